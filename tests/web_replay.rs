//! The JavaScript client's recording, replay and mirror calls (`web/test/recording.mjs`,
//! in Node) and the viewer's replay scrubber and mirror badge (`web/test/replay-viewer.mjs`,
//! in headless Chromium), against the built relay (`gsrelay serve`) recording a room a
//! Rust client publishes into over UDP/SRTP. Needs `node`, Debian's `chromium` and
//! `playwright-core` in `.tools` (scripts/test.sh installs them). The browser test writes
//! its screenshots to `target/web-artifacts/`.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::token::Rights;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::browser::{self, root};
use support::moving_head;
use support::serve::{DevServe, Serve};
use support::server::{ADMIN, ALL, PUBLISH_SUBSCRIBE, SUBSCRIBE};

/// A viewer that may watch and administer but not publish: a replay or mirror room
/// refuses a join that may publish.
const WATCH_ADMIN: Rights = Rights {
    publish: false,
    subscribe: true,
    admin: true,
};

/// A relay recording into a directory of its own, with a checkpoint every second so
/// that a seek in a recording of a few seconds lands close to its target.
struct Relay {
    serve: DevServe,
    dir: PathBuf,
}

impl Relay {
    /// `test` names its directory apart from the other test's, which runs beside it.
    fn start(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("gsrelay-web-replay-{}-{test}", std::process::id()));
        let dir_arg = dir
            .to_str()
            .expect("temporary directory is UTF-8")
            .to_owned();
        let serve = Serve::dev(&[
            "--recording-dir",
            &dir_arg,
            "--recording-checkpoint-secs",
            "1",
        ]);
        Self { serve, dir }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Rust client publishing a head moving along x into `room` every 50 ms until dropped.
struct Publisher {
    rt: tokio::runtime::Runtime,
    done: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Publisher {
    fn start(relay: &DevServe, room: &str) -> Self {
        let token = relay.token(room, "player", PUBLISH_SUBSCRIBE);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut client = rt
            .block_on(Client::join(
                &relay.base,
                &token,
                room,
                JoinOptions::default(),
            ))
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let task = {
            let done = done.clone();
            rt.spawn(async move {
                let mut x = -2.0f32;
                while !done.load(Ordering::Relaxed) {
                    client.send_objects(&[moving_head(7, x)]).await.unwrap();
                    x = if x > 2.0 { -2.0 } else { x + 0.05 };
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        Self {
            rt,
            done,
            task: Some(task),
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(task) = self.task.take() {
            let ended = self.rt.block_on(task);
            // Not asserted while unwinding: a failed test's own panic says more.
            if !std::thread::panicking() {
                ended.unwrap();
            }
        }
    }
}

/// The rooms the scripts join: a replay's and a mirror's.
const PLAYED_ROOMS: [&str; 2] = ["arena-replay", "arena-delayed"];

/// `{kind: {room: token}}` for each kind of token and each played room (only an admin
/// token may be relay-wide), as the scripts' `GSRELAY_TOKENS`.
fn room_tokens(relay: &DevServe, kinds: &[(&str, Rights)]) -> String {
    let by_kind: serde_json::Map<String, serde_json::Value> = kinds
        .iter()
        .map(|&(kind, rights)| {
            let by_room = PLAYED_ROOMS
                .iter()
                .map(|room| (room.to_string(), relay.token(room, kind, rights).into()))
                .collect::<serde_json::Map<_, _>>();
            (kind.to_owned(), by_room.into())
        })
        .collect();
    serde_json::Value::Object(by_kind).to_string()
}

#[test]
fn js_client_records_replays_and_mirrors_a_room() {
    let relay = Relay::start("client");
    let _publisher = Publisher::start(&relay.serve, "arena");
    let s = &relay.serve;
    let out = std::process::Command::new("node")
        .arg(root().join("web/test/recording.mjs"))
        .env("GSRELAY_BASE", &s.base)
        .env("GSRELAY_RELAY_ADMIN", s.token("*", "backend", ADMIN))
        .env("GSRELAY_ROOM_ADMIN", s.token("arena", "host", ADMIN))
        .env(
            "GSRELAY_TOKENS",
            room_tokens(s, &[("subscribe", SUBSCRIBE), ("publish", ALL)]),
        )
        .output()
        .unwrap_or_else(|e| panic!("cannot run node ({e}): scripts/test.sh installs it"));
    let stdout = browser::assert_passed("recording.mjs", &out);
    let passed: u64 = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_suffix(" passed, 0 failed"))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(passed >= 75, "only {passed} checks ran");
}

#[test]
fn viewer_scrubs_a_replay_and_badges_a_mirror_in_chromium() {
    let relay = Relay::start("viewer");
    let _publisher = Publisher::start(&relay.serve, "arena");
    let s = &relay.serve;
    let artifacts = root().join("target/web-artifacts");
    let mut cmd = browser::node("replay-viewer.mjs");
    cmd.env("GSRELAY_BASE", &s.base)
        .env("GSRELAY_RELAY_ADMIN", s.token("*", "backend", ADMIN))
        .env(
            "GSRELAY_TOKENS",
            room_tokens(
                s,
                &[
                    ("watch_admin", WATCH_ADMIN),
                    ("subscribe", SUBSCRIBE),
                    ("publish", ALL),
                ],
            ),
        )
        .env("GSRELAY_ARTIFACTS", &artifacts);
    let out = browser::output(&mut cmd);
    browser::assert_passed("replay-viewer.mjs", &out);
    for shot in ["viewer-replay.png", "viewer-mirror.png"] {
        let size = std::fs::metadata(artifacts.join(shot))
            .unwrap_or_else(|e| panic!("{shot}: {e}"))
            .len();
        assert!(size > 10_000, "{shot} of {size} bytes");
    }
}
