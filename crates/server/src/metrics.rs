//! Prometheus metrics, all under the `gsrelay_` prefix (plus the standard `process_*`
//! family) with bounded labels only (transport, direction, reason, kind, route, status,
//! shard): never an SSRC, object, room or session.
//!
//! `docs/operations.md` lists every family with the dashboard panel and alert that read it.

pub mod export;
mod kernel;
pub mod labels;

use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
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
    /// Sessions moved to a new client address, by transport.
    pub address_moves: IntCounterVec,
    /// RTCP feedback received by kind ([`labels::FEEDBACK_KINDS`]).
    pub feedback: IntCounterVec,
    /// Object ownership by outcome ([`labels::OWNERSHIP_OUTCOMES`]).
    pub ownership: IntCounterVec,
    /// Snapshot packets sent in answer to FIR/PLI.
    pub snapshot_packets: IntCounter,
    /// Snapshots (one per FIR/PLI answered from the cache).
    pub snapshots: IntCounter,
    /// FIRs passed on to a sender because the relay held no state.
    pub firs_forwarded: IntCounter,
    /// NACK repairs sent.
    pub repairs: IntCounter,
    /// Aggregated packets built (each sent to every member of its view).
    pub aggregate_payloads: IntCounter,
    /// Aggregated packets sent.
    pub aggregate_packets: IntCounter,
    /// Rooms open.
    pub rooms: IntGauge,
    /// Sessions joined.
    pub sessions: IntGauge,
    /// Streams publishing.
    pub streams: IntGauge,
    /// Objects in the store.
    pub cached_objects: IntGauge,
    /// Sessions on each shard (links between shards left out), by shard.
    pub shard_sessions: IntGaugeVec,
    /// Rooms each shard holds a linked replica of (the room is on other shards too), by
    /// shard: their sum over shards is the replicas of every room held on more than one.
    pub room_replicas: IntGaugeVec,
    /// Time from a datagram's arrival to its last forwarded copy leaving, by transport.
    pub forward_latency: HistogramVec,
    /// HTTP requests by route (the matched path template) and status code.
    pub http_requests: IntCounterVec,
    /// HTTP request durations by route.
    pub http_duration: HistogramVec,
    /// Joins refused, by the error code the client got.
    pub joins_refused: IntCounterVec,
    /// How long an input waits before the relay task gets to it, by shard.
    pub event_loop_lag: HistogramVec,
    /// Objects in each snapshot queued for a subscriber.
    pub snapshot_objects: Histogram,
    /// Payload bytes of each snapshot queued for a subscriber.
    pub snapshot_bytes: Histogram,
    /// From a snapshot being queued to the subscriber having nothing pending (paced).
    pub snapshot_duration: Histogram,
    /// What pacing does to object updates (`gsrelay_objects_*_total`).
    pub pacing: PacingCounters,
    /// 1 while `/readyz` answers 200.
    pub ready: IntGauge,
    /// 1 while the room directory answers (always, in process; with Redis, while the
    /// node's last write reached it).
    pub directory_available: IntGauge,
    /// 1 once a graceful drain has started.
    pub draining: IntGauge,
    /// HTTP requests refused and connections closed by a limit, by limit.
    pub http_limited: IntCounterVec,
    /// Feedback the relay did not answer (or answered later), by reason.
    pub feedback_suppressed: IntCounterVec,
    /// Defects caught at the shell (a panic in the core), by where they happened.
    pub internal_errors: IntCounterVec,
    /// `gsrelay_rtcp_reports_total{kind,direction}`.
    pub rtcp_reports: IntCounterVec,
    /// `gsrelay_session_rtt_seconds`.
    pub session_rtt: Histogram,
    /// QUIC connections by outcome (`attached`, or why one was refused or closed).
    pub quic_connections: IntCounterVec,
    /// WebRTC peer connections by outcome (`connected`, and how one ended).
    pub webrtc_connections: IntCounterVec,
    /// WebTransport sessions (QUIC connections with ALPN `h3`) by outcome, as
    /// [`Self::quic_connections`].
    pub webtransport_sessions: IntCounterVec,
    /// `gsrelay_cluster_links`: QUIC links to other nodes that are up.
    pub cluster_links: IntGauge,
    /// `gsrelay_cluster_nodes`: live nodes in the directory, this one included.
    pub cluster_nodes: IntGauge,
    /// `gsrelay_cluster_link_losses_total{reason}`: links to other nodes lost.
    pub cluster_link_losses: IntCounterVec,
    /// `gsrelay_cluster_links_refused_total{reason}`: links to or from other nodes
    /// refused.
    pub cluster_links_refused: IntCounterVec,
    /// `gsrelay_cluster_forwarded_total{route}`: HTTP requests forwarded to another node.
    pub cluster_forwarded: IntCounterVec,
    /// `gsrelay_cluster_forward_failures_total{route}`: forwarded requests that failed,
    /// each making its node suspect.
    pub cluster_forward_failures: IntCounterVec,
    /// `gsrelay_cluster_sessions_superseded_total`: sessions this node ended because
    /// another node resumed them while this one was frozen or cut off.
    pub cluster_sessions_superseded: IntCounter,
    /// `gsrelay_cluster_isolations_total`: times this node found itself cut off from the
    /// cluster's majority and shed its sessions.
    pub cluster_isolations: IntCounter,
    /// `gsrelay_cluster_node_health{state}`: the other nodes this one knows, by health
    /// (`alive`, `suspect`, `dead`).
    pub cluster_node_health: IntGaugeVec,
    /// `gsrelay_webhook_deliveries_total{outcome}`: webhooks by what became of them, per
    /// event and URL ([`labels::webhook_outcome`]).
    pub webhook_deliveries: IntCounterVec,
    /// `gsrelay_webhook_queued`: webhooks waiting in the URLs' queues.
    pub webhook_queued: IntGauge,
    /// `gsrelay_webhook_delivery_seconds`: from an event being queued to its receiver's
    /// 2xx, retries included.
    pub webhook_latency: Histogram,
    /// `gsrelay_recordings_active`: rooms being recorded on this node.
    pub recordings_active: IntGauge,
    /// `gsrelay_recordings_started_total`: recordings started.
    pub recordings_started: IntCounter,
    /// `gsrelay_recordings_failed_total{reason}`: recordings that stopped on a failure
    /// of their own (`disk_error`, `writer_behind`); the room went on.
    pub recordings_failed: IntCounterVec,
    /// `gsrelay_recordings_deleted_total`: recordings deleted by retention.
    pub recordings_deleted: IntCounter,
}

