//! The send budget from congestion feedback (RFC 8888), in simulated time: a subscriber
//! behind a simulated bottleneck reports what arrived when; the relay's controller brings
//! what it sends down to what the path carries, with the newest state of every object.

mod support;

use gsrelay::rtp::{PacketClass, RtpPacket};
use gsrelay::rtp::{ccfb, ntp};
use gsrelay::wire::Object;
use gsrelay::{Input, Joined, RelayConfig};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use support::{World, head, x_of};

/// A bottleneck: `bps`, then `delay` of propagation; arrivals wait in order.
struct Path {
    bps: f64,
    delay: Duration,
    free_at: Instant,
    /// (ssrc, seq, arrival) not reported yet.
    arrived: VecDeque<(u32, u16, Instant)>,
}

impl Path {
    fn new(bps: f64, now: Instant) -> Self {
        Self {
            bps,
            delay: Duration::from_millis(20),
            free_at: now,
            arrived: VecDeque::new(),
        }
    }

    fn send(&mut self, now: Instant, ssrc: u32, seq: u16, size: usize) -> Instant {
        let start = self.free_at.max(now);
        self.free_at = start + Duration::from_secs_f64((size + 28) as f64 * 8.0 / self.bps);
        let arrival = self.free_at + self.delay;
        self.arrived.push_back((ssrc, seq, arrival));
        arrival
    }

    /// The CCFB the receiver writes at `now` (its clock is `skew` ahead of the relay's).
    fn feedback(&mut self, w: &World, who: &Joined, skew: Duration) -> Option<Vec<u8>> {
        let now = w.now;
        let mut by_ssrc: HashMap<u32, Vec<(u16, Instant)>> = HashMap::new();
        while self.arrived.front().is_some_and(|p| p.2 <= now) {
            let (ssrc, seq, at) = self.arrived.pop_front().unwrap();
            by_ssrc.entry(ssrc).or_default().push((seq, at));
        }
        let report_ts = ntp::compact(ntp::from_duration(now - w.t0 + skew));
        let mut out = Vec::new();
        for (ssrc, pkts) in by_ssrc {
            let begin = pkts[0].0;
            let end = pkts.last().unwrap().0;
            let metrics: Vec<(bool, u16)> = (0..=end.wrapping_sub(begin))
                .map(|i| {
                    let seq = begin.wrapping_add(i);
                    match pkts.iter().find(|p| p.0 == seq) {
                        Some((_, at)) => {
                            let ato = ((now - *at).as_secs_f64() * 1024.0) as u16;
                            (true, ato.min(ccfb::ATO_OVERRANGE - 1))
                        }
                        None => (false, 0),
                    }
                })
                .collect();
            ccfb::write(&mut out, who.ssrc, ssrc, begin, &metrics, report_ts).unwrap();
        }
        (!out.is_empty()).then_some(out)
    }
}

fn world() -> World {
    let mut w = World::with(RelayConfig::default());
    let now = w.now;
    // The relay's NTP time starts at the epoch; the receiver's runs 1234.5 s ahead.
    w.relay
        .handle_input(
            now,
            Input::SetWallclock {
                since_unix: Duration::ZERO,
            },
        )
        .unwrap();
    w
}

/// 20 objects per packet, each carrying its tick in x: about 8 kB per tick.
fn tick(i: u32) -> Vec<Object> {
    (0..20).map(|id| head(id, i as f32)).collect()
}

struct Run {
    /// Bytes sent to the subscriber behind the path, per second of the run.
    per_second: Vec<u64>,
    /// The newest x the subscriber holds per object at the end.
    latest: HashMap<u64, f32>,
    /// Greatest queueing seen on the path.
    max_queue: Duration,
    /// Packets the other subscriber got.
    other_packets: usize,
}

fn run(w: &mut World, a: &Joined, b: &Joined, c: &Joined, secs: u32, feedback: bool) -> Run {
    let mut path = Path::new(300_000.0, w.now);
    let mut per_second = vec![0u64; secs as usize];
    let mut latest = HashMap::new();
    let mut max_queue = Duration::ZERO;
    let mut other_packets = 0;
    let skew = Duration::from_millis(1_234_500);
    for i in 0..secs * 100 {
        // The publisher at 100 Hz; the relay's timers every 10 ms.
        w.publish(a, &tick(i));
        w.advance(Duration::from_millis(10));
        for s in w.sent() {
            if s.class != PacketClass::Rtp {
                continue;
            }
            if s.to == c.session {
                other_packets += 1;
            }
            if s.to != b.session {
                continue;
            }
            per_second[(i / 100) as usize] += s.bytes.len() as u64;
            let p = RtpPacket::parse(&s.bytes).unwrap();
            let arrival = path.send(w.now, p.ssrc(), p.sequence_number(), s.bytes.len());
            max_queue = max_queue.max(arrival - w.now - path.delay);
            for o in s.objects(gsrelay::wire::Dialect::Draft01) {
                if let Object::Head1(h) = &o {
                    latest.insert(h.id, x_of(&o));
                }
            }
        }
        if feedback
            && i % 5 == 4
            && let Some(fb) = path.feedback(w, b, skew)
        {
            w.rtcp(b, |buf| buf.extend_from_slice(&fb));
        }
    }
    Run {
        per_second,
        latest,
        max_queue,
        other_packets,
    }
}

