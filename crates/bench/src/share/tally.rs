//! What a run's clients counted, in a form that adds up: every figure of the [`Report`]
//! is computed from a [`Tally`], and the tallies of agents that each ran a share of the
//! clients merge into the tally of the whole run (counts add, histograms merge bucket by
//! bucket), so a merged report's percentiles come from the merged histogram and never
//! from averaged percentiles.

use crate::report::{Latency, Report, SnapshotTimes, TargetKind};
use crate::scenario::Scenario;
use anyhow::{Context, bail};
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use serde::{Deserialize, Serialize};

/// Highest latency the histograms hold, ns.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// Significant digits of the latency histograms.
const LATENCY_DIGITS: u8 = 3;

/// A latency histogram of the range and precision every tally uses.
pub fn latency_histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_max(MAX_LATENCY_NS, LATENCY_DIGITS)?)
}

/// One room's counts: what its publishers sent in the window, and what its subscribers
/// present from the start received of it (the loss ratio's terms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoomTally {
    /// Packets its publishers sent in the window.
    pub sent: u64,
    /// Its subscribers present from the start (neither late nor slow).
    pub subscribers: u64,
    /// Packets they received with a send time in the window.
    pub received: u64,
}

/// What one publisher counted.
#[derive(Debug, Clone, Copy)]
pub struct PublisherCount {
    /// Its room.
    pub room: usize,
    /// Packets sent in the window.
    pub packets: u64,
    /// Objects sent in the window (the bench object not counted).
    pub objects: u64,
    /// Packets of live objects sent in the window.
    pub live: u64,
    /// Packets of live objects the schedule called for.
    pub nominal: f64,
}

/// What one subscriber counted.
#[derive(Debug)]
pub struct SubscriberCount<'a> {
    /// Its room.
    pub room: usize,
    /// Joined mid-run and asked for a snapshot.
    pub late: bool,
    /// Capped: left out of every figure but its own.
    pub slow: bool,
    /// Packets received with a send time in the window.
    pub packets: u64,
    /// Objects in those packets.
    pub objects: u64,
    /// Objects received in the window in any packet (the slow subscribers' figure).
    pub all_objects: u64,
    /// Packets its sequence numbers called for, and packets received.
    pub seq: (u64, u64),
    /// Its latencies, ns (empty unless it observes).
    pub latency: &'a Histogram<u64>,
    /// `Some(None)`: a snapshot asked for and not completed.
    pub snapshot: Option<Option<std::time::Duration>>,
}

/// The counts of a run, or of an agent's share of one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// By room index.
    pub rooms: Vec<RoomTally>,
    /// Packets of live objects sent in the window.
    pub sent_live: u64,
    /// Packets of live objects the schedule called for.
    pub nominal: f64,
    /// Objects sent in the window.
    pub sent_objects: u64,
    /// Packets received in the window by every subscriber but the slow ones.
    pub received_packets: u64,
    /// Objects in those packets.
    pub received_objects: u64,
    /// Packets the sequence numbers of the subscribers present from the start called for.
    pub seq_expected: u64,
    /// Packets those subscribers received, over the whole run.
    pub seq_received: u64,
    /// The observers' latencies, ns: HdrHistogram's V2 encoding in base64 in JSON.
    #[serde(with = "v2")]
    pub latency_ns: Histogram<u64>,
    /// Each late joiner's snapshot completion, ns (`None`: not completed).
    pub snapshots_ns: Vec<Option<u64>>,
    /// Slow subscribers.
    pub slow_subscribers: u64,
    /// Objects the slow subscribers received in the window.
    pub slow_objects: u64,
    /// CPU seconds of the bench processes during the window.
    pub process_cpu_s: f64,
}

/// What the bench saw of its target beside the clients (in process only).
#[derive(Debug, Clone, Default)]
pub struct TargetFigures {
    /// CPU seconds of the target's threads during the window.
    pub relay_cpu_s: Option<f64>,
    /// Of each of its shard threads.
    pub shard_cpu_s: Vec<f64>,
    /// Bytes its shards sent each other over links during the window.
    pub link_bytes: Option<u64>,
    /// Peak RSS of the process that holds it.
    pub peak_rss: Option<u64>,
}