/// What pacing does to object updates, each counter resolved once so the hot path does
/// no label lookup (and every series exists from the start).
#[derive(Clone)]
pub struct PacingCounters {
    /// `gsrelay_objects_deferred_total{reason}`: updates held back for a paced subscriber.
    pub deferred: IntCounterVec,
    /// Held back by a rate tier.
    pub deferred_rate_tier: IntCounter,
    /// Held back by a bandwidth cap.
    pub deferred_cap: IntCounter,
    /// `gsrelay_objects_coalesced_total`: held-back updates superseded by a newer state
    /// (never sent).
    pub coalesced: IntCounter,
    /// `gsrelay_objects_dropped_total{reason}`: updates dropped for a subscriber.
    pub dropped: IntCounterVec,
    /// Dropped under a bandwidth cap (no objectID: nothing cached to send later).
    pub dropped_cap: IntCounter,
}

impl PacingCounters {
    fn new() -> Self {
        let deferred = counter_vec(
            "gsrelay_objects_deferred_total",
            "Object updates held back for a paced subscriber, by reason.",
            &["reason"],
        );
        let dropped = counter_vec(
            "gsrelay_objects_dropped_total",
            "Object updates dropped for a subscriber, by reason.",
            &["reason"],
        );
        Self {
            deferred_rate_tier: deferred.with_label_values(&["rate_tier"]),
            deferred_cap: deferred.with_label_values(&["bandwidth_cap"]),
            dropped_cap: dropped.with_label_values(&["bandwidth_cap"]),
            coalesced: counter(
                "gsrelay_objects_coalesced_total",
                "Object updates superseded by a newer state while held back (never sent).",
            ),
            deferred,
            dropped,
        }
    }
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

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn exponential(start: f64, factor: f64, count: usize) -> Vec<f64> {
    prometheus::exponential_buckets(start, factor, count).unwrap_or_else(|e| panic!("buckets: {e}"))
}

/// `gsrelay_build_info{version,profile} 1`: which build each instance runs, to join
/// against other series or spot a mixed fleet mid-rollout.
fn build_info() -> IntGaugeVec {
    let info = IntGaugeVec::new(
        Opts::new("gsrelay_build_info", "Always 1; labels name the build."),
        &["version", "profile"],
    )
    .unwrap_or_else(|e| panic!("build info: {e}"));
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    info.with_label_values(&[env!("CARGO_PKG_VERSION"), profile])
        .set(1);
    info
}

/// The standard `process_*` family (CPU seconds, resident and virtual memory, open and
/// maximum file descriptors, threads, start time) of this process. Linux only.
fn process_collector() -> Option<Box<dyn Collector>> {
    #[cfg(target_os = "linux")]
    return Some(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ));
    #[cfg(not(target_os = "linux"))]
    None
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

/// One transport's per-packet metrics, resolved once so that a shell's hot path does no
/// label lookup ([`Metrics::transport`]).
#[derive(Clone)]
pub struct TransportCounters {
    /// Packets received.
    pub packets_in: IntCounter,
    /// Packets sent.
    pub packets_out: IntCounter,
    /// Bytes received.
    pub bytes_in: IntCounter,
    /// Bytes sent.
    pub bytes_out: IntCounter,
    /// From a batch's arrival at the relay task to its forwarded copies handed to the
    /// transport.
    pub latency: Histogram,
    /// Sessions moved to a new client address.
    pub moves: IntCounter,
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
            address_moves: counter_vec(
                "gsrelay_address_moves_total",
                "Sessions moved to a new client address by an authenticated packet, by transport.",
                &["transport"],
            ),
            feedback: counter_vec(
                "gsrelay_rtcp_feedback_total",
                "RTCP feedback received, by kind.",
                &["kind"],
            ),
            ownership: counter_vec(
                "gsrelay_ownership_total",
                "Object ownership: requests granted, objects released or lost to a request, requests refused by reason.",
                &["outcome"],
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
            aggregate_payloads: counter(
                "gsrelay_aggregate_payloads_total",
                "Aggregated-delivery payloads built (each shared by its view's members).",
            ),
            aggregate_packets: counter(
                "gsrelay_aggregate_packets_total",
                "Aggregated-delivery packets sent.",
            ),
            rooms: gauge("gsrelay_rooms", "Rooms open."),
            sessions: gauge("gsrelay_sessions", "Sessions joined."),
            streams: gauge("gsrelay_streams", "Streams publishing."),
            cached_objects: gauge(
                "gsrelay_cached_objects",
                "Objects held in the latest-state store.",
            ),
            shard_sessions: gauge_vec(
                "gsrelay_shard_sessions",
                "Sessions on each shard, links between shards left out.",
                &["shard"],
            ),
            room_replicas: gauge_vec(
                "gsrelay_room_replicas",
                "Rooms each shard holds a linked replica of (the room is on other shards too).",
                &["shard"],
            ),
            forward_latency: histogram_vec(
                "gsrelay_forward_latency_seconds",
                "Datagram arrival to forwarded copies sent.",
                &["transport"],
                latency_buckets(),
            ),
            http_requests: counter_vec(
                "gsrelay_http_requests_total",
                "HTTP requests by route (path template) and status code.",
                &["route", "status"],
            ),
            http_duration: histogram_vec(
                "gsrelay_http_request_duration_seconds",
                "HTTP request durations by route (path template).",
                &["route"],
                exponential(0.0001, 4.0, 9),
            ),
            joins_refused: counter_vec(
                "gsrelay_joins_refused_total",
                "Joins refused, by the error code returned.",
                &["reason"],
            ),
            event_loop_lag: histogram_vec(
                "gsrelay_event_loop_lag_seconds",
                "Time a probe command waits for the relay task to handle it, by shard.",
                &["shard"],
                latency_buckets(),
            ),
            snapshot_objects: histogram(
                "gsrelay_snapshot_objects",
                "Objects per snapshot queued for a subscriber.",
                exponential(1.0, 4.0, 9),
            ),
            snapshot_bytes: histogram(
                "gsrelay_snapshot_bytes",
                "Payload bytes per snapshot queued for a subscriber.",
                exponential(64.0, 4.0, 10),
            ),
            snapshot_duration: histogram(
                "gsrelay_snapshot_duration_seconds",
                "From a snapshot being queued until the subscriber has nothing pending (paced sends).",
                latency_buckets(),
            ),
            pacing: PacingCounters::new(),
            ready: gauge("gsrelay_ready", "1 while /readyz answers 200."),
            directory_available: gauge(
                "gsrelay_directory_available",
                "1 while the room directory answers (with Redis: the node's last write reached it).",
            ),
            draining: gauge("gsrelay_draining", "1 once a graceful drain has started."),
            http_limited: counter_vec(
                "gsrelay_http_limited_total",
                "HTTP requests refused and connections closed by a limit, by limit.",
                &["limit"],
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
            rtcp_reports: counter_vec(
                "gsrelay_rtcp_reports_total",
                "RTCP sender and receiver reports, by kind (sr, rr) and direction (in, out).",
                &["kind", "direction"],
            ),
            session_rtt: histogram(
                "gsrelay_session_rtt_seconds",
                "Round-trip times between the relay and sessions, from their reception reports on the relay's SRs.",
                exponential(0.000_5, 2.0, 14),
            ),
            quic_connections: counter_vec(
                "gsrelay_quic_connections_total",
                "QUIC connections by outcome: attached to a session, or why refused or closed.",
                &["outcome"],
            ),
            webrtc_connections: counter_vec(
                "gsrelay_webrtc_connections_total",
                "WebRTC peer connections by outcome: connected, or how one ended (failed, \
                 closed, never_connected).",
                &["outcome"],
            ),
            webtransport_sessions: counter_vec(
                "gsrelay_webtransport_sessions_total",
                "WebTransport sessions by outcome: attached to a session, or why refused or closed.",
                &["outcome"],
            ),
            cluster_links: gauge(
                "gsrelay_cluster_links",
                "QUIC links to other nodes of the cluster that are up.",
            ),
            cluster_nodes: gauge(
                "gsrelay_cluster_nodes",
                "Live nodes in the room directory, this one included (0 without a cluster).",
            ),
            cluster_link_losses: counter_vec(
                "gsrelay_cluster_link_losses_total",
                "Links to other nodes lost, by reason: silent (keep-alives stopped), closed \
                 (the peer closed it), expired (the peer left the directory).",
                &["reason"],
            ),
            cluster_links_refused: counter_vec(
                "gsrelay_cluster_links_refused_total",
                "Links to or from other nodes refused, by reason: auth (another cluster's \
                 secret), protocol (bad framing).",
                &["reason"],
            ),
            cluster_forwarded: counter_vec(
                "gsrelay_cluster_forwarded_total",
                "HTTP requests forwarded to the node serving the room or session, by route.",
                &["route"],
            ),
            cluster_forward_failures: counter_vec(
                "gsrelay_cluster_forward_failures_total",
                "Requests forwarded to another node that failed (refused, reset, timed out, \
                 a 503, or the node died meanwhile), by route; each makes the node suspect.",
                &["route"],
            ),
            cluster_sessions_superseded: counter(
                "gsrelay_cluster_sessions_superseded_total",
                "Sessions this node ended because another node resumed them while this one \
                 was frozen or cut off from the cluster.",
            ),
            cluster_isolations: counter(
                "gsrelay_cluster_isolations_total",
                "Times this node was cut off from the cluster's majority (linked to fewer than \
                 half of the nodes the directory lists) for a second and shed its sessions.",
            ),
            cluster_node_health: gauge_vec(
                "gsrelay_cluster_node_health",
                "The other nodes this one knows, by health: alive (linked), suspect (a \
                 forwarded request failed in the last 3 s), dead (link lost or record expired).",
                &["state"],
            ),
            webhook_deliveries: counter_vec(
                "gsrelay_webhook_deliveries_total",
                "Webhooks per event and URL by outcome: delivered, retried (a failed attempt \
                 followed by another), rejected (a 4xx), failed (every attempt failed), \
                 dropped (the queue was full).",
                &["outcome"],
            ),
            webhook_queued: gauge(
                "gsrelay_webhook_queued",
                "Webhooks waiting in the URLs' queues.",
            ),
            webhook_latency: histogram(
                "gsrelay_webhook_delivery_seconds",
                "From a webhook being queued to its receiver's 2xx, retries included.",
                exponential(0.001, 4.0, 9),
            ),
            recordings_active: gauge(
                "gsrelay_recordings_active",
                "Rooms being recorded on this node.",
            ),
            recordings_started: counter("gsrelay_recordings_started_total", "Recordings started."),
            recordings_failed: counter_vec(
                "gsrelay_recordings_failed_total",
                "Recordings stopped by a failure of their own (disk_error, writer_behind); \
                 their rooms went on.",
                &["reason"],
            ),
            recordings_deleted: counter(
                "gsrelay_recordings_deleted_total",
                "Recordings deleted by retention.",
            ),
            registry,
        };
        let collectors: Vec<Box<dyn Collector>> = vec![
            Box::new(m.packets.clone()),
            Box::new(m.bytes.clone()),
            Box::new(m.dropped.clone()),
            Box::new(m.address_moves.clone()),
            Box::new(m.feedback.clone()),
            Box::new(m.ownership.clone()),
            Box::new(m.snapshot_packets.clone()),
            Box::new(m.snapshots.clone()),
            Box::new(m.firs_forwarded.clone()),
            Box::new(m.repairs.clone()),
            Box::new(m.aggregate_payloads.clone()),
            Box::new(m.aggregate_packets.clone()),
            Box::new(m.rooms.clone()),
            Box::new(m.sessions.clone()),
            Box::new(m.streams.clone()),
            Box::new(m.cached_objects.clone()),
            Box::new(m.shard_sessions.clone()),
            Box::new(m.room_replicas.clone()),
            Box::new(m.forward_latency.clone()),
            Box::new(m.http_requests.clone()),
            Box::new(m.http_duration.clone()),
            Box::new(m.joins_refused.clone()),
            Box::new(m.event_loop_lag.clone()),
            Box::new(m.snapshot_objects.clone()),
            Box::new(m.snapshot_bytes.clone()),
            Box::new(m.snapshot_duration.clone()),
            Box::new(m.pacing.deferred.clone()),
            Box::new(m.pacing.coalesced.clone()),
            Box::new(m.pacing.dropped.clone()),
            Box::new(m.ready.clone()),
            Box::new(m.directory_available.clone()),
            Box::new(m.draining.clone()),
            Box::new(m.http_limited.clone()),
            Box::new(m.feedback_suppressed.clone()),
            Box::new(m.internal_errors.clone()),
            Box::new(m.rtcp_reports.clone()),
            Box::new(m.session_rtt.clone()),
            Box::new(m.quic_connections.clone()),
            Box::new(m.webrtc_connections.clone()),
            Box::new(m.webtransport_sessions.clone()),
            Box::new(m.cluster_links.clone()),
            Box::new(m.cluster_nodes.clone()),
            Box::new(m.cluster_link_losses.clone()),
            Box::new(m.cluster_links_refused.clone()),
            Box::new(m.cluster_forwarded.clone()),
            Box::new(m.cluster_forward_failures.clone()),
            Box::new(m.cluster_sessions_superseded.clone()),
            Box::new(m.cluster_isolations.clone()),
            Box::new(m.cluster_node_health.clone()),
            Box::new(m.webhook_deliveries.clone()),
            Box::new(m.webhook_queued.clone()),
            Box::new(m.webhook_latency.clone()),
            Box::new(m.recordings_active.clone()),
            Box::new(m.recordings_started.clone()),
            Box::new(m.recordings_failed.clone()),
            Box::new(m.recordings_deleted.clone()),
            Box::new(build_info()),
            Box::new(kernel::UdpRcvbufErrors::new()),
        ];
        for c in collectors.into_iter().chain(process_collector()) {
            m.registry
                .register(c)
                .unwrap_or_else(|e| panic!("register: {e}"));
        }
        m.create_known_series();
        m
    }

