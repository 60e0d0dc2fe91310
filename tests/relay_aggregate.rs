//! Aggregated delivery in the sans-I/O core, in simulated time: one stream from the relay's
//! SSRC carrying many senders' objects in containers.

mod support;

use gsrelay::rtp::PacketClass;
use gsrelay::rtp::rtcp::{self, RtcpItem};
use gsrelay::wire::container::container_len;
use gsrelay::wire::{self, Container, Dialect, Object};
use gsrelay::{ControlError, Delivery, Interest, JoinRequest, Joined, RelayConfig};
use std::time::Duration;
use support::{Sent, World, head, x_of};

const DELAY: Duration = Duration::from_millis(10);

fn aggregated(max_delay_ms: Option<u32>) -> Interest {
    Interest {
        delivery: Delivery::aggregated(max_delay_ms),
        ..Interest::default()
    }
}

/// Joins `room` with `interest`, publishing and/or subscribing, under SSRC `ssrc`.
fn join(w: &mut World, ssrc: u32, publish: bool, subscribe: bool, interest: Interest) -> Joined {
    w.join_with(JoinRequest {
        room: "r".into(),
        identity: format!("p{ssrc}"),
        publish,
        subscribe,
        ssrc: Some(ssrc),
        require_ssrc: true,
        interest,
        ..JoinRequest::default()
    })
    .expect("join")
}

fn publisher(w: &mut World, ssrc: u32) -> Joined {
    join(w, ssrc, true, false, Interest::default())
}

/// The containers of an aggregated packet, checking it comes from the relay's SSRC.
fn containers(w: &World, s: &Sent) -> Vec<Container> {
    assert_eq!(s.class, PacketClass::Rtp);
    assert_eq!(
        s.rtp().ssrc(),
        w.relay.relay_ssrc(),
        "from the relay's SSRC"
    );
    s.objects(Dialect::Draft01)
        .into_iter()
        .map(|o| match o {
            Object::Container(c) => c,
            other => panic!("expected a container, got {other:?}"),
        })
        .collect()
}

/// Packets sent to `to`.
fn to(sent: &[Sent], who: &Joined) -> Vec<usize> {
    (0..sent.len())
        .filter(|i| sent[*i].to == who.session)
        .collect()
}

/// Wire size of a Head1 with a one-byte objectID.
const HEAD_BYTES: usize = 35;

#[test]
fn a_packet_closes_when_the_next_update_would_not_fit_and_waits_for_the_deadline() {
    let ssrcs = [
        0x1000_0001u32,
        0x1000_0002,
        0x1000_0003,
        0x1000_0004,
        0x1000_0005,
    ];
    let one = container_len(ssrcs[0], HEAD_BYTES);
    // Room for exactly four senders' containers.
    let mut w = World::with(RelayConfig {
        payload_budget: 4 * one + one / 2,
        ..RelayConfig::default()
    });
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let pubs: Vec<Joined> = ssrcs.iter().map(|s| publisher(&mut w, *s)).collect();
    w.sent();
    for (i, p) in pubs.iter().enumerate() {
        w.publish(p, &[head(1, i as f32)]);
        assert!(
            w.sent().is_empty(),
            "a closed packet waits for the deadline with the open one"
        );
    }
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(
        out.len(),
        2,
        "the closed packet and the open one go together"
    );
    assert!(out.iter().all(|s| s.to == sub.session));
    let got = containers(&w, &out[0]);
    let senders: Vec<u32> = got.iter().map(|c| c.ssrc).collect();
    assert_eq!(senders, ssrcs[..4], "the fifth did not fit");
    for (i, c) in got.iter().enumerate() {
        assert_eq!(c.objects, vec![head(1, i as f32)]);
    }
    assert_eq!(out[0].rtp().payload().len(), 4 * one);
    let csrcs: Vec<u32> = out[0].rtp().csrcs().collect();
    assert_eq!(csrcs, ssrcs[..4], "CSRCs name the contributing senders");
    assert_eq!(containers(&w, &out[1])[0].ssrc, ssrcs[4]);
    let seqs: Vec<u16> = out.iter().map(|s| s.rtp().sequence_number()).collect();
    assert_eq!(seqs[1], seqs[0].wrapping_add(1), "numbered in order");
}

