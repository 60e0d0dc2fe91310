//! The layering rules of `docs/architecture.md`, checked on the workspace:
//!
//! - the crates depend on each other as drawn (the core and the recording format on no
//!   runtime and no socket crate, the client on nothing only a server needs), read from
//!   `cargo tree`;
//! - the core reads no clock and imports no metrics; it has one `impl Relay`, in one file;
//!   the recording format's replay clock reads no clock either;
//! - no module of any crate imports its siblings in a circle, at any depth.
//!
//! Imports are read from the code (comments and unit-test modules left out): in a folder
//! module's file, `super::x` (one `super::` per level below the folder), or
//! `crate::<the folder's path>::x`, braced groups included, names the sibling module `x`.
//! A folder module (`aggregate/`) counts as one module with all its files.

use source::{code, sources};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/source.rs"]
mod source;

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate's `src`, by package name.
fn crate_sources() -> Vec<(&'static str, PathBuf)> {
    let mut out = vec![("gsrelay", workspace().join("src"))];
    for (name, dir) in [
        ("gsrelay-core", "core"),
        ("gsrelay-record", "record"),
        ("gsrelay-net", "net"),
        ("gsrelay-client", "client"),
        ("gsrelay-server", "server"),
        ("gsrelay-bench", "bench"),
        ("gsrelay-ffi", "ffi"),
    ] {
        out.push((name, workspace().join("crates").join(dir).join("src")));
    }
    for (name, dir) in ENGINE_BINDINGS {
        out.push((name, workspace().join("bindings").join(dir).join("src")));
    }
    out
}

/// The bindings for engines and languages, each a crate under `bindings/`: what it is
/// called, and its folder.
const ENGINE_BINDINGS: [(&str, &str); 3] = [
    ("gsrelay-python", "python"),
    ("gsrelay-godot", "godot"),
    ("gsrelay-bevy", "bevy"),
];

/// The first identifier of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The modules a path prefix names in `rest` (the text right after the prefix): one
/// identifier, or the first identifier of each item of a braced group.
fn named_after(rest: &str) -> Vec<String> {
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest).to_owned()];
    };
    let mut names = Vec::new();
    let (mut depth, mut item_start) = (0usize, true);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                names.push(ident(&group[i..]).to_owned());
                item_start = false;
            }
            _ => {}
        }
    }
    names
}

/// The child modules of the folder `dir` (a crate's `src` or a folder module): each
/// `x.rs` and each folder `x/`, but the folder's own root file.
fn children(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let module_file =
            path.extension().is_some_and(|e| e == "rs") && !matches!(name, "mod" | "lib" | "main");
        if path.is_dir() || module_file {
            out.insert(name.to_owned());
        }
    }
    out
}