impl Tally {
    /// An empty tally of `rooms` rooms.
    pub fn new(rooms: usize) -> anyhow::Result<Self> {
        Ok(Self {
            rooms: vec![RoomTally::default(); rooms],
            sent_live: 0,
            nominal: 0.0,
            sent_objects: 0,
            received_packets: 0,
            received_objects: 0,
            seq_expected: 0,
            seq_received: 0,
            latency_ns: latency_histogram()?,
            snapshots_ns: Vec::new(),
            slow_subscribers: 0,
            slow_objects: 0,
            process_cpu_s: 0.0,
        })
    }

    fn room(&mut self, room: usize) -> anyhow::Result<&mut RoomTally> {
        let n = self.rooms.len();
        self.rooms
            .get_mut(room)
            .with_context(|| format!("room {room} of a tally of {n} rooms"))
    }

    /// Counts one publisher.
    pub fn add_publisher(&mut self, p: PublisherCount) -> anyhow::Result<()> {
        self.room(p.room)?.sent += p.packets;
        self.sent_live += p.live;
        self.nominal += p.nominal;
        self.sent_objects += p.objects;
        Ok(())
    }

    /// Counts one subscriber.
    pub fn add_subscriber(&mut self, s: SubscriberCount<'_>) -> anyhow::Result<()> {
        if s.slow {
            self.slow_subscribers += 1;
            self.slow_objects += s.all_objects;
            return Ok(());
        }
        if !s.late {
            let room = self.room(s.room)?;
            room.subscribers += 1;
            room.received += s.packets;
            self.seq_expected += s.seq.0;
            self.seq_received += s.seq.1;
        }
        self.received_packets += s.packets;
        self.received_objects += s.objects;
        self.latency_ns.add(s.latency)?;
        if let Some(done) = s.snapshot {
            self.snapshots_ns.push(done.map(|d| d.as_nanos() as u64));
        }
        Ok(())
    }

    /// Adds `other`, the tally of other clients of the same scenario.
    pub fn merge(&mut self, other: &Tally) -> anyhow::Result<()> {
        if other.rooms.len() != self.rooms.len() {
            bail!(
                "a tally of {} rooms merged into one of {}",
                other.rooms.len(),
                self.rooms.len()
            );
        }
        for (a, b) in self.rooms.iter_mut().zip(&other.rooms) {
            a.sent += b.sent;
            a.subscribers += b.subscribers;
            a.received += b.received;
        }
        self.sent_live += other.sent_live;
        self.nominal += other.nominal;
        self.sent_objects += other.sent_objects;
        self.received_packets += other.received_packets;
        self.received_objects += other.received_objects;
        self.seq_expected += other.seq_expected;
        self.seq_received += other.seq_received;
        self.latency_ns.add(&other.latency_ns)?;
        self.snapshots_ns.extend_from_slice(&other.snapshots_ns);
        self.slow_subscribers += other.slow_subscribers;
        self.slow_objects += other.slow_objects;
        self.process_cpu_s += other.process_cpu_s;
        Ok(())
    }

    /// Packets sent in the window, all rooms.
    pub fn sent_packets(&self) -> u64 {
        self.rooms.iter().map(|r| r.sent).sum()
    }

    /// The report of scenario `s`: every figure from these counts and `target`'s.
    pub fn report(
        &self,
        s: &Scenario,
        target: TargetKind,
        impairment: Option<String>,
        seen: &TargetFigures,
    ) -> Report {
        let secs = s.duration_s;
        let sent = self.sent_packets();
        let received = self.received_packets;
        let received_objects = self.received_objects;
        Report {
            scenario: s.clone(),
            target,
            impairment,
            duration_s: secs,
            rooms: s.rooms,
            publishers: s.rooms * s.publishers,
            subscribers: s.rooms * s.subscribers,
            sent_pps: sent as f64 / secs,
            offered_share: if self.nominal > 0.0 {
                self.sent_live as f64 / self.nominal
            } else {
                0.0
            },
            received_pps: received as f64 / secs,
            sent_objects_per_s: self.sent_objects as f64 / secs,
            received_objects_per_s: received_objects as f64 / secs,
            loss_ratio: self.loss_ratio(),
            seq_loss_ratio: (self.seq_expected > 0)
                .then(|| 1.0 - self.seq_received as f64 / self.seq_expected as f64),
            latency_us: Latency::from_ns(&self.latency_ns),
            snapshot_ms: self.snapshot_times(s),
            relay_cpu_s: seen.relay_cpu_s,
            relay_shard_cpu_s: seen.shard_cpu_s.clone(),
            link_bytes_per_s: seen.link_bytes.map(|b| b as f64 / secs),
            link_bytes_per_update: seen
                .link_bytes
                .filter(|_| sent > 0)
                .map(|b| b as f64 / sent as f64),
            relay_cpu_us_per_update: seen
                .relay_cpu_s
                .filter(|_| received_objects > 0)
                .map(|cpu| cpu * 1e6 / received_objects as f64),
            relay_cpu_us_per_packet: seen
                .relay_cpu_s
                .filter(|_| sent + received > 0)
                .map(|cpu| cpu * 1e6 / (sent + received) as f64),
            client_cpu_us_per_update: (received_objects > 0).then(|| {
                let clients = self.process_cpu_s - seen.relay_cpu_s.unwrap_or(0.0);
                clients.max(0.0) * 1e6 / received_objects as f64
            }),
            process_cpu_s: self.process_cpu_s,
            relay_peak_rss_bytes: seen.peak_rss,
            impair_dropped: None,
            relay_rtt_ms: None,
            slow_subscribers: self.slow_subscribers as usize,
            slow_received_objects_per_s: (self.slow_subscribers > 0)
                .then(|| self.slow_objects as f64 / secs / self.slow_subscribers as f64),
            baseline: None,
            ratio_received_pps: None,
            ratio_cpu_per_packet: None,
        }
    }

