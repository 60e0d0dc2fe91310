//! One room on two shards of a real relay, forced by a low spill threshold: the second
//! shard holds a replica joined to the first by an in-process link. UDP/SRTP, QUIC and
//! WebRTC clients sit on both shards; every subscriber sees every update of both
//! publishers, a late joiner on either shard gets the whole room, and a replica whose
//! last session leaves drops out.

mod support;

use gsrelay::client::{Client, Received, Update};
use gsrelay::serve::{self, Server};
use gsrelay::wire::Object;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::head;
use support::server::{PUBLISH, SUBSCRIBE, config, metric, room_info};
use support::transports::{Over, WAIT, join};

const ROOM: &str = "arena";

/// Sessions per shard before the room spreads.
const SPILL: usize = 3;

async fn relay() -> Server {
    let cfg = serve::ServeConfig {
        shards: 2,
        shard_spill_sessions: SPILL,
        ..config(1)
    };
    serve::start(cfg).await.unwrap()
}

/// Sessions on each of the two shards, and the replicas of the room each holds.
async fn placement(server: &Server) -> ([f64; 2], [f64; 2]) {
    let mut sessions = [0.0; 2];
    let mut replicas = [0.0; 2];
    for k in 0..2 {
        let series = |family: &str| format!("{family}{{shard=\"{k}\"}}");
        sessions[k] = metric(server, &series("gsrelay_shard_sessions"))
            .await
            .unwrap_or(0.0);
        replicas[k] = metric(server, &series("gsrelay_room_replicas"))
            .await
            .unwrap_or(0.0);
    }
    (sessions, replicas)
}

/// Receives until `c` got every (SSRC, objectID, x) of `want`.
async fn wait_for(c: &mut Client, want: &[(u32, u64, f32)]) {
    let mut missing = want.to_vec();
    let deadline = Instant::now() + WAIT;
    while !missing.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let updates = c
            .recv_updates(left)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{missing:?} not received within {WAIT:?}"));
        for u in updates {
            if let Update::Objects { ssrc, objects } = u {
                for o in objects {
                    if let Object::Head1(h) = o {
                        missing.retain(|m| *m != (ssrc, h.id, h.location.x));
                    }
                }
            }
        }
    }
}

