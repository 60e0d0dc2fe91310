//! Rooms across nodes as an operator runs them: three `gsrelay serve` processes and a
//! real `redis-server` behind a Service. A room spread over the three carries every
//! update to every node, a late joiner gets the room from its own node, and rooms stay
//! apart. When parts fail: a node killed with `kill -9` is dropped by the others within its
//! link's idle timeout (they end its streams), and its clients, rejoining through the
//! Service after the silence they set, hold the whole room again from a surviving node;
//! the recovery time is printed. Redis killed and restarted: the rooms already open keep
//! flowing across nodes with no loss, joins are refused with 503 meanwhile, and the
//! directory is whole again within a refresh.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::token::Rights;
use gsrelay::wire::Object;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use support::cluster::{Node, Service, linked, sees};
use support::head;
use support::redis::Redis;
use support::server::{PUBLISH, SUBSCRIBE, token};

const ROOM: &str = "arena";

/// Objects the publisher keeps in the room: the whole room a rejoined client must hold.
const OBJECTS: u64 = 20;

/// The silence after which the test's clients take their node for gone: the publisher
/// sends every 20 ms, so a live node is never this quiet.
const SILENCE: Duration = Duration::from_millis(300);

async fn join(base: &str, rights: Rights) -> Client {
    join_room(base, ROOM, rights).await
}

/// A client of `room` through `base`, with the test's silence.
async fn join_room(base: &str, room: &str, rights: Rights) -> Client {
    let opts = JoinOptions {
        silence: Some(SILENCE),
        ..JoinOptions::default()
    };
    let mut c = Client::join(base, &token(room, rights), room, opts)
        .await
        .unwrap();
    c.send_rr().await.unwrap();
    c
}

/// A client of the room through the Service, which sends it to node `k`.
async fn via(service: &Service, k: usize, rights: Rights) -> Client {
    service.next_to(k);
    join(&service.base(), rights).await
}

/// Three nodes spilling a room past one session each, linked, behind a Service.
async fn cluster(redis: &Redis) -> (Vec<Node>, Service) {
    let mut nodes = Vec::new();
    for name in ["node-a", "node-b", "node-c"] {
        nodes.push(Node::start(redis, name, &["--node-spill-sessions", "1"]).await);
    }
    linked(&nodes.iter().collect::<Vec<_>>()).await;
    let service = Service::start(nodes.iter().map(|n| n.http).collect(), 0).await;
    (nodes, service)
}

/// The ids of the publisher's objects in `objects` at generation `round`.
fn of_round(objects: &[Object], round: f32) -> impl Iterator<Item = u64> + '_ {
    objects.iter().filter_map(move |o| match o {
        Object::Head1(h) if h.location.x == round => Some(h.id),
        _ => None,
    })
}

