//! Replicas of one room joined by links, in simulated time: two and three relay cores,
//! each holding a link session for every peer (a full mesh). Towards a link a replica
//! sends, as its aggregated stream of containers, what its own sessions publish; from a
//! link, containers become the senders' streams. Nothing loops, every replica's cache is
//! whole, a late joiner anywhere gets the room from its own replica, a BYE crosses, and
//! the sequence numbers a subscriber sees stay continuous.

mod support;

use gsrelay::rtp::PacketClass;
use gsrelay::rtp::rtcp::{self, RtcpItem};
use gsrelay::wire::Dialect;
use gsrelay::wire::Object;
use gsrelay::{Area, Input, Interest, JoinRequest, Joined, RelayConfig};
use std::time::Duration;
use support::{Sent, World, head, x_of};

/// One replica and its links: `links[k]` is its session for replica `k`.
struct Replica {
    w: World,
    links: Vec<Option<Joined>>,
}

/// `n` replicas of room "r", each with a link session for every other, joined with the
/// peer's relay SSRC (the SSRC of the aggregated stream the peer sends it).
fn mesh(n: usize) -> Vec<Replica> {
    mesh_with(n, RelayConfig::default())
}

/// [`mesh`] with replicas configured by `cfg`.
fn mesh_with(n: usize, cfg: RelayConfig) -> Vec<Replica> {
    let mut replicas: Vec<Replica> = (0..n).map(|k| replica_with(k, n, cfg.clone())).collect();
    for a in 0..n {
        for b in a + 1..n {
            connect(&mut replicas, a, b);
        }
    }
    replicas
}

/// Replica `k` of room "r", with room for links to `n` replicas and none yet.
fn replica(k: usize, n: usize) -> Replica {
    replica_with(k, n, RelayConfig::default())
}

/// [`replica`] configured by `cfg`.
fn replica_with(k: usize, n: usize, cfg: RelayConfig) -> Replica {
    Replica {
        w: World::seeded(cfg, 11 + k as u64 * 101),
        links: vec![None; n],
    }
}

/// Links replicas `a` and `b`: each joins a link session for the other.
fn connect(rs: &mut [Replica], a: usize, b: usize) {
    for (k, peer) in [(a, b), (b, a)] {
        let ssrc = rs[peer].w.relay.relay_ssrc();
        let link = rs[k]
            .w
            .join_with(JoinRequest::link("r", format!("replica-{peer}"), ssrc))
            .expect("link joins");
        rs[k].links[peer] = Some(link);
    }
}

/// Carries what each replica sent its links to the peers, as input from the peer's link
/// session for it, until nothing more crosses; returns what the other sessions were sent,
/// per replica, as (session, class, bytes).
fn settle(rs: &mut [Replica]) -> Vec<Vec<(u64, PacketClass, Vec<u8>)>> {
    let n = rs.len();
    let mut local: Vec<Vec<(u64, PacketClass, Vec<u8>)>> = vec![Vec::new(); n];
    for _ in 0..8 {
        let mut crossing = Vec::new();
        for k in 0..n {
            rs[k].w.end_batch();
            for s in rs[k].w.sent() {
                let peer = rs[k]
                    .links
                    .iter()
                    .position(|l| l.as_ref().is_some_and(|l| l.session == s.to));
                match peer {
                    Some(peer) => crossing.push((k, peer, s.class, s.bytes)),
                    None => local[k].push((s.to, s.class, s.bytes)),
                }
            }
        }
        if crossing.is_empty() {
            break;
        }
        for (from, to, class, bytes) in crossing {
            let link = rs[to].links[from].as_ref().expect("link").session;
            let input = match class {
                PacketClass::Rtp => Input::Rtp {
                    from: link,
                    packet: &bytes,
                },
                _ => Input::Rtcp {
                    from: link,
                    packet: &bytes,
                },
            };
            rs[to].w.control(input).expect("packets are always taken");
        }
    }
    local
}

/// The RTP packets session `to` was sent, as (SSRC, sequence number, objects' x).
fn rtp_to(sent: &[(u64, PacketClass, Vec<u8>)], to: u64) -> Vec<(u32, u16, Vec<f32>)> {
    sent.iter()
        .filter(|(s, c, _)| *s == to && *c == PacketClass::Rtp)
        .map(|(_, _, b)| {
            let p = gsrelay::rtp::RtpPacket::parse(b).expect("rtp");
            let objects = gsrelay::wire::decode(p.payload(), Dialect::Draft01).expect("payload");
            (
                p.ssrc(),
                p.sequence_number(),
                objects.iter().map(x_of).collect(),
            )
        })
        .collect()
}

