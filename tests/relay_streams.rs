//! Sessions own streams: SSRCs declared at join, and, for a session that may send
//! containers (a link from a peer relay), the senders its containers name. Which inputs a
//! session may send is checked on every packet and a refusal is counted by reason.

mod support;

use gsrelay::rtp::PacketClass;
use gsrelay::rtp::rtcp::{self, RtcpItem};
use gsrelay::wire::{self, Dialect, Object, container};
use gsrelay::{ControlError, Event, JoinRequest, Joined, RelayConfig, Sends};
use support::{World, head, x_of};

/// A payload of one container per `(sender, objects)`.
fn containers(senders: &[(u32, Vec<Object>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (ssrc, objects) in senders {
        let body = wire::encode(objects, Dialect::Draft01).expect("encode");
        container::write_header(&mut out, *ssrc, body.len());
        out.extend_from_slice(&body);
    }
    out
}

fn link(w: &mut World, room: &str, sends: Sends) -> Joined {
    w.join_with(JoinRequest {
        room: room.into(),
        identity: "peer-relay".into(),
        publish: true,
        sends,
        ..JoinRequest::default()
    })
    .expect("link joins")
}

/// The RTP packets `to` was sent, as (SSRC, objects).
fn received(w: &mut World, to: u64) -> Vec<(u32, Vec<Object>)> {
    w.sent()
        .into_iter()
        .filter(|s| s.to == to && s.class == PacketClass::Rtp)
        .map(|s| (s.rtp().ssrc(), s.objects(Dialect::Draft01)))
        .collect()
}

#[test]
fn a_links_containers_become_the_senders_streams_owned_by_the_link() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let peer = link(&mut w, "r", Sends::Containers);
    let payload = containers(&[(0xaaaa, vec![head(1, 1.0)]), (0xbbbb, vec![head(2, 2.0)])]);
    w.publish_raw(&peer, &payload);

    let got = received(&mut w, sub.session);
    assert_eq!(got.len(), 2, "one packet per sender: {got:?}");
    assert_eq!(got[0].0, 0xaaaa);
    assert_eq!(x_of(&got[0].1[0]), 1.0);
    assert_eq!(got[1].0, 0xbbbb);
    assert_eq!(x_of(&got[1].1[0]), 2.0);
    assert_eq!(w.relay.session_by_ssrc(0xaaaa), Some(peer.session));
    assert_eq!(w.relay.session_by_ssrc(0xbbbb), Some(peer.session));
    let streams = w.streams("r");
    assert_eq!(streams, [0xaaaa, 0xbbbb]);

    // A late joiner's FIR for the relay gets both senders' state from the cache.
    let late = w.join("r", false, true);
    w.fir(&late, w.relay.relay_ssrc(), 1);
    for _ in 0..10 {
        w.advance(std::time::Duration::from_millis(10));
    }
    let mut snapshot: Vec<u32> = received(&mut w, late.session).iter().map(|p| p.0).collect();
    snapshot.sort_unstable();
    snapshot.dedup();
    assert_eq!(snapshot, [0xaaaa, 0xbbbb]);
}

#[test]
fn what_a_session_may_send_is_checked_per_packet_and_counted() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let client = w.join("r", true, false);
    let peer = link(&mut w, "r", Sends::Containers);
    let both = link(&mut w, "r", Sends::Both);

    w.publish_raw(&client, &containers(&[(0x1111, vec![head(1, 1.0)])]));
    assert_eq!(w.dropped("container_from_sender"), 1);

    w.publish(&peer, &[head(1, 1.0)]);
    assert_eq!(
        w.dropped("not_container"),
        1,
        "a link sends containers only"
    );

    let mut mixed = containers(&[(0x2222, vec![head(1, 1.0)])]);
    mixed.extend(wire::encode(&[head(2, 2.0)], Dialect::Draft01).expect("encode"));
    w.publish_raw(&both, &mixed);
    assert_eq!(w.dropped("not_container"), 2, "never both in one packet");
    assert!(
        received(&mut w, sub.session).is_empty(),
        "nothing refused got through"
    );

    // `Both` sends either kind, packet by packet.
    w.publish(&both, &[head(3, 3.0)]);
    w.publish_raw(&both, &containers(&[(0x3333, vec![head(4, 4.0)])]));
    let ssrcs: Vec<u32> = received(&mut w, sub.session).iter().map(|p| p.0).collect();
    assert_eq!(ssrcs, [both.ssrc, 0x3333]);
}

