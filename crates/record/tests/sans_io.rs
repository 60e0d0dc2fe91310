//! The format crate is sans-I/O but for its `dir` module: its dependency tree has no
//! runtime and no socket crate, checked by the compiler's own view of it (cargo tree),
//! not by a text search.

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn no_runtime_and_no_socket_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            "gsrelay-record",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        tree.contains("gsrelay-core") && tree.contains("flate2"),
        "{tree:?}"
    );
    let forbidden = [
        "tokio",
        "mio",
        "socket2",
        "quinn",
        "async-std",
        "smol",
        "futures",
        "gsrelay-net",
        "gsrelay-server",
    ];
    let found: Vec<_> = forbidden.iter().filter(|f| tree.contains(**f)).collect();
    assert!(found.is_empty(), "gsrelay-record depends on {found:?}");
}