#[test]
fn two_replicas_converge_and_a_late_joiner_on_either_gets_the_whole_room() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    let bob = rs[1].w.join("r", true, false);
    let sub_b = rs[1].w.join("r", false, true);
    rs[0].w.publish(&alice, &[head(1, 1.0)]);
    rs[1].w.publish(&bob, &[head(2, 2.0)]);
    let sent = settle(&mut rs);
    let got = rtp_to(&sent[1], sub_b.session);
    assert!(
        got.iter()
            .any(|(ssrc, _, xs)| *ssrc == alice.ssrc && xs == &[1.0]),
        "a subscriber on B gets A's publisher under its own SSRC: {got:?}"
    );
    // Both caches hold both publishers' state.
    for r in &rs {
        let streams = r.w.streams("r");
        let mut want = vec![alice.ssrc, bob.ssrc];
        want.sort_unstable();
        assert_eq!(streams, want);
    }
    // A late joiner on A asks A for everything and gets B's publisher from A's cache,
    // with no request crossing the link.
    let late = rs[0].w.join("r", false, true);
    let relay = rs[0].w.relay.relay_ssrc();
    rs[0].w.fir(&late, relay, 1);
    let mut snapshot = Vec::new();
    for _ in 0..20 {
        rs[0].w.advance(Duration::from_millis(5));
        snapshot.extend(rtp_to(
            &rs[0]
                .w
                .sent()
                .into_iter()
                .map(|s| (s.to, s.class, s.bytes))
                .collect::<Vec<_>>(),
            late.session,
        ));
    }
    let mut ssrcs: Vec<u32> = snapshot.iter().map(|p| p.0).collect();
    ssrcs.sort_unstable();
    ssrcs.dedup();
    let mut want = vec![alice.ssrc, bob.ssrc];
    want.sort_unstable();
    assert_eq!(ssrcs, want, "the whole room, from A's own cache");
}

#[test]
fn three_replicas_in_a_mesh_never_loop_a_stream_back() {
    let mut rs = mesh(3);
    let alice = rs[0].w.join("r", true, false);
    for r in &mut rs[1..] {
        r.w.join("r", false, true);
    }
    for step in 0..5 {
        rs[0].w.publish(&alice, &[head(1, step as f32)]);
        settle(&mut rs);
    }
    // Replica C got A's stream from A's link only: B never forwarded it (B's copy is
    // carried, and a link never gets a carried stream), so C's link for B owns nothing
    // of it and nothing was refused as another's stream.
    for (k, r) in rs.iter().enumerate().skip(1) {
        let owner = r.w.relay.session_by_ssrc(alice.ssrc);
        let link_a = r.links[0].as_ref().expect("link").session;
        assert_eq!(
            owner,
            Some(link_a),
            "replica {k} holds A's stream through A"
        );
        assert_eq!(r.w.dropped("ssrc_mismatch"), 0, "replica {k}");
        assert_eq!(r.w.dropped("late"), 0);
    }
    // Nothing reached A from its own publisher.
    assert_eq!(rs[0].w.dropped("ssrc_mismatch"), 0);
    assert_eq!(
        rs[0].w.relay.session_by_ssrc(alice.ssrc),
        Some(alice.session)
    );
}

#[test]
fn a_subscriber_behind_a_link_sees_continuous_sequence_numbers() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    let bob = rs[0].w.join("r", true, false);
    let sub_b = rs[1].w.join("r", false, true);
    let mut seen = Vec::new();
    for step in 0..30 {
        // Alice and Bob take turns on A, each in a packet of its own towards the link,
        // so the link's numbering counts both: Alice's stream must not show its gaps.
        rs[0].w.publish(&alice, &[head(1, step as f32)]);
        let sent = settle(&mut rs);
        seen.extend(
            rtp_to(&sent[1], sub_b.session)
                .into_iter()
                .filter(|p| p.0 == alice.ssrc),
        );
        rs[0].w.publish(&bob, &[head(2, step as f32)]);
        settle(&mut rs);
    }
    assert!(seen.len() >= 20, "{} packets of Alice's stream", seen.len());
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1].1,
            pair[0].1.wrapping_add(1),
            "continuous numbering: {pair:?}"
        );
    }
}

