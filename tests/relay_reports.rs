//! RTCP reports of the sans-I/O core in simulated time: the SRs subscribers get, the RRs
//! publishers get, round-trip times, report timing and bad reports.

mod support;

use gsrelay::rtp::rtcp::{self, ReceptionReport, RtcpItem, SenderInfo};
use gsrelay::rtp::{PacketClass, ntp};
use gsrelay::{Delivery, Event, Input, Interest, JoinRequest, Joined, RelayConfig, StatEvent};
use std::time::Duration;
use support::{Sent, World, head};

const UNIX_TO_NTP: u64 = 2_208_988_800;

fn world() -> World {
    let mut w = World::with(RelayConfig {
        rtcp_min_interval: Duration::from_secs(1),
        ..RelayConfig::default()
    });
    w.keep_reports = true;
    let now = w.now;
    w.relay
        .handle_input(
            now,
            Input::SetWallclock {
                since_unix: Duration::from_secs(1_700_000_000),
            },
        )
        .unwrap();
    w
}

/// The relay's NTP time at the world's `now`.
fn ntp_now(w: &World) -> u64 {
    ntp::from_duration(Duration::from_secs(1_700_000_000 + UNIX_TO_NTP) + (w.now - w.t0))
}

/// Advances in 10 ms steps until `to` got an RTCP packet (at most `limit`); returns every
/// packet sent meanwhile.
fn until_report(w: &mut World, to: &Joined, limit: Duration) -> Vec<Sent> {
    let mut all = Vec::new();
    let end = w.now + limit;
    while w.now < end {
        w.advance(Duration::from_millis(10));
        let got = w.sent();
        let done = got
            .iter()
            .any(|s| s.to == to.session && s.class == PacketClass::Rtcp);
        all.extend(got);
        if done {
            return all;
        }
    }
    panic!("no report to session {} within {limit:?}", to.session);
}

/// The RTCP items sent to `to` among `sent`, one Vec per datagram.
fn reports(sent: &[Sent], to: &Joined) -> Vec<Vec<RtcpItem>> {
    sent.iter()
        .filter(|s| s.to == to.session && s.class == PacketClass::Rtcp)
        .map(|s| rtcp::parse_compound(&s.bytes).expect("relay sends valid RTCP"))
        .collect()
}

fn sr_for(items: &[Vec<RtcpItem>], ssrc: u32) -> Option<SenderInfo> {
    items.iter().flatten().find_map(|i| match i {
        RtcpItem::SenderReport { ssrc: s, info, .. } if *s == ssrc => Some(*info),
        _ => None,
    })
}

/// The reception block the relay sent about `ssrc`.
fn block_for(items: &[Vec<RtcpItem>], ssrc: u32) -> Option<ReceptionReport> {
    items.iter().flatten().find_map(|i| match i {
        RtcpItem::ReceiverReport { reports, .. } | RtcpItem::SenderReport { reports, .. } => {
            reports.iter().find(|r| r.ssrc == ssrc).cloned()
        }
        _ => None,
    })
}

fn send_sr(w: &mut World, who: &Joined, ssrc: u32, info: SenderInfo) {
    w.rtcp(who, |b| {
        rtcp::write_sr(b, ssrc, info, &[]).unwrap();
    });
}

fn send_rr(w: &mut World, who: &Joined, blocks: &[ReceptionReport]) {
    w.rtcp(who, |b| {
        rtcp::write_rr(b, who.ssrc, blocks).unwrap();
    });
}

fn rr_block(ssrc: u32, lsr: u32, dlsr: Duration) -> ReceptionReport {
    ReceptionReport {
        ssrc,
        last_sender_report: lsr,
        delay: ntp::compact_from_duration(dlsr),
        ..ReceptionReport::default()
    }
}