#[test]
fn a_container_naming_another_sessions_stream_is_refused_and_that_stream_untouched() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let owner = w.join("r", true, false);
    let peer = link(&mut w, "r", Sends::Containers);
    w.publish(&owner, &[head(1, 1.0)]);
    assert_eq!(received(&mut w, sub.session).len(), 1);

    let forged = containers(&[
        (owner.ssrc, vec![head(1, 99.0)]),
        (w.relay.relay_ssrc(), vec![head(1, 99.0)]),
        (0x4444, vec![head(7, 7.0)]),
    ]);
    w.publish_raw(&peer, &forged);
    assert_eq!(
        w.dropped("ssrc_mismatch"),
        2,
        "another's stream, the relay's own"
    );
    let got = received(&mut w, sub.session);
    assert_eq!(got.len(), 1, "the honest container still goes: {got:?}");
    assert_eq!(got[0].0, 0x4444);
    assert_eq!(w.relay.session_by_ssrc(owner.ssrc), Some(owner.session));
    let info = w.relay.room_info("r").expect("room");
    let owned = info
        .streams
        .iter()
        .find(|s| s.ssrc == owner.ssrc)
        .expect("kept");
    assert_eq!(owned.objects, 1);
}

#[test]
fn a_link_owns_at_most_as_many_streams_as_a_room_holds_sessions() {
    let mut w = World::with(RelayConfig {
        max_sessions_per_room: 3,
        ..RelayConfig::default()
    });
    let peer = link(&mut w, "r", Sends::Containers);
    let senders: Vec<(u32, Vec<Object>)> = (0..4u32)
        .map(|k| (0x5000 + k, vec![head(u64::from(k), 0.0)]))
        .collect();
    w.publish_raw(&peer, &containers(&senders));
    // Its own SSRC and two learned senders fill its three.
    assert_eq!(w.dropped("too_many_streams"), 2);
    assert_eq!(w.relay.session_by_ssrc(0x5000), Some(peer.session));
    assert_eq!(w.relay.session_by_ssrc(0x5002), None);
}

#[test]
fn a_replay_plays_as_many_streams_as_a_room_holds_sessions() {
    let mut w = World::with(RelayConfig {
        max_sessions_per_room: 3,
        ..RelayConfig::default()
    });
    let replay = w
        .join_with(JoinRequest::replaying("r"))
        .expect("a replay joins");
    // One container per packet: each its stream's own numbering, outside the link order.
    for k in 0..4u32 {
        let sender = [(0x6000 + k, vec![head(u64::from(k), 0.0)])];
        w.publish_raw(&replay, &containers(&sender));
    }
    // The room it recorded held up to three sessions: all three play, a fourth does not.
    assert_eq!(w.dropped("too_many_streams"), 1);
    assert_eq!(w.relay.session_by_ssrc(0x6002), Some(replay.session));
    assert_eq!(w.relay.session_by_ssrc(0x6003), None);
}