#[test]
fn a_bye_at_home_ends_the_stream_on_every_replica() {
    let mut rs = mesh(3);
    let alice = rs[0].w.join("r", true, false);
    let subs: Vec<Joined> = (1..3).map(|k| rs[k].w.join("r", false, true)).collect();
    rs[0].w.publish(&alice, &[head(1, 1.0)]);
    settle(&mut rs);
    rs[0].w.leave(alice.session).expect("leave");
    let sent = settle(&mut rs);
    for k in 1..3 {
        let byes: Vec<u32> = sent[k]
            .iter()
            .filter(|(s, c, _)| *s == subs[k - 1].session && *c == PacketClass::Rtcp)
            .flat_map(|(_, _, b)| rtcp::parse_compound(b).expect("rtcp"))
            .flat_map(|i| match i {
                RtcpItem::Bye { ssrcs } => ssrcs,
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(byes, [alice.ssrc], "replica {k}'s subscriber hears the BYE");
        let info = rs[k].w.relay.room_info("r").expect("room");
        assert!(info.streams.is_empty(), "replica {k} dropped the stream");
    }
}

#[test]
fn a_late_or_repeated_link_packet_is_dropped_whole() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    rs[0].w.publish(&alice, &[head(1, 1.0)]);
    rs[0].w.end_batch();
    let first: Vec<Vec<u8>> = rs[0]
        .w
        .sent()
        .into_iter()
        .filter(|s| s.class == PacketClass::Rtp)
        .map(|s| s.bytes)
        .collect();
    let link = rs[1].links[0].as_ref().expect("link").session;
    let packet = first.first().expect("a packet to the link");
    rs[1].w.rtp_from(link, packet);
    rs[1].w.rtp_from(link, packet);
    assert_eq!(rs[1].w.dropped("duplicate"), 1);
    let info = rs[1].w.relay.room_info("r").expect("room");
    assert_eq!(info.streams.len(), 1);
}

/// Each sender's objects' x in the containers of the RTP packets `link` was sent.
fn carried_to(sent: &[Sent], link: u64) -> Vec<(u32, f32)> {
    sent.iter()
        .filter(|s| s.to == link && s.class == PacketClass::Rtp)
        .flat_map(|s| {
            let p = gsrelay::rtp::RtpPacket::parse(&s.bytes).expect("rtp");
            gsrelay::wire::decode(p.payload(), Dialect::Draft01).expect("payload")
        })
        .flat_map(|o| match o {
            Object::Container(c) => c.objects.iter().map(|o| (c.ssrc, x_of(o))).collect(),
            _ => Vec::new(),
        })
        .collect()
}

#[test]
fn a_link_gets_its_replicas_own_state_again_every_link_refresh() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    let bob = rs[1].w.join("r", true, false);
    rs[0].w.publish(&alice, &[head(1, 1.0), head(2, 2.0)]);
    rs[1].w.publish(&bob, &[head(3, 3.0)]);
    settle(&mut rs);
    let link_b = rs[0].links[1].as_ref().expect("link").session;
    let every = RelayConfig::default().link_refresh;
    // Nothing is published for a while: within one refresh interval the link is sent
    // Alice's whole state again, and never Bob's (he is B's own, carried here).
    let mut refreshed = Vec::new();
    let step = Duration::from_millis(50);
    for _ in 0..(every.as_millis() / step.as_millis() + 2) {
        rs[0].w.advance(step);
        rs[0].w.end_batch();
        refreshed.extend(carried_to(&rs[0].w.sent(), link_b));
    }
    refreshed.sort_by(|a, b| a.1.total_cmp(&b.1));
    refreshed.dedup();
    assert_eq!(refreshed, [(alice.ssrc, 1.0), (alice.ssrc, 2.0)]);
    // And not more often than that: over one more interval, at most one refresh.
    let mut count = 0;
    for _ in 0..(every.as_millis() / step.as_millis()) {
        rs[0].w.advance(step);
        rs[0].w.end_batch();
        count += carried_to(&rs[0].w.sent(), link_b).len();
    }
    assert!(
        count <= 2,
        "{count} objects in one interval: one refresh at most"
    );
}

