//! The Rust client when its relay goes away: a subscriber joined to a relay that stops
//! notices the silence (or the failed link) by itself, rejoins through the same HTTP
//! address, where a new relay with the same token secret now answers, and holds the whole
//! room again from that relay's cache, then follows it live. Over each transport, on
//! loopback; the relays report every 0.2 s (`rtcp_min_interval`) so that a short silence
//! is enough, and an idle room on a live relay must never count as silent. And the
//! rejoin's leave of the old session, which must never hold the rejoin up: a node that
//! died does not answer it (an HTTP front in front of the relays holds it open), and a
//! live relay may get it after the join.

mod rejoin_common;
mod support;

use gsrelay::client::{Client, JoinOptions, REJOIN_LEAVE_TIMEOUT, RESUME_HEDGE, RoomState};
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use rejoin_common::front::{Front, Leaves, Seen};
use rejoin_common::{
    REPORTS, ROOM, SILENCE, WAIT, objects, publish, relay, session_ssrcs, until_cached,
};
use std::net::SocketAddr;
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

/// Any free loopback port.
fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Joins the room through `front` with `rights` and `opts`.
async fn join_at(front: &Front, rights: Rights, opts: JoinOptions) -> Client {
    Client::join(&front.base(), &token(ROOM, rights), ROOM, opts)
        .await
        .unwrap()
}

/// Waits until `front` has seen what `done` wants; panics after `within`.
async fn until_seen(front: &Front, within: Duration, done: impl Fn(Seen) -> bool) -> Seen {
    let deadline = Instant::now() + within;
    loop {
        let seen = front.seen();
        if done(seen) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "not seen within {within:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Clients join through a front, as through a Service; their node dies, and the front then
/// sends joins to a live relay while a leave goes nowhere (held open, unanswered). A client
/// with a resume credential resumes there and sends no leave at all; a client that
/// rejoins is back, with its SSRC, while its old session's leave is still unanswered, and
/// gives that leave up after [`REJOIN_LEAVE_TIMEOUT`].
#[tokio::test]
async fn a_rejoin_never_waits_for_the_leave_a_dead_node_does_not_answer() {
    let x = relay(any_port()).await;
    let front = Front::start(x.http_addr, Leaves::Hold).await;
    let mut rejoiner = join_at(&front, PUBLISH, JoinOptions::default()).await;
    let opts = JoinOptions {
        silence: Some(Duration::from_secs(600)),
        ..JoinOptions::default()
    };
    let mut resumer = join_at(&front, SUBSCRIBE, opts).await;
    resumer.send_rr().await.unwrap();
    let (ssrc, resumer_ssrc) = (rejoiner.ssrc(), resumer.ssrc());
    assert!(
        resumer.resume_credential().is_some(),
        "no resume credential"
    );

    // The node dies; the front sends what comes next to a surviving relay.
    x.shutdown().await.unwrap();
    let y = relay(any_port()).await;
    front.point_to(y.http_addr);

    // Resume first, through the front: back on the surviving relay with its SSRC, and no
    // leave sent. Its UDP port closed, the old relay counts as silent at once.
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "never resumed");
        let _ = resumer.send_rr().await;
        let _ = resumer.recv(Duration::from_millis(20)).await;
        match resumer.rejoin_if_silent().await {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => eprintln!("resume failed: {e}"),
        }
    }
    assert_eq!(resumer.ssrc(), resumer_ssrc, "the resumed SSRC");
    assert_eq!(front.seen().leaves, 0, "a resume sent a leave");

    // A rejoin: back before its old session's leave has an answer or is given up.
    let started = Instant::now();
    rejoiner.rejoin().await.unwrap();
    let took = started.elapsed();
    let seen = front.seen();
    assert_eq!(
        (seen.leaves_answered, seen.leaves_given_up),
        (0, 0),
        "the rejoin ended after its leave did: {seen:?}"
    );
    assert!(took < REJOIN_LEAVE_TIMEOUT, "the rejoin took {took:?}");
    assert_eq!(rejoiner.ssrc(), ssrc, "the rejoined SSRC");
    let sessions = session_ssrcs(&y).await;
    assert!(
        sessions.contains(&u64::from(ssrc)) && sessions.contains(&u64::from(resumer_ssrc)),
        "both on the surviving relay: {sessions:?}"
    );

    // The leave did go out, unanswered, and the client gives it up in time: nothing of
    // the old session stays open.
    let seen = until_seen(&front, WAIT, |s| s.leaves == 1).await;
    assert_eq!(seen.leaves_given_up, 0, "{seen:?}");
    let seen = until_seen(&front, REJOIN_LEAVE_TIMEOUT + WAIT, |s| {
        s.leaves_given_up == 1
    })
    .await;
    assert!(
        started.elapsed() >= REJOIN_LEAVE_TIMEOUT,
        "given up early: {seen:?}"
    );
    y.shutdown().await.unwrap();
}

