//! The label values of every labelled family whose values form a closed set, one list per
//! family. [`super::Metrics::new`] creates each of these series at zero, so a healthy
//! relay exports them before their first event: a dashboard panel then reads 0 rather
//! than "no data", and a `rate()` alert can tell "none happened" from "not exported".
//!
//! Values named outside the `metrics` and `control` modules (the core's and the transports')
//! stay string literals where they are produced; `tests/metric_labels.rs` reads them from
//! the source and checks that each one is in its list here, so a new value cannot be
//! forgotten.
//!
//! Families left out are open or created elsewhere: `gsrelay_dropped_packets_total`
//! (reasons come from parsers' and shells' errors all over the code and grow with them),
//! `gsrelay_http_requests_total` and `gsrelay_http_request_duration_seconds` (a route
//! times every status code it may answer), and the per-transport and per-shard families,
//! whose series are created when their transport or shard starts.

/// `gsrelay_rtcp_feedback_total{kind}`: the RTCP feedback the core counts.
pub const FEEDBACK_KINDS: &[&str] = &["fir", "pli", "nack", "tmmbr", "ccfb", "bye"];

/// `gsrelay_feedback_suppressed_total{reason}`: feedback held back or ignored by the
/// core (`docs/relay.md`).
pub const FEEDBACK_SUPPRESSED: &[&str] = &[
    "unknown_stream",
    "fir_repeat",
    "snapshot_interval",
    "nack_repeat",
    "ccfb_flood",
    "ccfb_bad_timestamp",
    "report_flood",
    "sr_without_stream",
    "sr_absurd",
    "rr_unknown_source",
    "rr_unknown_lsr",
    "rr_absurd",
];

/// `gsrelay_ownership_total{outcome}`: ownership requests granted, objects released and
/// lost to a request, and requests refused by reason (`docs/relay.md`, "Room objects and
/// ownership"; the reasons are the names of `handover::Reason`).
pub const OWNERSHIP_OUTCOMES: &[&str] = &[
    "granted",
    "released",
    "lost",
    "contended",
    "no_object",
    "not_home",
    "dialect_mismatch",
    "id_in_use",
    "too_many_held",
    "not_publisher",
];

/// `gsrelay_internal_errors_total{where}`: where the shells hand the core an input.
pub const INTERNAL_ERROR_PLACES: &[&str] = &[
    "rtp",
    "rtcp",
    "timeout",
    "command",
    "path",
    "aggregate",
    "checkpoint",
];

/// `gsrelay_http_limited_total{limit}`: the HTTP limits, each named where it is counted.
pub mod http_limit {
    /// A token's identity over its request rate.
    pub const RATE_LIMITED: &str = "rate_limited";
    /// `max_in_flight` requests already being handled.
    pub const OVERLOADED: &str = "overloaded";
    /// A request body slower than `body_timeout`.
    pub const BODY_TIMEOUT: &str = "body_timeout";
    /// A request head slower than `header_timeout`.
    pub const HEADER_TIMEOUT: &str = "header_timeout";
    /// A connection idle for `idle_timeout`.
    pub const IDLE_TIMEOUT: &str = "idle_timeout";
    /// Every limit.
    pub const ALL: &[&str] = &[
        RATE_LIMITED,
        OVERLOADED,
        BODY_TIMEOUT,
        HEADER_TIMEOUT,
        IDLE_TIMEOUT,
    ];
}

/// `gsrelay_joins_refused_total{reason}`: the error codes a join can be answered with
/// (`docs/api.md`, "Errors", less those of other endpoints).
pub const JOIN_REFUSALS: &[&str] = &[
    "malformed_json",
    "room_read_only",
    "invalid_room",
    "bad_path",
    "bad_body",
    "token_missing",
    "token_malformed",
    "token_bad_signature",
    "token_wrong_algorithm",
    "token_expired",
    "token_not_yet_valid",
    "token_iat_missing",
    "token_iat_in_future",
    "token_ttl_too_long",
    "forbidden_room",
    "forbidden_right",
    "plain_rtp_disabled",
    "request_timeout",
    "ssrc_taken",
    "room_closed",
    "removed",
    "resume_invalid",
    "resume_stale",
    "body_too_large",
    "invalid_request",
    "invalid_interest",
    "unsupported_transport",
    "invalid_sdp_offer",
    "no_data_channel",
    "room_full",
    "rate_limited",
    "draining",
    "overloaded",
    "relay_full",
    "too_many_rooms",
    "relay_stopped",
    "directory_unavailable",
    "cluster_linking",
    "node_unavailable",
    "webrtc_address_unknown",
];

/// How a QUIC connection or WebTransport session that got past the handshake ended:
/// `outcome` of both `gsrelay_quic_connections_total` and
/// `gsrelay_webtransport_sessions_total`.
pub const SESSION_OUTCOMES: &[&str] = &[
    "attached",
    "token_invalid",
    "token_expired",
    "token_wrong_protocol",
    "token_timeout",
    "closed_before_token",
    "relay_stopped",
];

/// Outcomes before the protocol is known, counted under `gsrelay_quic_connections_total`
/// only.
pub const HANDSHAKE_OUTCOMES: &[&str] = &["handshake_failed", "refused_pending"];

/// Outcomes of WebTransport's HTTP/3 step, under `gsrelay_webtransport_sessions_total`
/// only.
pub const WEBTRANSPORT_OUTCOMES: &[&str] = &["wrong_path", "h3_failed"];

/// `gsrelay_webrtc_connections_total{outcome}`.
pub const WEBRTC_OUTCOMES: &[&str] = &["connected", "failed", "closed", "never_connected"];

/// `gsrelay_recordings_failed_total{reason}`: how a recording failed (`docs/recording.md`,
/// "When the disk fails"); the recordings service counts the reason's part before `:`.
pub const RECORDING_FAILURES: &[&str] = &["disk_error", "writer_behind"];

/// `gsrelay_cluster_link_losses_total{reason}`: how a link to another node was lost.
pub const LINK_LOSSES: &[&str] = &["silent", "closed", "expired"];

/// `gsrelay_cluster_node_health{state}`: the states another node can be in.
pub const NODE_HEALTH: &[&str] = &["alive", "suspect", "dead"];

/// `gsrelay_cluster_links_refused_total{reason}`: why a link to or from another node was
/// refused.
pub const LINK_REFUSALS: &[&str] = &["auth", "protocol"];

/// `gsrelay_cluster_forwarded_total{route}`: the routes a node forwards to the node
/// serving the room or session.
pub const FORWARDED_ROUTES: &[&str] = &[
    "/v1/rooms/{room}/sessions",
    "/v1/rooms/{room}",
    "/v1/sessions/{id}/interest",
    "/v1/sessions/{id}",
];

/// `gsrelay_webhook_deliveries_total{outcome}`: what became of a webhook, per event and
/// URL (`docs/webhooks.md`).
pub mod webhook_outcome {
    /// The receiver answered 2xx.
    pub const DELIVERED: &str = "delivered";
    /// An attempt failed in a way worth another (connection, timeout, 408, 429, 5xx);
    /// counted once per failed attempt that is followed by another.
    pub const RETRIED: &str = "retried";
    /// The receiver answered another status (4xx, 3xx): not retried.
    pub const REJECTED: &str = "rejected";
    /// Every attempt failed: given up on.
    pub const FAILED: &str = "failed";
    /// Never sent: the URL's queue was full, or the node stopped first.
    pub const DROPPED: &str = "dropped";
    /// Every outcome.
    pub const ALL: &[&str] = &[DELIVERED, RETRIED, REJECTED, FAILED, DROPPED];
}