#[test]
fn the_packets_of_one_deadline_but_the_last_are_padded_to_one_size() {
    let senders = [0x1000_0001u32, 0x1000_0002, 0x1000_0003, 0x1000_0004];
    let late = [0x1000_0005u32, 0x1000_0006];
    let one = container_len(senders[0], HEAD_BYTES);
    let mut w = World::with(RelayConfig {
        payload_budget: 4 * one + one / 2,
        ..RelayConfig::default()
    });
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let pubs: Vec<Joined> = senders.iter().map(|s| publisher(&mut w, *s)).collect();
    let more: Vec<Joined> = late.iter().map(|s| publisher(&mut w, *s)).collect();
    w.sent();
    for (i, p) in pubs.iter().take(3).enumerate() {
        w.publish(p, &[head(1, i as f32)]);
    }
    // Two objects in one packet do not fit beside the three: the first packet closes
    // short, and the next one, with two more senders, ends up the longer.
    w.publish(&pubs[3], &[head(1, 3.0), head(2, 3.0)]);
    for p in &more {
        w.publish(p, &[head(1, 5.0)]);
    }
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|s| s.to == sub.session));
    let (first, last) = (out[0].rtp(), out[1].rtp());
    assert!(
        first.has_padding() && !last.has_padding(),
        "the first is padded, the last never"
    );
    assert_eq!(
        out[0].bytes.len(),
        out[1].bytes.len(),
        "one size: one GSO buffer"
    );
    assert_eq!(first.payload().len(), 3 * one, "padding is not payload");
    let got: Vec<u32> = containers(&w, &out[0]).iter().map(|c| c.ssrc).collect();
    assert_eq!(got, senders[..3]);
    let got: Vec<u32> = containers(&w, &out[1]).iter().map(|c| c.ssrc).collect();
    assert_eq!(got, [senders[3], late[0], late[1]]);
}

#[test]
fn a_packet_goes_when_its_oldest_update_reaches_the_delay() {
    let mut w = World::new();
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(Some(25)));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    w.sent();
    let t0 = w.now;
    w.publish(&a, &[head(1, 1.0)]);
    w.advance(Duration::from_millis(10));
    w.publish(&b, &[head(2, 2.0)]);
    assert_eq!(w.relay.poll_timeout(), Some(t0 + Duration::from_millis(25)));
    w.advance(Duration::from_millis(14));
    assert!(
        w.sent().is_empty(),
        "not before the oldest update's deadline"
    );
    w.advance(Duration::from_millis(1));
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, sub.session);
    let got = containers(&w, &out[0]);
    assert_eq!(
        got,
        vec![
            Container {
                ssrc: a.ssrc,
                objects: vec![head(1, 1.0)]
            },
            Container {
                ssrc: b.ssrc,
                objects: vec![head(2, 2.0)]
            }
        ]
    );
    assert!(
        w.relay.poll_timeout().is_none_or(|t| t > w.now + DELAY),
        "nothing pending"
    );
}

#[test]
fn zero_delay_sends_what_one_input_batch_brought() {
    let mut w = World::new();
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(Some(0)));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    w.sent();
    w.publish(&a, &[head(1, 1.0)]);
    w.publish(&b, &[head(2, 2.0)]);
    assert!(w.sent().is_empty(), "the batch is not over yet");
    assert!(w.relay.poll_timeout().is_some_and(|t| t <= w.now));
    w.end_batch();
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, sub.session);
    assert_eq!(
        containers(&w, &out[0]).len(),
        2,
        "both senders in one packet"
    );
}

