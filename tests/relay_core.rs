//! The sans-I/O core driven with simulated time: no sockets, no clock, deterministic.

mod support;

use gsrelay::rtp::rtcp::{self, RtcpItem};
use gsrelay::rtp::{PacketClass, RtpHeader};
use gsrelay::wire::json::Hex;
use gsrelay::wire::{self, Dialect, Object, Unknown};
use gsrelay::{ControlError, Event, Interest, JoinRequest, RelayConfig};
use std::time::Duration;
use support::{World, head, x_of};

#[test]
fn forwards_to_every_other_subscriber_with_continuous_sequence_numbers() {
    let mut w = World::new();
    let a = w.join("r", true, true);
    let b = w.join("r", false, true);
    let c = w.join("r", false, true);
    let mut seen = Vec::new();
    for i in 0..5 {
        w.publish(&a, &[head(1, i as f32)]);
        let out = w.sent();
        assert_eq!(out.len(), 2, "one copy each for b and c, none echoed to a");
        assert!(
            out.iter()
                .all(|s| s.to != a.session && s.class == PacketClass::Rtp)
        );
        let to_b = out.iter().find(|s| s.to == b.session).unwrap();
        assert_eq!(to_b.rtp().ssrc(), a.ssrc);
        assert_eq!(to_b.objects(Dialect::Draft01), vec![head(1, i as f32)]);
        seen.push(to_b.rtp().sequence_number());
        assert!(out.iter().any(|s| s.to == c.session));
    }
    assert!(
        seen.windows(2).all(|p| p[1] == p[0].wrapping_add(1)),
        "{seen:?}"
    );
}

#[test]
fn every_object_type_and_unknown_tags_are_forwarded_untouched() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let unknown = Object::Unknown(Unknown {
        tag: 5000,
        data: Hex(vec![7, 1, 2, 3]),
    });
    let payload = wire::encode(&[head(1, 0.0), unknown.clone()], Dialect::Draft01).unwrap();
    w.publish_raw(&a, &payload);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, b.session);
    assert_eq!(
        out[0].rtp().payload(),
        &payload[..],
        "forwarded byte for byte"
    );
}

#[test]
fn late_joiner_fir_gets_exactly_the_latest_state_and_sequence_stays_continuous() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    for i in 0..50u64 {
        // Objects 0..10, each updated several times; the last x of object k is 40+k.
        w.publish(&a, &[head(i % 10, i as f32)]);
    }
    let late = w.join("r", false, true);
    w.sent();
    w.fir(&late, a.ssrc, 1);
    let snap = w.sent();
    assert!(!snap.is_empty());
    assert!(
        snap.iter()
            .all(|s| s.to == late.session && s.bytes.len() <= 12 + 1200)
    );
    let mut state: Vec<(u64, f32)> = snap
        .iter()
        .flat_map(|s| s.objects(Dialect::Draft01))
        .map(|o| (o.id().unwrap(), x_of(&o)))
        .collect();
    state.sort_by_key(|(id, _)| *id);
    let want: Vec<(u64, f32)> = (0..10).map(|k| (k, (40 + k) as f32)).collect();
    assert_eq!(state, want);
    // The next forwarded packet continues the snapshot's numbering.
    let last = snap.last().unwrap().rtp().sequence_number();
    w.publish(&a, &[head(3, 99.0)]);
    let next = w.sent();
    assert_eq!(next[0].rtp().sequence_number(), last.wrapping_add(1));
}

#[test]
fn snapshot_is_split_into_payload_budget_sized_packets() {
    let mut w = World::with(RelayConfig {
        payload_budget: 200,
        ..RelayConfig::default()
    });
    let a = w.join("r", true, false);
    for k in 0..40 {
        w.publish(&a, &[head(k, 1.0)]);
    }
    let b = w.join("r", false, true);
    w.fir(&b, w.relay.relay_ssrc(), 1);
    let snap = w.sent();
    assert!(snap.len() > 1);
    let seqs: Vec<u16> = snap.iter().map(|s| s.rtp().sequence_number()).collect();
    assert!(seqs.windows(2).all(|p| p[1] == p[0].wrapping_add(1)));
    assert!(snap.iter().all(|s| s.rtp().payload().len() <= 200));
    let ids: usize = snap.iter().map(|s| s.objects(Dialect::Draft01).len()).sum();
    assert_eq!(ids, 40);
}

