//! Rooms across nodes: three relays sharing a real `redis-server` and linked by QUIC.
//! A publisher on one node reaches subscribers on the others; any node takes any join
//! and serves it where the room is; a late joiner gets the whole room from its own node;
//! inspection answers for the whole room from any node; rooms stay apart; and a node of
//! another cluster cannot link. (Killing nodes and Redis is `tests/cluster_failover.rs`.)

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::internal::cluster::{self, node_link};
use gsrelay::serve::{self, Server};
use gsrelay::token::Rights;
use std::time::{Duration, Instant};
use support::cluster::{sees, until_links};
use support::head;
use support::redis::Redis;
use support::server::{ADMIN, PUBLISH, SUBSCRIBE, base, config, metric, token};
use support::transports::player;

/// How long a cluster may take to link up or show what it must.
const WAIT: Duration = Duration::from_secs(10);

/// A node of the cluster on `redis`, named `name`, spilling a room to another node
/// past `spill` sessions.
async fn node(redis: &Redis, name: &str, spill: usize) -> Server {
    node_with(redis, name, spill, None).await
}

async fn node_with(redis: &Redis, name: &str, spill: usize, secret: Option<&str>) -> Server {
    let mut cfg = serve::ServeConfig {
        redis_url: Some(redis.url()),
        node_name: Some(name.into()),
        link_addr: "127.0.0.1:0".parse().unwrap(),
        node_spill_sessions: spill,
        ..config(1)
    };
    if let Some(s) = secret {
        cfg.token_secret = Some(s.into());
    }
    serve::start(cfg).await.unwrap()
}