#[test]
fn one_source_packet_travels_whole_in_one_container() {
    let one = container_len(0x1000_0001, HEAD_BYTES);
    let mut w = World::with(RelayConfig {
        payload_budget: 5 * one,
        ..RelayConfig::default()
    });
    let _sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    w.sent();
    let a_objects: Vec<Object> = (0..3).map(|i| head(i, 1.0)).collect();
    let b_objects: Vec<Object> = (0..3).map(|i| head(i, 2.0)).collect();
    w.publish(&a, &a_objects);
    w.publish(&b, &b_objects);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(
        out.len(),
        2,
        "b's packet does not fit beside a's and is not split"
    );
    assert_eq!(
        containers(&w, &out[0]),
        vec![Container {
            ssrc: a.ssrc,
            objects: a_objects
        }]
    );
    assert_eq!(
        containers(&w, &out[1]),
        vec![Container {
            ssrc: b.ssrc,
            objects: b_objects
        }]
    );
    // A source packet larger than the budget makes a packet alone, whole.
    let big: Vec<Object> = (0..8).map(|i| head(i, 3.0)).collect();
    w.publish(&a, &big);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert!(out[0].rtp().payload().len() > 5 * one);
    assert_eq!(
        containers(&w, &out[0]),
        vec![Container {
            ssrc: a.ssrc,
            objects: big
        }]
    );
}

#[test]
fn only_the_newest_state_goes_and_packet_mates_stay_with_it() {
    let mut w = World::new();
    let _sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    w.sent();
    w.publish(&a, &[head(1, 1.0), head(2, 1.0)]);
    w.publish(&b, &[head(1, 5.0)]);
    w.publish(&a, &[head(1, 2.0)]);
    w.publish(&a, &[head(1, 3.0), head(3, 3.0)]);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    // Object 1 of a went three times: only its newest state is sent, and object 2 (which
    // came with the first state of object 1) still goes, in the same container.
    assert_eq!(
        containers(&w, &out[0]),
        vec![
            Container {
                ssrc: a.ssrc,
                objects: vec![head(2, 1.0), head(1, 3.0), head(3, 3.0)]
            },
            Container {
                ssrc: b.ssrc,
                objects: vec![head(1, 5.0)]
            }
        ]
    );
}

#[test]
fn a_shared_view_is_built_once_and_nobody_gets_their_own_stream() {
    let mut w = World::new();
    let members: Vec<Joined> = (1..=3)
        .map(|k| join(&mut w, 0x1000_0000 + k, true, true, aggregated(None)))
        .collect();
    w.sent();
    for (k, m) in members.iter().enumerate() {
        w.publish(m, &[head(1, k as f32)]);
    }
    let built = w.metrics().aggregate_payloads.get();
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(
        w.metrics().aggregate_payloads.get(),
        built + 1,
        "built once"
    );
    assert_eq!(out.len(), 3, "one packet per member");
    for m in &members {
        let mine = to(&out, m);
        assert_eq!(mine.len(), 1);
        let s = &out[mine[0]];
        let senders: Vec<u32> = containers(&w, s).iter().map(|c| c.ssrc).collect();
        let others: Vec<u32> = members
            .iter()
            .map(|o| o.ssrc)
            .filter(|x| *x != m.ssrc)
            .collect();
        assert_eq!(senders, others, "every sender but itself");
        assert_eq!(s.rtp().csrcs().collect::<Vec<_>>(), others);
    }
}

#[test]
fn echo_includes_ones_own_container() {
    let mut w = World::new();
    let interest = Interest {
        echo: true,
        ..aggregated(None)
    };
    let me = join(&mut w, 0x1000_0001, true, true, interest);
    w.sent();
    w.publish(&me, &[head(1, 1.0)]);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(containers(&w, &out[0])[0].ssrc, me.ssrc);
}

