//! Hostile input against the core, in simulated time: out-of-range interests, feedback
//! floods, pacing of what the relay makes itself, and state that must not grow with what a
//! client chooses.

mod support;

use gsrelay::rtp::PacketClass;
use gsrelay::rtp::rtcp::{self, FirEntry, TmmbEntry};
use gsrelay::{ControlError, Interest, RelayConfig};
use std::time::Duration;
use support::{World, head};

fn interest(json: &str) -> Interest {
    serde_json::from_str(json).expect("interest JSON")
}

/// A room with one publisher of `n` Head1 objects and one subscriber.
fn room_with_objects(cfg: RelayConfig, n: u64) -> (World, gsrelay::Joined, gsrelay::Joined) {
    let mut w = World::with(cfg);
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    for chunk in (0..n).collect::<Vec<_>>().chunks(20) {
        let objs: Vec<_> = chunk.iter().map(|i| head(*i, *i as f32)).collect();
        w.publish(&a, &objs);
    }
    w.sent();
    (w, a, b)
}

/// Bytes of everything queued for `to`, draining the outbox.
fn bytes_to(w: &mut World, to: u64) -> usize {
    w.sent()
        .iter()
        .filter(|s| s.to == to)
        .map(|s| s.bytes.len())
        .sum()
}

/// Bytes one full snapshot of the publisher's stream costs.
fn snapshot_bytes(w: &mut World, b: &gsrelay::Joined, a_ssrc: u32) -> usize {
    w.fir(b, a_ssrc, 200);
    let mut total = bytes_to(w, b.session);
    for _ in 0..1000 {
        w.advance(Duration::from_millis(1));
        total += bytes_to(w, b.session);
    }
    total
}

#[test]
fn rates_too_small_to_represent_are_refused_naming_the_field_and_range() {
    let mut w = World::new();
    let b = w.join("r", false, true);
    for hz in ["1e-30", "1e-19", "0.001", "1e9", "0"] {
        let i = interest(&format!(
            r#"{{"area":{{"radius":10}},"rates":[{{"max_hz":{hz}}}]}}"#
        ));
        match w.set_interest(b.session, i) {
            Err(ControlError::InvalidInterest(m)) => {
                assert!(
                    m.starts_with("interest.rates[0].max_hz: must be between"),
                    "{hz}: {m}"
                );
            }
            other => panic!("max_hz {hz} accepted: {other:?}"),
        }
    }
}