    /// Creates every series of a closed label set ([`labels`]) at zero, so that it is
    /// exported before its first event.
    fn create_known_series(&self) {
        use labels::*;
        let families: [(&IntCounterVec, &[&[&str]]); 15] = [
            (&self.feedback, &[FEEDBACK_KINDS]),
            (&self.ownership, &[OWNERSHIP_OUTCOMES]),
            (&self.feedback_suppressed, &[FEEDBACK_SUPPRESSED]),
            (&self.internal_errors, &[INTERNAL_ERROR_PLACES]),
            (&self.http_limited, &[http_limit::ALL]),
            (&self.joins_refused, &[JOIN_REFUSALS]),
            (
                &self.quic_connections,
                &[SESSION_OUTCOMES, HANDSHAKE_OUTCOMES],
            ),
            (
                &self.webtransport_sessions,
                &[SESSION_OUTCOMES, WEBTRANSPORT_OUTCOMES],
            ),
            (&self.webrtc_connections, &[WEBRTC_OUTCOMES]),
            (&self.cluster_link_losses, &[LINK_LOSSES]),
            (&self.cluster_links_refused, &[LINK_REFUSALS]),
            (&self.cluster_forwarded, &[FORWARDED_ROUTES]),
            (&self.cluster_forward_failures, &[FORWARDED_ROUTES]),
            (&self.webhook_deliveries, &[webhook_outcome::ALL]),
            (&self.recordings_failed, &[RECORDING_FAILURES]),
        ];
        for (family, lists) in families {
            for value in lists.iter().copied().flatten() {
                family.with_label_values(&[value]);
            }
        }
        for state in NODE_HEALTH {
            self.cluster_node_health.with_label_values(&[state]).set(0);
        }
    }

