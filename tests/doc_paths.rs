//! Every path the docs name exists. `README.md` and `docs/*.md` point readers at files and
//! folders of the repository (`crates/core/src/relay/core.rs`, `tests/relay_core.rs`,
//! `deploy/`), and a move or a rename leaves such a pointer naming nothing without any
//! build noticing; this test notices.
//!
//! Read: each word of an inline code span and each link target, outside fenced code
//! blocks (commands and their output), that starts with one of the repository's top-level
//! folders; a `:line`, a `#anchor` and trailing punctuation are cut off. A word with `*`,
//! `{`, `…` or `<` is a pattern (`fuzz/artifacts/<target>/`), not a path, and is skipped.
//! Each is looked up relative to the workspace root, and the failure lists every one that
//! is missing, with the document naming it.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository's top-level folders: a word naming a path starts with one of them and
/// a `/`.
const TOP_LEVEL: [&str; 13] = [
    "crates", "src", "tests", "docs", "deploy", "web", "bench", "scripts", "examples", "fuzz",
    "grafana", ".ci", "bindings",
];

/// What makes a word a pattern rather than a path.
const PATTERN: [char; 4] = ['*', '{', '…', '<'];

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and every `docs/*.md`.
fn documents() -> Vec<PathBuf> {
    let docs = workspace().join("docs");
    let mut out: Vec<PathBuf> = fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("read {}: {e}", docs.display()))
        .map(|entry| entry.expect("entry of docs/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    out.sort();
    out.insert(0, workspace().join("README.md"));
    out
}

/// `text` without its fenced code blocks, each of their lines and every blank one left
/// empty, so that paragraphs are separated by exactly `"\n\n"`.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        fenced ^= fence;
        let keep = !(fence || fenced || line.trim().is_empty());
        out.push(if keep { line } else { "" });
    }
    out.join("\n")
}

/// The words of `prose`'s inline code spans and its link targets. A code span never
/// crosses a paragraph, so a stray backtick costs one paragraph at most.
fn words(prose: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for paragraph in prose.split("\n\n") {
        // Between the 1st and 2nd backtick, the 3rd and 4th, …: code spans.
        for span in paragraph.split('`').skip(1).step_by(2) {
            out.extend(span.split_whitespace());
        }
        for (at, _) in paragraph.match_indices("](") {
            let target = &paragraph[at + 2..];
            let end = target.find([')', ' ', '\n']).unwrap_or(target.len());
            out.push(&target[..end]);
        }
    }
    out
}

/// The path `word` names, if it names one.
fn path_of(word: &str) -> Option<&str> {
    if word.contains(PATTERN) {
        return None;
    }
    let path = word.trim_start_matches(['(', '[', '"', '\'']);
    let path = path.split([':', '#']).next().unwrap_or_default();
    let path = path.trim_end_matches(['.', ',', ';', ')', ']', '"', '\'']);
    path.split_once('/')
        .is_some_and(|(top, _)| TOP_LEVEL.contains(&top))
        .then_some(path)
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = BTreeSet::new();
    let mut checked = 0;
    for doc in documents() {
        let text =
            fs::read_to_string(&doc).unwrap_or_else(|e| panic!("read {}: {e}", doc.display()));
        let name = doc.strip_prefix(workspace()).unwrap_or(&doc).display();
        for path in words(&prose(&text)).into_iter().filter_map(path_of) {
            checked += 1;
            if !workspace().join(path).exists() {
                missing.insert(format!("{name}: `{path}`"));
            }
        }
    }
    assert!(checked > 100, "found the paths the docs name ({checked})");
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}
