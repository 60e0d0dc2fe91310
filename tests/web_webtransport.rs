//! WebTransport in headless Chromium (Playwright, `web/test/webtransport.mjs`) against the
//! built relay as `gsrelay serve` runs it, with Rust clients over UDP/SRTP in the same
//! rooms: the viewer at the printed address follows a moving head, a late page gets a
//! 1 000-object snapshot whole, a browser publisher and a Rust one see each other, and
//! refused sessions are told why and counted. Needs Debian's `chromium` and
//! `playwright-core` in `.tools` (scripts/test.sh installs both).
//!
//! The scenarios take turns (one Chromium at a time): each browser is heavy, and the
//! follow scenario measures latency.

mod support;

use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::token::Rights;
use gsrelay::wire::{self, Head1, Loc2, Object, Rot2};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::browser;
use support::serve::{DevServe, Serve};
use support::server::{ADMIN, PUBLISH, PUBLISH_SUBSCRIBE, SUBSCRIBE};

/// How long a page may take to reach a point its test waits for.
const WAIT: Duration = Duration::from_secs(40);

/// Steps of the moving head, one metre each.
const STEPS: u32 = 10;

/// Longest a step may take from the Rust publisher to the viewer's map.
const FOLLOW_BOUND_MS: i64 = 500;

