//! Prometheus metrics, all under the `gsrelay_` prefix with bounded labels only
//! (transport, direction, reason, kind): never an SSRC, object or session.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

/// Every metric the relay exports. Cloning shares the same counters.
#[derive(Clone)]
pub struct Metrics {
    /// The registry `/metrics` renders.
    pub registry: Registry,
    /// Datagrams by transport and direction (`in`/`out`).
    pub packets: IntCounterVec,
    /// Bytes by transport and direction.
    pub bytes: IntCounterVec,
    /// Dropped inbound packets by reason.
    pub dropped: IntCounterVec,
    /// RTCP feedback received by kind (`fir`, `pli`, `nack`, `tmmbr`, `bye`).
    pub feedback: IntCounterVec,
    /// Snapshot packets sent in answer to FIR/PLI.
    pub snapshot_packets: IntCounter,
    /// Snapshots (one per FIR/PLI answered from the cache).
    pub snapshots: IntCounter,
    /// FIRs passed on to a sender because the relay held no state.
    pub firs_forwarded: IntCounter,
    /// NACK repairs sent.
    pub repairs: IntCounter,
    /// Rooms open.
    pub rooms: IntGauge,
    /// Sessions joined.
    pub sessions: IntGauge,
    /// Streams publishing.
    pub streams: IntGauge,
    /// Objects in the store.
    pub cached_objects: IntGauge,
    /// Time from a datagram's arrival to its last forwarded copy leaving, by transport.
    pub forward_latency: HistogramVec,
    /// HTTP API requests by status class.
    pub http_requests: IntCounterVec,
    /// Feedback the relay did not answer (or answered later), by reason.
    pub feedback_suppressed: IntCounterVec,
    /// Defects caught at the shell (a panic in the core), by where they happened.
    pub internal_errors: IntCounterVec,
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Latency buckets from 5 µs to 1 s, fine enough for a relay measured in microseconds.
pub fn latency_buckets() -> Vec<f64> {
    let mut b = Vec::new();
    let mut v = 5e-6;
    while v <= 1.0 {
        for m in [1.0, 2.0, 5.0] {
            b.push(v * m);
        }
        v *= 10.0;
    }
    b
}

impl Metrics {
    /// Creates and registers every metric. Names are static, so a failure here is a bug.
    pub fn new() -> Self {
        let registry = Registry::new();
        let m = Self {
            packets: counter_vec(
                "gsrelay_packets_total",
                "Datagrams by transport and direction.",
                &["transport", "direction"],
            ),
            bytes: counter_vec(
                "gsrelay_bytes_total",
                "Bytes by transport and direction.",
                &["transport", "direction"],
            ),
            dropped: counter_vec(
                "gsrelay_dropped_packets_total",
                "Inbound packets dropped, by reason.",
                &["reason"],
            ),
            feedback: counter_vec(
                "gsrelay_rtcp_feedback_total",
                "RTCP feedback received, by kind.",
                &["kind"],
            ),
            snapshot_packets: counter(
                "gsrelay_snapshot_packets_total",
                "Packets sent as FIR/PLI snapshots.",
            ),
            snapshots: counter(
                "gsrelay_snapshots_total",
                "FIR/PLI answered from the relay's cache.",
            ),
            firs_forwarded: counter(
                "gsrelay_firs_forwarded_total",
                "FIRs passed on to a sender (no cached state).",
            ),
            repairs: counter(
                "gsrelay_nack_repairs_total",
                "NACK repairs sent from the cache.",
            ),
            rooms: gauge("gsrelay_rooms", "Rooms open."),
            sessions: gauge("gsrelay_sessions", "Sessions joined."),
            streams: gauge("gsrelay_streams", "Streams publishing."),
            cached_objects: gauge(
                "gsrelay_cached_objects",
                "Objects held in the latest-state store.",
            ),
            forward_latency: HistogramVec::new(
                HistogramOpts::new(
                    "gsrelay_forward_latency_seconds",
                    "Datagram arrival to forwarded copies sent.",
                )
                .buckets(latency_buckets()),
                &["transport"],
            )
            .unwrap_or_else(|e| panic!("forward latency: {e}")),
            http_requests: counter_vec(
                "gsrelay_http_requests_total",
                "HTTP API requests by status class.",
                &["status"],
            ),
            feedback_suppressed: counter_vec(
                "gsrelay_feedback_suppressed_total",
                "RTCP feedback not answered (or answered later) under the feedback budget, by reason.",
                &["reason"],
            ),
            internal_errors: counter_vec(
                "gsrelay_internal_errors_total",
                "Defects caught in the relay (a panic in the core), by where; each cost one room.",
                &["where"],
            ),
            registry,
        };
        let collectors: [Box<dyn prometheus::core::Collector>; 16] = [
            Box::new(m.packets.clone()),
            Box::new(m.bytes.clone()),
            Box::new(m.dropped.clone()),
            Box::new(m.feedback.clone()),
            Box::new(m.snapshot_packets.clone()),
            Box::new(m.snapshots.clone()),
            Box::new(m.firs_forwarded.clone()),
            Box::new(m.repairs.clone()),
            Box::new(m.rooms.clone()),
            Box::new(m.sessions.clone()),
            Box::new(m.streams.clone()),
            Box::new(m.cached_objects.clone()),
            Box::new(m.forward_latency.clone()),
            Box::new(m.http_requests.clone()),
            Box::new(m.feedback_suppressed.clone()),
            Box::new(m.internal_errors.clone()),
        ];
        for c in collectors {
            m.registry
                .register(c)
                .unwrap_or_else(|e| panic!("register: {e}"));
        }
        m
    }

    /// Counts one dropped packet.
    pub fn drop(&self, reason: &str) {
        self.dropped.with_label_values(&[reason]).inc();
    }

    /// Counts one feedback request suppressed by the feedback budget.
    pub fn suppress(&self, reason: &str) {
        self.feedback_suppressed.with_label_values(&[reason]).inc();
    }

    /// The forward-latency histogram of one transport.
    pub fn latency(&self, transport: &str) -> Histogram {
        self.forward_latency.with_label_values(&[transport])
    }

    /// Renders the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let encoder = prometheus::TextEncoder::new();
        if let Err(e) = encoder.encode_utf8(&self.registry.gather(), &mut out) {
            out = format!("# encoding failed: {e}\n");
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