#[test]
fn subscribers_get_an_sr_per_stream_with_what_they_were_sent() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let (mut packets, mut octets) = (0u32, 0u32);
    for i in 0..5 {
        w.publish(&a, &[head(1, i as f32)]);
        for s in w.sent().iter().filter(|s| s.to == b.session) {
            packets += 1;
            octets += s.rtp().payload().len() as u32;
        }
    }
    // A FIR answered from the cache adds relay-made packets: they count too.
    w.fir(&b, a.ssrc, 1);
    for s in w.sent().iter().filter(|s| s.to == b.session) {
        packets += 1;
        octets += s.rtp().payload().len() as u32;
    }
    assert!(packets >= 6);
    let sent = until_report(&mut w, &b, Duration::from_secs(3));
    let items = reports(&sent, &b);
    let first = &items[0][0];
    assert!(
        matches!(first, RtcpItem::ReceiverReport { ssrc, reports } if *ssrc == b.relay_ssrc && reports.is_empty()),
        "a compound starts with the relay's RR: {first:?}"
    );
    let sr = sr_for(&items, a.ssrc).expect("an SR for the forwarded stream");
    assert_eq!((sr.packet_count, sr.octet_count), (packets, octets));
    // No SR from the publisher yet: the relay's clock, and the newest timestamp
    // extrapolated from its arrival at 90 kHz.
    assert_eq!(sr.ntp_time, ntp_now(&w));
    let last_ts = (w.now - w.t0).as_millis() as u32 * 90;
    assert!(
        sr.rtp_time.abs_diff(last_ts) <= 90,
        "{} vs {last_ts}",
        sr.rtp_time
    );
    let sdes = items.iter().flatten().find_map(|i| match i {
        RtcpItem::Sdes { chunks } => Some(chunks.clone()),
        _ => None,
    });
    let sdes = sdes.expect("an SDES");
    assert!(
        sdes.iter()
            .any(|c| c.ssrc == b.relay_ssrc && c.cname.is_some())
    );
    // The publisher gets no SR for a stream it was never sent.
    assert!(sr_for(&reports(&sent, &a), a.ssrc).is_none());
}

#[test]
fn the_publishers_clock_mapping_and_cname_reach_the_subscriber() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.publish(&a, &[head(1, 0.0)]);
    let info = SenderInfo {
        ntp_time: 0x1111_2222_0000_0000,
        rtp_time: 5_000,
        packet_count: 1,
        octet_count: 40,
    };
    w.rtcp(&a, |buf| {
        rtcp::write_sr(buf, a.ssrc, info, &[]).unwrap();
        rtcp::write_sdes_cname(buf, a.ssrc, b"player-a@example").unwrap();
    });
    let at_sr = w.now;
    let sent = until_report(&mut w, &b, Duration::from_secs(3));
    let sr = sr_for(&reports(&sent, &b), a.ssrc).unwrap();
    let elapsed = w.now - at_sr;
    assert_eq!(
        sr.ntp_time,
        info.ntp_time + ntp::from_duration(elapsed),
        "the publisher's NTP time, extrapolated"
    );
    let ticks = (elapsed.as_micros() * 90_000 / 1_000_000) as u32;
    assert_eq!(sr.rtp_time, info.rtp_time + ticks);
    let cname = reports(&sent, &b).iter().flatten().find_map(|i| match i {
        RtcpItem::Sdes { chunks } => chunks
            .iter()
            .find(|c| c.ssrc == a.ssrc)
            .and_then(|c| c.cname.clone()),
        _ => None,
    });
    assert_eq!(cname.as_deref(), Some(&b"player-a@example"[..]));
}

#[test]
fn publishers_get_receiver_reports_with_loss_highest_sequence_jitter_lsr_and_dlsr() {
    let mut w = world();
    let a = w.join("r", true, false);
    let payload = gsrelay::wire::encode(&[head(1, 0.0)], gsrelay::wire::Dialect::Draft01).unwrap();
    // 20 packets every 20 ms with 3 lost: 1000..=1019 without 1005, 1006, 1012.
    for seq in 1000u16..1020 {
        if ![1005, 1006, 1012].contains(&seq) {
            w.publish_seq(&a, seq, &payload);
        }
        w.advance(Duration::from_millis(20));
    }
    let sr_ntp = 0xdead_beef_1234_5678;
    let info = SenderInfo {
        ntp_time: sr_ntp,
        ..SenderInfo::default()
    };
    send_sr(&mut w, &a, a.ssrc, info);
    let at_sr = w.now;
    let sent = until_report(&mut w, &a, Duration::from_secs(3));
    let block = block_for(&reports(&sent, &a), a.ssrc).expect("a block on the stream");
    assert_eq!(block.total_lost, 3);
    assert_eq!(block.fraction_lost, (3 * 256 / 20) as u8);
    assert_eq!(block.last_sequence_number, 1019);
    // Sent on the clock, arriving on the clock (timestamps are 90 kHz of arrival).
    assert!(block.jitter <= 2, "jitter {}", block.jitter);
    assert_eq!(block.last_sender_report, ntp::compact(sr_ntp));
    let dlsr = ntp::compact_to_duration(block.delay);
    let want = w.now - at_sr;
    assert!(
        dlsr.abs_diff(want) < Duration::from_millis(1),
        "{dlsr:?} vs {want:?}"
    );
}