#[test]
fn ssrcs_declared_at_join_are_owned_and_must_be_free() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let a = w
        .join_with(JoinRequest {
            room: "r".into(),
            publish: true,
            ssrcs: vec![0x7001, 0x7002],
            ..JoinRequest::default()
        })
        .expect("join");
    let second = Joined {
        ssrc: 0x7002,
        ..a.clone()
    };
    w.publish(&second, &[head(1, 1.0)]);
    let got = received(&mut w, sub.session);
    assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), [0x7002]);

    let taken = w.join_with(JoinRequest {
        room: "r".into(),
        ssrcs: vec![0x7001],
        ..JoinRequest::default()
    });
    assert_eq!(taken, Err(ControlError::SsrcTaken(0x7001)));
    let twice = w.join_with(JoinRequest {
        room: "r".into(),
        ssrcs: vec![0x7100, 0x7100],
        ..JoinRequest::default()
    });
    assert_eq!(twice, Err(ControlError::SsrcTaken(0x7100)));
    // A stream the session does not own is refused as before.
    let stranger = Joined { ssrc: 0x7ffe, ..a };
    w.publish(&stranger, &[head(1, 1.0)]);
    assert_eq!(w.dropped("ssrc_mismatch"), 1);
}

#[test]
fn a_link_leaving_ends_every_stream_it_carried_with_a_bye() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let peer = link(&mut w, "r", Sends::Containers);
    w.publish_raw(
        &peer,
        &containers(&[(0x6001, vec![head(1, 1.0)]), (0x6002, vec![head(2, 2.0)])]),
    );
    w.sent();
    w.leave(peer.session).expect("leave");
    let mut byes: Vec<u32> = w
        .sent()
        .into_iter()
        .filter(|s| s.to == sub.session && s.class == PacketClass::Rtcp)
        .flat_map(|s| rtcp::parse_compound(&s.bytes).expect("rtcp"))
        .flat_map(|item| match item {
            RtcpItem::Bye { ssrcs } => ssrcs,
            _ => Vec::new(),
        })
        .collect();
    byes.sort_unstable();
    assert_eq!(byes, [0x6001, 0x6002]);
    assert_eq!(
        w.relay.session_by_ssrc(0x6001),
        None,
        "the SSRCs are free again"
    );
    assert!(w.relay.room_info("r").expect("room").streams.is_empty());
    assert!(
        w.events()
            .iter()
            .all(|e| !matches!(e, Event::SessionClosed(_)))
    );
}

#[test]
fn a_bye_from_a_link_ends_only_the_streams_it_owns() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let owner = w.join("r", true, false);
    let peer = link(&mut w, "r", Sends::Containers);
    w.publish(&owner, &[head(1, 1.0)]);
    w.publish_raw(&peer, &containers(&[(0x6101, vec![head(1, 1.0)])]));
    w.sent();
    w.rtcp(&peer, |b| {
        rtcp::write_bye(b, &[0x6101, owner.ssrc]).expect("bye");
    });
    let streams = w.streams("r");
    assert_eq!(
        streams,
        [owner.ssrc],
        "the link's sender ended, the other stayed"
    );
    assert!(w.sent().iter().any(|s| s.to == sub.session));
}

#[test]
fn a_stream_that_starts_again_under_its_ssrc_is_numbered_on_for_each_subscriber() {
    let mut w = World::new();
    let subscriber = w.join("r", false, true);
    let player = || JoinRequest {
        room: "r".into(),
        identity: "player".into(),
        publish: true,
        ssrc: Some(0x00c0_ffee),
        require_ssrc: true,
        ..JoinRequest::default()
    };
    let first = w.join_with(player()).unwrap();
    for i in 0..5 {
        w.publish_seq(
            &first,
            40_000 + i,
            &wire::encode(&[head(1, 1.0)], Dialect::Draft01).unwrap(),
        );
    }
    let seqs = |w: &mut World| -> Vec<u16> {
        w.sent()
            .iter()
            .filter(|s| s.to == subscriber.session && s.class == PacketClass::Rtp)
            .map(|s| s.rtp().sequence_number())
            .collect()
    };
    let before = seqs(&mut w);
    let last = *before
        .last()
        .expect("the first stream reached the subscriber");
    // The player leaves and comes back with the same SSRC, its numbering started afresh
    // far below: the subscriber's numbering of that SSRC goes on, never back.
    w.leave(first.session).unwrap();
    let again = w.join_with(player()).unwrap();
    w.sent();
    for i in 0..3 {
        w.publish_seq(
            &again,
            7 + i,
            &wire::encode(&[head(1, 2.0)], Dialect::Draft01).unwrap(),
        );
    }
    let after = seqs(&mut w);
    assert_eq!(
        after.first().copied(),
        Some(last.wrapping_add(1)),
        "{before:?} then {after:?}"
    );
}

