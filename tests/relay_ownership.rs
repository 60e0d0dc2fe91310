//! Room objects and ownership in the sans-I/O core (`docs/relay.md`, "Room objects and
//! ownership"): room streams outlive their publisher, expire by the room's rule and are
//! bounded; objects change hands one session at a time.

mod support;

use gsrelay::handover::{self, Entry, Kind, Reason};
use gsrelay::rtp::PacketClass;
use gsrelay::rtp::rtcp::{self, RtcpItem};
use gsrelay::wire::Dialect;
use gsrelay::{Input, JoinRequest, Joined, RelayConfig};
use std::time::Duration;
use support::{Sent, World, head, x_of};

fn join(w: &mut World, identity: &str, room_stream: bool) -> Joined {
    w.join_with(JoinRequest {
        room: "r".into(),
        identity: identity.into(),
        publish: true,
        subscribe: true,
        room_stream,
        ..JoinRequest::default()
    })
    .expect("join")
}

/// The same session, publishing on its room stream.
fn on_room_stream(j: &Joined) -> Joined {
    Joined {
        ssrc: j.room_ssrc.expect("a room stream"),
        ..j.clone()
    }
}

fn ownership(w: &mut World, who: &Joined, kind: Kind, objects: &[(u32, u64)]) {
    let entries: Vec<Entry> = objects.iter().map(|(s, o)| Entry::new(*s, *o)).collect();
    let mut data = Vec::new();
    handover::encode(&entries, &mut data);
    w.rtcp(who, |b| {
        rtcp::write_app(b, kind.subtype(), who.ssrc, handover::NAME, &data).unwrap();
    });
}

/// An ownership message from `who` with any subtype, sender SSRC and data.
fn raw_app(w: &mut World, who: &Joined, (kind, ssrc): (Kind, u32), data: &[u8]) {
    w.rtcp(who, |b| {
        rtcp::write_app(b, kind.subtype(), ssrc, handover::NAME, data).unwrap();
    });
}

