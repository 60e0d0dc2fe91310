//! Room objects and ownership end to end (`docs/relay.md`, "Room objects and ownership"),
//! over UDP/SRTP, QUIC and WebRTC with the Rust client against a whole relay: a room
//! object outlives its publisher and reaches a late joiner; of concurrent requests for an
//! object exactly one wins, and the loser's (the previous holder's) updates are dropped;
//! a holder whose object's stream ended has what it sends of it dropped for a second.

mod support;

use gsrelay::client::{Client, JoinOptions, Notice, Received, notices};
use gsrelay::handover::{Kind, Reason};
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::Object;
use support::moving_head;
use support::server::{
    PUBLISH_SUBSCRIBE, SUBSCRIBE, base, metric, now, room_info, start, token_as,
};
use support::transports::{Over, WAIT};
use tokio::time::Instant;

/// `identity` joined to room "r" over `over`, with a room stream if asked.
async fn player(
    server: &Server,
    identity: &str,
    rights: Rights,
    over: Over,
    room_stream: bool,
) -> Client {
    let opts = JoinOptions {
        quic: over == Over::Quic,
        webrtc: over == Over::WebRtc,
        room_stream,
        ..JoinOptions::default()
    };
    let t = token_as("r", identity, rights, now(), 600);
    let mut c = Client::join(&base(server), &t, "r", opts).await.unwrap();
    if over == Over::Udp {
        // A UDP session's address is latched by its first packet.
        c.send_rr().await.unwrap();
    }
    c
}

/// How many objects the relay holds for stream `ssrc` of room "r", and whether the room
/// holds it after its publisher left.
async fn stream_state(server: &Server, ssrc: u32) -> Option<(u64, bool)> {
    let info = room_info(server, "r").await;
    let streams = info["streams"].as_array()?;
    let s = streams.iter().find(|s| s["ssrc"] == ssrc)?;
    Some((
        s["objects"].as_u64()?,
        s["orphaned"].as_bool().unwrap_or(false),
    ))
}

/// Polls the relay until `check` holds for stream `ssrc`, sending `again` meanwhile.
async fn until_stream(server: &Server, ssrc: u32, check: impl Fn(Option<(u64, bool)>) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check(stream_state(server, ssrc).await) {
        assert!(
            Instant::now() < deadline,
            "stream {ssrc}: {:?}",
            stream_state(server, ssrc).await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The next ownership notice about object `(ssrc, object)` that `c` receives.
async fn next_notice(c: &mut Client, ssrc: u32, object: u64) -> Notice {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtcp(items)) => {
                if let Some(n) = notices(&items)
                    .into_iter()
                    .find(|n| (n.entry.ssrc, n.entry.object) == (ssrc, object))
                {
                    return n;
                }
            }
            Some(Received::Rtp { .. }) => {}
            None => panic!("no notice about ({ssrc}, {object}) within {WAIT:?}"),
        }
    }
}

/// The next update of object `id` of stream `ssrc` that `c` receives.
async fn next_update(c: &mut Client, ssrc: u32, id: u64) -> Object {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtp {
                ssrc: s, payload, ..
            }) if s == ssrc => {
                let objects = gsrelay::wire::decode(&payload, c.dialect()).unwrap();
                if let Some(o) = objects.into_iter().find(|o| o.id() == Some(id)) {
                    return o;
                }
            }
            Some(_) => {}
            None => panic!("no update of ({ssrc}, {id}) within {WAIT:?}"),
        }
    }
}

/// Alice sends object `id` until the watcher has it (a WebRTC publisher's first packets
/// may go before its channel is open), then the watcher reads what is left in flight.
async fn until_watched(alice: &mut Client, watcher: &mut Client, id: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "object {id} never reached the watcher"
        );
        alice.send_objects(&[moving_head(id, 0.0)]).await.unwrap();
        if let Some(Received::Rtp { ssrc, .. }) = watcher
            .recv(std::time::Duration::from_millis(100))
            .await
            .unwrap()
            && ssrc == alice.ssrc()
        {
            break;
        }
    }
    while watcher
        .recv(std::time::Duration::from_millis(200))
        .await
        .unwrap()
        .is_some()
    {}
}