/// One browser at a time.
static BROWSER: Mutex<()> = Mutex::new(());

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A scenario of `webtransport.mjs` running in Chromium.
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
    /// Starts `scenario` against `relay` with `env`.
    fn start(scenario: &str, relay: &DevServe, env: &[(&str, String)]) -> Self {
        let mut cmd = browser::node("webtransport.mjs");
        cmd.arg(scenario)
            .env("GSRELAY_BASE", &relay.base)
            .stdin(Stdio::piped())
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

    /// The next line the page printed, within [`WAIT`].
    fn line(&self) -> String {
        self.lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("the page printed nothing more within {WAIT:?}: {e}"))
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

    /// Lets the page go on.
    fn go(&mut self) {
        writeln!(self.stdin, "go").unwrap();
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

async fn udp_client(relay: &DevServe, room: &str, who: &str, rights: Rights) -> Client {
    let token = relay.token(room, who, rights);
    let mut c = Client::join(&relay.base, &token, room, JoinOptions::default())
        .await
        .unwrap();
    // A UDP session's address is latched by its first packet.
    c.send_rr().await.unwrap();
    c
}

fn head(id: u64, x: f32, y: f32, z: f32) -> Object {
    Object::Head1(Head1 {
        id,
        location: Loc2 {
            x,
            y,
            z,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

/// Publishes `head(1, step, ...)` every 20 ms while `run` is set, `step` read each time.
fn publish_steps(
    rt: &tokio::runtime::Runtime,
    mut client: Client,
    step: Arc<AtomicU32>,
    run: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    rt.spawn(async move {
        while run.load(Ordering::Relaxed) {
            let x = step.load(Ordering::Relaxed) as f32;
            client.send_objects(&[head(1, x, 1.7, 0.0)]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

#[test]
fn the_viewer_at_the_printed_address_follows_a_moving_head() {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Serve::dev(&[]);
    let viewer = relay.serve.line("viewer: ", WAIT);
    let viewer_url = viewer.trim_start_matches("viewer: ").to_owned();
    assert!(
        viewer_url.starts_with(&format!("{}/viewer#token=", relay.base)),
        "{viewer_url}"
    );

    let rt = runtime();
    let mover = rt.block_on(udp_client(&relay, "dev", "mover", PUBLISH));
    let ssrc = mover.ssrc();
    let step = Arc::new(AtomicU32::new(0));
    let run = Arc::new(AtomicBool::new(true));
    let publishing = publish_steps(&rt, mover, step.clone(), run.clone());

    let mut page = Page::start(
        "follow",
        &relay,
        &[
            ("GSRELAY_VIEWER_URL", viewer_url),
            ("GSRELAY_PEER_SSRC", ssrc.to_string()),
            ("GSRELAY_STEPS", STEPS.to_string()),
        ],
    );
    page.event("ready");
    let mut published = Vec::new();
    for k in 1..=STEPS {
        published.push(unix_ms());
        step.store(k, Ordering::Relaxed);
        // The stimulus's pace: each step stays long enough to be drawn.
        std::thread::sleep(Duration::from_millis(250));
    }
    page.go();
    let seen = page.event("seen");
    run.store(false, Ordering::Relaxed);
    rt.block_on(publishing).unwrap();
    page.passed();

    let mut lags = Vec::new();
    for (k, sent) in (1..=STEPS).zip(published) {
        let drawn = seen[k.to_string()]
            .as_i64()
            .unwrap_or_else(|| panic!("step {k} never drawn: {seen}"));
        lags.push(drawn - sent);
    }
    lags.sort_unstable();
    eprintln!("publisher to viewer map, ms: {lags:?}");
    // Millisecond clocks on both sides: a step may read as drawn a millisecond early.
    assert!(lags[0] >= -1, "{lags:?}");
    assert!(lags[lags.len() - 1] <= FOLLOW_BOUND_MS, "{lags:?}");
}

/// Polls the room inspection until `ssrc` holds `objects` objects.
async fn cached(relay: &DevServe, room: &str, ssrc: u32, objects: u64) {
    let token = relay.token(room, "inspector", ADMIN);
    let url = format!("{}/v1/rooms/{room}", relay.base);
    let deadline = Instant::now() + WAIT;
    loop {
        let info: Value = reqwest::Client::new()
            .get(&url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let held = info["streams"].as_array().and_then(|streams| {
            streams
                .iter()
                .find(|s| s["ssrc"] == ssrc)
                .and_then(|s| s["objects"].as_u64())
        });
        if held == Some(objects) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the relay holds {held:?} objects"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_late_page_gets_a_thousand_object_snapshot_whole() {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Serve::dev(&[]);
    let rt = runtime();
    let publisher = rt.block_on(async {
        let mut p = udp_client(&relay, "snapshot", "publisher", PUBLISH).await;
        let objects: Vec<Object> = (0..1000).map(|id| head(id, id as f32, 1.7, 0.0)).collect();
        for chunk in objects.chunks(10) {
            p.send_objects(chunk).await.unwrap();
        }
        cached(&relay, "snapshot", p.ssrc(), 1000).await;
        p
    });
    let page = Page::start(
        "snapshot",
        &relay,
        &[
            ("GSRELAY_ROOM", "snapshot".into()),
            ("GSRELAY_TOKEN", relay.token("snapshot", "late", SUBSCRIBE)),
            ("GSRELAY_PEER_SSRC", publisher.ssrc().to_string()),
            ("GSRELAY_OBJECTS", "1000".into()),
        ],
    );
    let got = page.event("snapshot");
    page.passed();
    assert_eq!(got["objects"], 1000);
    assert_eq!(got["intact"], 1000);
    // The browser's datagram limit is the session's: snapshot packets that fit it go as
    // datagrams, the rest on the stream, and none is lost either way.
    assert!(got["maxDatagramSize"].as_u64().unwrap() >= 1200, "{got}");
    eprintln!(
        "1000-object snapshot in Chromium: connected {:.0} ms, first state {:.0} ms, complete {:.0} ms after the join began",
        got["connectMs"].as_f64().unwrap(),
        got["firstStateMs"].as_f64().unwrap(),
        got["completeMs"].as_f64().unwrap()
    );
    drop(publisher);
}

/// The next RTP packet `c` receives from `ssrc`, decoded.
async fn objects_from(c: &mut Client, ssrc: u32) -> Vec<Object> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtp {
                ssrc: from,
                payload,
                ..
            }) if from == ssrc => return wire::decode(&payload, c.dialect()).unwrap(),
            Some(_) => continue,
            None => panic!("nothing from {ssrc} within {WAIT:?}"),
        }
    }
}

#[test]
fn a_browser_publisher_and_a_udp_one_see_each_other() {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Serve::dev(&[]);
    let rt = runtime();
    let mut subscriber = rt.block_on(udp_client(&relay, "exchange", "listener", SUBSCRIBE));
    let mut publisher = rt.block_on(udp_client(&relay, "exchange", "rust", PUBLISH));
    let ssrc = publisher.ssrc();
    let run = Arc::new(AtomicBool::new(true));
    let publishing = {
        let run = run.clone();
        rt.spawn(async move {
            while run.load(Ordering::Relaxed) {
                let h = head(7, -2.5, 1.5, 0.75);
                publisher.send_objects(&[h]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut page = Page::start(
        "exchange",
        &relay,
        &[
            ("GSRELAY_ROOM", "exchange".into()),
            (
                "GSRELAY_TOKEN",
                relay.token("exchange", "browser", PUBLISH_SUBSCRIBE),
            ),
            ("GSRELAY_PEER_SSRC", ssrc.to_string()),
        ],
    );
    let browser = page.event("joined")["ssrc"].as_u64().unwrap() as u32;
    let got = rt.block_on(objects_from(&mut subscriber, browser));
    let expected = Object::Head1(Head1 {
        id: 42,
        time: 1000,
        location: Loc2 {
            x: 1.25,
            y: 1.5,
            z: -0.5,
            ..Loc2::default()
        },
        rotation: Rot2 {
            sj: 0.5,
            ..Rot2::default()
        },
        ..Head1::default()
    });
    assert_eq!(got, vec![expected], "the browser's head, over UDP/SRTP");
    page.go();
    page.passed();
    run.store(false, Ordering::Relaxed);
    rt.block_on(publishing).unwrap();
}

/// The value of the `/metrics` sample `name{labels}`.
fn metric(relay: &DevServe, rt: &tokio::runtime::Runtime, sample: &str) -> f64 {
    let text = rt.block_on(async {
        reqwest::get(format!("{}/metrics", relay.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn refused_sessions_are_told_why_and_counted() {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Serve::dev(&[]);
    let page = Page::start(
        "refused",
        &relay,
        &[
            ("GSRELAY_ROOM", "refused".into()),
            (
                "GSRELAY_TOKEN",
                relay.token("refused", "browser", PUBLISH_SUBSCRIBE),
            ),
        ],
    );
    page.event("refused");
    page.passed();
    let rt = runtime();
    let count = |outcome: &str| {
        let sample = format!("gsrelay_webtransport_sessions_total{{outcome=\"{outcome}\"}}");
        metric(&relay, &rt, &sample)
    };
    assert_eq!(count("attached"), 1.0);
    assert_eq!(count("token_invalid"), 3.0);
    assert_eq!(count("wrong_path"), 1.0);
}
