//! The C ABI from C: programs in `tests/ffi/` compiled with gcc (C11, `-Wall -Wextra
//! -Werror`) against `crates/ffi/include/gsrelay.h` and the shared library, run against a
//! real `gsrelay serve` on loopback: the reference implementation's vectors round-trip
//! byte for byte through the codec; every object type is published and received in both
//! dialects, live, in a late joiner's snapshot and in aggregated delivery.

mod support;

use gsrelay::token::Rights;
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};
use support::ffi::{Link, compile, gse_vectors, out_dir, succeeded};
use support::serve::Serve;

/// `<dialect> <hex>` lines of every payload of the vector file `name`.
fn vector_lines(name: &str, dialect: u8, out: &mut String) -> usize {
    let text = std::fs::read_to_string(gse_vectors().join(name)).expect("read the vectors");
    let doc: Value = serde_json::from_str(&text).expect("vector JSON");
    let vectors = doc["vectors"].as_array().expect("vectors");
    for v in vectors {
        writeln!(out, "{dialect} {}", v["hex"].as_str().expect("hex")).unwrap();
    }
    vectors.len()
}

#[test]
fn the_gse_vectors_round_trip_byte_for_byte_through_the_c_codec() {
    let dir = out_dir("codec_vectors");
    let exe = dir.join("codec_vectors");
    compile("gcc", "c11", &["codec_vectors.c"], &exe, Link::Shared, &[]);
    let mut lines = String::new();
    let n = vector_lines("objects.json", 1, &mut lines)
        + vector_lines("concatenated.json", 1, &mut lines)
        + vector_lines("draft01_objects_not_in_gse.json", 0, &mut lines);
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run codec_vectors");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(lines.as_bytes())
        .expect("write the vectors");
    let output = child.wait_with_output().expect("codec_vectors ends");
    let stdout = succeeded("codec_vectors", &output);
    assert_eq!(stdout.trim(), format!("{n} passed, 0 failed"));
}

/// Runs the publish-and-receive program in `dialect` against a fresh relay.
fn pubsub(dialect: u8, link: Link) {
    let relay = Serve::dev(&[]);
    let room = format!("ffi-{dialect}");
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: false,
    };
    let tokens: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|who| relay.token(&room, who, rights))
        .collect();
    let dir = out_dir(&format!("pubsub_{dialect}_{}", link == Link::Static));
    let exe = dir.join("pubsub");
    compile("gcc", "c11", &["pubsub.c"], &exe, link, &[]);
    let output = Command::new(&exe)
        .arg(&relay.base)
        .args(&tokens)
        .arg(&room)
        .arg(dialect.to_string())
        .output()
        .expect("run pubsub");
    let stdout = succeeded("pubsub", &output);
    assert!(stdout.contains("byte-exact live"), "{stdout}");
}

#[test]
fn every_draft01_object_goes_from_a_c_publisher_to_c_subscribers_byte_exact() {
    pubsub(0, Link::Shared);
}

#[test]
fn every_gse_object_goes_from_a_c_publisher_to_c_subscribers_byte_exact() {
    pubsub(1, Link::Shared);
}

#[test]
fn a_program_linked_with_the_static_library_publishes_and_receives() {
    pubsub(0, Link::Static);
}