async fn a_room_object_outlives_its_owner_and_reaches_a_late_joiner(over: Over) {
    let server = start().await;
    let mut alice = player(&server, "alice", PUBLISH_SUBSCRIBE, over, true).await;
    let room_ssrc = alice.room_ssrc().expect("a room stream");
    let door = moving_head(50, 5.0);
    alice.send_objects(&[moving_head(1, 0.0)]).await.unwrap();
    alice
        .send_room_objects(std::slice::from_ref(&door))
        .await
        .unwrap();
    until_stream(&server, room_ssrc, |s| s == Some((1, false))).await;
    alice.leave().await.unwrap();
    until_stream(&server, room_ssrc, |s| s == Some((1, true))).await;

    let mut late = player(&server, "carol", SUBSCRIBE, over, false).await;
    late.send_fir(room_ssrc).await.unwrap();
    assert_eq!(next_update(&mut late, room_ssrc, 50).await, door);
}

#[tokio::test]
async fn a_room_object_outlives_its_owner_over_udp() {
    a_room_object_outlives_its_owner_and_reaches_a_late_joiner(Over::Udp).await;
}

#[tokio::test]
async fn a_room_object_outlives_its_owner_over_quic() {
    a_room_object_outlives_its_owner_and_reaches_a_late_joiner(Over::Quic).await;
}

#[tokio::test]
async fn a_room_object_outlives_its_owner_over_webrtc() {
    a_room_object_outlives_its_owner_and_reaches_a_late_joiner(Over::WebRtc).await;
}