/// Waits until `check` holds, or fails naming `what`.
async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    let asked = Instant::now();
    while !check().await {
        assert!(asked.elapsed() < WAIT, "{what} within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every node has a link to every other.
async fn linked(nodes: &[&Server]) {
    let want = (nodes.len() - 1) as f64;
    for n in nodes {
        until_links("a node", want, || metric(n, "gsrelay_cluster_links")).await;
    }
}

async fn join(server: &Server, room: &str, rights: Rights) -> Client {
    let mut c = Client::join(
        &base(server),
        &token(room, rights),
        room,
        JoinOptions::default(),
    )
    .await
    .unwrap();
    c.send_rr().await.unwrap();
    c
}

/// Which node's RTP address a client was given.
fn served_by(c: &Client, nodes: &[&Server]) -> usize {
    let addr = c.relay_addr().unwrap();
    nodes
        .iter()
        .position(|n| n.rtp_addrs.contains(&addr))
        .expect("served by one of the nodes")
}

#[tokio::test]
async fn a_publisher_on_one_node_reaches_subscribers_on_the_others() {
    let redis = Redis::start().await;
    // A room spills past one session per node: each join stays where it arrives.
    let (a, b, c) = (
        node(&redis, "node-a", 1).await,
        node(&redis, "node-b", 1).await,
        node(&redis, "node-c", 1).await,
    );
    linked(&[&a, &b, &c]).await;
    let mut publisher = join(&a, "arena", PUBLISH).await;
    let mut on_b = join(&b, "arena", SUBSCRIBE).await;
    let mut on_c = join(&c, "arena", SUBSCRIBE).await;
    assert_eq!(served_by(&on_b, &[&a, &b, &c]), 1);
    assert_eq!(served_by(&on_c, &[&a, &b, &c]), 2);
    for i in 0..20 {
        let x = i as f32;
        publisher.send_objects(&[head(7, x)]).await.unwrap();
        sees(&mut on_b, 7, x).await;
        sees(&mut on_c, 7, x).await;
    }
    // A late joiner on C gets the room from C's own replica.
    let mut late = join(&c, "arena", SUBSCRIBE).await;
    let relay_ssrc = late.relay_ssrc();
    late.send_fir(relay_ssrc).await.unwrap();
    sees(&mut late, 7, 19.0).await;
}

#[tokio::test]
async fn any_node_takes_any_join_and_serves_it_where_the_room_is() {
    let redis = Redis::start().await;
    let (a, b) = (
        node(&redis, "node-a", 1000).await,
        node(&redis, "node-b", 1000).await,
    );
    linked(&[&a, &b]).await;
    let mut publisher = join(&a, "arena", PUBLISH).await;
    // Through B's API, served by A, where the room is.
    let mut subscriber = join(&b, "arena", SUBSCRIBE).await;
    assert_eq!(served_by(&subscriber, &[&a, &b]), 0);
    publisher.send_objects(&[head(1, 5.0)]).await.unwrap();
    sees(&mut subscriber, 1, 5.0).await;

    // Inspection through either node answers for the whole room.
    for n in [&a, &b] {
        let info: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/v1/rooms/arena", base(n)))
            .bearer_auth(token("arena", ADMIN))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(info["sessions"].as_array().map(Vec::len), Some(2), "{info}");
    }
    // Leaving through B reaches the session on A.
    subscriber.leave().await.unwrap();
    assert_eq!(
        metric(
            &a,
            "gsrelay_cluster_forwarded_total{route=\"/v1/rooms/{room}/sessions\"}"
        )
        .await,
        Some(0.0)
    );
    assert!(
        metric(
            &b,
            "gsrelay_cluster_forwarded_total{route=\"/v1/sessions/{id}\"}"
        )
        .await
            >= Some(1.0)
    );
}

#[tokio::test]
async fn rooms_stay_apart_across_nodes() {
    let redis = Redis::start().await;
    let (a, b) = (
        node(&redis, "node-a", 1).await,
        node(&redis, "node-b", 1).await,
    );
    linked(&[&a, &b]).await;
    let mut red = join(&a, "red", PUBLISH).await;
    let _blue_pub = join(&a, "blue", PUBLISH).await;
    // Each on B: the rooms spill there (A holds two sessions).
    let mut on_red = join(&b, "red", SUBSCRIBE).await;
    let mut on_blue = join(&b, "blue", SUBSCRIBE).await;
    red.send_objects(&[head(3, 1.0)]).await.unwrap();
    sees(&mut on_red, 3, 1.0).await;
    // Blue's subscriber sees nothing of red, past the time red took to arrive.
    let got = on_blue
        .recv_objects(Duration::from_millis(500))
        .await
        .unwrap();
    assert!(got.is_none(), "a red update reached blue: {got:?}");
}

#[tokio::test]
async fn a_node_of_another_cluster_cannot_link() {
    let redis = Redis::start().await;
    let a = node(&redis, "node-a", 1).await;
    let stranger = node_with(
        &redis,
        "node-z",
        1,
        Some("another-clusters-secret-0123456789"),
    )
    .await;
    eventually("the stranger's link refused for its proof", async || {
        let refused = |s| async move {
            metric(s, "gsrelay_cluster_links_refused_total{reason=\"auth\"}")
                .await
                .unwrap_or(0.0)
        };
        refused(&a).await + refused(&stranger).await >= 1.0
    })
    .await;
    assert_eq!(metric(&a, "gsrelay_cluster_links").await, Some(0.0));
    assert_eq!(metric(&stranger, "gsrelay_cluster_links").await, Some(0.0));
    // A join through A stays on A: the stranger is no candidate.
    let c = join(&a, "arena", PUBLISH).await;
    assert_eq!(served_by(&c, &[&a, &stranger]), 0);
}

#[tokio::test]
async fn a_draining_node_sends_new_joins_elsewhere_and_keeps_its_links() {
    let redis = Redis::start().await;
    let (a, b) = (
        node(&redis, "node-a", 1).await,
        node(&redis, "node-b", 1).await,
    );
    linked(&[&a, &b]).await;
    let mut publisher = join(&a, "arena", PUBLISH).await;
    let mut on_b = join(&b, "arena", SUBSCRIBE).await;
    assert_eq!(served_by(&on_b, &[&a, &b]), 1);
    b.begin_drain().await.unwrap();
    // B holds its session and its link: the publisher on A still reaches it.
    publisher.send_objects(&[head(4, 1.0)]).await.unwrap();
    sees(&mut on_b, 4, 1.0).await;
    // A join reaching B is served by A, the room's other node.
    let late = join(&b, "arena", SUBSCRIBE).await;
    assert_eq!(served_by(&late, &[&a, &b]), 0);
}

/// Opens a link to `server` as a node named `name` would, proving `secret`.
async fn dial_link(
    server: &Server,
    name: &str,
    secret: &str,
) -> Result<node_link::Opened, node_link::OpenError> {
    let (endpoint, client) = cluster::endpoint("127.0.0.1:0".parse().unwrap()).unwrap();
    let me = node_link::Me {
        node: name.into(),
        ssrcs: vec![0x5151_5151],
    };
    let key = node_link::LinkKey::new(secret.as_bytes(), "gsrelay");
    let addr = server
        .link_addr
        .expect("a cluster node has a link endpoint");
    node_link::dial(&endpoint, client, addr, &me, &key).await
}

#[tokio::test]
async fn garbage_on_a_link_is_dropped_and_counted_and_a_bad_frame_closes_only_that_link() {
    let redis = Redis::start().await;
    let (a, b) = (
        node(&redis, "node-a", 1).await,
        node(&redis, "node-b", 1).await,
    );
    linked(&[&a, &b]).await;
    // A wrong secret: refused, counted.
    let wrong = dial_link(&a, "intruder", "not-the-cluster-secret-0123456789").await;
    assert!(wrong.is_err(), "a wrong proof is refused");
    eventually("the refusal counted", async || {
        metric(&a, "gsrelay_cluster_links_refused_total{reason=\"auth\"}").await >= Some(1.0)
    })
    .await;

    // The right secret, then garbage datagrams: each dropped by reason, the link stands.
    let mut link = dial_link(&a, "tester", support::server::SECRET)
        .await
        .unwrap();
    eventually("the tester linked", async || {
        metric(&a, "gsrelay_cluster_links").await == Some(2.0)
    })
    .await;
    link.conn.send_datagram(vec![1, 2, 3].into()).unwrap();
    let mut bad_class = vec![0u8; 13];
    bad_class[12] = 9;
    link.conn.send_datagram(bad_class.into()).unwrap();
    let mut unknown = vec![0u8; 13];
    unknown.extend_from_slice(&[0x80, 0, 0, 1]);
    link.conn.send_datagram(unknown.into()).unwrap();
    eventually("garbage datagrams counted by reason", async || {
        let truncated = "gsrelay_dropped_packets_total{reason=\"link_truncated\"}";
        let class = "gsrelay_dropped_packets_total{reason=\"link_bad_class\"}";
        let unknown = "gsrelay_dropped_packets_total{reason=\"link_unknown\"}";
        metric(&a, truncated).await >= Some(1.0)
            && metric(&a, class).await >= Some(1.0)
            && metric(&a, unknown).await >= Some(1.0)
    })
    .await;
    assert_eq!(metric(&a, "gsrelay_cluster_links").await, Some(2.0));

    // A frame that does not parse closes that link, counted, and no other.
    link.send.write_all(&[0, 3, 99, 0, 0]).await.unwrap();
    eventually("the tester's link closed for its frame", async || {
        metric(
            &a,
            "gsrelay_cluster_links_refused_total{reason=\"protocol\"}",
        )
        .await
            >= Some(1.0)
    })
    .await;
    let closed = link.conn.closed().await;
    assert!(
        matches!(closed, quinn::ConnectionError::ApplicationClosed(_)),
        "{closed:?}"
    );
    assert_eq!(metric(&a, "gsrelay_cluster_links").await, Some(1.0));
    // A and B still carry a room.
    let mut publisher = join(&a, "arena", PUBLISH).await;
    let mut on_b = join(&b, "arena", SUBSCRIBE).await;
    publisher.send_objects(&[head(2, 9.0)]).await.unwrap();
    sees(&mut on_b, 2, 9.0).await;
}

/// `GET path` on `server` with `token`, as JSON.
async fn get_json(server: &Server, path: &str, token: &str) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("{}{path}", base(server)))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_server_api_answers_for_the_whole_cluster_from_any_node() {
    let redis = Redis::start().await;
    // One session per node: each join stays on the node it reaches.
    let (a, b) = (
        node(&redis, "node-a", 1).await,
        node(&redis, "node-b", 1).await,
    );
    linked(&[&a, &b]).await;
    let mut alice = player(&a, "arena", "alice", PUBLISH).await;
    let mut bob = player(&b, "arena", "bob", SUBSCRIBE).await;
    assert_eq!(served_by(&bob, &[&a, &b]), 1);
    let http = reqwest::Client::new();
    let relay_admin = gsrelay::token::Tokens::new(support::server::SECRET.as_bytes())
        .unwrap()
        .issue("*", "backend", ADMIN, 600, support::server::now())
        .unwrap();
    let admin = token("arena", ADMIN);
    // Either node lists the room with both nodes' sessions, and both participants.
    for n in [&a, &b] {
        let rooms = get_json(n, "/v1/rooms", &relay_admin).await;
        assert_eq!(rooms["rooms"][0]["room"], "arena", "{rooms}");
        assert_eq!(rooms["rooms"][0]["sessions"], 2, "{rooms}");
        let list = get_json(n, "/v1/rooms/arena/participants", &admin).await;
        let names: Vec<&str> = list["participants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["identity"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["alice", "bob"], "{list}");
    }
    // Muting alice through B reaches A, where she publishes.
    let muted = http
        .patch(format!("{}/v1/rooms/arena/participants/alice", base(&b)))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"publish": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(muted.status(), 200);
    alice.send_objects(&[head(1, 1.0)]).await.unwrap();
    eventually("alice's update dropped on A as muted", async || {
        metric(&a, "gsrelay_dropped_packets_total{reason=\"muted\"}").await >= Some(1.0)
    })
    .await;
    // Closing through A ends the sessions on both nodes and refuses joins on either.
    let closed = http
        .delete(format!("{}/v1/rooms/arena", base(&a)))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    for (c, name) in [(&mut alice, "alice"), (&mut bob, "bob")] {
        let relay = c.relay_ssrc();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match c.recv(left).await.unwrap() {
                Some(gsrelay::client::Received::Rtcp(items))
                    if items.iter().any(|i| {
                        matches!(i, gsrelay::rtp::RtcpItem::Bye { ssrcs } if ssrcs.contains(&relay))
                    }) =>
                {
                    break;
                }
                Some(_) => {}
                None => panic!("{name} got no BYE from its relay"),
            }
        }
    }
    for n in [&a, &b] {
        let refused = http
            .post(format!("{}/v1/rooms/arena/sessions", base(n)))
            .bearer_auth(token("arena", PUBLISH))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 409);
    }
}