    /// Over the subscribers present from the start: the share of the packets their room's
    /// publishers sent in the window that they did not receive.
    fn loss_ratio(&self) -> f64 {
        let expected: u64 = self.rooms.iter().map(|r| r.sent * r.subscribers).sum();
        let got: u64 = self.rooms.iter().map(|r| r.received).sum();
        if expected == 0 {
            0.0
        } else {
            (1.0 - got as f64 / expected as f64).clamp(0.0, 1.0)
        }
    }

    /// Late joiners' snapshot completion times, when any asked.
    fn snapshot_times(&self, s: &Scenario) -> Option<SnapshotTimes> {
        if self.snapshots_ns.is_empty() {
            return None;
        }
        let mut done: Vec<f64> = self
            .snapshots_ns
            .iter()
            .flatten()
            .map(|ns| *ns as f64 / 1e6)
            .collect();
        done.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let i = ((done.len() as f64 * p).ceil() as usize).saturating_sub(1);
            done.get(i).copied().unwrap_or(0.0)
        };
        Some(SnapshotTimes {
            p50: q(0.5),
            p99: q(0.99),
            max: done.last().copied().unwrap_or(0.0),
            completed: done.len() as u64,
            incomplete: self.snapshots_ns.iter().filter(|d| d.is_none()).count() as u64,
            expected_objects: (s.publishers * (s.objects + s.static_objects)) as u64,
        })
    }
}

/// A histogram as HdrHistogram's V2 encoding (the format its other implementations read
/// too), in base64 so that it fits a JSON string.
mod v2 {
    use super::*;
    use serde::Serializer;

    pub fn serialize<S: Serializer>(h: &Histogram<u64>, out: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(h, &mut bytes)
            .map_err(|e| serde::ser::Error::custom(format!("{e:?}")))?;
        out.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        decode(&text).map_err(serde::de::Error::custom)
    }

