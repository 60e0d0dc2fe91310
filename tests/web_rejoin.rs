//! The JavaScript client's rejoin in headless Chromium (`web/test/rejoin.mjs`, Playwright):
//! a page's sessions over WebTransport and over WebRTC hold a Rust publisher's room on a
//! relay; the relay stops and a new one starts on the same HTTP address with the same
//! token secret; each session notices by itself, rejoins, holds the whole room again from
//! the new relay's cache (the publisher's state moved while it was away) and follows it
//! live. The relays report every 0.2 s, so the page's silence is 1.5 s. Needs Debian's
//! `chromium` and `playwright-core` in `.tools` (scripts/test.sh installs both).

mod rejoin_common;
mod support;

use gsrelay::client::{Client, JoinOptions};
use rejoin_common::{ROOM, SILENCE, WAIT, objects, publish, relay, session_ssrcs, until_cached};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use support::browser;
use support::server::{PUBLISH, SUBSCRIBE, base, token};

/// `rejoin.mjs` running in Chromium.
struct Page {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Page {
    fn start(env: &[(&str, String)]) -> Self {
        let mut cmd = browser::node("rejoin.mjs");
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run node ({e}): scripts/test.sh installs it"));
        let stdin = child.stdin.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("[page] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[page] {line}");
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// The next line the page printed; the page's waits are bounded, and so is this.
    fn line(&self) -> String {
        let wait = WAIT * 3;
        self.lines
            .recv_timeout(wait)
            .unwrap_or_else(|e| panic!("the page printed nothing more within {wait:?}: {e}"))
    }

    /// The data of the page's next event, which must be `name`.
    fn event(&self, name: &str) -> Value {
        let prefix = format!("event {name} ");
        loop {
            let line = self.line();
            if let Some(json) = line.strip_prefix(&prefix) {
                return serde_json::from_str(json).unwrap();
            }
            assert!(
                !line.ends_with(" failed"),
                "the page ended before {name}: {line}"
            );
        }
    }

    /// Lets the page go on, waiting for the publisher's objects at x = id + `dx`.
    fn go(&mut self, dx: f32) {
        writeln!(self.stdin, "go {dx}").unwrap();
    }

    /// Waits for the page's tally and asserts that nothing failed.
    fn passed(self) {
        loop {
            let line = self.line();
            if line.ends_with(" failed") {
                assert!(line.ends_with(" 0 failed"), "{line}");
                return;
            }
        }
    }
}

/// The SSRCs the page's sessions had when it printed `event`.
fn page_ssrcs(event: &Value) -> Vec<u64> {
    let sessions = event.get("sessions").unwrap_or(event);
    sessions
        .as_object()
        .unwrap()
        .values()
        .map(|s| s["ssrc"].as_u64().unwrap())
        .collect()
}

#[test]
fn the_js_client_rejoins_a_restarted_relay_and_holds_the_whole_room_again() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let x = rt.block_on(relay("127.0.0.1:0".parse().unwrap()));
    let http = x.http_addr;
    let mut publisher = rt.block_on(async {
        let mut c = Client::join(
            &base(&x),
            &token(ROOM, PUBLISH),
            ROOM,
            JoinOptions::default(),
        )
        .await
        .unwrap();
        publish(&mut c, &objects(0.0)).await;
        until_cached(&x, c.ssrc()).await;
        c
    });
    let ssrc = publisher.ssrc();

    let mut page = Page::start(&[
        ("GSRELAY_BASE", base(&x)),
        ("GSRELAY_ROOM", ROOM.to_owned()),
        ("GSRELAY_TOKEN", token(ROOM, SUBSCRIBE)),
        ("GSRELAY_PEER_SSRC", ssrc.to_string()),
        ("GSRELAY_OBJECTS", rejoin_common::OBJECTS.to_string()),
        ("GSRELAY_SILENCE_MS", SILENCE.as_millis().to_string()),
    ]);
    let holding = page.event("holding");
    let ssrcs = page_ssrcs(&holding);
    assert_eq!(ssrcs.len(), 2, "{holding}");

    // The relay stops; a new one takes its HTTP address; the publisher comes back with
    // its state, moved meanwhile, before the page is told what to wait for.
    let y = rt.block_on(async {
        x.shutdown().await.unwrap();
        let y = relay(http).await;
        publisher.rejoin().await.unwrap();
        publish(&mut publisher, &objects(50.0)).await;
        until_cached(&y, ssrc).await;
        y
    });
    assert_eq!(publisher.ssrc(), ssrc);
    page.go(50.0);
    let rejoined = page.event("rejoined");
    assert_eq!(page_ssrcs(&rejoined), ssrcs, "{rejoined}");
    let on_y = rt.block_on(session_ssrcs(&y));
    for s in &ssrcs {
        assert!(
            on_y.contains(s),
            "page session {s} not on the new relay: {on_y:?}"
        );
    }

    rt.block_on(publish(&mut publisher, &objects(100.0)));
    page.go(100.0);
    page.passed();
    rt.block_on(async {
        publisher.leave().await.unwrap();
        y.shutdown().await.unwrap();
    });
}