async fn concurrent_requests_have_one_winner(over: Over) {
    let server = start().await;
    let mut alice = player(&server, "alice", PUBLISH_SUBSCRIBE, over, false).await;
    let mut bob = player(&server, "bob", PUBLISH_SUBSCRIBE, over, false).await;
    let mut carol = player(&server, "carol", PUBLISH_SUBSCRIBE, over, false).await;
    let mut watcher = player(&server, "dave", SUBSCRIBE, Over::Udp, false).await;
    let ball = (alice.ssrc(), 9);
    // The watcher has Alice's ball before the handover.
    until_watched(&mut alice, &mut watcher, 9).await;

    let balls = [ball];
    let (b, c) = tokio::join!(bob.request_objects(&balls), carol.request_objects(&balls));
    b.unwrap();
    c.unwrap();
    let (nb, nc) = tokio::join!(
        next_notice(&mut bob, ball.0, ball.1),
        next_notice(&mut carol, ball.0, ball.1)
    );
    let kinds = [nb.kind, nc.kind];
    assert!(
        kinds.contains(&Kind::Granted) && kinds.contains(&Kind::Refused),
        "exactly one winner: {nb:?} {nc:?}"
    );
    let (winner, refused) = if nb.kind == Kind::Granted {
        (&mut bob, nc)
    } else {
        (&mut carol, nb)
    };
    assert_eq!(refused.entry.reason, Reason::Contended);
    assert!(winner.holds(ball.0, ball.1));
    let lost = next_notice(&mut alice, ball.0, ball.1).await;
    assert_eq!(
        (lost.kind, lost.entry.reason),
        (Kind::Lost, Reason::Contended)
    );

    // The winner's update reaches the room as Alice's ball.
    let caught = moving_head(9, 42.0);
    winner
        .send_objects(std::slice::from_ref(&caught))
        .await
        .unwrap();
    assert_eq!(next_update(&mut watcher, ball.0, 9).await, caught);
    // Alice, who lost it, is dropped and counted; the next update the room sees is the
    // winner's.
    let series = r#"gsrelay_dropped_packets_total{reason="not_owner"}"#;
    alice.send_objects(&[moving_head(9, -1.0)]).await.unwrap();
    let deadline = Instant::now() + WAIT;
    while metric(&server, series).await.unwrap_or(0.0) < 1.0 {
        assert!(Instant::now() < deadline, "not_owner never counted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let thrown = moving_head(9, 43.0);
    winner
        .send_objects(std::slice::from_ref(&thrown))
        .await
        .unwrap();
    assert_eq!(next_update(&mut watcher, ball.0, 9).await, thrown);
}

#[tokio::test]
async fn concurrent_requests_have_one_winner_over_udp() {
    concurrent_requests_have_one_winner(Over::Udp).await;
}

#[tokio::test]
async fn concurrent_requests_have_one_winner_over_quic() {
    concurrent_requests_have_one_winner(Over::Quic).await;
}

#[tokio::test]
async fn concurrent_requests_have_one_winner_over_webrtc() {
    concurrent_requests_have_one_winner(Over::WebRtc).await;
}

/// Alice's ball is held by Bob when Alice leaves: Bob is told `lost` (`gone`), and what
/// he sends of objectID 9 just after is dropped (`not_owner`), not forwarded as a ball of
/// his own: the watcher gets his next object (10) with no 9 before it.
async fn a_holder_whose_objects_stream_ended_has_its_updates_dropped(over: Over) {
    let server = start().await;
    let mut alice = player(&server, "alice", PUBLISH_SUBSCRIBE, over, false).await;
    let mut bob = player(&server, "bob", PUBLISH_SUBSCRIBE, over, false).await;
    let mut watcher = player(&server, "dave", SUBSCRIBE, Over::Udp, false).await;
    let ball = (alice.ssrc(), 9);
    until_watched(&mut alice, &mut watcher, 9).await;
    bob.request_objects(&[ball]).await.unwrap();
    assert_eq!(
        next_notice(&mut bob, ball.0, ball.1).await.kind,
        Kind::Granted
    );
    alice.leave().await.unwrap();
    let lost = next_notice(&mut bob, ball.0, ball.1).await;
    assert_eq!((lost.kind, lost.entry.reason), (Kind::Lost, Reason::Gone));

    let series = r#"gsrelay_dropped_packets_total{reason="not_owner"}"#;
    bob.send_objects(&[moving_head(9, 7.0)]).await.unwrap();
    let deadline = Instant::now() + WAIT;
    while metric(&server, series).await.unwrap_or(0.0) < 1.0 {
        assert!(Instant::now() < deadline, "not_owner never counted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    bob.send_objects(&[moving_head(10, 1.0)]).await.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match watcher.recv(left).await.unwrap() {
            Some(Received::Rtp { ssrc, payload, .. }) if ssrc == bob.ssrc() => {
                let objects = gsrelay::wire::decode(&payload, watcher.dialect()).unwrap();
                assert!(
                    objects.iter().all(|o| o.id() != Some(9)),
                    "Bob's 9 forwarded as his own"
                );
                if objects.iter().any(|o| o.id() == Some(10)) {
                    break;
                }
            }
            Some(_) => {}
            None => panic!("Bob's object 10 never arrived"),
        }
    }
}

#[tokio::test]
async fn a_holder_whose_objects_stream_ended_has_its_updates_dropped_over_udp() {
    a_holder_whose_objects_stream_ended_has_its_updates_dropped(Over::Udp).await;
}

#[tokio::test]
async fn a_holder_whose_objects_stream_ended_has_its_updates_dropped_over_quic() {
    a_holder_whose_objects_stream_ended_has_its_updates_dropped(Over::Quic).await;
}

#[tokio::test]
async fn a_holder_whose_objects_stream_ended_has_its_updates_dropped_over_webrtc() {
    a_holder_whose_objects_stream_ended_has_its_updates_dropped(Over::WebRtc).await;
}