#[test]
fn every_client_number_is_checked_by_range() {
    let cases = [
        (r#"{"area":{"radius":1e30}}"#, "interest.area.radius"),
        (r#"{"area":{"radius":0}}"#, "interest.area.radius"),
        (
            r#"{"area":{"radius":10,"exit_radius":1e6}}"#,
            "interest.area.exit_radius",
        ),
        (
            r#"{"area":{"half_extents":[1,1e20,1]}}"#,
            "interest.area.half_extents",
        ),
        (
            r#"{"area":{"half_extents":[1,1,1],"exit_half_extents":[1,1,100]}}"#,
            "interest.area.exit_half_extents",
        ),
        (
            r#"{"area":{"radius":1,"center":[1e30,0,0]}}"#,
            "interest.area.center",
        ),
        (
            r#"{"area":{"radius":1},"rates":[{"within":1e30,"max_hz":1}]}"#,
            "interest.rates[0].within",
        ),
        (
            r#"{"area":{"radius":1},"rates":[{"within":1},{"within":2},{"within":3},{"within":4},{"within":5},{"within":6},{"within":7},{"within":8},{"within":9}]}"#,
            "interest.rates",
        ),
        (r#"{"max_bitrate_bps":1}"#, "interest.max_bitrate_bps"),
        (
            r#"{"max_bitrate_bps":18446744073709551615}"#,
            "interest.max_bitrate_bps",
        ),
        (
            r#"{"prediction":{"heartbeat_hz":1e-30}}"#,
            "interest.prediction.heartbeat_hz",
        ),
        (
            r#"{"prediction":{"tolerance":1e30}}"#,
            "interest.prediction.tolerance",
        ),
        (
            r#"{"prediction":{"rotation_tolerance_deg":720}}"#,
            "interest.prediction.rotation_tolerance_deg",
        ),
        (
            r#"{"prediction":{"tolerance_per_meter":1e9}}"#,
            "interest.prediction.tolerance_per_meter",
        ),
    ];
    for (json, field) in cases {
        let err = interest(json).validate().expect_err(json);
        assert!(err.starts_with(&format!("{field}:")), "{json}: {err}");
    }
}

#[test]
fn a_feedback_flood_draws_a_few_snapshots_worth_per_second() {
    let (mut w, a, b) = room_with_objects(RelayConfig::default(), 400);
    let snapshot = snapshot_bytes(&mut w, &b, a.ssrc);
    assert!(snapshot > 10_000, "a room worth flooding: {snapshot} B");
    w.advance(Duration::from_secs(1));
    w.sent();
    let relay = w.relay.relay_ssrc();

    // One second of flooding: every millisecond a compound of PLIs naming the relay and
    // the stream, FIRs whose sequence numbers alternate, and NACKs with full bitmasks.
    let (mut sent_in, mut got) = (0usize, 0usize);
    for i in 0..1000u32 {
        let mut pkt = Vec::new();
        rtcp::write_pli(&mut pkt, b.ssrc, relay).unwrap();
        rtcp::write_pli(&mut pkt, b.ssrc, a.ssrc).unwrap();
        let fir = |ssrc| FirEntry {
            ssrc,
            sequence_number: (i % 2) as u8,
        };
        rtcp::write_fir(&mut pkt, b.ssrc, &[fir(relay), fir(a.ssrc)]).unwrap();
        let lost: Vec<u16> = (0..64).map(|k| 1000u16.wrapping_add(k)).collect();
        rtcp::write_nack(&mut pkt, b.ssrc, a.ssrc, &lost).unwrap();
        sent_in += pkt.len();
        w.rtcp_from(b.session, &pkt);
        got += bytes_to(&mut w, b.session);
        w.advance(Duration::from_millis(1));
        got += bytes_to(&mut w, b.session);
    }
    // Snapshots at 0, 0.5 s and 1 s at most, plus at most one repair per object in each
    // interval: bounded by the room, not by what the subscriber sends.
    assert!(
        got <= 6 * snapshot,
        "flood of {sent_in} B drew {got} B; one snapshot is {snapshot} B"
    );
    assert!(
        w.metrics()
            .feedback_suppressed
            .with_label_values(&["snapshot_interval"])
            .get()
            > 0
    );
}

#[test]
fn an_honest_joiners_first_fir_is_answered_at_once() {
    let (mut w, a, b) = room_with_objects(RelayConfig::default(), 40);
    w.fir(&b, a.ssrc, 1);
    let ids: usize = w
        .sent()
        .iter()
        .filter(|s| s.to == b.session)
        .map(|s| s.objects(gsrelay::wire::Dialect::Draft01).len())
        .sum();
    assert_eq!(ids, 40, "within the same input, no timer needed");
}

#[test]
fn a_large_snapshot_goes_in_bursts_a_default_receive_buffer_holds() {
    let cfg = RelayConfig::default();
    let burst = cfg.relay_send_burst_bytes;
    let (mut w, a, b) = room_with_objects(cfg, 10_000);
    w.fir(&b, a.ssrc, 1);
    let mut objects = 0;
    let mut largest_burst = 0;
    for _ in 0..2000 {
        let out = w.sent();
        let bytes: usize = out.iter().map(|s| s.bytes.len()).sum();
        largest_burst = largest_burst.max(bytes);
        objects += out
            .iter()
            .map(|s| s.objects(gsrelay::wire::Dialect::Draft01).len())
            .sum::<usize>();
        if objects == 10_000 {
            break;
        }
        w.advance(Duration::from_millis(1));
    }
    assert_eq!(objects, 10_000, "the whole snapshot arrives");
    assert!(
        largest_burst <= burst + 1500,
        "no burst over the relay's burst budget: {largest_burst} B"
    );
    assert!(
        largest_burst < 208 * 1024 / 2,
        "fits a default receive buffer"
    );
}

#[test]
fn snapshots_count_against_the_subscribers_bandwidth_cap() {
    let (mut w, a, b) = room_with_objects(RelayConfig::default(), 2000);
    w.set_interest(b.session, interest(r#"{"max_bitrate_bps":80000}"#))
        .unwrap();
    w.fir(&b, a.ssrc, 1);
    let mut got = bytes_to(&mut w, b.session);
    for _ in 0..1000 {
        w.advance(Duration::from_millis(1));
        got += bytes_to(&mut w, b.session);
    }
    // 10 kB/s plus the cap's burst (100 ms worth, at least one MTU).
    assert!(got <= 10_000 + 1500 + 1500, "{got} B in one second");
    assert!(got > 5_000, "but the cap is used: {got} B");
}

#[test]
fn a_repeated_nack_is_repaired_once_per_interval() {
    let (mut w, a, b) = room_with_objects(RelayConfig::default(), 1);
    w.publish(&a, &[head(0, 5.0)]);
    let lost = w.sent()[0].rtp().sequence_number();
    let mut repairs = 0;
    for _ in 0..10 {
        w.rtcp(&b, |buf| {
            rtcp::write_nack(buf, b.ssrc, a.ssrc, &[lost]).unwrap();
        });
        repairs += w.sent().len();
    }
    assert_eq!(repairs, 1);
    assert_eq!(
        w.metrics()
            .feedback_suppressed
            .with_label_values(&["nack_repeat"])
            .get(),
        9
    );
    w.advance(RelayConfig::default().snapshot_interval);
    w.rtcp(&b, |buf| {
        rtcp::write_nack(buf, b.ssrc, a.ssrc, &[lost]).unwrap();
    });
    assert_eq!(
        w.sent().len(),
        1,
        "answered again once the interval is over"
    );
}

#[test]
fn firs_for_made_up_streams_leave_no_state() {
    let (mut w, _a, b) = room_with_objects(RelayConfig::default(), 1);
    let before = w.relay.session(b.session).unwrap().state_entries();
    for ssrc in 0..5000u32 {
        w.fir(&b, 0x5000_0000 + ssrc, 1);
        w.advance(Duration::from_millis(1)); // within the session's packet rate
    }
    assert!(w.sent().is_empty());
    assert_eq!(w.relay.session(b.session).unwrap().state_entries(), before);
    assert_eq!(
        w.metrics()
            .feedback_suppressed
            .with_label_values(&["unknown_stream"])
            .get(),
        5000
    );
}

#[test]
fn per_subscriber_state_goes_with_expired_objects_and_ended_streams() {
    let cfg = RelayConfig {
        object_ttl: Duration::from_secs(2),
        stream_timeout: Duration::from_secs(60),
        ..RelayConfig::default()
    };
    let mut w = World::with(cfg);
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.set_interest(
        b.session,
        interest(
            r#"{"area":{"center":[0,0,0],"radius":1000},"rates":[{"max_hz":1}],
                    "prediction":{"tolerance":0.01}}"#,
        ),
    )
    .unwrap();
    for round in 0..3 {
        let objs: Vec<_> = (0..300u64)
            .map(|i| head(i, i as f32 + round as f32))
            .collect();
        for chunk in objs.chunks(20) {
            w.publish(&a, chunk);
        }
        w.advance(Duration::from_millis(100));
    }
    w.sent();
    let held = w.relay.session(b.session).unwrap().state_entries();
    assert!(
        held >= 600,
        "rate, area and prediction state per object: {held}"
    );
    // The objects expire: everything keyed by them goes too.
    w.advance(Duration::from_secs(3));
    let s = w.relay.session(b.session).unwrap();
    assert!(s.state_entries() <= 1, "left: {}", s.state_entries());
    // A stream that ends takes its subscription with it.
    w.publish(&a, &[head(1, 1.0)]);
    w.leave(a.session).unwrap();
    w.sent();
    assert_eq!(w.relay.session(b.session).unwrap().state_entries(), 0);
}

#[test]
fn the_outbox_has_a_ceiling_and_counts_what_it_refuses() {
    let cfg = RelayConfig {
        max_outbox_bytes: 4000,
        ..RelayConfig::default()
    };
    let mut w = World::with(cfg);
    let a = w.join("r", true, false);
    let subs: Vec<_> = (0..20).map(|_| w.join("r", false, true)).collect();
    let objs: Vec<_> = (0..20).map(|i| head(i, 0.0)).collect();
    w.publish(&a, &objs);
    let out = w.sent();
    assert!(!out.is_empty() && out.len() < subs.len());
    assert!(out.iter().map(|s| s.bytes.len()).sum::<usize>() <= 4000);
    assert_eq!(
        w.dropped("outbox_full"),
        (subs.len() - out.len()) as u64,
        "each refused packet counted"
    );
    // The next input starts from an empty outbox again.
    w.publish(&a, &[head(1, 1.0)]);
    assert_eq!(w.sent().len(), subs.len());
}

#[test]
fn a_tmmbr_of_zero_is_clamped_not_a_stall() {
    let (mut w, a, b) = room_with_objects(RelayConfig::default(), 10);
    let relay = w.relay.relay_ssrc();
    w.rtcp(&b, |buf| {
        rtcp::write_tmmbr(
            buf,
            b.ssrc,
            &[TmmbEntry {
                ssrc: relay,
                bitrate_bps: 0,
                overhead: 0,
            }],
        )
        .unwrap();
    });
    w.fir(&b, a.ssrc, 1);
    let mut got = w.sent().len();
    for _ in 0..20 {
        w.advance(Duration::from_secs(1));
        got += w
            .sent()
            .iter()
            .filter(|s| s.class == PacketClass::Rtp)
            .count();
    }
    assert!(
        got > 0,
        "the snapshot still trickles through at the floor rate"
    );
}

#[test]
fn a_restarted_relay_hands_out_other_session_ids() {
    // The server seeds each relay from the OS: two seeds stand for before and after.
    let first = |seed| {
        let mut relay = gsrelay::Relay::new(RelayConfig::default(), seed);
        let req = gsrelay::JoinRequest {
            room: "r".into(),
            identity: "p".into(),
            subscribe: true,
            ..Default::default()
        };
        relay
            .handle_input(std::time::Instant::now(), gsrelay::Input::Join(req))
            .ok()
            .and_then(gsrelay::Reply::joined)
            .expect("join")
            .session
    };
    let (before, after) = (first(0x1234_5678), first(0x9abc_def0));
    assert_ne!(before, after, "a stale id names nobody's new session");
    assert!(before > 1 << 32 && after > 1 << 32, "not a small counter");
}

#[test]
fn a_relay_whose_sessions_all_left_gives_back_what_the_load_grew() {
    let mut w = World::new();
    let idle = w.relay.capacity_bytes();
    // Rounds of subscribers joining a publisher's room, getting its objects, and leaving.
    let a = w.join("r", true, false);
    for round in 0..4 {
        let subs: Vec<_> = (0..100).map(|_| w.join("r", false, true)).collect();
        let objs: Vec<_> = (0..100u64)
            .map(|i| head(i, i as f32 + round as f32))
            .collect();
        for chunk in objs.chunks(20) {
            w.publish(&a, chunk);
        }
        w.sent();
        for s in subs {
            w.leave(s.session).unwrap();
        }
    }
    w.sent();
    let busy = w.relay.capacity_bytes();
    assert!(busy > idle + 64 * 1024, "busy {busy} B, idle {idle} B");
    assert!(!w.relay.release_idle(), "not while a session is joined");
    w.leave(a.session).unwrap();
    w.sent();
    assert!(w.relay.release_idle());
    let after = w.relay.capacity_bytes();
    assert!(after <= idle + 1024, "after {after} B, idle {idle} B");
    // It serves again as before.
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.publish(&a, &[head(1, 1.0)]);
    assert!(w.sent().iter().any(|s| s.to == b.session));
}