#[test]
fn a_session_path_smaller_than_the_budget_packs_its_snapshots_to_the_path() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    for k in 0..40 {
        w.publish(&a, &[head(k, 1.0)]);
    }
    let wide = w.join("r", false, true);
    let narrow = w.join("r", false, true);
    // A QUIC connection whose datagrams hold 300-byte packets.
    w.set_path(narrow.session, 300, None);
    w.sent();
    w.fir(&wide, w.relay.relay_ssrc(), 1);
    w.fir(&narrow, w.relay.relay_ssrc(), 1);
    let sent = w.sent();
    let to = |id| sent.iter().filter(move |s: &&support::Sent| s.to == id);
    assert!(to(narrow.session).all(|s| s.bytes.len() <= 300));
    assert!(
        to(wide.session).any(|s| s.bytes.len() > 300),
        "others keep the budget"
    );
    for id in [wide.session, narrow.session] {
        let objects: usize = to(id).map(|s| s.objects(Dialect::Draft01).len()).sum();
        assert_eq!(objects, 40, "every object in the snapshot");
    }
}

#[test]
fn repeated_fir_is_answered_once_and_relay_ssrc_fir_covers_every_stream() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let c = w.join("r", true, false);
    w.publish(&a, &[head(1, 1.0)]);
    w.publish(&c, &[head(2, 2.0)]);
    let b = w.join("r", false, true);
    w.sent();
    w.fir(&b, a.ssrc, 5);
    assert_eq!(w.sent().len(), 1);
    w.fir(&b, a.ssrc, 5);
    assert!(
        w.sent().is_empty(),
        "same FIR sequence number: not answered twice"
    );
    w.fir(&b, a.ssrc, 6);
    assert!(
        w.sent().is_empty(),
        "a new FIR within the snapshot interval waits for its end"
    );
    w.advance(RelayConfig::default().snapshot_interval);
    assert_eq!(w.sent().len(), 1, "and is answered then");
    w.advance(RelayConfig::default().snapshot_interval);
    w.fir(&b, w.relay.relay_ssrc(), 1);
    let all = w.sent();
    let mut ssrcs: Vec<u32> = all.iter().map(|s| s.rtp().ssrc()).collect();
    ssrcs.sort();
    let mut want = vec![a.ssrc, c.ssrc];
    want.sort();
    assert_eq!(ssrcs, want);
}

#[test]
fn fir_for_a_stream_without_state_is_passed_to_its_sender_throttled() {
    let mut w = World::with(RelayConfig {
        object_ttl: Duration::from_secs(1),
        ..RelayConfig::default()
    });
    let a = w.join("r", true, false);
    w.publish(&a, &[head(1, 1.0)]);
    w.advance(Duration::from_millis(1500)); // the object expires, the stream lives on
    w.publish_raw(&a, &[]);
    let b = w.join("r", false, true);
    w.sent();
    w.fir(&b, a.ssrc, 1);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].to, out[0].class), (a.session, PacketClass::Rtcp));
    let items = rtcp::parse_compound(&out[0].bytes).unwrap();
    assert!(
        matches!(&items[0], RtcpItem::Fir { sender_ssrc, entries } if *sender_ssrc == w.relay.relay_ssrc() && entries[0].ssrc == a.ssrc)
    );
    w.fir(&b, a.ssrc, 2);
    assert!(w.sent().is_empty(), "throttled");
}

#[test]
fn same_object_in_two_formats_keeps_both_in_order() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let newer = Object::Unknown(Unknown {
        tag: 20000,
        data: Hex(vec![1, 0xaa]),
    }); // objectID 1, new format
    w.publish(&a, &[head(1, 5.0), newer.clone()]);
    let b = w.join("r", false, true);
    w.sent();
    w.fir(&b, a.ssrc, 1);
    let snap = w.sent();
    assert_eq!(snap[0].objects(Dialect::Draft01), vec![head(1, 5.0), newer]);
    // A later packet with only the old format replaces both.
    w.publish(&a, &[head(1, 6.0)]);
    w.fir(&b, a.ssrc, 2);
    let snap = w.sent();
    assert_eq!(
        snap.last().unwrap().objects(Dialect::Draft01),
        vec![head(1, 6.0)]
    );
}

