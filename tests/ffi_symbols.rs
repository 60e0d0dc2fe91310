//! What the C ABI's shared library exports: exactly the functions its header declares,
//! every one named `gsr_…` (read with `nm`), so it cannot clash with an engine's symbols
//! or another library's. (The static library carries Rust's standard library and
//! compiler builtins as well: `docs/c-client.md`, "Linking", says what that means.)

mod support;

use std::collections::BTreeSet;
use std::process::Command;
use support::ffi::{include_dir, lib_dir};

/// The functions the header declares.
fn declared() -> BTreeSet<String> {
    let header = std::fs::read_to_string(include_dir().join("gsrelay.h")).expect("the header");
    let mut out = BTreeSet::new();
    for line in header.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("gsr_") {
            let rest = &line[at..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if rest[end..].starts_with('(') {
                out.insert(rest[..end].to_owned());
            }
        }
    }
    out
}

#[test]
fn the_shared_library_exports_exactly_the_declared_gsr_functions() {
    let lib = lib_dir().join("libgsrelay_ffi.so");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm failed");
    let exported: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_owned)
        .collect();
    let foreign: Vec<&String> = exported.iter().filter(|s| !s.starts_with("gsr_")).collect();
    assert!(
        foreign.is_empty(),
        "exported without the prefix: {foreign:?}"
    );
    let declared = declared();
    assert!(
        declared.len() > 20,
        "the header's functions are read: {declared:?}"
    );
    assert_eq!(exported, declared, "exported and declared differ");
}

/// Every macro the header defines is the library's (`GSR_`): none can clash with an
/// engine's own names.
#[test]
fn every_macro_of_the_header_has_the_prefix() {
    let header = std::fs::read_to_string(include_dir().join("gsrelay.h")).expect("the header");
    let foreign: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| !name.starts_with("GSR_") && *name != "GSRELAY_H")
        .collect();
    assert!(foreign.is_empty(), "macros without the prefix: {foreign:?}");
}