#[test]
fn without_feedback_nothing_changes() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let c = w.join("r", false, true);
    let r = run(&mut w, &a, &b, &c, 3, false);
    assert_eq!(w.relay.send_budget(b.session), None);
    // Every tick reached b unpaced: far more than the path carries, so its queue grows.
    assert_eq!(r.other_packets, 300);
    assert!(r.max_queue > Duration::from_secs(1), "{:?}", r.max_queue);
}

#[test]
fn feedback_brings_the_send_rate_to_the_path_rate_with_the_newest_state() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let c = w.join("r", false, true);
    let r = run(&mut w, &a, &b, &c, 20, true);
    let budget = w
        .relay
        .send_budget(b.session)
        .expect("a budget from feedback");
    assert!(
        (60_000..=450_000).contains(&budget),
        "budget {budget} for a 300 kbit/s path"
    );
    // The last 10 s: within the path's rate (plus headers' slack), not a growing queue.
    let tail: u64 = r.per_second[10..].iter().sum();
    let bps = tail as f64 * 8.0 / 10.0;
    assert!(bps <= 330_000.0, "sent {bps} bit/s into a 300 kbit/s path");
    assert!(bps >= 100_000.0, "sent only {bps} bit/s");
    assert!(
        r.max_queue < Duration::from_secs(2),
        "queue {:?}",
        r.max_queue
    );
    // Latest-value coalescing: every object arrives, and recently.
    assert_eq!(r.latest.len(), 20);
    let newest = (20 * 100 - 1) as f32;
    for (id, x) in &r.latest {
        assert!(
            newest - x < 100.0,
            "object {id} is {} ticks old",
            newest - x
        );
    }
    // The other subscriber, without feedback, got every tick.
    assert_eq!(r.other_packets, 2000);
    assert_eq!(w.relay.send_budget(c.session), None);
    let info = w.relay.room_info("r").unwrap();
    let b_info = info.sessions.iter().find(|s| s.ssrc == b.ssrc).unwrap();
    assert_eq!(b_info.send_budget_bps, Some(budget));
}

#[test]
fn bogus_feedback_is_ignored_and_counted() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    let c = w.join("r", false, true);
    let ccfb_from = |w: &mut World, who: &Joined, sender: u32, ts: u32| {
        w.rtcp(who, |buf| {
            ccfb::write(buf, sender, a.ssrc, 0, &[(true, 0)], ts).unwrap();
        });
    };
    w.publish(&a, &tick(0));
    // Not the session's own SSRC.
    ccfb_from(&mut w, &b, c.ssrc, 1000);
    assert_eq!(w.dropped("ssrc_mismatch"), 1);
    assert!(
        w.relay
            .room_info("r")
            .unwrap()
            .sessions
            .iter()
            .all(|s| s.send_budget_bps.is_none())
    );
    ccfb_from(&mut w, &b, b.ssrc, 1000);
    // Too soon after the last.
    ccfb_from(&mut w, &b, b.ssrc, 2000);
    assert_eq!(w.suppressed("ccfb_flood"), 1);
    // Going back in time.
    w.advance(Duration::from_millis(50));
    ccfb_from(&mut w, &b, b.ssrc, 10);
    assert_eq!(w.suppressed("ccfb_bad_timestamp"), 1);
    assert_eq!(w.relay.send_budget(c.session), None);
}

#[test]
fn a_transport_budget_caps_and_lifts_like_any_other() {
    let mut w = world();
    let a = w.join("r", true, false);
    let b = w.join("r", false, true);
    w.set_send_budget(b.session, Some(50_000)).unwrap();
    let mut bytes = 0;
    for i in 0..200 {
        w.publish(&a, &tick(i));
        w.advance(Duration::from_millis(10));
        bytes += w
            .sent()
            .iter()
            .filter(|s| s.to == b.session)
            .map(|s| s.bytes.len())
            .sum::<usize>();
    }
    let bps = bytes as f64 * 8.0 / 2.0;
    assert!(bps <= 50_000.0 * 1.2 + 64_000.0, "{bps}");
    w.set_send_budget(b.session, None).unwrap();
    w.publish(&a, &tick(999));
    assert!(w.sent().iter().any(|s| s.to == b.session));
    assert!(w.set_send_budget(12345, Some(1)).is_err());
}
