//! The room directory in Redis (`serve --redis-url`), against a real `redis-server`: a
//! node registers under a key that expires unless refreshed, each room records the node
//! with its sessions, a Redis that is down refuses joins (503 `directory_unavailable`)
//! while the rooms already open keep flowing, and a Redis restarted empty is whole
//! again within a refresh.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::serve::{self, Server};
use gsrelay::wire::Object;
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};
use support::head;
use support::redis::Redis;
use support::server::{PUBLISH, SUBSCRIBE, base, config, metric, token};
use support::transports::post_join;

const ROOM: &str = "arena";

/// How long the directory may take to show what it must: a refresh and a margin.
const WAIT: Duration = Duration::from_secs(6);

async fn relay(redis: &Redis, node: &str, prefix: &str) -> Server {
    let cfg = serve::ServeConfig {
        redis_url: Some(redis.url()),
        redis_prefix: prefix.into(),
        node_name: Some(node.into()),
        link_addr: "127.0.0.1:0".parse().unwrap(),
        ..config(1)
    };
    serve::start(cfg).await.unwrap()
}

async fn join(server: &Server, rights: gsrelay::token::Rights) -> Client {
    let mut c = Client::join(
        &base(server),
        &token(ROOM, rights),
        ROOM,
        JoinOptions::default(),
    )
    .await
    .unwrap();
    c.send_rr().await.unwrap();
    c
}

/// This node's sessions of `room` as the directory records them.
async fn sessions_of(c: &mut MultiplexedConnection, prefix: &str, node: &str) -> Option<u64> {
    redis::cmd("HGET")
        .arg(format!("{prefix}:room:{ROOM}"))
        // The node's one shard.
        .arg(format!("{node}#0"))
        .query_async(c)
        .await
        .unwrap()
}

/// The status `/readyz` answers.
async fn readyz(server: &Server) -> u16 {
    reqwest::get(format!("{}/readyz", base(server)))
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `gsrelay_directory_available` as `/metrics` shows it.
async fn directory_available(server: &Server) -> f64 {
    metric(server, "gsrelay_directory_available")
        .await
        .expect("gsrelay_directory_available is exported")
}

/// Waits until `check` holds, or fails naming `what`.
async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    let asked = Instant::now();
    while !check().await {
        assert!(asked.elapsed() < WAIT, "{what} within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Publishes `n` updates and checks the subscriber gets each.
async fn flows(publisher: &mut Client, subscriber: &mut Client, n: u32) {
    for i in 0..n {
        let x = i as f32;
        publisher.send_objects(&[head(1, x)]).await.unwrap();
        let got = subscriber
            .recv_objects(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("update {i} did not arrive"));
        assert!(
            got.1
                .iter()
                .any(|o| matches!(o, Object::Head1(h) if h.location.x == x)),
            "update {i}: {got:?}"
        );
    }
}

#[tokio::test]
async fn a_node_registers_and_its_rooms_record_it_with_their_sessions() {
    let redis = Redis::start().await;
    let mut c = redis.connection().await.unwrap();
    let server = relay(&redis, "node-a", "gsrelay").await;
    eventually("ready once registered", async || {
        readyz(&server).await == 200
    })
    .await;
    eventually("the node's record, expiring", async || {
        let ttl: i64 = redis::cmd("PTTL")
            .arg("gsrelay:node:node-a")
            .query_async(&mut c)
            .await
            .unwrap();
        ttl > 0 && ttl <= 6_000
    })
    .await;
    let record: String = redis::cmd("GET")
        .arg("gsrelay:node:node-a")
        .query_async(&mut c)
        .await
        .unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["http"], server.http_addr.to_string());

    let publisher = join(&server, PUBLISH).await;
    let subscriber = join(&server, SUBSCRIBE).await;
    // A join is recorded before it is answered.
    assert_eq!(sessions_of(&mut c, "gsrelay", "node-a").await, Some(2));
    subscriber.leave().await.unwrap();
    assert_eq!(sessions_of(&mut c, "gsrelay", "node-a").await, Some(1));
    publisher.leave().await.unwrap();
    assert_eq!(
        sessions_of(&mut c, "gsrelay", "node-a").await,
        None,
        "a room the node no longer holds loses its field"
    );
}

#[tokio::test]
async fn without_redis_joins_wait_and_open_rooms_flow_and_a_restarted_redis_is_whole_again() {
    let redis = Redis::start().await;
    let server = relay(&redis, "node-a", "gsrelay").await;
    let mut publisher = join(&server, PUBLISH).await;
    let mut subscriber = join(&server, SUBSCRIBE).await;
    flows(&mut publisher, &mut subscriber, 5).await;

    let port = redis.kill();
    // The room already open keeps flowing, every update.
    flows(&mut publisher, &mut subscriber, 20).await;
    // A join cannot be placed: 503, told when to retry.
    let refused = post_join(&server, ROOM, serde_json::json!({"transport": "rtp"})).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "directory_unavailable", "{body}");
    // Not ready while joins cannot be placed: a load balancer sends them elsewhere.
    assert_eq!(readyz(&server).await, 503);
    assert_eq!(directory_available(&server).await, 0.0);

    // Redis comes back empty: the node writes its record and its room back by itself.
    let redis = Redis::start_on(port).await;
    let mut c = redis.connection().await.unwrap();
    eventually("the room's record rebuilt", async || {
        sessions_of(&mut c, "gsrelay", "node-a").await == Some(2)
    })
    .await;
    let exists: bool = redis::cmd("EXISTS")
        .arg("gsrelay:node:node-a")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(exists, "the node's record rebuilt");
    eventually("ready again", async || readyz(&server).await == 200).await;
    assert_eq!(directory_available(&server).await, 1.0);
    let mut late = join(&server, SUBSCRIBE).await;
    assert_eq!(sessions_of(&mut c, "gsrelay", "node-a").await, Some(3));
    flows(&mut publisher, &mut late, 1).await;
}

#[tokio::test]
async fn clusters_with_other_prefixes_share_a_redis_without_seeing_each_other() {
    let redis = Redis::start().await;
    let mut c = redis.connection().await.unwrap();
    let blue = relay(&redis, "node", "blue").await;
    let green = relay(&redis, "node", "green").await;
    let _b = join(&blue, PUBLISH).await;
    let _g1 = join(&green, PUBLISH).await;
    let _g2 = join(&green, SUBSCRIBE).await;
    assert_eq!(sessions_of(&mut c, "blue", "node").await, Some(1));
    assert_eq!(sessions_of(&mut c, "green", "node").await, Some(2));
}

#[tokio::test]
async fn a_redis_url_that_cannot_be_used_stops_the_start_naming_it() {
    for url in ["not a url", "http://127.0.0.1:6379/", "redis://"] {
        let cfg = serve::ServeConfig {
            redis_url: Some(url.into()),
            ..config(1)
        };
        let err = match serve::start(cfg).await {
            Ok(_) => panic!("{url:?} was taken"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains("redis"), "{url:?}: {err}");
    }
}