#[tokio::test]
async fn a_room_spread_over_three_processes_reaches_every_node_and_rooms_stay_apart() {
    let redis = Redis::start().await;
    let (nodes, service) = cluster(&redis).await;
    let mut publisher = via(&service, 0, PUBLISH).await;
    let mut on_b = via(&service, 1, SUBSCRIBE).await;
    let mut on_c = via(&service, 2, SUBSCRIBE).await;
    for n in &nodes {
        assert_eq!(n.sessions().await, 1.0, "one session on {}", n.name);
    }
    for i in 0..20 {
        let x = i as f32;
        publisher.send_objects(&[head(7, x)]).await.unwrap();
        sees(&mut on_b, 7, x).await;
        sees(&mut on_c, 7, x).await;
    }
    // A late joiner on C gets the room from C's replica.
    let mut late = via(&service, 2, SUBSCRIBE).await;
    assert_eq!(nodes[2].sessions().await, 2.0, "the late joiner is on C");
    let relay_ssrc = late.relay_ssrc();
    late.send_fir(relay_ssrc).await.unwrap();
    sees(&mut late, 7, 19.0).await;

    // Another room, published on B and watched on A, never mixes with this one.
    let mut blue_pub = join_room(&nodes[1].base(), "blue", PUBLISH).await;
    let mut blue_sub = join_room(&nodes[0].base(), "blue", SUBSCRIBE).await;
    blue_pub.send_objects(&[head(9, 1.0)]).await.unwrap();
    sees(&mut blue_sub, 9, 1.0).await;
    publisher.send_objects(&[head(7, 50.0)]).await.unwrap();
    sees(&mut on_b, 7, 50.0).await;
    let stray = blue_sub
        .recv_objects(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(stray.is_none(), "arena's update reached blue: {stray:?}");
    let mut seen = 0;
    while let Ok(Some((_, objs))) = on_c.recv_objects(Duration::from_millis(300)).await {
        assert!(
            !objs
                .iter()
                .any(|o| matches!(o, Object::Head1(h) if h.id == 9)),
            "blue's object reached arena"
        );
        seen += 1;
    }
    assert!(seen > 0, "arena flowed meanwhile");
}

#[tokio::test]
async fn a_killed_nodes_clients_rejoin_through_the_service_and_hold_the_whole_room() {
    let redis = Redis::start().await;
    let (mut nodes, service) = cluster(&redis).await;
    // The publisher on A; one subscriber on B, one on C, each through the Service.
    let mut publisher = via(&service, 0, PUBLISH).await;
    let mut on_b = via(&service, 1, SUBSCRIBE).await;
    let mut on_c = via(&service, 2, SUBSCRIBE).await;
    let objects: Vec<Object> = (1..=OBJECTS).map(|id| head(id, 1.0)).collect();
    publisher.send_objects(&objects).await.unwrap();
    for c in [&mut on_b, &mut on_c] {
        let mut seen = HashSet::new();
        while seen.len() < OBJECTS as usize {
            let got = c.recv_objects(Duration::from_secs(5)).await.unwrap();
            let (_, objs) = got.expect("the room's objects reach every node");
            seen.extend(of_round(&objs, 1.0));
        }
    }

    nodes[1].kill();
    let killed = Instant::now();
    // The publisher keeps the room alive; B's subscriber rejoins when it finds B silent
    // and asks its new node for the whole room.
    let mut held = HashSet::new();
    let mut rejoined = None;
    while held.len() < OBJECTS as usize {
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "not whole again in time"
        );
        publisher.send_objects(&[head(0, 2.0)]).await.unwrap();
        if on_b.rejoin_if_silent().await.unwrap_or(false) {
            rejoined = Some(killed.elapsed());
            held.clear();
        }
        if let Ok(Some((_, objs))) = on_b.recv_objects(Duration::from_millis(20)).await
            && rejoined.is_some()
        {
            held.extend(of_round(&objs, 1.0));
        }
    }
    let whole = killed.elapsed();
    eprintln!("node killed -> rejoined {rejoined:?}, whole room again {whole:?}");
    assert!(rejoined.is_some(), "B's subscriber rejoined");
    let addr = on_b.relay_addr().unwrap();
    assert!(addr != nodes[1].http, "served by a surviving node");
    // The survivors dropped B (after the link's 600 ms idle timeout; the time is a
    // benchmark's to hold, the bound here only catches a link that never times out): its
    // link is gone, and counted.
    for n in [&nodes[0], &nodes[2]] {
        while n.metric("gsrelay_cluster_links").await != Some(1.0) {
            assert!(
                killed.elapsed() < Duration::from_secs(5),
                "{} dropped B",
                n.name
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        eprintln!(
            "{} dropped the killed node after {:?}",
            n.name,
            killed.elapsed()
        );
        let lost = n
            .metric("gsrelay_cluster_link_losses_total{reason=\"silent\"}")
            .await
            .unwrap_or(0.0)
            + n.metric("gsrelay_cluster_link_losses_total{reason=\"closed\"}")
                .await
                .unwrap_or(0.0);
        assert!(lost >= 1.0, "{} counted the lost link", n.name);
    }
    // C's subscriber never noticed: it still gets the publisher's updates.
    publisher.send_objects(&[head(0, 3.0)]).await.unwrap();
    loop {
        let (_, objs) = on_c
            .recv_objects(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("C still flows");
        if of_round(&objs, 3.0).next().is_some() {
            break;
        }
    }
}

#[tokio::test]
async fn with_redis_killed_rooms_flow_across_nodes_and_a_restarted_redis_is_whole_again() {
    let redis = Redis::start().await;
    let (nodes, service) = cluster(&redis).await;
    let mut publisher = via(&service, 0, PUBLISH).await;
    let mut subscriber = via(&service, 1, SUBSCRIBE).await;
    assert_ne!(
        publisher.relay_addr().unwrap().port(),
        subscriber.relay_addr().unwrap().port()
    );

    let port = redis.kill();
    let down = Instant::now();
    // Every update crosses from A to B while Redis is away (10 s in the benchmark; long
    // enough here for every node's key to have expired).
    let mut n = 0u32;
    while down.elapsed() < Duration::from_secs(7) {
        n += 1;
        let x = n as f32;
        publisher.send_objects(&[head(1, x)]).await.unwrap();
        loop {
            let (_, objs) = subscriber
                .recv_objects(Duration::from_secs(2))
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("update {n} lost while Redis was away"));
            if objs
                .iter()
                .any(|o| matches!(o, Object::Head1(h) if h.location.x == x))
            {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A join cannot be placed meanwhile.
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/rooms/{ROOM}/sessions", nodes[2].base()))
        .bearer_auth(token(ROOM, SUBSCRIBE))
        .json(&serde_json::json!({"transport": "rtp"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);

    let redis = Redis::start_on(port).await;
    let back = Instant::now();
    let mut c = redis.connection().await.unwrap();
    loop {
        let nodes_back: Vec<String> = redis::cmd("KEYS")
            .arg("gsrelay:node:*")
            .query_async(&mut c)
            .await
            .unwrap();
        let room: Vec<String> = redis::cmd("HKEYS")
            .arg(format!("gsrelay:room:{ROOM}"))
            .query_async(&mut c)
            .await
            .unwrap();
        if nodes_back.len() == 3 && room.len() == 2 {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "directory whole within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("Redis back -> directory whole in {:?}", back.elapsed());
    // The links stood: no node was dropped while Redis was away.
    for n in &nodes {
        assert_eq!(
            n.metric("gsrelay_cluster_links").await,
            Some(2.0),
            "{}",
            n.name
        );
    }
    // And joins are placed again, across nodes.
    let mut late = via(&service, 2, SUBSCRIBE).await;
    let relay_ssrc = late.relay_ssrc();
    late.send_fir(relay_ssrc).await.unwrap();
    let got = late.recv_objects(Duration::from_secs(5)).await.unwrap();
    assert!(got.is_some(), "the late joiner gets the room");
}

/// Two nodes with the default spill, linked: a room opened through B stays on B, and a
/// join of it through A is forwarded there.
async fn pair(redis: &Redis) -> (Node, Node) {
    let a = Node::start(redis, "node-a", &[]).await;
    let b = Node::start(redis, "node-b", &[]).await;
    linked(&[&a, &b]).await;
    (a, b)
}

const JOIN_FORWARD_FAILURES: &str =
    "gsrelay_cluster_forward_failures_total{route=\"/v1/rooms/{room}/sessions\"}";

#[tokio::test]
async fn joins_through_a_survivor_are_answered_while_a_killed_node_is_still_listed() {
    let redis = Redis::start().await;
    let (a, mut b) = pair(&redis).await;
    let _publisher = join(&b.base(), PUBLISH).await;
    let _forwarded = join(&a.base(), SUBSCRIBE).await;
    assert_eq!(b.sessions().await, 2.0, "the room's node serves it");

    b.kill();
    // B's key outlives it by seconds and its link by 600 ms: every join through A in
    // that time is answered, by A.
    let killed = Instant::now();
    let mut joins = 0;
    let mut held = Vec::new();
    while killed.elapsed() < Duration::from_millis(1500) {
        let opts = JoinOptions {
            silence: Some(SILENCE),
            ..JoinOptions::default()
        };
        let c = Client::join(&a.base(), &token(ROOM, SUBSCRIBE), ROOM, opts)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "join {joins} refused {:?} after the kill: {e}",
                    killed.elapsed()
                )
            });
        joins += 1;
        assert_eq!(
            a.sessions().await,
            joins as f64,
            "the survivor takes the room"
        );
        held.push(c);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failures = a.metric(JOIN_FORWARD_FAILURES).await.unwrap_or(0.0);
    eprintln!("{joins} joins through the survivor after the kill, {failures} forward failed");
    assert!(
        failures >= 1.0,
        "the first join met the dead node, which became suspect"
    );
}

#[tokio::test]
async fn a_join_forwarded_to_a_frozen_node_is_placed_again_and_the_node_comes_back_whole() {
    let redis = Redis::start().await;
    let (a, b) = pair(&redis).await;
    let mut publisher = join(&b.base(), PUBLISH).await;
    publisher.send_objects(&[head(1, 1.0)]).await.unwrap();

    b.serve.signal("STOP");
    let frozen = Instant::now();
    // B accepts the connection (its kernel does) but never answers: the forward is
    // given up when B's link falls silent, and A takes the join.
    let c = join(&a.base(), SUBSCRIBE).await;
    let answered = frozen.elapsed();
    eprintln!("join through A answered {answered:?} after B froze");
    assert_eq!(a.sessions().await, 1.0, "A took the join");
    assert!(
        answered < Duration::from_secs(5),
        "given up with B's link, not after the forward's 10 s timeout"
    );
    assert!(a.metric(JOIN_FORWARD_FAILURES).await.unwrap_or(0.0) >= 1.0);

    // Thawed, B links again, and the room is one: A's subscriber gets B's publisher.
    b.serve.signal("CONT");
    linked(&[&a, &b]).await;
    let mut c = c;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "B's publisher reaches A again");
        publisher.send_objects(&[head(1, 2.0)]).await.unwrap();
        if let Ok(Some((_, objs))) = c.recv_objects(Duration::from_millis(50)).await
            && of_round(&objs, 2.0).next().is_some()
        {
            break;
        }
    }
}