#[test]
fn a_replica_that_joins_the_mesh_late_gets_the_whole_room_from_its_peers() {
    let mut rs: Vec<Replica> = (0..3).map(|k| replica(k, 3)).collect();
    connect(&mut rs, 0, 1);
    let alice = rs[0].w.join("r", true, false);
    let bob = rs[1].w.join("r", true, false);
    rs[0].w.publish(&alice, &[head(1, 1.0)]);
    rs[1].w.publish(&bob, &[head(2, 2.0)]);
    settle(&mut rs);
    // C joins the mesh: each peer sends its new link its own state at once, so C's
    // cache holds the whole room after one exchange, with no publisher sending again.
    connect(&mut rs, 2, 0);
    connect(&mut rs, 2, 1);
    for r in &mut rs {
        r.w.advance(Duration::from_millis(1));
    }
    settle(&mut rs);
    let mut want = vec![alice.ssrc, bob.ssrc];
    want.sort_unstable();
    assert_eq!(rs[2].w.streams("r"), want);
    // Each stream is owned by its home's link: nothing came the long way round.
    assert_eq!(
        rs[2].w.relay.session_by_ssrc(alice.ssrc),
        rs[2].links[0].as_ref().map(|l| l.session)
    );
    assert_eq!(
        rs[2].w.relay.session_by_ssrc(bob.ssrc),
        rs[2].links[1].as_ref().map(|l| l.session)
    );
}

#[test]
fn a_replica_whose_last_local_session_leaves_drops_out_and_its_streams_end_everywhere() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    rs[1].w.join("r", false, true);
    rs[0].w.publish(&alice, &[head(1, 1.0)]);
    settle(&mut rs);
    // Alice leaves A; A then holds only its link, and its shell takes the link down on
    // both sides (what `transport::link` does): B's subscriber hears the BYE, and
    // neither replica keeps anything of the room but B's own subscriber.
    rs[0].w.leave(alice.session).expect("leave");
    settle(&mut rs);
    for (k, r) in rs.iter_mut().enumerate() {
        let link = r.links[1 - k].take().expect("link").session;
        r.w.leave(link).expect("link leaves");
    }
    settle(&mut rs);
    assert!(
        rs[0].w.relay.room_info("r").is_none(),
        "A holds nothing of the room"
    );
    let info = rs[1]
        .w
        .relay
        .room_info("r")
        .expect("B keeps its subscriber");
    assert!(info.streams.is_empty());
    assert_eq!(info.sessions.len(), 1, "B's subscriber alone");
}

#[test]
fn links_keep_each_other_alive_with_their_reports_when_nothing_is_published() {
    // Two replicas holding only their links (no shell here closes an emptied room's).
    let mut rs = mesh(2);
    for r in &mut rs {
        // The links' reports cross like any packet.
        r.w.keep_reports = true;
    }
    let timeout = RelayConfig::default().session_timeout;
    let step = Duration::from_millis(500);
    let mut waited = Duration::ZERO;
    while waited < timeout * 2 {
        for r in &mut rs {
            r.w.advance(step);
        }
        settle(&mut rs);
        waited += step;
    }
    for (k, r) in rs.iter().enumerate() {
        let link = r.links[1 - k].as_ref().expect("link").session;
        assert!(
            r.w.relay.session(link).is_some(),
            "replica {k}'s link outlived {:?} of silence from publishers",
            timeout * 2
        );
    }
}

/// How many times each object was sent to `link`, by objectID.
fn sends_by_object(sent: &[Sent], link: u64) -> std::collections::BTreeMap<u64, usize> {
    let mut n = std::collections::BTreeMap::new();
    for s in sent
        .iter()
        .filter(|s| s.to == link && s.class == PacketClass::Rtp)
    {
        let p = gsrelay::rtp::RtpPacket::parse(&s.bytes).expect("rtp");
        for o in gsrelay::wire::decode(p.payload(), Dialect::Draft01).expect("payload") {
            if let Object::Container(c) = o {
                for o in c.objects {
                    if let Object::Head1(h) = o {
                        *n.entry(h.id).or_default() += 1;
                    }
                }
            }
        }
    }
    n
}

