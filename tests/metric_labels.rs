//! The closed label sets of `gsrelay::internal::labels` against the code that produces
//! their values: the core and the transports name them as string literals where they
//! count, so each family's literals are read from the source here and must be exactly its
//! list. A value added in the code without the list (its series would be missing until
//! its first event) or left in the list after the code dropped it fails.
//!
//! The code is read with comments, unit-test modules and all whitespace left out, so
//! `count(&metrics, None, "x")` reads `count(&metrics,None,"x")`.

use gsrelay::internal::labels::*;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

#[path = "support/source.rs"]
mod source;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The code of a source file: no unit-test module, no comments.
fn code(path: &str) -> String {
    let text = fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    source::code(&text)
}

/// The code of every `.rs` file under `dir`.
fn code_under(dir: &str) -> Vec<String> {
    source::sources(&root().join(dir))
        .iter()
        .map(|(_, text)| source::code(text))
        .collect()
}

/// The function `name` of `code`: from its `fn` line to the next item's.
fn function(code: &str, name: &str) -> String {
    let start = code
        .find(&format!("fn {name}"))
        .unwrap_or_else(|| panic!("no fn {name}"));
    let rest = &code[start..];
    let end = rest
        .match_indices('\n')
        .map(|(i, _)| i)
        .find(|&i| {
            let line = rest[i + 1..].trim_start();
            [
                "fn ",
                "pub fn ",
                "pub(super) fn ",
                "pub(crate) fn ",
                "async fn ",
                "impl ",
            ]
            .iter()
            .any(|p| line.starts_with(p))
        })
        .unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// The string literals of `code` (whitespace removed) right after one of `after` or
/// right before one of `before`.
fn literals(code: &str, after: &[&str], before: &[&str]) -> BTreeSet<String> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    let mut offset = 0;
    while let Some(open) = rest.find('"') {
        let start = offset + open + 1;
        let Some(len) = code[start..].find('"') else {
            break;
        };
        let end = start + len;
        let (head, tail) = (&code[..start - 1], &code[end + 1..]);
        if after.iter().any(|p| head.ends_with(p)) || before.iter().any(|s| tail.starts_with(s)) {
            out.insert(code[start..end].to_owned());
        }
        offset = end + 1;
        rest = &code[offset..];
    }
    out
}

fn set(lists: &[&[&str]]) -> BTreeSet<String> {
    lists
        .iter()
        .copied()
        .flatten()
        .map(|s| (*s).to_owned())
        .collect()
}

#[test]
fn feedback_kinds_are_those_the_core_counts() {
    let found = code_under("crates/core/src/relay")
        .iter()
        .flat_map(|c| literals(c, &["feedback.add("], &[]))
        .collect::<BTreeSet<_>>();
    assert_eq!(found, set(&[FEEDBACK_KINDS]));
}

#[test]
fn suppression_reasons_are_those_the_core_counts() {
    let mut found = code_under("crates/core/src/relay")
        .iter()
        .flat_map(|c| literals(c, &["suppress("], &[]))
        .collect::<BTreeSet<_>>();
    // The congestion controller's refusals are suppressed under their own names.
    let admit = function(&code("crates/core/src/relay/congestion.rs"), "admit");
    found.extend(literals(&admit, &["Err("], &[]));
    assert_eq!(found, set(&[FEEDBACK_SUPPRESSED]));
}

#[test]
fn internal_error_places_are_those_the_shard_names() {
    let found = literals(
        &code("crates/server/src/transport/shard.rs"),
        &[".input("],
        &[",Input::"],
    );
    assert_eq!(found, set(&[INTERNAL_ERROR_PLACES]));
}

#[test]
fn quic_and_webtransport_outcomes_are_those_the_endpoint_counts() {
    let conn = code("crates/server/src/transport/quic/conn.rs");
    let outcome = ["Err(", "ok_or(", "Refusal::early(", "|_|"];
    let mut found = literals(
        &conn,
        &["count(&metrics,None,", "count(&metrics,Some(protocol),"],
        &[],
    );
    for f in ["admit", "attach", "read_line"] {
        found.extend(literals(&function(&conn, f), &outcome, &[]));
    }
    let port = code("crates/server/src/transport/quic/port.rs");
    found.extend(literals(&function(&port, "attach"), &outcome, &[]));
    let webtransport = code("crates/server/src/transport/webtransport/mod.rs");
    found.extend(literals(&function(&webtransport, "open"), &outcome, &[]));
    assert_eq!(
        found,
        set(&[SESSION_OUTCOMES, HANDSHAKE_OUTCOMES, WEBTRANSPORT_OUTCOMES])
    );
}

#[test]
fn webrtc_outcomes_are_those_the_port_counts() {
    let peer = code("crates/server/src/transport/webrtc/peer.rs");
    let mut found = literals(&function(&peer, "events"), &["=>", "=true;"], &[]);
    found.extend(literals(
        &code("crates/server/src/transport/webrtc/port.rs"),
        &["outcomes.with_label_values(&["],
        &[],
    ));
    assert_eq!(found, set(&[WEBRTC_OUTCOMES]));
}

/// The error codes of `docs/api.md` that only other endpoints answer.
const NOT_FROM_A_JOIN: &[&str] = &[
    "forbidden_session",
    "session_not_found",
    "room_not_found",
    "participant_not_found",
    "invalid_identity",
    "metadata_too_large",
    "not_found",
    "method_not_allowed",
    // Recordings, replays and mirrors (docs/recording.md).
    "already_mirrored",
    "already_recording",
    "invalid_delay",
    "invalid_replay",
    "invalid_speed",
    "no_mirror",
    "not_recording",
    "recording_damaged",
    "recording_disabled",
    "recording_not_found",
    "recording_running",
    "recording_storage",
    "replay_not_found",
    "room_live",
    "seek_past_end",
];

#[test]
fn join_refusals_are_the_documented_error_codes_of_a_join() {
    let api = fs::read_to_string(Path::new(&root()).join("docs/api.md")).expect("docs/api.md");
    let table = api
        .split("## Errors")
        .nth(1)
        .expect("an Errors section")
        .split("\n\n")
        .find(|p| p.starts_with("| status | code |"))
        .expect("the error table");
    let documented: BTreeSet<String> = table
        .lines()
        .skip(2)
        .filter_map(|row| row.split('|').nth(2))
        .flat_map(|codes| codes.split(','))
        .map(|c| c.trim().trim_matches('`').to_owned())
        .filter(|c| !NOT_FROM_A_JOIN.contains(&c.as_str()))
        .collect();
    assert_eq!(set(&[JOIN_REFUSALS]), documented);
}
