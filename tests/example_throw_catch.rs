//! The `throw_catch` example (`examples/throw_catch.rs`) plays its scene against a real
//! relay: a ball thrown on a room stream, caught by a handover, and found by a player who
//! joins after the thrower left.

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::server::{PUBLISH_SUBSCRIBE, base, start, token};

/// The example's binary, built by `cargo test` beside the tests (built here if not).
fn example() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gsrelay"));
    let path = bin
        .parent()
        .expect("the target directory")
        .join("examples/throw_catch");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--example", "throw_catch"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo");
        assert!(status.success(), "the example builds");
    }
    path
}

#[tokio::test]
async fn the_throw_and_catch_scene_plays_to_its_end() {
    let server = start().await;
    let out = tokio::process::Command::new(example())
        .args(["--http", &base(&server), "--room", "r"])
        .env("GSRELAY_TOKEN", token("r", PUBLISH_SUBSCRIBE))
        .env("RUST_BACKTRACE", "0")
        .output()
        .await
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "bob holds the ball",
        "alice left",
        "carol, who came last, sees the ball",
    ] {
        assert!(stdout.contains(step), "{step:?} missing from {stdout}");
    }
}
