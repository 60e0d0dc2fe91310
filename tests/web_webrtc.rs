//! WebRTC data channels in headless Chromium (`web/test/webrtc.mjs`, Playwright), against
//! the built relay, with Rust clients over UDP/SRTP on the other side:
//! - the viewer joins over WebRTC and shows a Rust publisher's Head1 moving, its drawn
//!   position within a bound of where the publisher has it;
//! - a page joining late gets a 1 000-object snapshot whole over its data channel;
//! - a page publishing over WebRTC reaches a UDP/SRTP subscriber.
//!
//! Needs Debian's `chromium` and `playwright-core` in `.tools` (scripts/test.sh installs
//! both).

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::wire::{Head1, Loc2, Object, Object1, Vec3};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::browser;
use support::serve::Serve;
use support::server::ALL;

/// Objects in the late joiner's snapshot.
const SNAPSHOT_OBJECTS: u64 = 1000;

/// Where the page's publisher puts its head: the subscriber looks for exactly this.
const BROWSER_HEAD_X: f32 = 42.5;

/// The relay's session timeout: longer than the JS client's report interval (5 s), short
/// enough for the viewer to be seen outliving it.
const SESSION_TIMEOUT_S: u64 = 7;

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A head moving along x at 1 m/s from x = 0 at `t0_ms` (epoch), with that rate in its
/// Loc2 so that a viewer predicts between updates.
fn moving_head(t0_ms: u64) -> Object {
    let now = epoch_ms();
    Object::Head1(Head1 {
        id: 1,
        time: (now & 0xffff) as u16,
        location: Loc2 {
            x: (now - t0_ms) as f32 / 1000.0,
            y: 1.7,
            vx: 1.0,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

/// The snapshot's objects, in packets that fit the relay's limit.
fn crowd() -> Vec<Vec<Object>> {
    let objects: Vec<Object> = (0..SNAPSHOT_OBJECTS)
        .map(|i| {
            Object::Object1(Object1 {
                id: 1000 + i,
                position: Vec3 {
                    x: (i % 40) as f32,
                    y: 0.0,
                    z: (i / 40) as f32,
                },
                active: true,
                ..Object1::default()
            })
        })
        .collect();
    objects.chunks(25).map(<[Object]>::to_vec).collect()
}

#[test]
fn webrtc_pages_and_rust_clients_share_a_room_in_chromium() {
    let mut page = browser::node("webrtc.mjs");
    let relay = Serve::dev(&["--session-timeout", &SESSION_TIMEOUT_S.to_string()]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let join = |identity: &str| {
        let token = relay.token("dev", identity, ALL);
        rt.block_on(Client::join(
            &relay.base,
            &token,
            "dev",
            JoinOptions::default(),
        ))
        .unwrap()
    };

    // The crowd, published once before any page joins: only a snapshot can carry it.
    let mut crowd_client = join("crowd");
    let crowd_ssrc = crowd_client.ssrc();
    rt.block_on(async {
        for packet in crowd() {
            crowd_client.send_objects(&packet).await.unwrap();
        }
    });

    // A moving head over UDP/SRTP every 30 ms until the pages are done; the crowd's client
    // reports meanwhile, so the session timeout never takes its state away.
    let t0 = epoch_ms();
    let done = Arc::new(AtomicBool::new(false));
    let mut mover = join("mover");
    let mover_ssrc = mover.ssrc();
    let moving = {
        let done = done.clone();
        rt.spawn(async move {
            for tick in 0u64.. {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                mover.send_objects(&[moving_head(t0)]).await.unwrap();
                if tick % 30 == 0 {
                    crowd_client.send_rr().await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        })
    };

    // A UDP/SRTP subscriber waiting for the page's head; it writes the stop file when it
    // has it, which ends the page's publishing.
    let stop_file = std::env::temp_dir().join(format!("gsrelay-webrtc-{}", std::process::id()));
    let _ = std::fs::remove_file(&stop_file);
    let mut listener = join("listener");
    let heard = {
        let stop_file = stop_file.clone();
        rt.spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while tokio::time::Instant::now() < deadline {
                listener.send_rr().await.unwrap();
                let Some((ssrc, objects)) = listener
                    .recv_objects(Duration::from_millis(500))
                    .await
                    .unwrap()
                else {
                    continue;
                };
                let found = objects.iter().any(
                    |o| matches!(o, Object::Head1(h) if h.id == 7 && h.location.x == BROWSER_HEAD_X),
                );
                if found {
                    std::fs::write(&stop_file, b"heard").unwrap();
                    return Some(ssrc);
                }
            }
            None
        })
    };

    page.env("GSRELAY_BASE", &relay.base)
        .env("GSRELAY_TOKEN", relay.token("dev", "page", ALL))
        .env("GSRELAY_MOVER_SSRC", mover_ssrc.to_string())
        .env("GSRELAY_MOVER_T0_MS", t0.to_string())
        .env("GSRELAY_CROWD_SSRC", crowd_ssrc.to_string())
        .env("GSRELAY_CROWD_OBJECTS", SNAPSHOT_OBJECTS.to_string())
        .env("GSRELAY_BROWSER_HEAD_X", BROWSER_HEAD_X.to_string())
        .env("GSRELAY_STOP_FILE", &stop_file)
        .env("GSRELAY_SESSION_TIMEOUT_S", SESSION_TIMEOUT_S.to_string());
    let out = browser::output(&mut page);
    done.store(true, Ordering::Relaxed);
    rt.block_on(moving).unwrap();
    let heard = rt.block_on(heard).unwrap();
    let _ = std::fs::remove_file(&stop_file);

    let stdout = browser::assert_passed("webrtc.mjs", &out);
    let browser_ssrc = heard.expect("the UDP/SRTP subscriber got the page's head");
    assert!(
        stdout.contains(&format!("publisher ssrc {browser_ssrc}")),
        "the head came from the page's stream ({browser_ssrc})"
    );
}
