//! The viewer (`/viewer`) and the client module (`/client/gsrelay.js`) in headless
//! Chromium, driven by Playwright (`web/test/viewer.mjs`), against the built relay with a
//! Rust client publishing over UDP/SRTP, which the page watches live over WebTransport. Needs Debian's `chromium` and `playwright-core`
//! in `.tools` (scripts/test.sh installs both). Writes the viewer's screenshot to
//! `target/web-artifacts/viewer.png`; `GSRELAY_DOCS_SCREENSHOT=docs/viewer.png` also
//! refreshes the one in the docs.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::control::token::Rights;
use gsrelay::wire::{Hand1, Head1, Loc2, Object};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::serve::Serve;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn env_path(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map_or(default, PathBuf::from)
}

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
    let chromium = env_path("GSRELAY_CHROMIUM", PathBuf::from("/usr/bin/chromium"));
    let tools = env_path("GSRELAY_NODE_TOOLS", root().join(".tools"));
    assert!(
        chromium.is_file(),
        "no Chromium at {} (scripts/test.sh installs Debian's chromium; or set GSRELAY_CHROMIUM)",
        chromium.display()
    );
    assert!(
        tools.join("node_modules/playwright-core").is_dir(),
        "no playwright-core in {} (scripts/test.sh installs it; or set GSRELAY_NODE_TOOLS)",
        tools.display()
    );

    let relay = Serve::dev(&[]);
    let all = Rights {
        publish: true,
        subscribe: true,
        admin: true,
    };
    let viewer_token = relay.token("dev", "viewer", all);
    let publisher_token = relay.token("dev", "publisher", all);
    let subscribe_only = Rights {
        subscribe: true,
        ..Rights::default()
    };
    let subscriber_token = relay.token("dev", "subscriber", subscribe_only);

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
    let mut cmd = Command::new("node");
    cmd.arg(root().join("web/test/viewer.mjs"))
        .env("GSRELAY_BASE", &relay.base)
        .env("GSRELAY_TOKEN", &viewer_token)
        .env("GSRELAY_SUBSCRIBE_TOKEN", &subscriber_token)
        .env("GSRELAY_PUBLISHER_SSRC", ssrc.to_string())
        .env("GSRELAY_PUBLISHER_IDENTITY", "publisher")
        .env("GSRELAY_CHROMIUM", &chromium)
        .env("GSRELAY_NODE_TOOLS", &tools)
        .env("GSRELAY_ARTIFACTS", &artifacts);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run node ({e}): scripts/test.sh installs it"));
    done.store(true, Ordering::Relaxed);
    rt.block_on(publishing).unwrap();

    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let closing = stdout
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .expect("viewer.mjs prints its tally");
    assert!(closing.ends_with(" 0 failed"), "{closing}");
    assert!(out.status.success());
    let shot = std::fs::metadata(artifacts.join("viewer.png")).expect("screenshot written");
    assert!(shot.len() > 10_000, "screenshot of {} bytes", shot.len());
}