    /// Decodes one histogram, refusing any of another range or precision than
    /// [`latency_histogram`]'s (they could not merge exactly).
    pub fn decode(text: &str) -> anyhow::Result<Histogram<u64>> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .context("a latency histogram that is not base64")?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| anyhow::anyhow!("a latency histogram that does not decode: {e:?}"))?;
        let want = latency_histogram()?;
        if h.sigfig() != want.sigfig() || h.high() != want.high() || h.low() != want.low() {
            bail!(
                "a latency histogram of range {}..={} ns at {} digits, not {}..={} at {}",
                h.low(),
                h.high(),
                h.sigfig(),
                want.low(),
                want.high(),
                want.sigfig()
            );
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share::Share;
    use std::time::Duration;

    /// Latencies from 1 µs to 2 s, from an LCG started at `seed`.
    fn latencies(seed: u64, n: usize) -> impl Iterator<Item = u64> {
        let mut x = seed;
        (0..n).map(move |_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            1_000 + (x >> 20) % 2_000_000_000
        })
    }

    /// Through JSON, as an agent sends its tally.
    fn round_trip(t: &Tally) -> Tally {
        serde_json::from_str(&serde_json::to_string(t).unwrap()).unwrap()
    }

    #[test]
    fn histograms_serialised_by_parts_merge_into_the_whole_exactly() {
        let mut whole = latency_histogram().unwrap();
        let mut parts = vec![Tally::new(1).unwrap(); 3];
        for (i, v) in latencies(1, 100_000).enumerate() {
            whole.record(v).unwrap();
            parts[i % 3].latency_ns.record(v).unwrap();
        }
        let mut merged = Tally::new(1).unwrap();
        for p in &parts {
            merged.merge(&round_trip(p)).unwrap();
        }
        // (`assert!`: a failing `assert_eq!` would print every bucket.)
        assert!(merged.latency_ns == whole);
        assert_eq!(merged.latency_ns.len(), 100_000);
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                merged.latency_ns.value_at_quantile(q),
                whole.value_at_quantile(q)
            );
        }
        assert_eq!(merged.latency_ns.max(), whole.max());
        assert_eq!(merged.latency_ns.min(), whole.min());
    }

    /// Counts every client of a scenario of 3 rooms × 5 publishers × 7 subscribers (the
    /// last of each room late, one slow) would report, for the clients `share` holds.
    fn tally_of(share: Share) -> Tally {
        let mut t = Tally::new(3).unwrap();
        let mut h = latency_histogram().unwrap();
        for room in 0..3 {
            for n in (0..5).filter(|n| share.holds(room, *n)) {
                let k = (room * 10 + n) as u64;
                t.add_publisher(PublisherCount {
                    room,
                    packets: 100 + k,
                    objects: 500 + k,
                    live: 90 + k,
                    nominal: 100.0,
                })
                .unwrap();
            }
            for n in (0..8).filter(|n| share.holds(room, *n)) {
                let k = (room * 10 + n) as u64;
                h.reset();
                for v in latencies(k, 10 + n) {
                    h.record(v).unwrap();
                }
                t.add_subscriber(SubscriberCount {
                    room,
                    late: n == 6,
                    slow: n == 7,
                    packets: 300 + k,
                    objects: 1_500 + k,
                    all_objects: 1_600 + k,
                    seq: (320 + k, 300 + k),
                    latency: &h,
                    snapshot: (n == 6).then_some(Some(Duration::from_micros(100 + k))),
                })
                .unwrap();
            }
        }
        t
    }

    #[test]
    fn tallies_of_shares_merge_into_the_tally_of_the_whole() {
        let mut whole = tally_of(Share::WHOLE);
        whole.snapshots_ns.sort();
        for agents in [2, 3, 4] {
            let mut merged = Tally::new(3).unwrap();
            for index in 0..agents {
                let part = tally_of(Share::new(index, agents).unwrap());
                merged.merge(&round_trip(&part)).unwrap();
            }
            // Late joiners' times come in the agents' order; their quantiles do not care.
            merged.snapshots_ns.sort();
            assert!(merged.latency_ns == whole.latency_ns, "{agents} agents");
            merged.latency_ns = whole.latency_ns.clone();
            assert_eq!(merged, whole, "{agents} agents");
        }
        let s = Scenario {
            rooms: 3,
            ..Scenario::default()
        };
        let r = whole.report(&s, TargetKind::Remote, None, &TargetFigures::default());
        assert_eq!(r.slow_subscribers, 3);
        assert_eq!(r.snapshot_ms.map(|t| t.completed), Some(3));
        assert!(r.loss_ratio > 0.0 && r.loss_ratio < 1.0);
    }

    #[test]
    fn garbage_and_foreign_histograms_are_refused() {
        let mut t = serde_json::to_value(Tally::new(1).unwrap()).unwrap();
        for bad in ["not base64!", "AAAA", ""] {
            t["latency_ns"] = bad.into();
            assert!(serde_json::from_value::<Tally>(t.clone()).is_err(), "{bad}");
        }
        // Two digits instead of three: it would not merge exactly.
        let coarse = Histogram::<u64>::new_with_max(MAX_LATENCY_NS, 2).unwrap();
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&coarse, &mut bytes).unwrap();
        t["latency_ns"] = base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .into();
        let err = serde_json::from_value::<Tally>(t).unwrap_err().to_string();
        assert!(err.contains("2 digits"), "{err}");
        let mut a = Tally::new(2).unwrap();
        assert!(a.merge(&Tally::new(3).unwrap()).is_err());
        assert!(
            a.add_publisher(PublisherCount {
                room: 2,
                packets: 1,
                objects: 1,
                live: 1,
                nominal: 1.0
            })
            .is_err()
        );
    }
}
