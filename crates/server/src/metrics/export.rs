//! Exports the core's plain-data statistics ([`RelayStats`]) to Prometheus. Each shell
//! owns one [`StatsExporter`] and calls [`StatsExporter::export`] after handling an input:
//! it adds what grew since the last call, so several cores (shards) add into the same
//! series, and label look-ups happen once per reason, not per packet.

use super::Metrics;
use gsrelay_core::relay::{Relay, RelayStats, StatEvent};
use prometheus::{IntCounter, IntCounterVec, IntGauge};

/// Reasons a family resolves before its list grows: a reason first seen in steady state
/// then costs the label look-up once, and no growth on the forwarding path.
const REASONS: usize = 32;

/// Counters of one labelled family, each label resolved once.
struct Family {
    vec: IntCounterVec,
    resolved: Vec<(&'static str, IntCounter)>,
}

impl Family {
    fn new(vec: &IntCounterVec) -> Self {
        Self {
            vec: vec.clone(),
            resolved: Vec::with_capacity(REASONS),
        }
    }

    fn add(&mut self, reason: &'static str, n: u64) {
        if let Some((_, c)) = self.resolved.iter().find(|(r, _)| *r == reason) {
            c.inc_by(n);
            return;
        }
        let c = self.vec.with_label_values(&[reason]);
        c.inc_by(n);
        self.resolved.push((reason, c));
    }
}

/// A gauge that several cores add to: each exporter adds its own change.
struct SharedGauge {
    gauge: IntGauge,
    last: i64,
}

impl SharedGauge {
    fn new(gauge: &IntGauge) -> Self {
        Self {
            gauge: gauge.clone(),
            last: 0,
        }
    }

    fn set(&mut self, value: u64) {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        self.gauge.add(value - self.last);
        self.last = value;
    }
}

impl Drop for SharedGauge {
    /// A core that stops holds nothing any more.
    fn drop(&mut self) {
        self.gauge.sub(self.last);
    }
}

/// Turns one core's statistics into Prometheus series.
pub struct StatsExporter {
    metrics: Metrics,
    last: RelayStats,
    dropped: Family,
    feedback: Family,
    ownership: Family,
    suppressed: Family,
    rooms: SharedGauge,
    sessions: SharedGauge,
    streams: SharedGauge,
    cached_objects: SharedGauge,
    reports: ReportCounters,
}

/// `gsrelay_rtcp_reports_total{kind,direction}`, each series resolved once.
struct ReportCounters {
    sr_out: IntCounter,
    rr_out: IntCounter,
    sr_in: IntCounter,
    rr_in: IntCounter,
}

impl ReportCounters {
    fn new(m: &Metrics) -> Self {
        let c = |kind: &str, direction: &str| m.rtcp_reports.with_label_values(&[kind, direction]);
        Self {
            sr_out: c("sr", "out"),
            rr_out: c("rr", "out"),
            sr_in: c("sr", "in"),
            rr_in: c("rr", "in"),
        }
    }
}

impl StatsExporter {
    /// An exporter into `metrics`.
    pub fn new(metrics: &Metrics) -> Self {
        Self {
            metrics: metrics.clone(),
            last: RelayStats::default(),
            dropped: Family::new(&metrics.dropped),
            feedback: Family::new(&metrics.feedback),
            ownership: Family::new(&metrics.ownership),
            suppressed: Family::new(&metrics.feedback_suppressed),
            rooms: SharedGauge::new(&metrics.rooms),
            sessions: SharedGauge::new(&metrics.sessions),
            streams: SharedGauge::new(&metrics.streams),
            cached_objects: SharedGauge::new(&metrics.cached_objects),
            reports: ReportCounters::new(metrics),
        }
    }

    /// Adds what `relay` counted since the last call, and takes its measurements.
    pub fn export(&mut self, relay: &mut Relay) {
        let now = relay.stats();
        self.export_reports(now, &self.last);
        let m = &self.metrics;
        let last = &self.last;
        add_new(&mut self.dropped, &now.dropped, &last.dropped);
        add_new(&mut self.feedback, &now.feedback, &last.feedback);
        add_new(&mut self.ownership, &now.ownership, &last.ownership);
        add_new(&mut self.suppressed, &now.suppressed, &last.suppressed);
        m.snapshots.inc_by(now.snapshots - last.snapshots);
        m.firs_forwarded
            .inc_by(now.firs_forwarded - last.firs_forwarded);
        m.repairs.inc_by(now.repairs - last.repairs);
        m.aggregate_payloads
            .inc_by(now.aggregate_payloads - last.aggregate_payloads);
        m.aggregate_packets
            .inc_by(now.aggregate_packets - last.aggregate_packets);
        let (p, q) = (&now.pacing, &last.pacing);
        m.pacing
            .deferred_rate_tier
            .inc_by(p.deferred_rate_tier - q.deferred_rate_tier);
        m.pacing
            .deferred_cap
            .inc_by(p.deferred_cap - q.deferred_cap);
        m.pacing.dropped_cap.inc_by(p.dropped_cap - q.dropped_cap);
        m.pacing.coalesced.inc_by(p.coalesced - q.coalesced);
        self.streams.set(now.streams);
        self.cached_objects.set(now.cached_objects);
        self.last.clone_from(now);
        self.rooms.set(relay.room_count() as u64);
        self.sessions.set(relay.session_count() as u64);
    }

    /// Counts a packet the shell itself dropped (before or after the core), by reason,
    /// without a label look-up after the first of each reason.
    pub fn drop(&mut self, reason: &'static str) {
        self.dropped.add(reason, 1);
    }

    /// Counts `n` packets dropped for `reason` in one add.
    pub fn drop_n(&mut self, reason: &'static str, n: u64) {
        self.dropped.add(reason, n);
    }

    /// RTCP reports sent and received since the last call.
    fn export_reports(&self, now: &RelayStats, last: &RelayStats) {
        let r = &self.reports;
        let (s, l) = (&now.rtcp, &last.rtcp);
        for (counter, n) in [
            (&r.sr_out, s.sender_reports_sent - l.sender_reports_sent),
            (&r.rr_out, s.receiver_reports_sent - l.receiver_reports_sent),
            (
                &r.sr_in,
                s.sender_reports_received - l.sender_reports_received,
            ),
            (
                &r.rr_in,
                s.receiver_reports_received - l.receiver_reports_received,
            ),
        ] {
            counter.inc_by(n);
        }
    }

    /// Turns one of the core's measurements into its histogram sample.
    pub fn observe(&self, e: StatEvent) {
        let m = &self.metrics;
        match e {
            StatEvent::SnapshotQueued { objects, bytes } => {
                m.snapshot_objects.observe(objects as f64);
                m.snapshot_bytes.observe(bytes as f64);
            }
            StatEvent::SnapshotSent { took } => m.snapshot_duration.observe(took.as_secs_f64()),
            StatEvent::Rtt { rtt } => m.session_rtt.observe(rtt.as_secs_f64()),
        }
    }
}

/// Adds to `family` what each reason gained between `last` and `now`.
fn add_new(
    family: &mut Family,
    now: &gsrelay_core::relay::stats::ReasonCounts,
    last: &gsrelay_core::relay::stats::ReasonCounts,
) {
    for (reason, n) in now.iter() {
        let grew = n - last.get(reason);
        if grew > 0 {
            family.add(reason, grew);
        }
    }
}
