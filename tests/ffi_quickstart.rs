//! The C quick start of `docs/c-client.md` compiles and runs as written: the block after
//! its "quick start" marker, compiled against the header and the library, run against a
//! real `gsrelay serve` with the environment the guide names.

mod support;

use gsrelay::token::Rights;
use std::process::Command;
use support::ffi::{Link, compile, out_dir, root, succeeded};
use support::serve::Serve;

/// The fenced C block after the quick start marker.
fn quick_start() -> String {
    let doc = std::fs::read_to_string(root().join("docs/c-client.md")).expect("the guide");
    let (_, after) = doc
        .split_once("<!-- quick start:")
        .expect("the quick start marker");
    let (_, code) = after
        .split_once("```c\n")
        .expect("a C block after the marker");
    let (code, _) = code.split_once("```").expect("the block's end");
    code.to_owned()
}

#[test]
fn the_c_quick_start_compiles_and_runs_as_written() {
    let dir = out_dir("quickstart");
    let source = dir.join("quickstart.c");
    std::fs::write(&source, quick_start()).expect("write the quick start");
    let exe = dir.join("quickstart");
    let source = source.to_str().expect("a UTF-8 path");
    compile("cc", "c11", &[source], &exe, Link::Shared, &[]);
    let relay = Serve::dev(&[]);
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: false,
    };
    let output = Command::new(&exe)
        .env("GSRELAY_URL", &relay.base)
        .env("GSRELAY_TOKEN", relay.token("dev", "quickstart", rights))
        .output()
        .expect("run the quick start");
    let stdout = succeeded("the quick start", &output);
    assert!(stdout.contains("joined as SSRC "), "{stdout}");
}
