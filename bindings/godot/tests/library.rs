//! What Godot sees of the extension, checked without Godot: the built library exports
//! the entry symbol (read with `nm`, as `tests/ffi_symbols.rs` reads the C ABI's), the
//! `.gdextension` file names that symbol, the library's file and the API version the
//! crate is built against, and the demo project refers only to files it has and to
//! methods, signals and properties the node has.

mod guide;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The entry symbol of `#[gdextension(entry_symbol = ...)]` in `src/lib.rs`.
const ENTRY: &str = "gsrelay_init";

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn demo() -> PathBuf {
    crate_dir().join("demo")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The shared library cargo built beside this test's binary (the crate's cdylib).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let lib = exe
        .parent()
        .expect("the test binary's folder")
        .join("libgsrelay_godot.so");
    assert!(lib.is_file(), "{} not built", lib.display());
    lib
}

/// The `.gdextension` file as sections of `key = value` (quotes taken off).
fn gdextension() -> BTreeMap<String, BTreeMap<String, String>> {
    let text = read(&demo().join("addons/gsrelay/gsrelay.gdextension"));
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a key = value line: {line}"));
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        assert!(!section.is_empty(), "{key} outside a section");
        sections
            .entry(section.clone())
            .or_default()
            .insert(key.trim().to_owned(), value.to_owned());
    }
    sections
}

#[test]
fn the_library_exports_the_entry_symbol_and_only_the_c_abi_besides() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library())
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm failed");
    let exported: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_owned)
        .collect();
    assert!(
        exported.contains(ENTRY),
        "{ENTRY} is not exported: {exported:?}"
    );
    // Beside it: godot-rust's hot-reload workaround on Linux defines
    // __cxa_thread_atexit_impl, so that Godot can unload the library while thread-local
    // destructors are registered; and the C ABI's functions the node calls, linked in
    // from gsrelay-ffi with their C names (each one the header declares). Nothing else:
    // no Rust symbol that could clash with another library's.
    let header = read(&crate_dir().join("../../crates/ffi/include/gsrelay.h"));
    let foreign: Vec<&String> = exported
        .iter()
        .filter(|s| *s != ENTRY && *s != "__cxa_thread_atexit_impl")
        .filter(|s| !(s.starts_with("gsr_") && header.contains(&format!("{s}("))))
        .collect();
    assert!(foreign.is_empty(), "exported beside the entry: {foreign:?}");
}

#[test]
fn the_gdextension_file_names_the_entry_symbol_the_libraries_and_the_api_version() {
    let file = gdextension();
    let configuration = &file["configuration"];
    assert_eq!(configuration["entry_symbol"], ENTRY);
    // The crate is built against Godot 4.3's API (api-4-3), which loads in 4.3 and later.
    assert_eq!(configuration["compatibility_minimum"], "4.3");
    // The C ABI's network thread lives for the process: the library must stay loaded.
    assert_eq!(configuration["reloadable"], "false");
    let manifest = read(&crate_dir().join("Cargo.toml"));
    assert!(
        manifest.contains("features = [\"api-4-3\"]"),
        "the godot dependency selects api-4-3"
    );
    let built = library();
    let built_name = built.file_name().unwrap().to_str().unwrap();
    let libraries = &file["libraries"];
    for (platform, path) in libraries {
        let name = path
            .strip_prefix("res://addons/gsrelay/bin/")
            .unwrap_or_else(|| panic!("{platform}: {path} is not under the addon's bin/"));
        let expected = match platform.split('.').next() {
            Some("linux") => built_name,
            Some("windows") => "gsrelay_godot.dll",
            Some("macos") => "libgsrelay_godot.dylib",
            _ => panic!("{platform}: an unexpected platform"),
        };
        assert_eq!(name, expected, "{platform}");
    }
    for needed in ["linux.debug.x86_64", "linux.release.x86_64"] {
        assert!(libraries.contains_key(needed), "{needed} is listed");
    }
    // The folder the paths name is in the repository (the library is copied into it).
    assert!(demo().join("addons/gsrelay/bin/.gitignore").is_file());
}

#[test]
fn the_library_loads_as_godot_loads_it_and_has_the_entry_symbol() {
    // What Godot does first with a .gdextension: dlopen the library (every symbol bound
    // now, as RTLD_NOW does) and dlsym its entry symbol. Python's ctypes is the dlopen and
    // dlsym of this machine's libc; nothing is called.
    let entry = gdextension()["configuration"]["entry_symbol"].clone();
    let program = "import ctypes, os, sys\n\
                   lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_LOCAL)\n\
                   getattr(lib, sys.argv[2])\n";
    let out = Command::new("python3")
        .args(["-c", program])
        .arg(library())
        .arg(&entry)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "dlopen/dlsym {entry}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The names a script may use on the node: its `#[func]`s, `#[signal]`s and `#[export]`
/// fields, read from its source.
fn node_names() -> BTreeSet<String> {
    let source = read(&crate_dir().join("src/node.rs"));
    let mut names = BTreeSet::new();
    let mut after: Option<&str> = None;
    for line in source.lines().map(str::trim) {
        if line.starts_with("#[func")
            || line.starts_with("#[signal")
            || line.starts_with("#[export")
        {
            after = Some(line);
            continue;
        }
        let Some(attribute) = after else { continue };
        if line.starts_with("#[") {
            continue;
        }
        let name: String = line
            .trim_start_matches("fn ")
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        assert!(!name.is_empty(), "a name after {attribute}: {line}");
        names.insert(name);
        after = None;
    }
    names
}

/// The names a script uses after `room.` (its variable for the node).
fn room_uses(script: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (at, _) in script.match_indices("room.") {
        let before = script[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // another variable, `chatroom.` say
        }
        let name: String = script[at + "room.".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        used.insert(name);
    }
    used
}

#[test]
fn the_demo_and_the_guide_use_only_what_the_node_has_and_files_they_have() {
    let names = node_names();
    for expected in [
        "join",
        "poll",
        "publish_head",
        "object_updated",
        "ended",
        "transport",
    ] {
        assert!(
            names.contains(expected),
            "{expected} read from node.rs: {names:?}"
        );
    }
    let uses = |what: &str, script: &str| {
        let used = room_uses(script);
        assert!(
            used.len() >= 6,
            "{what}'s uses of the node are read: {used:?}"
        );
        let unknown: Vec<&String> = used.difference(&names).collect();
        assert!(
            unknown.is_empty(),
            "{what} uses what GsRelayRoom lacks: {unknown:?}"
        );
    };
    uses("main.gd", &read(&demo().join("main.gd")));
    uses("the guide's quick start", &guide::quick_start_script());

    let project = read(&demo().join("project.godot"));
    assert!(project.contains("run/main_scene=\"res://main.tscn\""));
    let scene = read(&demo().join("main.tscn"));
    assert!(scene.contains("[node name=\"Room\" type=\"GsRelayRoom\" parent=\".\"]"));
    for (at, _) in scene.match_indices("path=\"res://") {
        let rest = &scene[at + "path=\"res://".len()..];
        let path = &rest[..rest.find('"').expect("a closing quote")];
        assert!(demo().join(path).is_file(), "main.tscn names res://{path}");
    }
}
