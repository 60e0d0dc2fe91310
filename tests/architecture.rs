//! The layering rules of `docs/architecture.md`, checked on the source tree: the core
//! reads no clock and imports no runtime or metrics crate; it has one `impl Relay`, in
//! one file; and neither the core's modules nor the shells' import each other in a circle.
//!
//! Imports are read from the code (comments and unit-test modules left out): every
//! `super::x`, `super::super::x` or `crate::<layer>::x` path, braced groups included,
//! names the sibling module `x` of the layer. A folder module (`aggregate/`) counts as one
//! module with all its files.

use source::{code, sources};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "support/source.rs"]
mod source;

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

/// The module graph of one layer (`src/<layer>`): each top-level module to the sibling
/// modules its code names.
fn module_graph(layer: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(layer);
    let files = sources(&dir);
    assert!(files.len() > 5, "found the sources of src/{layer}");
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(rel, _)| top_module(rel))
        .filter(|m| m != "mod")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        let from = top_module(rel);
        if from == "mod" {
            continue;
        }
        let nested = rel.contains('/') && !rel.ends_with("/mod.rs");
        // The prefixes that reach the layer's own modules from this file.
        let crate_prefix = format!("crate::{layer}::");
        let prefixes: Vec<&str> = if nested {
            vec!["super::super::", &crate_prefix]
        } else {
            vec!["super::", &crate_prefix]
        };
        let code = code(text);
        let edges = graph.entry(from.clone()).or_default();
        for prefix in prefixes {
            for (at, _) in code.match_indices(prefix) {
                // `super::super::x` is not `super::x` where x = "super".
                if prefix == "super::" && code[..at].ends_with("super::") {
                    continue;
                }
                for name in named_after(&code[at + prefix.len()..]) {
                    if name != from && modules.contains(&name) {
                        edges.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// The top-level module a file belongs to: `core.rs` → `core`, `aggregate/x.rs` →
/// `aggregate`, `mod.rs` → `mod`.
fn top_module(rel: &str) -> String {
    let first = rel.split('/').next().unwrap_or(rel);
    first.trim_end_matches(".rs").to_owned()
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

fn assert_acyclic(layer: &str) {
    let graph = module_graph(layer);
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "src/{layer} imports in a circle: {}; the module graph is {graph:#?}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_core_counts_into_plain_data_and_imports_no_metrics_crate() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay");
    let files = sources(&core);
    assert!(files.len() > 10, "found the core's sources");
    for (path, text) in files {
        // Unit tests may take a real `Instant` as the origin of simulated time.
        let text = code(&text);
        for forbidden in [
            "prometheus",
            "crate::metrics",
            "tokio",
            "std::net",
            "Instant::now",
            "SystemTime",
        ] {
            assert!(
                !text.contains(forbidden),
                "src/relay/{path} mentions `{forbidden}`: the core owns no I/O, clock or metrics"
            );
        }
    }
}

#[test]
fn the_core_is_one_impl_in_one_file() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay");
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
fn the_cores_modules_import_each_other_in_one_direction() {
    assert_acyclic("relay");
}

#[test]
fn the_shells_modules_import_each_other_in_one_direction() {
    assert_acyclic("transport");
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
    // Both layers have modules that import others: the graph is not read empty.
    for layer in ["relay", "transport"] {
        let graph = module_graph(layer);
        assert!(
            graph.values().map(BTreeSet::len).sum::<usize>() > 10,
            "{layer}"
        );
    }
}