#[test]
fn objects_expire_after_the_ttl() {
    let mut w = World::with(RelayConfig {
        object_ttl: Duration::from_secs(2),
        ..RelayConfig::default()
    });
    let a = w.join("r", true, false);
    w.publish(&a, &[head(1, 1.0), head(2, 2.0)]);
    w.advance(Duration::from_secs(1));
    w.publish(&a, &[head(2, 3.0)]);
    w.advance(Duration::from_millis(1500));
    let info = w.relay.room_info("r").unwrap();
    assert_eq!(
        info.streams[0].objects, 1,
        "object 1 expired, object 2 was refreshed"
    );
}

#[test]
fn leave_and_silence_end_the_stream_with_a_bye() {
    let mut w = World::with(RelayConfig {
        stream_timeout: Duration::from_secs(3),
        ..RelayConfig::default()
    });
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.publish(&a, &[head(1, 1.0)]);
    w.sent();
    w.advance(Duration::from_secs(4));
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].to, out[0].class), (b.session, PacketClass::Rtcp));
    assert_eq!(
        rtcp::parse_compound(&out[0].bytes).unwrap(),
        vec![RtcpItem::Bye {
            ssrcs: vec![a.ssrc]
        }]
    );
    w.publish(&a, &[head(1, 2.0)]);
    w.sent();
    w.leave(a.session).unwrap();
    let out = w.sent();
    assert_eq!(
        rtcp::parse_compound(&out[0].bytes).unwrap(),
        vec![RtcpItem::Bye {
            ssrcs: vec![a.ssrc]
        }]
    );
    assert_eq!(
        w.leave(a.session),
        Err(ControlError::NoSuchSession(a.session))
    );
}

#[test]
fn rtcp_bye_from_the_sender_ends_its_stream() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.publish(&a, &[head(1, 1.0)]);
    w.sent();
    w.rtcp(&a, |buf| {
        rtcp::write_bye(buf, &[a.ssrc]).unwrap();
    });
    let out = w.sent();
    assert_eq!(out[0].to, b.session);
    assert!(w.relay.room_info("r").unwrap().streams.is_empty());
}

#[test]
fn nack_is_answered_with_the_current_state_of_what_the_subscriber_lacks_under_fresh_sequence_numbers()
 {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.publish(&a, &[head(1, 1.0), head(2, 2.0)]);
    let first = w.sent()[0].rtp().sequence_number();
    w.publish(&a, &[head(1, 10.0), head(3, 3.0)]);
    let second = w.sent()[0].rtp().sequence_number();
    w.publish(&a, &[head(3, 30.0)]);
    let third = w.sent()[0].rtp().sequence_number();
    w.rtcp(&b, |buf| {
        rtcp::write_nack(buf, b.ssrc, a.ssrc, &[first, second]).unwrap();
    });
    let out = w.sent();
    let mut got: Vec<Object> = out
        .iter()
        .flat_map(|s| s.objects(Dialect::Draft01))
        .collect();
    got.sort_by_key(|o| o.id());
    assert_eq!(
        got,
        vec![head(1, 10.0), head(2, 2.0)],
        "from the first packet only object 2 (object 1 went again in the second); from \
         the second only object 1 (object 3 went again in the third)"
    );
    let seqs: Vec<u16> = out.iter().map(|s| s.rtp().sequence_number()).collect();
    assert_eq!(
        seqs,
        vec![third.wrapping_add(1)],
        "never under a lost number: a fresh one, continuing the numbering"
    );
    // The newest state of what the lost packet carried.
    w.rtcp(&b, |buf| {
        rtcp::write_nack(buf, b.ssrc, a.ssrc, &[third]).unwrap();
    });
    let again: Vec<Object> = w
        .sent()
        .iter()
        .flat_map(|s| s.objects(Dialect::Draft01))
        .collect();
    assert_eq!(again, vec![head(3, 30.0)]);
}

#[test]
fn tmmbr_is_recorded_as_the_subscribers_rate_cap() {
    let mut w = World::new();
    let b = w.join("r", false, true);
    let relay_ssrc = w.relay.relay_ssrc();
    w.rtcp(&b, |buf| {
        let e = rtcp::TmmbEntry {
            ssrc: relay_ssrc,
            bitrate_bps: 64_000,
            overhead: 40,
        };
        rtcp::write_tmmbr(buf, b.ssrc, &[e]).unwrap();
    });
    assert_eq!(w.relay.session(b.session).unwrap().tmmbr_bps, Some(64_000));
}