#[test]
fn fir_for_the_relay_ssrc_gets_a_snapshot_in_aggregated_form_at_once() {
    let mut w = World::new();
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    for i in 0..20u64 {
        w.publish(&a, &[head(i % 4, i as f32)]);
        w.publish(&b, &[head(i % 2, -(i as f32))]);
    }
    let early = join(&mut w, 0x2000_0001, false, true, aggregated(None));
    let late = join(&mut w, 0x2000_0002, false, true, aggregated(None));
    w.sent();
    let relay = w.relay.relay_ssrc();
    w.fir(&late, relay, 1);
    let snap = w.sent();
    assert!(!snap.is_empty(), "sent at once, not at the deadline");
    assert!(
        snap.iter().all(|s| s.to == late.session),
        "only the requester gets it, not the other member of its view"
    );
    let mut state: Vec<(u32, u64, f32)> = snap
        .iter()
        .flat_map(|s| containers(&w, s))
        .flat_map(|c| c.objects.into_iter().map(move |o| (c.ssrc, o)))
        .map(|(ssrc, o)| (ssrc, o.id().unwrap(), x_of(&o)))
        .collect();
    state.sort_by_key(|x| (x.0, x.1));
    let want = vec![
        (a.ssrc, 0, 16.0),
        (a.ssrc, 1, 17.0),
        (a.ssrc, 2, 18.0),
        (a.ssrc, 3, 19.0),
        (b.ssrc, 0, -18.0),
        (b.ssrc, 1, -19.0),
    ];
    assert_eq!(state, want);
    // The live stream continues the snapshot's numbering.
    let last = snap.last().unwrap().rtp().sequence_number();
    w.publish(&a, &[head(0, 99.0)]);
    w.advance(DELAY);
    let out = w.sent();
    let next = &out[to(&out, &late)[0]];
    assert_eq!(next.rtp().sequence_number(), last.wrapping_add(1));
    assert_eq!(to(&out, &early).len(), 1);
    // A PLI naming one sender snapshots that sender only (once the feedback budget's
    // interval since the last snapshot has passed).
    let interval = w.relay.config().snapshot_interval;
    w.advance(interval);
    w.sent();
    w.rtcp(&late, |buf| {
        rtcp::write_pli(buf, late.ssrc, b.ssrc).unwrap();
    });
    let snap = w.sent();
    let senders: Vec<u32> = snap
        .iter()
        .flat_map(|s| containers(&w, s))
        .map(|c| c.ssrc)
        .collect();
    assert_eq!(senders, vec![b.ssrc]);
}

/// Every object in the aggregated packets of `out`, by sender, sorted.
fn all_objects(w: &World, out: &[Sent]) -> Vec<(u32, Object)> {
    let mut v: Vec<(u32, Object)> = out
        .iter()
        .flat_map(|s| containers(w, s))
        .flat_map(|c| c.objects.into_iter().map(move |o| (c.ssrc, o)))
        .collect();
    v.sort_by_key(|(ssrc, o)| (*ssrc, o.id()));
    v
}