/// The ownership notices `to` was sent.
fn notices(sent: &[Sent], to: &Joined) -> Vec<(Kind, Entry)> {
    sent.iter()
        .filter(|s| s.to == to.session && s.class == PacketClass::Rtcp)
        .flat_map(|s| rtcp::parse_compound(&s.bytes).unwrap())
        .filter_map(|i| match i {
            RtcpItem::App {
                subtype,
                name: handover::NAME,
                data,
                ..
            } => Some((Kind::from_subtype(subtype)?, data)),
            _ => None,
        })
        .flat_map(|(k, data)| {
            handover::decode(&data)
                .unwrap()
                .map(move |e| (k, e))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The heads `to` was sent of stream `ssrc`, by objectID and x.
fn heads_to(sent: &[Sent], to: &Joined, ssrc: u32) -> Vec<(u64, f32)> {
    sent.iter()
        .filter(|s| s.to == to.session && s.class == PacketClass::Rtp && s.rtp().ssrc() == ssrc)
        .flat_map(|s| s.objects(Dialect::Draft01))
        .filter_map(|o| Some((o.id()?, x_of(&o))))
        .collect()
}

fn byes_to(sent: &[Sent], to: &Joined) -> Vec<u32> {
    sent.iter()
        .filter(|s| s.to == to.session && s.class == PacketClass::Rtcp)
        .flat_map(|s| rtcp::parse_compound(&s.bytes).unwrap())
        .flat_map(|i| match i {
            RtcpItem::Bye { ssrcs } => ssrcs,
            _ => Vec::new(),
        })
        .collect()
}

#[test]
fn a_room_stream_outlives_its_publisher_and_reaches_a_late_joiner() {
    let mut w = World::new();
    let a = join(&mut w, "alice", true);
    let b = join(&mut w, "bob", false);
    let room = on_room_stream(&a);
    w.publish(&a, &[head(1, 1.0)]);
    w.publish(&room, &[head(7, 7.0), head(8, 8.0)]);
    w.sent();
    w.leave(a.session).unwrap();
    let sent = w.sent();
    assert_eq!(byes_to(&sent, &b), vec![a.ssrc], "only its own stream ends");
    let info = w.relay.room_info("r").unwrap();
    let kept = info.streams.iter().find(|s| s.ssrc == room.ssrc).unwrap();
    assert!(kept.room_owned && kept.orphaned && kept.objects == 2);

    let late = join(&mut w, "carol", false);
    w.sent();
    w.fir(&late, room.ssrc, 1);
    let mut got = heads_to(&w.sent(), &late, room.ssrc);
    got.sort_by_key(|(id, _)| *id);
    assert_eq!(got, vec![(7, 7.0), (8, 8.0)]);
}

#[test]
fn room_objects_expire_by_the_room_rule_not_the_object_ttl_and_the_room_lingers_for_them() {
    let cfg = RelayConfig {
        object_ttl: Duration::from_secs(2),
        stream_timeout: Duration::from_secs(2),
        room_object_ttl: Duration::from_secs(10),
        ..RelayConfig::default()
    };
    let mut w = World::with(cfg);
    let a = join(&mut w, "alice", true);
    w.publish(&on_room_stream(&a), &[head(7, 7.0)]);
    w.leave(a.session).unwrap();
    for _ in 0..20 {
        w.advance(Duration::from_millis(250));
    }
    assert_eq!(w.relay.room_counts()[0].objects, 1, "past object_ttl, kept");
    assert_eq!(w.relay.room_counts()[0].sessions, 0);
    for _ in 0..40 {
        w.advance(Duration::from_millis(250));
    }
    assert_eq!(w.relay.room_count(), 0, "expired, and the room with it");
}

#[test]
fn closing_the_room_drops_its_room_objects() {
    let mut w = World::new();
    let a = join(&mut w, "alice", true);
    w.publish(&on_room_stream(&a), &[head(7, 7.0)]);
    w.leave(a.session).unwrap();
    assert_eq!(w.relay.room_count(), 1);
    w.control(Input::Evict {
        room: "r",
        identity: None,
    })
    .unwrap();
    assert_eq!(w.relay.room_count(), 0);
}

#[test]
fn room_objects_past_the_room_bound_are_refused_and_counted() {
    let cfg = RelayConfig {
        max_room_objects: 3,
        ..RelayConfig::default()
    };
    let mut w = World::with(cfg);
    let a = join(&mut w, "alice", true);
    let b = join(&mut w, "bob", true);
    w.publish(&on_room_stream(&a), &[head(1, 0.0), head(2, 0.0)]);
    w.publish(&on_room_stream(&b), &[head(3, 0.0), head(4, 0.0)]);
    assert_eq!(w.dropped("room_objects_full"), 1);
    w.publish(&on_room_stream(&b), &[head(3, 0.0)]);
    assert_eq!(w.relay.room_counts()[0].objects, 3);
    // Updates of objects already held still go.
    w.publish(&on_room_stream(&a), &[head(1, 5.0)]);
    assert_eq!(w.dropped("room_objects_full"), 1);
}

#[test]
fn the_same_identity_takes_its_room_stream_up_again_and_no_one_else_can() {
    let mut w = World::new();
    let a = join(&mut w, "alice", true);
    let ssrc = a.room_ssrc.unwrap();
    w.publish(&on_room_stream(&a), &[head(7, 7.0)]);
    w.leave(a.session).unwrap();
    let req = |identity: &str| JoinRequest {
        room: "r".into(),
        identity: identity.into(),
        publish: true,
        room_stream: true,
        room_ssrc: Some(ssrc),
        ..JoinRequest::default()
    };
    // Another identity naming it gets a room stream of its own.
    let other = w.join_with(req("mallory")).unwrap().room_ssrc.unwrap();
    assert_ne!(other, ssrc);
    let again = w.join_with(req("alice")).unwrap();
    assert_eq!(again.room_ssrc, Some(ssrc));
    w.publish(&on_room_stream(&again), &[head(7, 9.0)]);
    assert_eq!(w.dropped("ssrc_mismatch"), 0);
}

#[test]
fn a_handover_moves_the_right_to_update_and_both_sides_learn_of_it() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    let c = join(&mut w, "carol", false);
    w.publish(&a, &[head(1, 1.0), head(9, 0.0)]);
    w.sent();
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 9)]);
    let sent = w.sent();
    assert_eq!(
        notices(&sent, &b),
        vec![(Kind::Granted, Entry::new(a.ssrc, 9))]
    );
    let lost = notices(&sent, &a);
    assert_eq!(lost.len(), 1);
    assert_eq!(
        (lost[0].0, lost[0].1.reason),
        (Kind::Lost, Reason::Contended)
    );

    // Bob's update of 9 reaches Carol as stream A's; Alice's is dropped, her 1 goes on.
    w.publish(&b, &[head(9, 42.0)]);
    let sent = w.sent();
    assert_eq!(heads_to(&sent, &c, a.ssrc), vec![(9, 42.0)]);
    assert_eq!(
        heads_to(&sent, &a, a.ssrc),
        vec![(9, 42.0)],
        "its publisher sees it"
    );
    assert_eq!(heads_to(&sent, &b, a.ssrc), vec![], "no echo to its holder");
    w.publish(&a, &[head(1, 2.0), head(9, -1.0)]);
    assert_eq!(heads_to(&w.sent(), &c, a.ssrc), vec![(1, 2.0)]);
    assert_eq!(w.dropped("not_owner"), 1);
    // A snapshot has the holder's state.
    w.fir(&c, a.ssrc, 1);
    let mut snap = heads_to(&w.sent(), &c, a.ssrc);
    snap.sort_by_key(|(id, _)| *id);
    assert_eq!(snap, vec![(1, 2.0), (9, 42.0)]);

    // Released, it is Alice's again.
    ownership(&mut w, &b, Kind::Release, &[(a.ssrc, 9)]);
    assert_eq!(
        notices(&w.sent(), &a),
        vec![(Kind::Granted, Entry::new(a.ssrc, 9))]
    );
    w.publish(&a, &[head(9, 3.0)]);
    assert_eq!(heads_to(&w.sent(), &c, a.ssrc), vec![(9, 3.0)]);
}

