//! The Rust client when its relay goes away: a subscriber joined to a relay that stops
//! notices the silence (or the failed link) by itself, rejoins through the same HTTP
//! address, where a new relay with the same token secret now answers, and holds the whole
//! room again from that relay's cache, then follows it live. Over each transport, on
//! loopback; the relays report every 0.2 s (`rtcp_min_interval`) so that a short silence
//! is enough, and an idle room on a live relay must never count as silent.

mod rejoin_common;
mod support;

use gsrelay::client::{Client, JoinOptions, RoomState};
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use rejoin_common::{
    REPORTS, ROOM, SILENCE, WAIT, objects, publish, relay, session_ssrcs, until_cached,
};
use std::time::{Duration, Instant};
use support::server::{PUBLISH, SUBSCRIBE, base, token};
use support::transports::Over;

/// Joins `relay`'s room over `over` with `rights` and `silence`; a UDP session sends an
/// RR so that the relay latches its address.
async fn join(relay: &Server, rights: Rights, over: Over, silence: Option<Duration>) -> Client {
    let opts = JoinOptions {
        quic: over == Over::Quic,
        webtransport: over == Over::WebTransport,
        webrtc: over == Over::WebRtc,
        silence,
        ..JoinOptions::default()
    };
    let mut c = Client::join(&base(relay), &token(ROOM, rights), ROOM, opts)
        .await
        .unwrap();
    if over == Over::Udp {
        c.send_rr().await.unwrap();
    }
    c
}

/// Whether `room` holds every object of [`objects`]`(dx)` from `ssrc`.
fn holds(room: &RoomState, ssrc: u32, dx: f32) -> bool {
    let Some(sender) = room.sender(ssrc) else {
        return false;
    };
    objects(dx)
        .iter()
        .all(|o| o.id().and_then(|id| sender.get(&id)) == Some(o))
}

/// What the app loop of the client's module docs does: reads into `room`, and rejoins
/// (starting the room afresh) when the relay is silent, until `done` holds; returns the
/// rejoins. Panics after [`WAIT`].
async fn follow(
    c: &mut Client,
    room: &mut RoomState,
    mut done: impl FnMut(&RoomState) -> bool,
) -> u32 {
    let deadline = Instant::now() + WAIT;
    let mut rejoins = 0;
    while !done(room) {
        assert!(Instant::now() < deadline, "not done within {WAIT:?}");
        match c.recv_updates(Duration::from_millis(50)).await {
            Ok(updates) => updates.iter().flatten().for_each(|u| room.apply(u)),
            Err(_) if c.is_silent(Instant::now()) => {}
            Err(e) => panic!("receiving: {e}"),
        }
        match c.rejoin_if_silent().await {
            Ok(true) => {
                rejoins += 1;
                *room = RoomState::default();
            }
            Ok(false) => {}
            // No relay answers yet: the client tries again later.
            Err(e) => eprintln!("rejoin failed: {e}"),
        }
    }
    rejoins
}