#[test]
fn malformed_and_unauthorised_packets_are_dropped_by_reason_and_harm_nobody() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let mallory = w.join("r", true, false);
    w.publish(&a, &[head(1, 1.0)]);
    w.sent();
    // A payload with one malformed object is rejected whole.
    let mut bad = wire::encode(&[head(2, 2.0)], Dialect::Draft01).unwrap();
    bad.extend_from_slice(&[0x01, 0x05, 0x00]);
    w.publish_raw(&a, &bad);
    assert_eq!(w.dropped("truncated"), 1);
    // Mallory's packets claiming a's SSRC.
    let mut spoof = Vec::new();
    RtpHeader {
        marker: false,
        payload_type: 96,
        sequence_number: 1,
        timestamp: 1,
        ssrc: a.ssrc,
        csrcs: &[],
        extension: None,
    }
    .append_to(&mut spoof)
    .unwrap();
    spoof.extend(wire::encode(&[head(1, 666.0)], Dialect::Draft01).unwrap());
    w.rtp_from(mallory.session, &spoof);
    assert_eq!(w.dropped("ssrc_mismatch"), 1);
    // A subscriber-only session may not publish.
    w.publish(&b, &[head(9, 9.0)]);
    assert_eq!(w.dropped("not_publisher"), 1);
    // Truncated RTP and RTCP.
    w.rtp_from(a.session, &[0x80, 0x60, 0x00]);
    w.rtcp_from(b.session, &[0x80, 0xc9, 0x00]);
    assert_eq!(
        (w.dropped("rtp_too_short"), w.dropped("rtcp_truncated")),
        (1, 1)
    );
    assert!(w.sent().is_empty());
    // a's state is untouched and still flows.
    w.fir(&b, a.ssrc, 1);
    assert_eq!(w.sent()[0].objects(Dialect::Draft01), vec![head(1, 1.0)]);
}

#[test]
fn rooms_are_isolated() {
    let mut w = World::new();
    let a = w.join("red", true, true);
    let b = w.join("blue", true, true);
    w.publish(&a, &[head(1, 1.0)]);
    w.publish(&b, &[head(1, 2.0)]);
    assert!(w.sent().is_empty(), "nobody else in either room");
    let a2 = w.join("red", false, true);
    w.fir(&a2, w.relay.relay_ssrc(), 1);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].rtp().ssrc(), a.ssrc);
    // A FIR naming the other room's stream gets nothing.
    w.fir(&a2, b.ssrc, 2);
    assert!(w.sent().is_empty());
}

#[test]
fn ssrc_requests_and_room_limits() {
    let mut w = World::with(RelayConfig {
        max_sessions_per_room: 2,
        ..RelayConfig::default()
    });
    let req = |ssrc, require_ssrc| JoinRequest {
        room: "r".into(),
        publish: true,
        ssrc: Some(ssrc),
        require_ssrc,
        ..JoinRequest::default()
    };
    let a = w.join_with(req(1234, true)).unwrap();
    assert_eq!(a.ssrc, 1234);
    assert_eq!(
        w.join_with(req(1234, true)),
        Err(ControlError::SsrcTaken(1234))
    );
    let b = w.join_with(req(1234, false)).unwrap();
    assert_ne!(b.ssrc, 1234, "a fresh SSRC when the wanted one is taken");
    assert_eq!(
        w.join_with(req(99, false)),
        Err(ControlError::RoomFull("r".into()))
    );
    assert!(
        w.join_with(JoinRequest {
            room: "other".into(),
            ..JoinRequest::default()
        })
        .is_ok()
    );
}

#[test]
fn relay_wide_room_and_session_caps() {
    let mut w = World::with(RelayConfig {
        max_rooms: 2,
        max_sessions: 3,
        ..RelayConfig::default()
    });
    let join = |w: &mut World, room: &str| {
        w.join_with(JoinRequest {
            room: room.into(),
            subscribe: true,
            ..JoinRequest::default()
        })
    };
    let a = join(&mut w, "a").unwrap();
    join(&mut w, "b").unwrap();
    assert_eq!(join(&mut w, "c"), Err(ControlError::TooManyRooms(2)));
    join(&mut w, "a").unwrap();
    assert_eq!(join(&mut w, "b"), Err(ControlError::RelayFull(3)));
    // Caps count what is held now: a leave makes room again.
    w.leave(a.session).unwrap();
    join(&mut w, "b").unwrap();
}