#[test]
fn nack_is_repaired_with_the_current_state_of_what_the_packet_carried() {
    let mut w = World::new();
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    w.sent();
    w.publish(&a, &[head(1, 1.0), head(2, 1.0)]);
    w.publish(&b, &[head(7, 1.0)]);
    w.advance(DELAY);
    let lost = w.sent()[0].rtp().sequence_number();
    w.publish(&a, &[head(1, 2.0)]);
    w.advance(DELAY);
    let next = w.sent()[0].rtp().sequence_number();
    assert_eq!(next, lost.wrapping_add(1));
    let relay = w.relay.relay_ssrc();
    w.rtcp(&sub, |buf| {
        rtcp::write_nack(buf, sub.ssrc, relay, &[lost]).unwrap();
    });
    w.advance(DELAY);
    let out = w.sent();
    assert!(!out.is_empty());
    for (i, s) in out.iter().enumerate() {
        assert_eq!(
            s.rtp().sequence_number(),
            next.wrapping_add(1 + i as u16),
            "under fresh numbers, never the lost one"
        );
    }
    assert_eq!(
        all_objects(&w, &out),
        vec![(a.ssrc, head(2, 1.0)), (b.ssrc, head(7, 1.0))],
        "the objects it carried, but object 1, which a later packet carried"
    );
    // Once the repair interval has passed, object 7 is repaired again, with its state
    // of now.
    w.advance(w.relay.config().snapshot_interval);
    w.sent();
    w.publish(&b, &[head(7, 4.0)]);
    w.advance(DELAY);
    let carried_7 = w.sent()[0].rtp().sequence_number();
    w.rtcp(&sub, |buf| {
        rtcp::write_nack(buf, sub.ssrc, relay, &[carried_7]).unwrap();
    });
    w.publish(&b, &[head(8, 1.0)]);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(
        all_objects(&w, &out),
        vec![(b.ssrc, head(7, 4.0)), (b.ssrc, head(8, 1.0))],
        "the repair rides with the live update"
    );
    let unknown = w.dropped("nack_unknown");
    w.rtcp(&sub, |buf| {
        rtcp::write_nack(buf, sub.ssrc, relay, &[lost.wrapping_sub(500)]).unwrap();
    });
    w.advance(DELAY);
    assert!(w.sent().is_empty());
    assert_eq!(w.dropped("nack_unknown"), unknown + 1);
}

#[test]
fn a_sender_leaving_is_announced_by_bye_and_never_revived() {
    let mut w = World::new();
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    w.sent();
    w.publish(&a, &[head(1, 1.0)]);
    w.publish(&b, &[head(1, 2.0)]);
    w.leave(a.session).unwrap();
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].to, out[0].class), (sub.session, PacketClass::Rtcp));
    let items = rtcp::parse_compound(&out[0].bytes).unwrap();
    assert!(matches!(&items[0], RtcpItem::Bye { ssrcs } if ssrcs == &vec![a.ssrc]));
    w.advance(DELAY);
    let out = w.sent();
    let senders: Vec<u32> = containers(&w, &out[0]).iter().map(|c| c.ssrc).collect();
    assert_eq!(
        senders,
        vec![b.ssrc],
        "a's pending update is dropped with it"
    );
}

#[test]
fn a_sender_leaving_is_taken_out_of_the_closed_packets_too() {
    let one = container_len(0x1000_0001, HEAD_BYTES);
    let mut w = World::with(RelayConfig {
        payload_budget: 2 * one + one / 2,
        ..RelayConfig::default()
    });
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    let b = publisher(&mut w, 0x1000_0002);
    let c = publisher(&mut w, 0x1000_0003);
    w.sent();
    // Two packets held for the deadline: [a, b] closed, [c, a] open.
    for p in [&a, &b, &c, &a] {
        w.publish(p, &[head(1, 1.0)]);
    }
    w.leave(a.session).unwrap();
    let out = w.sent();
    assert_eq!(out.len(), 1, "only the BYE goes at once");
    assert_eq!((out[0].to, out[0].class), (sub.session, PacketClass::Rtcp));
    w.advance(DELAY);
    let out = w.sent();
    let senders: Vec<Vec<u32>> = out
        .iter()
        .map(|s| containers(&w, s).iter().map(|c| c.ssrc).collect())
        .collect();
    assert_eq!(
        senders,
        vec![vec![b.ssrc], vec![c.ssrc]],
        "nothing of a's goes after its BYE"
    );
}