#[tokio::test]
async fn presence_through_any_node_is_the_rooms_own() {
    let redis = Redis::start().await;
    let (a, b) = (
        node(&redis, "node-a", 1000).await,
        node(&redis, "node-b", 1000).await,
    );
    linked(&[&a, &b]).await;
    let alice = player(&a, "hall", "alice", PUBLISH).await;
    // B holds none of the room: it hands the stream to A, where the room is.
    let mut resp = reqwest::Client::new()
        .get(format!("{}/v1/rooms/hall/presence", base(&b)))
        .bearer_auth(token("hall", SUBSCRIBE))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut text = String::new();
    let mut next_event = async || -> String {
        loop {
            if let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                if block.starts_with("event:") {
                    return block;
                }
                continue;
            }
            let chunk = tokio::time::timeout(WAIT, resp.chunk())
                .await
                .expect("an event")
                .unwrap()
                .expect("the stream goes on");
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    };
    let snapshot = next_event().await;
    assert!(snapshot.starts_with("event: snapshot"), "{snapshot}");
    assert!(
        snapshot.contains(&format!("\"ssrcs\":[{}]", alice.ssrc())),
        "{snapshot}"
    );
    // A join through B is served on A, and its presence comes through B's stream.
    let _bob = player(&b, "hall", "bob", SUBSCRIBE).await;
    let joined = next_event().await;
    assert!(joined.starts_with("event: participant_joined"), "{joined}");
    assert!(joined.contains("\"identity\":\"bob\""), "{joined}");
}