/// A sender that moved to another node comes in through that node's link while the link
/// from its old node, not yet found lost, still holds its SSRC: once the old link has
/// carried nothing of it for `LINK_TAKEOVER_QUIET`, the new link takes the stream over
/// (its objects kept), and the old one may no longer update it. Within that time the
/// stream stays with the link that carried it last.
#[test]
fn a_stream_quiet_on_one_link_is_taken_over_by_the_link_that_carries_it_now() {
    let mut w = World::new();
    let sub = w.join("r", false, true);
    let old = link(&mut w, "r", Sends::Containers);
    let new = link(&mut w, "r", Sends::Containers);
    w.publish_raw(&old, &containers(&[(0xaaaa, vec![head(1, 1.0)])]));
    assert_eq!(received(&mut w, sub.session).len(), 1);

    // Too soon: the old link carried it just now.
    w.publish_raw(&new, &containers(&[(0xaaaa, vec![head(1, 2.0)])]));
    assert_eq!(w.dropped("ssrc_mismatch"), 1);
    assert!(received(&mut w, sub.session).is_empty());
    assert_eq!(w.relay.session_by_ssrc(0xaaaa), Some(old.session));

    w.advance(gsrelay::relay::LINK_TAKEOVER_QUIET);
    w.publish_raw(&new, &containers(&[(0xaaaa, vec![head(1, 3.0)])]));
    let got = received(&mut w, sub.session);
    assert_eq!(got.len(), 1, "taken over: {got:?}");
    assert_eq!((got[0].0, x_of(&got[0].1[0])), (0xaaaa, 3.0));
    assert_eq!(w.relay.session_by_ssrc(0xaaaa), Some(new.session));

    // The old link's stale copy is refused now, and the stream keeps its state.
    w.publish_raw(&old, &containers(&[(0xaaaa, vec![head(1, 0.5)])]));
    assert_eq!(w.dropped("ssrc_mismatch"), 2);
    assert!(received(&mut w, sub.session).is_empty());
    let info = w.relay.room_info("r").expect("room");
    assert_eq!(info.streams.len(), 1);
    assert_eq!(info.streams[0].objects, 1);
}

/// A link's claim is only ever taken from another link of the same room: a client's own
/// stream, or a link's of another room, is never handed over however long it was quiet.
#[test]
fn only_a_quiet_links_stream_of_the_same_room_is_taken_over() {
    let mut w = World::new();
    let owner = w.join("r", true, false);
    let elsewhere = link(&mut w, "other", Sends::Containers);
    let peer = link(&mut w, "r", Sends::Containers);
    w.publish(&owner, &[head(1, 1.0)]);
    w.publish_raw(&elsewhere, &containers(&[(0xcccc, vec![head(2, 1.0)])]));
    w.advance(gsrelay::relay::LINK_TAKEOVER_QUIET * 4);
    w.publish_raw(
        &peer,
        &containers(&[
            (owner.ssrc, vec![head(1, 9.0)]),
            (0xcccc, vec![head(2, 9.0)]),
        ]),
    );
    assert_eq!(w.dropped("ssrc_mismatch"), 2);
    assert_eq!(w.relay.session_by_ssrc(owner.ssrc), Some(owner.session));
    assert_eq!(w.relay.session_by_ssrc(0xcccc), Some(elsewhere.session));
}