/// The module graph among the children of `dir`, whose module path in its crate is
/// `path` (empty for the crate root): each child to the siblings its code names.
fn module_graph(dir: &Path, path: &str) -> BTreeMap<String, BTreeSet<String>> {
    let siblings = children(dir);
    let absolute = if path.is_empty() {
        "crate::".to_owned()
    } else {
        format!("crate::{path}::")
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in sources(dir) {
        let from = rel
            .split('/')
            .next()
            .unwrap_or(&rel)
            .trim_end_matches(".rs");
        if !siblings.contains(from) {
            continue; // the folder's own root file
        }
        // A file `x.rs` or `x/mod.rs` reaches the siblings with one `super::`, each level
        // deeper with one more.
        let depth = rel.split('/').count() - usize::from(rel.ends_with("mod.rs"));
        let relative = "super::".repeat(depth);
        let code = code(&text);
        let edges = graph.entry(from.to_owned()).or_default();
        for prefix in [relative.as_str(), absolute.as_str()] {
            for (at, _) in code.match_indices(prefix) {
                // `super::super::x` is not `super::x` where x = "super", and
                // `$crate::x` or `other_crate::x` is no path of this crate.
                let before = &code[..at];
                if before.ends_with("super::")
                    || before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
                {
                    continue;
                }
                for name in named_after(&code[at + prefix.len()..]) {
                    if name != from && siblings.contains(&name) {
                        edges.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// Every folder under `src` (itself included) with its module path.
fn folders(src: &Path) -> Vec<(PathBuf, String)> {
    let mut out = vec![(src.to_path_buf(), String::new())];
    let mut i = 0;
    while i < out.len() {
        let (dir, path) = out[i].clone();
        for entry in fs::read_dir(&dir).expect("read dir") {
            let sub = entry.expect("dir entry").path();
            if sub.is_dir() {
                let name = sub.file_name().and_then(|s| s.to_str()).unwrap_or("");
                let sub_path = if path.is_empty() {
                    name.to_owned()
                } else {
                    format!("{path}::{name}")
                };
                out.push((sub, sub_path));
            }
        }
        i += 1;
    }
    out
}

/// A circle of imports, if the graph has one: its modules in order.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut marks, &mut Vec::new()))
}

#[test]
fn no_module_of_any_crate_imports_its_siblings_in_a_circle() {
    let mut circles = Vec::new();
    let mut edges = 0;
    for (krate, src) in crate_sources() {
        for (dir, path) in folders(&src) {
            let graph = module_graph(&dir, &path);
            edges += graph.values().map(BTreeSet::len).sum::<usize>();
            if let Some(cycle) = find_cycle(&graph) {
                circles.push(format!("{krate} {path:?}: {}", cycle.join(" -> ")));
            }
        }
    }
    assert!(
        edges > 100,
        "the graphs are read, not empty ({edges} edges)"
    );
    assert!(
        circles.is_empty(),
        "imports in a circle:\n{}",
        circles.join("\n")
    );
}

/// The names of the crates in `package`'s normal dependency tree.
fn dependency_tree(package: &str) -> BTreeSet<String> {
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
            package,
        ])
        .current_dir(workspace())
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn assert_none_of(package: &str, forbidden: &[&str], why: &str) {
    let tree = dependency_tree(package);
    assert!(tree.len() > 10, "{package}'s tree is read: {tree:?}");
    let found: Vec<&&str> = forbidden.iter().filter(|f| tree.contains(**f)).collect();
    assert!(found.is_empty(), "{package} depends on {found:?}: {why}");
}

#[test]
fn the_core_crate_has_no_runtime_and_no_socket_crate() {
    assert_none_of(
        "gsrelay-core",
        &[
            "tokio",
            "mio",
            "socket2",
            "quinn",
            "quinn-udp",
            "async-std",
            "smol",
            "futures",
            "hyper",
            "reqwest",
            "gsrelay-net",
            "gsrelay-client",
            "gsrelay-server",
        ],
        "the core is sans-I/O",
    );
}

/// The crates of this workspace in `package`'s normal dependency tree, itself included.
fn workspace_crates_under(package: &str) -> BTreeSet<String> {
    dependency_tree(package)
        .into_iter()
        .filter(|c| c.starts_with("gsrelay"))
        .collect()
}

/// The recording format and the replay clock are sans-I/O but for reading and writing
/// files with `std::fs` (`dir`): the core beneath them, no runtime, no socket, no
/// other crate of ours, so that a tool reads recordings without linking a relay.
#[test]
fn the_record_crate_depends_on_the_core_only_and_has_no_runtime_and_no_socket_crate() {
    assert_eq!(
        workspace_crates_under("gsrelay-record"),
        BTreeSet::from(["gsrelay-record".to_owned(), "gsrelay-core".to_owned()]),
        "gsrelay-record depends on the core and on no other crate of the workspace"
    );
    assert_none_of(
        "gsrelay-record",
        &[
            "tokio",
            "mio",
            "socket2",
            "quinn",
            "quinn-udp",
            "async-std",
            "smol",
            "futures",
            "hyper",
            "reqwest",
        ],
        "the recording format is sans-I/O",
    );
    // The server records and replays with it, and the root package re-exports it
    // (`gsrelay::record`); the client and the C ABI have no use for it.
    for package in ["gsrelay-server", "gsrelay"] {
        assert!(
            workspace_crates_under(package).contains("gsrelay-record"),
            "{package} depends on gsrelay-record"
        );
    }
    for package in ["gsrelay-client", "gsrelay-ffi", "gsrelay-net"] {
        assert!(
            !workspace_crates_under(package).contains("gsrelay-record"),
            "{package} has no use for gsrelay-record"
        );
    }
}

/// The replay clock (`player`) and the writer are given the time, as the core is: a
/// replay is tested on a virtual clock, and plays the same on a loaded machine.
#[test]
fn the_record_crate_reads_no_clock_and_spawns_nothing() {
    let src = workspace().join("crates/record/src");
    let files = sources(&src);
    assert!(files.len() >= 5, "found the record crate's sources");
    for (path, text) in files {
        let text = code(&text);
        for forbidden in [
            "tokio",
            "std::net",
            "Instant::now",
            "SystemTime",
            "thread::spawn",
            "prometheus",
        ] {
            assert!(
                !text.contains(forbidden),
                "crates/record/src/{path} mentions `{forbidden}`: the recording format is \
                 given the time and owns no thread, socket or metrics"
            );
        }
    }
}

/// What a game links must not bring a server's crates: the client, and the C ABI that
/// the engine bindings load.
const SERVER_ONLY: [&str; 10] = [
    "axum",
    "redis",
    "prometheus",
    "governor",
    "tower-http",
    "dashmap",
    "jsonwebtoken",
    "reqwest",
    "gsrelay-server",
    "gsrelay-bench",
];

#[test]
fn the_client_crate_has_nothing_only_a_server_needs() {
    assert_none_of(
        "gsrelay-client",
        &SERVER_ONLY,
        "a game links the client alone",
    );
}

/// The engine bindings wrap the one client (Python and Bevy directly, Godot through the
/// C ABI) and bring nothing else a server needs: the Python package mints tokens with
/// the same JWT crate the relay checks them with, and nothing more of the server's.
#[test]
fn the_engine_bindings_wrap_the_client_and_have_nothing_only_a_server_needs() {
    for (package, _) in ENGINE_BINDINGS {
        let tree = dependency_tree(package);
        let wraps = if package == "gsrelay-godot" {
            "gsrelay-ffi"
        } else {
            "gsrelay-client"
        };
        assert!(tree.contains(wraps), "{package} wraps {wraps}");
        let forbidden: Vec<&str> = SERVER_ONLY
            .into_iter()
            .filter(|f| !(package == "gsrelay-python" && *f == "jsonwebtoken"))
            .collect();
        assert_none_of(
            package,
            &forbidden,
            "a game or a tool links its binding alone",
        );
    }
}

#[test]
fn the_c_abi_has_nothing_only_a_server_needs() {
    assert_none_of(
        "gsrelay-ffi",
        &SERVER_ONLY,
        "an engine loads the C ABI alone",
    );
}

#[test]
fn the_shared_network_crate_and_the_server_need_no_client_and_no_bench() {
    assert_none_of(
        "gsrelay-net",
        &[
            "gsrelay-client",
            "gsrelay-server",
            "gsrelay-bench",
            "axum",
            "redis",
        ],
        "the network layer is beneath both ends",
    );
    assert_none_of(
        "gsrelay-server",
        &["gsrelay-client", "gsrelay-bench"],
        "the server runs no client and no load",
    );
}

#[test]
fn the_core_counts_into_plain_data_and_reads_no_clock() {
    let src = workspace().join("crates/core/src");
    let files = sources(&src);
    assert!(files.len() > 30, "found the core's sources");
    for (path, text) in files {
        // Unit tests may take a real `Instant` as the origin of simulated time.
        let text = code(&text);
        for forbidden in [
            "prometheus",
            "tokio",
            "std::net::UdpSocket",
            "TcpStream",
            "Instant::now",
            "SystemTime",
            "thread::spawn",
        ] {
            assert!(
                !text.contains(forbidden),
                "crates/core/src/{path} mentions `{forbidden}`: the core owns no I/O, clock or metrics"
            );
        }
    }
}

#[test]
fn the_clusters_control_plane_is_sans_io_too() {
    let src = workspace().join("crates/server/src/cluster/plane");
    let files = sources(&src);
    assert!(files.len() >= 2, "found the plane's sources");
    for (path, text) in files.iter().filter(|(p, _)| p.as_str() != "tests.rs") {
        let text = code(text);
        for forbidden in [
            "tokio",
            "quinn",
            "redis::",
            "reqwest",
            "prometheus",
            "Instant::now",
            "SystemTime",
            "thread::spawn",
            "async fn",
            ".await",
        ] {
            assert!(
                !text.contains(forbidden),
                "crates/server/src/cluster/plane/{path} mentions `{forbidden}`: the plane takes \
                 time and answers as inputs and owns no I/O"
            );
        }
    }
}

#[test]
fn the_core_is_one_impl_in_one_file() {
    let core = workspace().join("crates/core/src/relay");
    let with_impl: Vec<String> = sources(&core)
        .into_iter()
        .filter(|(_, text)| {
            let code = code(text);
            code.match_indices("impl Relay").any(|(at, m)| {
                !code[at + m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            })
        })
        .map(|(path, _)| path)
        .collect();
    assert_eq!(with_impl, ["core.rs"], "`impl Relay` lives in core.rs only");
}

#[test]
fn the_cycle_check_sees_a_circle_and_reads_braced_groups() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        named_after("{forward::{self, Packet}, state::State, rng}; x"),
        ["forward", "state", "rng"]
    );
    assert_eq!(named_after("core::Relay;"), ["core"]);
    // The core's modules import each other: its graph is not read empty.
    let relay = module_graph(&workspace().join("crates/core/src/relay"), "relay");
    assert!(relay.values().map(BTreeSet::len).sum::<usize>() > 10);
    assert!(relay["core"].contains("ingest"), "{relay:#?}");
}
