//! A relay with several shards: rooms are placed on shards and never share state, each
//! shard has its own RTP port, session operations reach the right shard, the relay-wide
//! figures add up over shards, and a stopped shard costs only its own rooms.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::internal::Metrics;
use gsrelay::internal::command::RelayHandle;
use gsrelay::internal::directory::MemoryDirectory;
use gsrelay::internal::shard;
use gsrelay::internal::shards::Shards;
use gsrelay::internal::udp::UdpConfig;
use gsrelay::serve::{self, Server};
use gsrelay::{Relay, RelayConfig};
use std::sync::Arc;
use std::time::Duration;
use support::head;
use support::server::{PUBLISH, SUBSCRIBE, base, config, serve_api, token};

async fn start(shards: usize) -> Server {
    serve::start(serve::ServeConfig {
        shards,
        ..config(1)
    })
    .await
    .unwrap()
}

async fn join(base_url: &str, room: &str, sub: bool) -> Client {
    let rights = if sub { SUBSCRIBE } else { PUBLISH };
    let mut c = Client::join(base_url, &token(room, rights), room, JoinOptions::default())
        .await
        .unwrap();
    c.send_rr().await.unwrap();
    c
}

/// Sessions on each shard, as the directory counts them.
async fn load(server: &Server) -> Vec<usize> {
    server.handle.directory().await.load().await.unwrap()
}

/// The shards the directory has `room` on.
async fn shards_of(server: &Server, room: &str) -> Vec<usize> {
    let placed = server.handle.directory().await.room(room).await.unwrap();
    placed.iter().map(|p| p.shard).collect()
}

/// A publisher and a subscriber in `room`; the subscriber gets what the publisher sends.
async fn room_flows(base_url: &str, room: &str, x: f32) -> (Client, Client) {
    let mut p = join(base_url, room, false).await;
    let mut s = join(base_url, room, true).await;
    p.send_objects(&[head(1, x)]).await.unwrap();
    let got = s.recv_objects(Duration::from_secs(5)).await.unwrap();
    assert_eq!(got.map(|(_, o)| o), Some(vec![head(1, x)]), "{room}");
    (p, s)
}

#[tokio::test]
async fn rooms_spread_over_shards_each_with_its_own_port() {
    let server = start(2).await;
    assert_eq!(server.rtp_addrs.len(), 2);
    assert_ne!(server.rtp_addrs[0], server.rtp_addrs[1]);
    let url = base(&server);
    let (pa, sa) = room_flows(&url, "a", 1.0).await;
    let (pb, sb) = room_flows(&url, "b", 2.0).await;
    // Each room's sessions share one shard's port; the second room went to the idle shard.
    let a = pa.relay_addr().unwrap();
    let b = pb.relay_addr().unwrap();
    assert_eq!(sa.relay_addr().unwrap(), a);
    assert_eq!(sb.relay_addr().unwrap(), b);
    assert_ne!(a, b, "two rooms on one shard while the other idles");
    assert_eq!(load(&server).await, vec![2, 2]);

    // Room info and session operations reach the owning shard.
    let info = server.handle.room_info("b".into()).await.unwrap().unwrap();
    assert_eq!(info.sessions.len(), 2);
    pb.leave().await.unwrap();
    let info = server.handle.room_info("b".into()).await.unwrap().unwrap();
    assert_eq!(info.sessions.len(), 1);

    // The gauges add up over shards (exported after each shard's next input).
    let metrics = server.metrics.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while metrics.sessions.get() != 3 || metrics.rooms.get() != 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "sessions {} rooms {}",
            metrics.sessions.get(),
            metrics.rooms.get()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((pa, sa, sb));
}

#[tokio::test]
async fn a_room_whose_sessions_all_left_can_be_placed_again() {
    let server = start(2).await;
    let url = base(&server);
    let (p, s) = room_flows(&url, "a", 1.0).await;
    p.leave().await.unwrap();
    s.leave().await.unwrap();
    assert_eq!(shards_of(&server, "a").await, Vec::<usize>::new());
    assert_eq!(load(&server).await, vec![0, 0]);
    room_flows(&url, "a", 3.0).await;
}

/// An API over two shards: shard 0 a running relay task, shard 1 stopped.
async fn one_shard_stopped() -> (String, shard::ShardTask) {
    let live = shard::spawn(
        UdpConfig::new("127.0.0.1:0".parse().unwrap()),
        Relay::new(RelayConfig::default(), 3).in_shard(0, 2),
        Metrics::new(),
    )
    .await
    .unwrap();
    let (dead, commands) = RelayHandle::channel(1);
    drop(commands);
    let directory = Arc::new(MemoryDirectory::new(2, 100, 100));
    let url = serve_api(Shards::new(vec![live.handle.clone(), dead], directory)).await;
    (url, live)
}

#[tokio::test]
async fn a_stopped_shard_costs_only_its_rooms() {
    let (url, _live) = one_shard_stopped().await;
    // New rooms go to the running shard and flow.
    room_flows(&url, "a", 1.0).await;
    room_flows(&url, "b", 2.0).await;
    // The relay is alive but not ready: no new clients should be sent to it.
    let health = reqwest::get(format!("{url}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = reqwest::get(format!("{url}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["error"]["code"], "relay_stopped");
}

#[tokio::test]
async fn quic_sessions_reach_the_shard_of_their_room() {
    let server = start(2).await;
    let url = base(&server);
    let mut shards_used = Vec::new();
    for (room, x) in [("a", 1.0), ("b", 2.0)] {
        let mut s = join(&url, room, true).await;
        let opts = JoinOptions {
            quic: true,
            ..JoinOptions::default()
        };
        let mut p = Client::join(&url, &token(room, PUBLISH), room, opts)
            .await
            .unwrap();
        // Packets over QUIC and the subscriber's first UDP packet take different paths
        // to the shard: publish until the subscriber has latched and receives.
        let mut got = None;
        for _ in 0..20 {
            p.send_objects(&[head(1, x)]).await.unwrap();
            got = s.recv_objects(Duration::from_millis(250)).await.unwrap();
            if got.is_some() {
                break;
            }
        }
        assert_eq!(got.map(|(_, o)| o), Some(vec![head(1, x)]), "{room}");
        shards_used.push(shards_of(&server, room).await);
    }
    assert_ne!(shards_used[0], shards_used[1], "one room per shard");
}