/// A client that rejoins a live relay which still holds its old session, the leave
/// reaching the relay only after the rejoin's join (the front holds it until then):
/// `require_ssrc` makes the client wait for that leave and join again, with its SSRC;
/// without it the client takes the SSRC the relay gives. Either way the old session goes.
async fn rejoin_before_the_leave_lands(require_ssrc: bool) {
    let x = relay(any_port()).await;
    // The leave passes once the first join and the rejoin's have been answered.
    let front = Front::start(x.http_addr, Leaves::AfterJoins(2)).await;
    let opts = JoinOptions {
        require_ssrc,
        ..JoinOptions::default()
    };
    let mut c = join_at(&front, PUBLISH, opts).await;
    let (ssrc, session) = (c.ssrc(), c.session());
    c.rejoin().await.unwrap();
    assert_ne!(c.session(), session, "a new session");
    let seen = front.seen();
    if require_ssrc {
        assert_eq!(c.ssrc(), ssrc, "the required SSRC");
        // The join refused (the SSRC still the old session's), the leave, the join again.
        assert_eq!((seen.joins, seen.leaves_answered), (3, 1), "{seen:?}");
    } else {
        assert_ne!(c.ssrc(), ssrc, "the old session still held its SSRC");
        assert_eq!(seen.joins, 2, "{seen:?}");
    }
    until_seen(&front, WAIT, |s| s.leaves_answered == 1).await;
    assert_eq!(session_ssrcs(&x).await, vec![u64::from(c.ssrc())]);
    x.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_rejoin_requiring_its_ssrc_waits_for_a_leave_the_live_relay_gets_late() {
    rejoin_before_the_leave_lands(true).await;
}

#[tokio::test]
async fn a_rejoin_takes_another_ssrc_when_the_live_relay_gets_the_leave_late() {
    rejoin_before_the_leave_lands(false).await;
}

/// A resume that reached a node that accepts connections and answers nothing (frozen)
/// gets a second request beside it, which the live relay answers: the client is back
/// while the first request is still held.
#[tokio::test]
async fn a_resume_a_frozen_node_never_answers_is_repeated_beside_it() {
    let x = relay(any_port()).await;
    let front = Front::start(x.http_addr, Leaves::Hold).await;
    let opts = JoinOptions {
        silence: Some(Duration::from_secs(600)),
        ..JoinOptions::default()
    };
    let mut c = join_at(&front, SUBSCRIBE, opts).await;
    let ssrc = c.ssrc();
    x.shutdown().await.unwrap();
    let y = relay(any_port()).await;
    front.point_to(y.http_addr);
    front.hold_next_joins(1);
    let joined = front.seen().joins;

    let started = Instant::now();
    c.resume().await.unwrap();
    let took = started.elapsed();
    let seen = front.seen();
    eprintln!("resumed in {took:?} beside a held request");
    assert_eq!(
        (seen.joins_held, seen.joins_given_up, seen.joins - joined),
        (1, 0, 1),
        "back through the second request while the first is still held: {seen:?}"
    );
    assert!(
        took >= RESUME_HEDGE,
        "the second went out after the hedge, {took:?}"
    );
    assert_eq!(c.ssrc(), ssrc, "the resumed SSRC");
    let sessions = session_ssrcs(&y).await;
    assert!(sessions.contains(&u64::from(ssrc)), "{sessions:?}");
}
