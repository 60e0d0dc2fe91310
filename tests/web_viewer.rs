//! The viewer (`/viewer`) and the client module (`/client/gsrelay.js`) in headless
//! Chromium, driven by Playwright (`web/test/viewer.mjs`), against the built relay with a
//! Rust client publishing over UDP/SRTP, which the page watches live over WebTransport. Needs Debian's `chromium` and `playwright-core`
//! in `.tools` (scripts/test.sh installs both). Writes the viewer's screenshot to
//! `target/web-artifacts/viewer.png`; `GSRELAY_DOCS_SCREENSHOT=docs/viewer.png` also
//! refreshes the one in the docs.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::wire::{Hand1, Head1, Loc2, Object};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::browser::{self, root};
use support::serve::Serve;
use support::server::{ALL, SUBSCRIBE};

/// A head and two hands, as the `publish` example sends them, off to one side of the map
/// so the screenshot shows them apart from the objects the page is fed.
fn avatar() -> Vec<Object> {
    let at = |x, y, z| Loc2 {
        x,
        y,
        z,
        ..Loc2::default()
    };
    vec![
        Object::Head1(Head1 {
            id: 1,
            location: at(-1.5, 1.7, -1.0),
            ..Head1::default()
        }),
        Object::Hand1(Hand1 {
            id: 2,
            left: true,
            location: at(-2.2, 1.2, -1.3),
            ..Hand1::default()
        }),
        Object::Hand1(Hand1 {
            id: 3,
            location: at(-0.8, 1.2, -1.3),
            ..Hand1::default()
        }),
    ]
}

#[test]
fn viewer_shows_a_live_room_in_chromium() {
    let mut cmd = browser::node("viewer.mjs");
    let relay = Serve::dev(&[]);
    let viewer_token = relay.token("dev", "viewer", ALL);
    let publisher_token = relay.token("dev", "publisher", ALL);
    let subscriber_token = relay.token("dev", "subscriber", SUBSCRIBE);

    // A publisher over UDP/SRTP, sending its avatar every 50 ms until the page is done.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut client = rt
        .block_on(Client::join(
            &relay.base,
            &publisher_token,
            "dev",
            JoinOptions::default(),
        ))
        .unwrap();
    let ssrc = client.ssrc();
    let done = Arc::new(AtomicBool::new(false));
    let publishing = {
        let done = done.clone();
        rt.spawn(async move {
            while !done.load(Ordering::Relaxed) {
                client.send_objects(&avatar()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let artifacts = root().join("target/web-artifacts");
    cmd.env("GSRELAY_BASE", &relay.base)
        .env("GSRELAY_TOKEN", &viewer_token)
        .env("GSRELAY_SUBSCRIBE_TOKEN", &subscriber_token)
        .env("GSRELAY_PUBLISHER_SSRC", ssrc.to_string())
        .env("GSRELAY_PUBLISHER_IDENTITY", "publisher")
        .env("GSRELAY_ARTIFACTS", &artifacts);
    let out = browser::output(&mut cmd);
    done.store(true, Ordering::Relaxed);
    rt.block_on(publishing).unwrap();

    browser::assert_passed("viewer.mjs", &out);
    let shot = std::fs::metadata(artifacts.join("viewer.png")).expect("screenshot written");
    assert!(shot.len() > 10_000, "screenshot of {} bytes", shot.len());
}