/// A room with a publisher (a, one Head1 sent) and two subscribers (b, c), run until
/// b's first report; returns what was sent up to then.
fn publisher_and_two_subscribers() -> (World, Joined, Joined, Joined, Vec<Sent>) {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let c = w.join("r", false, true);
    w.publish(&a, &[head(1, 0.0)]);
    let sent = until_report(&mut w, &b, Duration::from_secs(3));
    (w, a, b, c, sent)
}

#[test]
fn subscriber_rtt_from_lsr_and_dlsr_on_the_relays_srs() {
    let (mut w, a, b, c, sent) = publisher_and_two_subscribers();
    let sr = sr_for(&reports(&sent, &b), a.ssrc).unwrap();
    // b answers 50 ms later, having held the SR for 30 ms: 20 ms round trip.
    w.advance(Duration::from_millis(50));
    w.sent();
    let lsr = ntp::compact(sr.ntp_time);
    send_rr(
        &mut w,
        &b,
        &[rr_block(a.ssrc, lsr, Duration::from_millis(30))],
    );
    let rtt = w.relay.session_rtt(b.session).expect("an RTT");
    assert!(
        rtt.abs_diff(Duration::from_millis(20)) < Duration::from_micros(100),
        "{rtt:?}"
    );
    let info = w.relay.room_info("r").unwrap();
    let b_info = info.sessions.iter().find(|s| s.ssrc == b.ssrc).unwrap();
    assert!((b_info.rtt_ms.unwrap() - 20.0).abs() < 0.1);
    assert_eq!(w.relay.session_rtt(c.session), None);
    assert_eq!(rtt_samples(&mut w), vec![rtt]);
}

#[test]
fn bad_reports_are_ignored_counted_and_touch_no_one_else() {
    let (mut w, a, b, c, sent) = publisher_and_two_subscribers();
    let lsr = ntp::compact(sr_for(&reports(&sent, &b), a.ssrc).unwrap().ntp_time);

    // b sends an SR for a's SSRC: not its own, dropped; a's mapping is untouched.
    let forged = SenderInfo {
        ntp_time: 0x0101_0101_0000_0000,
        ..SenderInfo::default()
    };
    send_sr(&mut w, &b, a.ssrc, forged);
    assert_eq!(w.dropped("sr_ssrc_mismatch"), 1);
    // An RR from another SSRC.
    w.rtcp(&b, |buf| {
        rtcp::write_rr(buf, a.ssrc, &[]).unwrap();
    });
    assert_eq!(w.dropped("rr_ssrc_mismatch"), 1);

    w.advance(Duration::from_millis(200));
    // An LSR the relay never sent, a source it never sent b, a DLSR longer than the wait.
    send_rr(
        &mut w,
        &b,
        &[rr_block(a.ssrc, lsr ^ 0x5555, Duration::ZERO)],
    );
    assert_eq!(w.suppressed("rr_unknown_lsr"), 1);
    w.advance(Duration::from_millis(200));
    send_rr(&mut w, &b, &[rr_block(0x0bad_0bad, lsr, Duration::ZERO)]);
    assert_eq!(w.suppressed("rr_unknown_source"), 1);
    w.advance(Duration::from_millis(200));
    send_rr(
        &mut w,
        &b,
        &[rr_block(a.ssrc, lsr, Duration::from_secs(30))],
    );
    assert_eq!(w.suppressed("rr_absurd"), 1);
    assert_eq!(w.relay.session_rtt(b.session), None);

    // A flood: only the first of 50 reports at once is read.
    w.advance(Duration::from_millis(200));
    for _ in 0..50 {
        send_rr(&mut w, &b, &[rr_block(a.ssrc, lsr, Duration::ZERO)]);
    }
    assert_eq!(w.suppressed("report_flood"), 49);
    assert_eq!(rtt_samples(&mut w).len(), 1);

    // c, in the same room, is measured as usual and its SRs carry the relay's clock.
    w.sent();
    let sent = until_report(&mut w, &c, Duration::from_secs(8));
    let sr = sr_for(&reports(&sent, &c), a.ssrc).unwrap();
    assert_eq!(sr.ntp_time, ntp_now(&w), "the forged SR changed nothing");
    w.advance(Duration::from_millis(10));
    send_rr(
        &mut w,
        &c,
        &[rr_block(a.ssrc, ntp::compact(sr.ntp_time), Duration::ZERO)],
    );
    let rtt = w.relay.session_rtt(c.session).unwrap();
    assert!(rtt.abs_diff(Duration::from_millis(10)) < Duration::from_micros(100));
}