    /// Counts one dropped packet.
    pub fn drop(&self, reason: &str) {
        self.dropped.with_label_values(&[reason]).inc();
    }

    /// Counts one feedback request suppressed by the feedback budget.
    pub fn suppress(&self, reason: &str) {
        self.feedback_suppressed.with_label_values(&[reason]).inc();
    }

    /// Counts and times one HTTP request.
    pub fn observe_http(&self, route: &str, status: u16, took: std::time::Duration) {
        self.http_requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
        self.http_duration
            .with_label_values(&[route])
            .observe(took.as_secs_f64());
    }

    /// Counts one refused join by the error code its client got.
    pub fn refuse_join(&self, code: &str) {
        self.joins_refused.with_label_values(&[code]).inc();
    }

    /// The forward-latency histogram of one transport.
    pub fn latency(&self, transport: &str) -> Histogram {
        self.forward_latency.with_label_values(&[transport])
    }

    /// The per-packet metrics of one transport, labels resolved once.
    pub fn transport(&self, transport: &str) -> TransportCounters {
        TransportCounters {
            packets_in: self.packets.with_label_values(&[transport, "in"]),
            packets_out: self.packets.with_label_values(&[transport, "out"]),
            bytes_in: self.bytes.with_label_values(&[transport, "in"]),
            bytes_out: self.bytes.with_label_values(&[transport, "out"]),
            latency: self.latency(transport),
            moves: self.address_moves.with_label_values(&[transport]),
        }
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