#[test]
fn of_concurrent_requests_exactly_one_wins_and_the_losers_updates_are_dropped() {
    let mut w = World::new();
    let a = join(&mut w, "alice", true);
    let room = on_room_stream(&a);
    w.publish(&room, &[head(5, 0.0)]);
    w.leave(a.session).unwrap();
    let players: Vec<Joined> = (0..4)
        .map(|i| join(&mut w, &format!("p{i}"), false))
        .collect();
    w.sent();
    for p in &players {
        ownership(&mut w, p, Kind::Request, &[(room.ssrc, 5)]);
    }
    let sent = w.sent();
    let granted: Vec<&Joined> = players
        .iter()
        .filter(|p| notices(&sent, p).iter().any(|(k, _)| *k == Kind::Granted))
        .collect();
    assert_eq!(granted.len(), 1, "exactly one winner");
    let winner = granted[0];
    for p in players.iter().filter(|p| p.session != winner.session) {
        assert_eq!(notices(&sent, p)[0].1.reason, Reason::Contended);
    }
    assert_eq!(w.relay.stats().ownership.get("contended"), 3);
    let loser = players
        .iter()
        .find(|p| p.session != winner.session)
        .unwrap();
    // A loser that sends objectID 5 anyway publishes its own object 5, not the room's.
    w.publish(winner, &[head(5, 1.0)]);
    w.publish(loser, &[head(5, 2.0)]);
    let watcher = join(&mut w, "w", false);
    w.sent();
    w.fir(&watcher, room.ssrc, 1);
    assert_eq!(heads_to(&w.sent(), &watcher, room.ssrc), vec![(5, 1.0)]);
}