#[test]
fn a_joiner_never_gets_the_packets_closed_before_it_joined() {
    let one = container_len(0x1000_0001, HEAD_BYTES);
    let mut w = World::with(RelayConfig {
        payload_budget: 2 * one + one / 2,
        ..RelayConfig::default()
    });
    let first = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let pubs: Vec<Joined> = (1..=3)
        .map(|i| publisher(&mut w, 0x1000_0000 + i))
        .collect();
    w.sent();
    // [1, 2] closed, [3] open.
    for p in &pubs {
        w.publish(p, &[head(1, 1.0)]);
    }
    let late = join(&mut w, 0x2000_0001, false, true, aggregated(None));
    let out = w.sent();
    let to_first = to(&out, &first);
    assert_eq!(
        to_first.len(),
        1,
        "the closed packet goes to who it was closed for"
    );
    let senders: Vec<u32> = containers(&w, &out[to_first[0]])
        .iter()
        .map(|c| c.ssrc)
        .collect();
    assert_eq!(senders, [pubs[0].ssrc, pubs[1].ssrc]);
    assert!(to(&out, &late).is_empty());
    w.advance(DELAY);
    let out = w.sent();
    for who in [&first, &late] {
        let got = to(&out, who);
        assert_eq!(got.len(), 1);
        let senders: Vec<u32> = containers(&w, &out[got[0]])
            .iter()
            .map(|c| c.ssrc)
            .collect();
        assert_eq!(
            senders,
            [pubs[2].ssrc],
            "only the packet open when it joined"
        );
    }
}

#[test]
fn a_room_mixes_both_modes() {
    let mut w = World::new();
    let per_stream = join(&mut w, 0x2000_0001, false, true, Interest::default());
    let agg = join(&mut w, 0x2000_0002, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    w.sent();
    w.publish(&a, &[head(1, 1.0)]);
    let out = w.sent();
    assert_eq!(out.len(), 1, "per-stream forwarding is immediate");
    assert_eq!(out[0].to, per_stream.session);
    assert_eq!(out[0].rtp().ssrc(), a.ssrc);
    assert_eq!(out[0].objects(Dialect::Draft01), vec![head(1, 1.0)]);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, agg.session);
    assert_eq!(
        containers(&w, &out[0]),
        vec![Container {
            ssrc: a.ssrc,
            objects: vec![head(1, 1.0)]
        }]
    );
}

#[test]
fn sequence_numbers_stay_continuous_across_view_changes() {
    let mut w = World::new();
    let sub = join(&mut w, 0x2000_0000, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    w.sent();
    let mut seqs = Vec::new();
    let mut send_one = |w: &mut World, x: f32| {
        w.publish(&a, &[head(1, x)]);
        w.advance(Duration::from_millis(50));
        let out = w.sent();
        assert_eq!(out.len(), 1, "one packet per update");
        seqs.push(out[0].rtp().sequence_number());
    };
    send_one(&mut w, 1.0);
    send_one(&mut w, 2.0);
    // Another filter (another shared view), then an area (a view of its own).
    let typed = Interest {
        types: serde_json::from_value(serde_json::json!({"allow": ["Head1"]})).unwrap(),
        ..aggregated(Some(20))
    };
    w.set_interest(sub.session, typed).unwrap();
    send_one(&mut w, 3.0);
    let area = Interest {
        area: Some(
            serde_json::from_value(serde_json::json!({"center": [0, 0, 0], "radius": 100}))
                .unwrap(),
        ),
        ..aggregated(Some(20))
    };
    w.set_interest(sub.session, area).unwrap();
    send_one(&mut w, 4.0);
    assert!(
        seqs.windows(2).all(|p| p[1] == p[0].wrapping_add(1)),
        "{seqs:?}"
    );
}

#[test]
fn an_area_is_honoured_in_a_view_of_ones_own() {
    let mut w = World::new();
    let interest = Interest {
        area: Some(
            serde_json::from_value(serde_json::json!({"center": [0, 0, 0], "radius": 10})).unwrap(),
        ),
        ..aggregated(None)
    };
    let sub = join(&mut w, 0x2000_0000, false, true, interest);
    let a = publisher(&mut w, 0x1000_0001);
    w.sent();
    w.publish(&a, &[head(1, 5.0), head(2, 50.0)]);
    w.publish(&a, &[head(3, 100.0)]);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, sub.session);
    assert_eq!(
        containers(&w, &out[0]),
        vec![Container {
            ssrc: a.ssrc,
            objects: vec![head(1, 5.0)]
        }]
    );
}