#[test]
fn limits_on_objects_size_and_rate_drop_by_reason() {
    let cfg = RelayConfig {
        max_objects_per_stream: 3,
        max_packet_bytes: 300,
        max_packets_per_sec: 10,
        ..RelayConfig::default()
    };
    let mut w = World::with(cfg);
    let a = w.join("r", true, false);
    w.publish(&a, &[head(1, 0.0), head(2, 0.0), head(3, 0.0)]);
    w.publish(&a, &[head(4, 0.0)]);
    assert_eq!(w.dropped("too_many_objects"), 1);
    w.publish_raw(&a, &[0u8; 400]);
    assert_eq!(w.dropped("oversized"), 1);
    for _ in 0..20 {
        w.publish(&a, &[head(1, 0.0)]);
    }
    assert!(w.dropped("rate_limited") >= 10);
    w.advance(Duration::from_secs(1));
    let before = w.dropped("rate_limited");
    w.publish(&a, &[head(1, 0.0)]);
    assert_eq!(
        w.dropped("rate_limited"),
        before,
        "the bucket refills with time"
    );
}

#[test]
fn filtered_packets_leave_no_gap_in_sequence_numbers() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let interest: Interest = serde_json::from_str(r#"{"types":{"deny":["Hand1"]}}"#).unwrap();
    let b = w
        .join_with(JoinRequest {
            room: "r".into(),
            subscribe: true,
            interest,
            ..JoinRequest::default()
        })
        .unwrap();
    let hand = Object::Hand1(Default::default());
    w.publish(&a, &[head(1, 1.0)]);
    let first = w.sent()[0].rtp().sequence_number();
    w.publish(&a, std::slice::from_ref(&hand));
    assert!(w.sent().is_empty(), "nothing b wants");
    w.publish(&a, &[hand, head(1, 2.0)]);
    let out = w.sent();
    assert_eq!(out[0].rtp().sequence_number(), first.wrapping_add(1));
    assert_eq!(out[0].objects(Dialect::Draft01), vec![head(1, 2.0)]);
    let _ = b;
}

#[test]
fn idle_sessions_are_removed_and_reported_to_the_transport() {
    let mut w = World::with(RelayConfig {
        session_timeout: Duration::from_secs(5),
        ..RelayConfig::default()
    });
    let a = w.join("r", false, true);
    w.advance(Duration::from_secs(6));
    assert_eq!(w.events(), vec![Event::SessionClosed(a.session)]);
    assert!(w.relay.session(a.session).is_none());
    assert!(w.relay.room_info("r").is_none(), "empty rooms are removed");
}

#[test]
fn a_reordered_packet_applies_only_the_objects_no_newer_packet_refreshed() {
    let mut w = World::new();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let encode = |objects: &[Object]| wire::encode(objects, Dialect::Draft01).unwrap();
    w.publish_seq(&a, 100, &encode(&[head(1, 1.0), head(2, 1.0)]));
    w.publish_seq(&a, 102, &encode(&[head(2, 3.0)]));
    w.sent();
    // 101 arrives late: object 1 is still news, object 2 was refreshed by 102.
    w.publish_seq(&a, 101, &encode(&[head(1, 2.0), head(2, 2.0)]));
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].objects(Dialect::Draft01), vec![head(1, 2.0)]);
    // Nothing in it is news any more: dropped as late.
    w.publish_seq(&a, 101, &encode(&[head(1, 2.0), head(2, 2.0)]));
    assert!(w.sent().is_empty());
    assert_eq!(w.dropped("late"), 1);
    w.fir(&b, a.ssrc, 1);
    let mut state: Vec<(u64, f32)> = w
        .sent()
        .iter()
        .flat_map(|s| s.objects(Dialect::Draft01))
        .map(|o| (o.id().unwrap(), x_of(&o)))
        .collect();
    state.sort_by_key(|(id, _)| *id);
    assert_eq!(state, vec![(1, 2.0), (2, 3.0)]);
}