#[test]
fn reports_follow_the_rfc_3550_interval_and_always_start_with_sr_or_rr() {
    let mut w = World::with(RelayConfig::default());
    w.keep_reports = true;
    let a = w.join("r", true, true);
    let b = w.join("r", true, true);
    let mut times = Vec::new();
    for i in 0..6000u32 {
        // 50 packets/s each way for 60 s.
        if i % 2 == 0 {
            w.publish(&a, &[head(1, i as f32)]);
            w.publish(&b, &[head(2, i as f32)]);
        }
        w.advance(Duration::from_millis(10));
        for s in w.sent() {
            if s.to == b.session && s.class == PacketClass::Rtcp {
                let items = rtcp::parse_compound(&s.bytes).unwrap();
                assert!(matches!(
                    items[0],
                    RtcpItem::SenderReport { .. } | RtcpItem::ReceiverReport { .. }
                ));
                if matches!(items[0], RtcpItem::ReceiverReport { .. }) {
                    times.push(w.now - w.t0);
                }
            }
        }
    }
    // Tmin 5 s: the first within [0.5, 1.5] * 2.5 s / 1.218, then [0.5, 1.5] * 5 s / 1.218.
    let (lo, hi) = (0.5 * 5.0 / 1.2183, 1.5 * 5.0 / 1.2183);
    assert!(times[0].as_secs_f64() <= hi / 2.0 + 0.01, "{times:?}");
    for gap in times.windows(2).map(|p| (p[1] - p[0]).as_secs_f64()) {
        assert!(gap >= lo - 0.01 && gap <= hi + 0.01, "{gap} in {times:?}");
    }
    assert!((8..=30).contains(&times.len()), "{}", times.len());
    // Randomised: not all gaps equal.
    let gaps: Vec<_> = times.windows(2).map(|p| p[1] - p[0]).collect();
    assert!(gaps.iter().any(|g| *g != gaps[0]));
}

#[test]
fn aggregated_subscribers_get_an_sr_from_the_relay_ssrc_first() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w
        .join_with(JoinRequest {
            room: "r".into(),
            identity: "b".into(),
            subscribe: true,
            interest: Interest {
                delivery: Delivery::aggregated(Some(0)),
                ..Interest::default()
            },
            ..JoinRequest::default()
        })
        .unwrap();
    let mut packets = 0;
    for i in 0..4 {
        w.publish(&a, &[head(1, i as f32)]);
        w.end_batch();
        packets += w
            .sent()
            .iter()
            .filter(|s| s.to == b.session && s.class == PacketClass::Rtp)
            .count() as u32;
    }
    assert!(packets >= 4);
    let sent = until_report(&mut w, &b, Duration::from_secs(3));
    let items = reports(&sent, &b);
    match &items[0][0] {
        RtcpItem::SenderReport { ssrc, info, .. } => {
            assert_eq!(*ssrc, b.relay_ssrc);
            assert_eq!(info.packet_count, packets);
            assert_eq!(info.ntp_time, ntp_now(&w));
        }
        other => panic!("expected the relay's SR first, got {other:?}"),
    }
}

/// The round trips the core measured since the last call (its RTT events).
fn rtt_samples(w: &mut World) -> Vec<Duration> {
    w.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Stat(StatEvent::Rtt { rtt }) => Some(rtt),
            _ => None,
        })
        .collect()
}