/// The whole story over `over`: see the file's doc.
async fn rejoins_a_restarted_relay(over: Over) {
    let x = relay("127.0.0.1:0".parse().unwrap()).await;
    let http = x.http_addr;
    let mut publisher = join(&x, PUBLISH, Over::Udp, None).await;
    let ssrc = publisher.ssrc();
    publish(&mut publisher, &objects(0.0)).await;
    until_cached(&x, ssrc).await;

    let mut sub = join(&x, SUBSCRIBE, over, Some(SILENCE)).await;
    assert_eq!(sub.silence(), SILENCE);
    let relay_ssrc = sub.relay_ssrc();
    sub.send_fir(relay_ssrc).await.unwrap();
    let mut room = RoomState::default();
    let rejoins = follow(&mut sub, &mut room, |r| holds(r, ssrc, 0.0)).await;
    assert_eq!(rejoins, 0, "{over:?}: rejoined a live relay");

    // An idle room on a live relay: only its reports come, and they keep it alive.
    let idle = Instant::now();
    let rejoins = follow(&mut sub, &mut room, |_| idle.elapsed() >= 2 * SILENCE).await;
    assert_eq!(rejoins, 0, "{over:?}: an idle live relay counted as silent");
    assert!(
        sub.last_heard() > idle + SILENCE,
        "{over:?}: no reports heard"
    );

    // The relay stops; a new one takes its HTTP address, and the publisher comes back
    // with its state, changed meanwhile. The subscriber is not reading then: the new
    // state can only reach it from the new relay's cache.
    let sub_ssrc = sub.ssrc();
    x.shutdown().await.unwrap();
    let y = relay(http).await;
    publisher.rejoin().await.unwrap();
    assert_eq!(publisher.ssrc(), ssrc, "the publisher's SSRC");
    publish(&mut publisher, &objects(50.0)).await;
    until_cached(&y, ssrc).await;

    let rejoins = follow(&mut sub, &mut room, |r| holds(r, ssrc, 50.0)).await;
    assert_eq!(rejoins, 1, "{over:?}: rejoins");
    assert_eq!(sub.ssrc(), sub_ssrc, "{over:?}: the subscriber's SSRC");
    let sessions = session_ssrcs(&y).await;
    assert!(
        sessions.contains(&u64::from(sub_ssrc)),
        "{over:?}: the subscriber is on the new relay: {sessions:?}"
    );

    // And live from there on.
    publish(&mut publisher, &objects(100.0)).await;
    let rejoins = follow(&mut sub, &mut room, |r| holds(r, ssrc, 100.0)).await;
    assert_eq!(rejoins, 0, "{over:?}: rejoined the new relay");
    y.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_udp_client_rejoins_a_restarted_relay_and_holds_the_whole_room_again() {
    rejoins_a_restarted_relay(Over::Udp).await;
}

#[tokio::test]
async fn a_quic_client_rejoins_a_restarted_relay_and_holds_the_whole_room_again() {
    rejoins_a_restarted_relay(Over::Quic).await;
}

#[tokio::test]
async fn a_webtransport_client_rejoins_a_restarted_relay_and_holds_the_whole_room_again() {
    rejoins_a_restarted_relay(Over::WebTransport).await;
}

#[tokio::test]
async fn a_webrtc_client_rejoins_a_restarted_relay_and_holds_the_whole_room_again() {
    rejoins_a_restarted_relay(Over::WebRtc).await;
}

/// A relay whose UDP port is closed answers with port unreachable: the client counts that
/// as silence at once, however long its silence, and rejoins.
#[tokio::test]
async fn a_closed_relay_port_counts_as_silence_at_once() {
    let x = relay("127.0.0.1:0".parse().unwrap()).await;
    let http = x.http_addr;
    let long = Duration::from_secs(600);
    let mut sub = join(&x, SUBSCRIBE, Over::Udp, Some(long)).await;
    let mut room = RoomState::default();
    let started = Instant::now();
    follow(&mut sub, &mut room, |_| started.elapsed() >= REPORTS * 2).await;
    assert!(!sub.is_silent(Instant::now()));

    x.shutdown().await.unwrap();
    let deadline = Instant::now() + WAIT;
    while !sub.is_silent(Instant::now()) {
        assert!(Instant::now() < deadline, "never silent");
        // Either may fail with the ICMP error; the next one sees it if this one does not.
        let _ = sub.send_rr().await;
        let _ = sub.recv(Duration::from_millis(50)).await;
    }
    assert!(started.elapsed() < long);

    let _y = relay(http).await;
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "never rejoined");
        match sub.rejoin_if_silent().await {
            Ok(true) => break,
            // A failed attempt waits before the next.
            Ok(false) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => eprintln!("rejoin failed: {e}"),
        }
    }
    assert!(!sub.is_silent(Instant::now()));
    assert_eq!(sub.silence(), long, "the silence set survives the rejoin");
}