/// A session of `identity` in `room`, publishing and subscribing.
fn join_as(w: &mut World, room: &str, identity: &str) -> gsrelay::Joined {
    w.join_with(JoinRequest {
        room: room.into(),
        identity: identity.into(),
        publish: true,
        subscribe: true,
        ..JoinRequest::default()
    })
    .unwrap()
}

#[test]
fn an_eviction_sends_the_session_a_bye_from_the_relay_and_reports_it_closed() {
    let mut w = World::new();
    let a = join_as(&mut w, "r", "alice");
    let b = join_as(&mut w, "r", "bob");
    let other = join_as(&mut w, "elsewhere", "alice");
    w.publish(&a, &[head(1, 1.0)]);
    w.sent();
    w.events();
    let evicted = w.relay.handle_input(
        w.now,
        gsrelay::Input::Evict {
            room: "r",
            identity: Some("alice"),
        },
    );
    assert_eq!(evicted, Ok(gsrelay::Reply::Sessions(1)));
    let out = w.sent();
    let to_a: Vec<_> = out.iter().filter(|s| s.to == a.session).collect();
    assert_eq!(
        rtcp::parse_compound(&to_a[0].bytes).unwrap(),
        vec![RtcpItem::Bye {
            ssrcs: vec![a.relay_ssrc]
        }],
        "the evicted session hears that the relay ended it"
    );
    assert!(
        out.iter().any(|s| s.to == b.session
            && rtcp::parse_compound(&s.bytes).unwrap()
                == vec![RtcpItem::Bye {
                    ssrcs: vec![a.ssrc]
                }]),
        "the others see its stream end"
    );
    let events = w.events();
    assert!(events.contains(&Event::SessionClosed(a.session)));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::StreamEnded { session, ssrc, .. } if *session == a.session && *ssrc == a.ssrc
    )));
    // Alice's session in another room, and bob, are untouched.
    assert!(w.relay.session(other.session).is_some());
    assert!(w.relay.session(b.session).is_some());
    // Closing the room evicts everyone left in it.
    let closed = w.relay.handle_input(
        w.now,
        gsrelay::Input::Evict {
            room: "r",
            identity: None,
        },
    );
    assert_eq!(closed, Ok(gsrelay::Reply::Sessions(1)));
    assert!(w.relay.room_info("r").is_none());
}

#[test]
fn a_muted_publisher_is_dropped_and_counted_and_streams_are_reported_once() {
    let mut w = World::new();
    let a = join_as(&mut w, "r", "alice");
    let b = join_as(&mut w, "r", "bob");
    w.publish(&a, &[head(1, 1.0)]);
    let events = w.events();
    let started: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::StreamStarted { .. }))
        .collect();
    assert_eq!(
        started,
        vec![&Event::StreamStarted {
            room: "r".into(),
            session: a.session,
            ssrc: a.ssrc
        }]
    );
    w.publish(&a, &[head(1, 2.0)]);
    assert!(
        !w.events()
            .iter()
            .any(|e| matches!(e, Event::StreamStarted { .. })),
        "a stream starts once"
    );
    w.sent();
    let muted = w.relay.handle_input(
        w.now,
        gsrelay::Input::Mute {
            room: "r",
            identity: "alice",
            muted: true,
        },
    );
    assert_eq!(muted, Ok(gsrelay::Reply::Sessions(1)));
    w.publish(&a, &[head(1, 3.0)]);
    assert_eq!(w.dropped("muted"), 1);
    assert!(
        w.sent()
            .iter()
            .all(|s| s.to != b.session || s.class != PacketClass::Rtp)
    );
    w.control(gsrelay::Input::Mute {
        room: "r",
        identity: "alice",
        muted: false,
    })
    .unwrap();
    w.publish(&a, &[head(1, 4.0)]);
    assert!(
        w.sent()
            .iter()
            .any(|s| s.to == b.session && s.class == PacketClass::Rtp)
    );
    // An unknown identity or room concerns no session.
    let none = w.relay.handle_input(
        w.now,
        gsrelay::Input::Mute {
            room: "nowhere",
            identity: "alice",
            muted: true,
        },
    );
    assert_eq!(none, Ok(gsrelay::Reply::Sessions(0)));
}