#[test]
fn a_capped_subscriber_gets_the_newest_state_within_its_cap() {
    let mut w = World::new();
    let interest = Interest {
        max_bitrate_bps: Some(20_000),
        ..aggregated(None)
    };
    let sub = join(&mut w, 0x2000_0000, false, true, interest);
    let a = publisher(&mut w, 0x1000_0001);
    w.sent();
    let mut received = Vec::new();
    let mut bytes = 0;
    for i in 0..400 {
        w.publish(&a, &[head(1, i as f32)]);
        w.advance(Duration::from_millis(5));
        for s in w.sent() {
            assert_eq!(s.to, sub.session);
            bytes += s.bytes.len();
            received.extend(containers(&w, &s).into_iter().flat_map(|c| c.objects));
        }
    }
    w.advance(Duration::from_secs(1));
    for s in w.sent() {
        received.extend(containers(&w, &s).into_iter().flat_map(|c| c.objects));
    }
    assert!(
        received.len() < 400 / 2,
        "coalesced: {} updates",
        received.len()
    );
    assert_eq!(
        received.last(),
        Some(&head(1, 399.0)),
        "the newest state arrives"
    );
    // The cap charges what per-stream forwarding would send (an RTP header per source
    // packet); aggregated packets add CSRCs and container headers, so allow half again.
    let allowed = (2 * 20_000 / 8 + 1500) * 3 / 2;
    assert!(bytes <= allowed, "{bytes} bytes > {allowed}");
}

#[test]
fn containers_from_senders_are_dropped() {
    let mut w = World::new();
    let _sub = join(&mut w, 0x2000_0000, false, true, Interest::default());
    let a = publisher(&mut w, 0x1000_0001);
    w.sent();
    let payload = wire::encode(
        &[Object::Container(Container {
            ssrc: 5,
            objects: vec![head(1, 1.0)],
        })],
        Dialect::Draft01,
    )
    .unwrap();
    w.publish_raw(&a, &payload);
    assert!(w.sent().is_empty());
    assert_eq!(w.dropped("container_from_sender"), 1);
}

#[test]
fn delivery_is_validated() {
    let mut w = World::new();
    let s = join(&mut w, 0x2000_0000, false, true, Interest::default());
    for (delivery, field) in [
        (
            Delivery::aggregated(Some(1001)),
            "interest.delivery.max_delay_ms",
        ),
        (
            Delivery {
                max_delay_ms: Some(5),
                ..Delivery::default()
            },
            "interest.delivery.max_delay_ms",
        ),
    ] {
        let interest = Interest {
            delivery,
            ..Interest::default()
        };
        match w.set_interest(s.session, interest) {
            Err(ControlError::InvalidInterest(m)) => assert!(m.starts_with(field), "{m}"),
            other => panic!("expected an invalid interest, got {other:?}"),
        }
    }
    for ms in [0, 1000] {
        let ok = w.set_interest(s.session, aggregated(Some(ms)));
        assert!(ok.is_ok(), "{ms} ms");
    }
}