/// The newest x of each (SSRC, objectID) a late joiner gets once it asks for the room.
async fn room_of_late_joiner(c: &mut Client, want: usize) -> BTreeMap<(u32, u64), f32> {
    let relay = c.relay_ssrc();
    c.send_fir(relay).await.unwrap();
    let mut room = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while room.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtp { ssrc, payload, .. }) => {
                for o in gsrelay::wire::decode(&payload, c.dialect()).unwrap() {
                    if let Object::Head1(h) = o {
                        room.insert((ssrc, h.id), h.location.x);
                    }
                }
            }
            Some(Received::Rtcp(_)) => {}
            None => panic!("the late joiner has {room:?} of {want} objects after {WAIT:?}"),
        }
    }
    room
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_on_two_shards_is_one_room_for_every_transport() {
    let server = relay().await;
    // Shard 0 takes the first three sessions; the fourth starts a replica on shard 1.
    let mut p1 = join(&server, ROOM, PUBLISH, Over::Udp).await;
    let s1 = join(&server, ROOM, SUBSCRIBE, Over::Quic).await;
    let s2 = join(&server, ROOM, SUBSCRIBE, Over::WebRtc).await;
    let mut p2 = join(&server, ROOM, PUBLISH, Over::Quic).await;
    let s3 = join(&server, ROOM, SUBSCRIBE, Over::WebRtc).await;
    let s4 = join(&server, ROOM, SUBSCRIBE, Over::Udp).await;
    assert_eq!(
        placement(&server).await,
        ([3.0, 3.0], [1.0, 1.0]),
        "three sessions on each shard, each holding a replica of the room"
    );
    let mut subscribers = [s1, s2, s3, s4];
    // The admin view is the whole room: the six sessions of both shards, no link among
    // them.
    let info = room_info(&server, ROOM).await;
    let sessions = info["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 6, "{info}");
    assert!(
        sessions.iter().all(|s| s["identity"] == "tester"),
        "only the clients: {info}"
    );

    // Each publisher's every update reaches every subscriber, whichever shard each is on.
    for round in 0..20 {
        let x = round as f32;
        p1.send_objects(&[head(1, x)]).await.unwrap();
        p2.send_objects(&[head(2, -x)]).await.unwrap();
        for s in &mut subscribers {
            wait_for(s, &[(p1.ssrc(), 1, x), (p2.ssrc(), 2, -x)]).await;
        }
    }

    // A late joiner on either shard gets the whole room from its own shard's cache.
    let mut late_a = join(&server, ROOM, SUBSCRIBE, Over::Udp).await;
    let mut late_b = join(&server, ROOM, SUBSCRIBE, Over::WebRtc).await;
    assert_eq!(placement(&server).await.0, [4.0, 4.0], "one on each shard");
    for late in [&mut late_a, &mut late_b] {
        let room = room_of_late_joiner(late, 2).await;
        let want = BTreeMap::from([((p1.ssrc(), 1), 19.0), ((p2.ssrc(), 2), -19.0)]);
        assert_eq!(room, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_sessions_all_leave_drops_out_and_its_publisher_ends_everywhere() {
    let server = relay().await;
    let mut home = Vec::new();
    for _ in 0..SPILL {
        home.push(join(&server, ROOM, SUBSCRIBE, Over::Udp).await);
    }
    let mut publisher = join(&server, ROOM, PUBLISH, Over::Udp).await;
    assert_eq!(placement(&server).await, ([3.0, 1.0], [1.0, 1.0]));
    publisher.send_objects(&[head(7, 1.0)]).await.unwrap();
    wait_for(&mut home[0], &[(publisher.ssrc(), 7, 1.0)]).await;

    let ssrc = publisher.ssrc();
    publisher.leave().await.unwrap();
    // The subscriber across the link hears the publisher's BYE.
    let deadline = Instant::now() + WAIT;
    'bye: loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match home[0].recv_updates(left).await.unwrap() {
            Some(updates) => {
                for u in updates {
                    if matches!(u, Update::Left(ref s) if s.contains(&ssrc)) {
                        break 'bye;
                    }
                }
            }
            None => panic!("no BYE for the publisher within {WAIT:?}"),
        }
    }
    // Shard 1 held nothing but the link: the room is on shard 0 alone again.
    let deadline = Instant::now() + WAIT;
    while placement(&server).await != ([3.0, 0.0], [0.0, 0.0]) {
        assert!(Instant::now() < deadline, "{:?}", placement(&server).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rooms_spread_over_the_same_two_shards_each_stay_whole_and_apart() {
    let server = relay().await;
    // Room a fills shard 0 and spreads to shard 1, where room b starts and fills it;
    // once a's first session leaves, b spreads to shard 0.
    let first = join(&server, "a", SUBSCRIBE, Over::Udp).await;
    let mut a_sub = join(&server, "a", SUBSCRIBE, Over::Udp).await;
    let _a3 = join(&server, "a", SUBSCRIBE, Over::Udp).await;
    let mut a_pub = join(&server, "a", PUBLISH, Over::Udp).await;
    let mut b_pub = join(&server, "b", PUBLISH, Over::Udp).await;
    let _b2 = join(&server, "b", SUBSCRIBE, Over::Udp).await;
    first.leave().await.unwrap();
    let mut b_sub = join(&server, "b", SUBSCRIBE, Over::Udp).await;
    assert_eq!(
        placement(&server).await,
        ([3.0, 3.0], [2.0, 2.0]),
        "each shard holds a replica of both rooms"
    );
    for round in 0..5 {
        let x = round as f32;
        a_pub.send_objects(&[head(1, x)]).await.unwrap();
        b_pub.send_objects(&[head(2, x + 100.0)]).await.unwrap();
        wait_for(&mut a_sub, &[(a_pub.ssrc(), 1, x)]).await;
        wait_for(&mut b_sub, &[(b_pub.ssrc(), 2, x + 100.0)]).await;
    }
    // Neither room's subscriber got the other room's publisher.
    for (sub, other) in [(&mut a_sub, b_pub.ssrc()), (&mut b_sub, a_pub.ssrc())] {
        while let Some(updates) = sub.recv_updates(Duration::from_millis(100)).await.unwrap() {
            for u in updates {
                if let Update::Objects { ssrc, .. } = u {
                    assert_ne!(ssrc, other, "a room's stream leaked into another room");
                }
            }
        }
    }
}