#[test]
fn a_holder_that_leaves_gives_the_object_back_and_a_stream_that_ends_takes_it_away() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    w.publish(&a, &[head(9, 0.0)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 9)]);
    w.sent();
    w.leave(b.session).unwrap();
    assert_eq!(
        notices(&w.sent(), &a),
        vec![(Kind::Granted, Entry::new(a.ssrc, 9))]
    );
    let c = join(&mut w, "carol", false);
    w.advance(Duration::from_secs(1));
    ownership(&mut w, &c, Kind::Request, &[(a.ssrc, 9)]);
    w.sent();
    w.leave(a.session).unwrap();
    let lost = notices(&w.sent(), &c);
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].0, lost[0].1.reason), (Kind::Lost, Reason::Gone));
}

#[test]
fn requests_the_rules_refuse_are_answered_with_their_reason() {
    let cfg = RelayConfig {
        max_held_objects: 1,
        ..RelayConfig::default()
    };
    let mut w = World::with(cfg);
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    let viewer = w.join("r", false, true);
    w.publish(&a, &[head(1, 0.0), head(2, 0.0), head(3, 0.0)]);
    w.publish(&b, &[head(3, 0.0)]);
    w.sent();
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 77), (0xdead, 1)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 3)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 1), (a.ssrc, 2)]);
    ownership(&mut w, &viewer, Kind::Request, &[(a.ssrc, 2)]);
    let sent = w.sent();
    let reasons: Vec<Reason> = notices(&sent, &b)
        .iter()
        .filter(|(k, _)| *k == Kind::Refused)
        .map(|(_, e)| e.reason)
        .collect();
    assert_eq!(
        reasons,
        vec![
            Reason::NoObject,
            Reason::NoObject,
            Reason::IdInUse,
            Reason::TooManyHeld
        ]
    );
    assert_eq!(notices(&sent, &viewer)[0].1.reason, Reason::NotPublisher);
}

#[test]
fn a_flood_of_ownership_requests_is_dropped_unanswered_and_garbage_is_counted() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    w.publish(&a, &[head(1, 0.0)]);
    w.sent();
    for _ in 0..500 {
        ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 1)]);
    }
    let answered = notices(&w.sent(), &b).len();
    assert!(answered <= 21, "answers bounded by the rate: {answered}");
    assert!(w.dropped("ownership_flood") >= 479);
    w.advance(Duration::from_secs(2));
    // Garbage: a bad length, a relay-only kind, another's SSRC.
    raw_app(&mut w, &b, (Kind::Request, b.ssrc), &[0; 12]);
    raw_app(&mut w, &b, (Kind::Granted, b.ssrc), &[0; 16]);
    raw_app(&mut w, &b, (Kind::Request, a.ssrc), &[0; 16]);
    assert_eq!(w.dropped("ownership_malformed"), 2);
    assert!(w.dropped("ssrc_mismatch") >= 1);
    assert!(
        w.sent()
            .iter()
            .all(|s| s.to != b.session || s.class == PacketClass::Rtcp)
    );
}

#[test]
fn a_packet_mixing_its_own_and_held_objects_sends_each_under_its_stream_only() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    let c = join(&mut w, "carol", false);
    w.publish(&a, &[head(9, 0.0)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 9)]);
    w.sent();
    w.publish(&b, &[head(2, 2.0), head(9, 9.0)]);
    let sent = w.sent();
    assert_eq!(heads_to(&sent, &c, b.ssrc), vec![(2, 2.0)]);
    assert_eq!(heads_to(&sent, &c, a.ssrc), vec![(9, 9.0)]);
}