#[test]
fn objects_outside_the_peers_interest_union_cross_only_at_the_refresh_rate() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    // B's only subscriber looks within 10 m of the origin.
    rs[1]
        .w
        .join_with(JoinRequest {
            room: "r".into(),
            identity: "near".into(),
            subscribe: true,
            interest: Interest {
                area: Some(Area {
                    center: Some([0.0; 3]),
                    radius: Some(10.0),
                    ..Area::default()
                }),
                ..Interest::default()
            },
            ..JoinRequest::default()
        })
        .expect("join");
    // A sweep sends each replica's union over its links.
    for r in &mut rs {
        r.w.advance(RelayConfig::default().sweep_interval);
    }
    settle(&mut rs);
    let link_b = rs[0].links[1].as_ref().expect("link").session;
    let step = Duration::from_millis(50);
    let updates = 40; // two seconds at 20 Hz
    let mut sent = Vec::new();
    for i in 0..updates {
        let x = i as f32 * 0.1;
        rs[0].w.publish(&alice, &[head(1, x), head(2, 1000.0 + x)]);
        rs[0].w.advance(step);
        rs[0].w.end_batch();
        sent.extend(rs[0].w.sent());
    }
    let n = sends_by_object(&sent, link_b);
    assert_eq!(
        n.get(&1),
        Some(&updates),
        "the near object crosses at every update"
    );
    let far = n.get(&2).copied().unwrap_or(0);
    assert!(
        (1..=3).contains(&far),
        "the far object crosses with the refresh only, once a second: {far} times in 2 s"
    );
}

#[test]
fn a_union_from_a_client_or_one_that_does_not_decode_is_dropped_and_counted() {
    let mut rs = mesh(2);
    let client = rs[0].w.join("r", true, true);
    let link = rs[0].links[1].as_ref().expect("link").clone();
    let mut everything = Vec::new();
    gsrelay::rtp::rtcp::write_app(&mut everything, 0, client.ssrc, *b"GSIU", &[1, 0, 0, 0])
        .expect("app");
    rs[0].w.rtcp_from(client.session, &everything);
    assert_eq!(rs[0].w.dropped("union_from_sender"), 1);
    // A link signs with its peer's relay SSRC.
    let peer = rs[1].w.relay.relay_ssrc();
    let mut garbage = Vec::new();
    gsrelay::rtp::rtcp::write_app(&mut garbage, 0, peer, *b"GSIU", &[9, 9, 9, 9]).expect("app");
    rs[0].w.rtcp_from(link.session, &garbage);
    assert_eq!(rs[0].w.dropped("union_malformed"), 1);
    // Signed with another SSRC than the link's own.
    let mut forged = Vec::new();
    gsrelay::rtp::rtcp::write_app(&mut forged, 0, client.ssrc, *b"GSIU", &[1, 0, 0, 0])
        .expect("app");
    rs[0].w.rtcp_from(link.session, &forged);
    assert_eq!(rs[0].w.dropped("ssrc_mismatch"), 1);
}

#[test]
fn a_links_packets_name_no_csrcs_its_containers_name_the_senders() {
    let mut rs = mesh(2);
    let alice = rs[0].w.join("r", true, false);
    let sub = rs[0].w.join_with(JoinRequest {
        room: "r".into(),
        identity: "sub".into(),
        subscribe: true,
        interest: Interest {
            delivery: gsrelay::Delivery::aggregated(Some(0)),
            ..Interest::default()
        },
        ..JoinRequest::default()
    });
    let sub = sub.expect("join").session;
    rs[0].w.publish(&alice, &[head(1, 1.0)]);
    rs[0].w.end_batch();
    let link = rs[0].links[1].as_ref().expect("link").session;
    let mut csrcs = std::collections::BTreeMap::new();
    for s in rs[0].w.sent() {
        if s.class == PacketClass::Rtp {
            csrcs.insert(s.to, s.rtp().csrc_count());
        }
    }
    assert_eq!(csrcs.get(&link), Some(&0), "a link's packet lists no CSRC");
    assert_eq!(
        csrcs.get(&sub),
        Some(&1),
        "a subscriber's names Alice (RFC 3550 §5.1)"
    );
}

