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

/// Runs the bad-input program built with `extra` flags and `env`.
fn bad_inputs(name: &str, extra: &[&str], env: &[(&str, &str)]) {
    let dir = out_dir(name);
    let exe = dir.join("bad_inputs");
    compile("gcc", "c11", &["bad_inputs.c"], &exe, Link::Shared, extra);
    let output = Command::new(&exe)
        .envs(env.iter().copied())
        .output()
        .expect("run bad_inputs");
    let stdout = succeeded("bad_inputs", &output);
    assert!(stdout.trim().ends_with(" passed, 0 failed"), "{stdout}");
}

#[test]
fn garbage_into_every_entry_is_refused_with_its_code() {
    bad_inputs("bad_inputs", &[], &[]);
}

/// The same under AddressSanitizer and UndefinedBehaviorSanitizer: no entry reads or
/// writes memory it was not given. Leak detection is off: the library's network thread
/// and its runtime live for the process, by design.
#[test]
fn garbage_into_every_entry_is_clean_under_asan_and_ubsan() {
    bad_inputs(
        "bad_inputs_asan",
        &[
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer",
        ],
        &[("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")],
    );
}

/// A C publisher and subscriber come back by themselves after `kill -9` and a restart of
/// the relay on the same ports, keeping their SSRCs, and the stream flows again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_clients_resume_with_their_ssrcs_after_the_relay_is_killed_and_restarted() {
    use std::io::{BufRead, BufReader};
    use support::restart::Relay;
    use support::server::{PUBLISH, SUBSCRIBE, now, token_as};

    let relay = Relay::start().await;
    let dir = out_dir("resume");
    let exe = dir.join("resume");
    compile("gcc", "c11", &["resume.c"], &exe, Link::Shared, &[]);
    let mut child = Command::new(&exe)
        .arg(relay.base())
        .arg(token_as("r", "pub", PUBLISH, now(), 600))
        .arg(token_as("r", "sub", SUBSCRIBE, now(), 600))
        .arg("r")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run resume");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the C clients joined and the subscriber received");
    assert_eq!(line, "joined");
    let ports = relay.kill_9();
    let _relay = Relay::restart_on(ports).await;
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("resume ends");
    reader
        .join()
        .expect("the output reader ends with the program");
    let mut lines: Vec<String> = rx.try_iter().collect();
    lines.sort();
    succeeded("resume", &output);
    assert_eq!(lines, ["back pub resumed", "back sub resumed", "flowing"]);
}

/// The header compiles as C++17 with every warning an error, and RAII wrappers of the
/// kind an engine writes encode, decode, join, publish and receive.
#[test]
fn cpp17_wrappers_encode_decode_and_exchange_an_object() {
    let relay = Serve::dev(&[]);
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: false,
    };
    let dir = out_dir("cpp");
    let exe = dir.join("smoke");
    compile("g++", "c++17", &["smoke.cpp"], &exe, Link::Shared, &[]);
    let output = Command::new(&exe)
        .arg(&relay.base)
        .arg(relay.token("cpp", "a", rights))
        .arg(relay.token("cpp", "b", rights))
        .arg("cpp")
        .output()
        .expect("run smoke");
    let stdout = succeeded("smoke", &output);
    assert!(stdout.contains("published and received"), "{stdout}");
}

/// Room streams and ownership from C: a request granted (and the publisher told it lost
/// the object), a release, and a room object that outlives its publisher and reaches a
/// late joiner.
#[test]
fn c_clients_hand_objects_over_and_a_room_object_outlives_its_publisher() {
    let relay = Serve::dev(&[]);
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: false,
    };
    let dir = out_dir("ownership");
    let exe = dir.join("ownership");
    compile("gcc", "c11", &["ownership.c"], &exe, Link::Shared, &[]);
    let output = Command::new(&exe)
        .arg(&relay.base)
        .arg(relay.token("own", "a", rights))
        .arg(relay.token("own", "b", rights))
        .arg(relay.token("own", "c", rights))
        .arg("own")
        .output()
        .expect("run ownership");
    let stdout = succeeded("ownership", &output);
    assert!(stdout.contains("reached a late joiner"), "{stdout}");
}