#[test]
fn a_room_stream_taken_up_again_accepts_the_new_sessions_numbering() {
    let mut w = World::new();
    let a = join(&mut w, "alice", true);
    let room = on_room_stream(&a);
    w.publish(&room, &[head(7, 7.0)]);
    w.leave(a.session).unwrap();
    let again = w
        .join_with(JoinRequest {
            room: "r".into(),
            identity: "alice".into(),
            publish: true,
            room_stream: true,
            room_ssrc: room.room_ssrc,
            ..JoinRequest::default()
        })
        .unwrap();
    let viewer = join(&mut w, "v", false);
    w.sent();
    // Half the sequence space away from the old session's numbering.
    let payload = gsrelay::wire::encode(&[head(7, 8.0)], Dialect::Draft01).unwrap();
    w.publish_seq(
        &on_room_stream(&again),
        1001u16.wrapping_add(0x9000),
        &payload,
    );
    assert_eq!(heads_to(&w.sent(), &viewer, room.ssrc), vec![(7, 8.0)]);
    assert_eq!(w.dropped("late"), 0);
}

#[test]
fn what_a_holder_had_in_flight_when_it_lost_the_object_is_dropped_not_adopted() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    let c = join(&mut w, "carol", false);
    w.publish(&a, &[head(9, 0.0)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 9)]);
    w.advance(Duration::from_millis(300));
    ownership(&mut w, &c, Kind::Request, &[(a.ssrc, 9)]);
    w.sent();
    w.publish(&b, &[head(9, 5.0)]);
    assert!(
        heads_to(&w.sent(), &c, b.ssrc).is_empty(),
        "no object 9 of Bob's"
    );
    assert_eq!(w.dropped("not_owner"), 1);
    let info = w.relay.room_info("r").unwrap();
    assert!(
        info.streams
            .iter()
            .all(|s| s.ssrc != b.ssrc || s.objects == 0)
    );
}

/// A holder that lost an object because its stream ended (`gone`) is held to the same
/// rule as after a handover: what it sends of that objectID for the next second is
/// dropped (`not_owner`), not forwarded as an object of its own; after that it is its own.
#[test]
fn what_a_holder_sends_of_an_object_whose_stream_ended_is_dropped_for_a_second() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    let c = join(&mut w, "carol", false);
    w.publish(&a, &[head(9, 0.0)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 9)]);
    w.sent();
    w.leave(a.session).unwrap();
    let lost = notices(&w.sent(), &b);
    assert_eq!((lost[0].0, lost[0].1.reason), (Kind::Lost, Reason::Gone));
    w.publish(&b, &[head(9, 5.0)]);
    assert!(
        heads_to(&w.sent(), &c, b.ssrc).is_empty(),
        "no object 9 of Bob's while his updates may still be in flight"
    );
    assert_eq!(w.dropped("not_owner"), 1);
    w.advance(Duration::from_millis(1100));
    w.publish(&b, &[head(9, 6.0)]);
    assert_eq!(heads_to(&w.sent(), &c, b.ssrc), vec![(9, 6.0)]);
}

#[test]
fn muting_a_holder_gives_its_objects_back() {
    let mut w = World::new();
    let a = join(&mut w, "alice", false);
    let b = join(&mut w, "bob", false);
    w.publish(&a, &[head(9, 0.0)]);
    ownership(&mut w, &b, Kind::Request, &[(a.ssrc, 9)]);
    w.sent();
    w.control(Input::Mute {
        room: "r",
        identity: "bob",
        muted: true,
    })
    .unwrap();
    let sent = w.sent();
    assert_eq!(
        notices(&sent, &a),
        vec![(Kind::Granted, Entry::new(a.ssrc, 9))]
    );
    let lost = notices(&sent, &b);
    assert_eq!(
        (lost[0].0, lost[0].1.reason),
        (Kind::Lost, Reason::NotPublisher)
    );
    w.publish(&a, &[head(9, 1.0)]);
    assert_eq!(w.dropped("not_owner"), 0);
}