#[test]
fn two_rooms_link_the_same_two_replicas_each_on_its_own_links() {
    let mut rs = mesh(2);
    // Room "q" on the same two replicas: its links are known by the same peer SSRCs.
    let mut q_links = Vec::new();
    for (k, peer) in [(0, 1), (1, 0)] {
        let ssrc = rs[peer].w.relay.relay_ssrc();
        let link = rs[k]
            .w
            .join_with(JoinRequest::link("q", format!("replica-{peer}"), ssrc))
            .expect("a second room's link joins");
        q_links.push(link.session);
    }
    let alice = rs[0].w.join("q", true, false);
    let sub = rs[1].w.join("q", false, true);
    rs[0].w.publish(&alice, &[head(1, 7.0)]);
    // Carry A's packets for q's link to B as input from B's link of q.
    rs[0].w.end_batch();
    for s in rs[0].w.sent() {
        if s.to == q_links[0] && s.class == PacketClass::Rtp {
            rs[1].w.rtp_from(q_links[1], &s.bytes);
        }
    }
    rs[1].w.end_batch();
    let got: Vec<(u64, PacketClass, Vec<u8>)> = rs[1]
        .w
        .sent()
        .into_iter()
        .map(|s| (s.to, s.class, s.bytes))
        .collect();
    let to_sub = rtp_to(&got, sub.session);
    assert!(
        to_sub
            .iter()
            .any(|(ssrc, _, xs)| *ssrc == alice.ssrc && xs == &[7.0]),
        "B's subscriber of q gets Alice through q's link: {to_sub:?}"
    );
    assert!(
        rs[1].w.relay.room_info("r").is_some(),
        "room r keeps its own links"
    );
}

#[test]
fn no_session_may_take_the_ssrc_a_peer_replica_sends_from() {
    let peer = 0xabcd_1234;
    let mut relay = gsrelay::Relay::new(RelayConfig::default(), 3).with_peer_ssrcs(&[peer]);
    let now = std::time::Instant::now();
    let ask = |require_ssrc| {
        Input::Join(JoinRequest {
            room: "r".into(),
            publish: true,
            ssrc: Some(peer),
            require_ssrc,
            ..JoinRequest::default()
        })
    };
    assert!(matches!(
        relay.handle_input(now, ask(true)),
        Err(gsrelay::ControlError::SsrcTaken(s)) if s == peer
    ));
    let joined = relay
        .handle_input(now, ask(false))
        .expect("join")
        .joined()
        .expect("joined");
    assert_ne!(joined.ssrc, peer, "another SSRC is drawn");
    // The peer's links still send from it.
    let link = relay
        .handle_input(
            now,
            Input::Join(JoinRequest::link("r", "peer".into(), peer)),
        )
        .expect("link joins")
        .joined()
        .expect("joined");
    assert_ne!(link.ssrc, peer);
}

#[test]
fn an_object_its_home_expired_expires_on_every_replica_two_refreshes_later() {
    let cfg = RelayConfig {
        object_ttl: Duration::from_secs(5),
        ..RelayConfig::default()
    };
    let mut rs = mesh_with(2, cfg.clone());
    let alice = rs[0].w.join("r", true, false);
    rs[1].w.join("r", false, true);
    // Object 1 once; object 2 all along, which keeps Alice's stream alive.
    rs[0].w.publish(&alice, &[head(1, 1.0), head(2, 0.0)]);
    settle(&mut rs);
    let objects = |r: &Replica| {
        r.w.relay.room_info("r").map_or(0, |i| {
            i.streams
                .iter()
                .filter(|s| s.ssrc == alice.ssrc)
                .map(|s| s.objects)
                .sum::<usize>()
        })
    };
    let step = Duration::from_millis(250);
    let mut t = Duration::ZERO;
    let mut expired_at = [None, None];
    while t < cfg.object_ttl * 3 {
        rs[0].w.publish(&alice, &[head(2, t.as_secs_f32())]);
        for r in &mut rs {
            r.w.advance(step);
        }
        settle(&mut rs);
        t += step;
        for (k, r) in rs.iter().enumerate() {
            if objects(r) == 1 && expired_at[k].is_none() {
                expired_at[k] = Some(t);
            }
        }
        // While its home holds it, the replica holds it: the refresh keeps it.
        if expired_at[0].is_none() {
            assert_eq!(
                objects(&rs[1]),
                2,
                "at {t:?} the replica lost object 1 early"
            );
        }
    }
    let (home, replica) = (
        expired_at[0].expect("home"),
        expired_at[1].expect("replica"),
    );
    assert!(home >= cfg.object_ttl, "home expired it at {home:?}");
    let later = replica - home;
    assert!(
        later <= cfg.link_refresh * 2 + cfg.sweep_interval * 2,
        "the replica expired it {later:?} after its home"
    );
}
