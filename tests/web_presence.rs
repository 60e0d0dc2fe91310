//! Presence and the server API through the JavaScript client (`web/test/presence.mjs`):
//! the event-stream reading and reconnection over stand-in answers in Node, then a page in
//! headless Chromium watching a room with `watchPresence` on the built relay while
//! players join and leave and a backend in Node calls `RoomAdmin` (list, update, remove,
//! metadata, close). Needs Debian's `chromium` and `playwright-core` in `.tools`
//! (scripts/test.sh installs both).

mod support;

use support::browser;
use support::serve::Serve;
use support::server::{ADMIN, PUBLISH, PUBLISH_SUBSCRIBE, SUBSCRIBE};

#[test]
fn a_page_watches_presence_while_a_backend_administers_the_room() {
    let mut cmd = browser::node("presence.mjs");
    let relay = Serve::dev(&[]);
    cmd.env("GSRELAY_BASE", &relay.base)
        .env("GSRELAY_ADMIN_TOKEN", relay.token("*", "backend", ADMIN))
        .env(
            "GSRELAY_WATCH_TOKEN",
            relay.token("hall", "watcher", SUBSCRIBE),
        )
        .env(
            "GSRELAY_ALICE_TOKEN",
            relay.token("hall", "alice", PUBLISH_SUBSCRIBE),
        )
        .env("GSRELAY_BOB_TOKEN", relay.token("hall", "bob", PUBLISH));
    let out = browser::output(&mut cmd);
    browser::assert_passed("presence.mjs", &out);
}
