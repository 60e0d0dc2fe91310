//! What the rejoin tests share (`tests/client_rejoin.rs`, `tests/web_rejoin.rs`): relays
//! that report often, started on a given HTTP address so that a new one can take a
//! stopped one's, a publisher's room of objects, and an HTTP front ([`front`]) that holds
//! the leaves a dead node would never answer.
#![allow(dead_code)] // each test file uses a different part of it

pub mod front;

use crate::support::moving_head;
use crate::support::server::{config, room_info};
use gsrelay::client::Client;
use gsrelay::serve::{self as server, Server};
use gsrelay::wire::Object;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub const ROOM: &str = "rejoin";

/// Objects the publisher keeps in the room.
pub const OBJECTS: u64 = 40;

/// The relays' least report interval: reports come at most 0.25 s apart.
pub const REPORTS: Duration = Duration::from_millis(200);

/// The subscribers' silence: six of the longest report gaps.
pub const SILENCE: Duration = Duration::from_millis(1500);

/// How long anything the tests wait for may take.
pub const WAIT: Duration = Duration::from_secs(20);

/// A relay with the tests' token secret and fast reports, its HTTP API on `http` (port 0:
/// any).
pub async fn relay(http: SocketAddr) -> Server {
    let mut cfg = config(0);
    cfg.http_addr = http;
    cfg.relay.rtcp_min_interval = REPORTS;
    server::start(cfg).await.unwrap()
}

/// The room's objects: Head1 with x = id + `dx`.
pub fn objects(dx: f32) -> Vec<Object> {
    (0..OBJECTS)
        .map(|id| moving_head(id, id as f32 + dx))
        .collect()
}

/// Publishes `objects`, ten to a packet.
pub async fn publish(c: &mut Client, objects: &[Object]) {
    for chunk in objects.chunks(10) {
        c.send_objects(chunk).await.unwrap();
    }
}

/// Objects `relay` caches for stream `ssrc` (0 while it has no such stream).
async fn cached(relay: &Server, ssrc: u32) -> u64 {
    let info = room_info(relay, ROOM).await;
    info["streams"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["ssrc"] == ssrc)
        .and_then(|s| s["objects"].as_u64())
        .unwrap_or(0)
}

/// Waits until `relay` caches [`OBJECTS`] objects of stream `ssrc`.
pub async fn until_cached(relay: &Server, ssrc: u32) {
    let deadline = Instant::now() + WAIT;
    while cached(relay, ssrc).await < OBJECTS {
        assert!(
            Instant::now() < deadline,
            "the relay never cached {OBJECTS}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The SSRCs of the sessions `relay` holds in the room.
pub async fn session_ssrcs(relay: &Server) -> Vec<u64> {
    let info = room_info(relay, ROOM).await;
    info["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["ssrc"].as_u64())
        .collect()
}