#[test]
fn a_dense_room_sends_about_n_packets_per_tick_built_once_per_view() {
    const N: u32 = 60;
    let mut w = World::new();
    let players: Vec<Joined> = (0..N)
        .map(|k| join(&mut w, 0x1000_0000 + k, true, true, aggregated(None)))
        .collect();
    w.sent();
    let built = w.metrics().aggregate_payloads.get();
    for (k, p) in players.iter().enumerate() {
        w.publish(p, &[head(1, k as f32)]);
    }
    w.advance(DELAY);
    let out = w.sent();
    let payloads = w.metrics().aggregate_payloads.get() - built;
    // Every player's head, in containers of a budget-sized packet each.
    let per_packet = RelayConfig::default().payload_budget / container_len(0x1000_0000, HEAD_BYTES);
    let packets_per_player = (N as usize).div_ceil(per_packet);
    assert_eq!(
        payloads as usize, packets_per_player,
        "each packet built once"
    );
    assert!(
        out.len() <= N as usize * packets_per_player,
        "{} packets, not N² = {}",
        out.len(),
        N * (N - 1)
    );
    for p in &players {
        let heads: usize = to(&out, p)
            .into_iter()
            .flat_map(|i| containers(&w, &out[i]))
            .inspect(|c| assert_ne!(c.ssrc, p.ssrc))
            .map(|c| c.objects.len())
            .sum();
        assert_eq!(heads, N as usize - 1, "every other player's head");
    }
}

#[test]
fn a_tmmbr_cap_moves_a_subscriber_to_packets_of_its_own_without_a_gap() {
    let mut w = World::new();
    let capped = join(&mut w, 0x2000_0001, false, true, aggregated(None));
    let other = join(&mut w, 0x2000_0002, false, true, aggregated(None));
    let a = publisher(&mut w, 0x1000_0001);
    w.sent();
    w.publish(&a, &[head(1, 1.0)]);
    w.advance(DELAY);
    let first = w.sent();
    let seq = first[to(&first, &capped)[0]].rtp().sequence_number();
    let relay = w.relay.relay_ssrc();
    w.rtcp(&capped, |buf| {
        let entry = rtcp::TmmbEntry {
            ssrc: relay,
            bitrate_bps: 500_000,
            overhead: 0,
        };
        rtcp::write_tmmbr(buf, capped.ssrc, &[entry]).unwrap();
    });
    let built = w.metrics().aggregate_payloads.get();
    w.publish(&a, &[head(1, 2.0)]);
    w.advance(DELAY);
    let out = w.sent();
    assert_eq!(
        w.metrics().aggregate_payloads.get() - built,
        2,
        "the capped subscriber's packet is built apart"
    );
    for who in [&capped, &other] {
        let mine = to(&out, who);
        assert_eq!(mine.len(), 1);
        assert_eq!(containers(&w, &out[mine[0]])[0].objects, vec![head(1, 2.0)]);
    }
    let next = out[to(&out, &capped)[0]].rtp().sequence_number();
    assert_eq!(next, seq.wrapping_add(1));
}

#[test]
fn a_narrow_path_gets_packets_that_fit_it_from_its_own_view() {
    let mut w = World::new();
    let wide = join(&mut w, 0x2000_0001, false, true, aggregated(Some(0)));
    let narrow = join(&mut w, 0x2000_0002, false, true, aggregated(Some(0)));
    // A QUIC path of 400 bytes (the shell's input): the narrow member leaves the shared
    // view for one whose packets fit.
    w.set_path(narrow.session, 400, None);
    let senders: Vec<Joined> = (0..30)
        .map(|i| publisher(&mut w, 0x3000_0000 + i))
        .collect();
    w.sent();
    for (i, p) in senders.iter().enumerate() {
        w.publish(p, &[head(1, i as f32)]);
    }
    w.end_batch();
    let sent = w.sent();
    let (to_wide, to_narrow) = (to(&sent, &wide), to(&sent, &narrow));
    let count = |idx: &[usize]| -> usize {
        idx.iter()
            .map(|i| containers(&w, &sent[*i]).len())
            .sum::<usize>()
    };
    assert_eq!(count(&to_wide), 30, "every sender reaches the wide member");
    assert_eq!(
        count(&to_narrow),
        30,
        "every sender reaches the narrow member"
    );
    for i in &to_narrow {
        assert!(sent[*i].bytes.len() <= 400, "{} B", sent[*i].bytes.len());
    }
    assert!(
        to_wide.iter().any(|i| sent[*i].bytes.len() > 400),
        "the wide member's packets use its budget"
    );
}
