//! The HTTP API's JSON types (`docs/api.md`): the bodies the server reads and answers
//! with, and the client writes and reads, defined once so the two cannot drift apart.
//!
//! The server deserializes [`JoinBody`] and serializes [`JoinAnswerBody`], [`ErrorBody`]
//! and [`StatusBody`]; the Rust client does the reverse. An interest change's body is the
//! relay's [`Interest`] and a room's description its `RoomInfo`, which are their own JSON.
//! Optional fields are omitted when absent, except the few documented as `null`.
//! Presence (`GET /v1/rooms/{room}/presence`) carries [`PresenceSnapshot`] and
//! [`PresenceParticipant`] in its events.

use crate::relay::Interest;
use crate::rtp::SrtpProfile;
use crate::wire::Dialect;
use serde::{Deserialize, Serialize};

/// `srtp_profile` in a join that asks for plain RTP instead of an SRTP profile.
pub const PLAIN_RTP: &str = "none";

/// Body of `POST /v1/rooms/{room}/sessions`: a join.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// `"rtp"`, `"quic"`, `"webtransport"` or `"webrtc"`; any other value is refused
    /// with `unsupported_transport`, so it is read as a string.
    pub transport: String,
    /// Wanted SSRC; the relay picks one when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssrc: Option<u32>,
    /// Fail instead of taking another SSRC when `ssrc` is in use.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_ssrc: bool,
    /// Wire dialect the session speaks.
    #[serde(default)]
    pub dialect: Dialect,
    /// Initial interest; omitted when it is the default, which an absent one means.
    #[serde(default, skip_serializing_if = "is_default")]
    pub interest: Interest,
    /// SRTP profile name, or [`PLAIN_RTP`]; the relay's default when absent. Only an
    /// `rtp` join names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srtp_profile: Option<String>,
    /// The client's SDP offer; a `webrtc` join carries one, no other does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sdp_offer: Option<String>,
    /// A resume credential of an earlier join's answer: the join takes that session back
    /// (or, the relay having forgotten it, its SSRCs) rather than opening another.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// Asks for a room stream: one more SSRC whose objects belong to the room and
    /// outlive the session (`docs/relay.md`, "Room objects and ownership").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub room_stream: bool,
}

/// Whether an interest is the one a join without any gets.
fn is_default(interest: &Interest) -> bool {
    *interest == Interest::default()
}

/// Answer of `POST /v1/rooms/{room}/sessions`: the session, and how to reach it over
/// the transport the join asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinAnswerBody {
    /// The session's id, as the `/v1/sessions/{id}` routes take it.
    pub session_id: String,
    /// The SSRC the session sends with.
    pub ssrc: u32,
    /// The SSRC of the relay's own RTCP (and of aggregated delivery).
    pub relay_ssrc: u32,
    /// SSRCs of the streams already in the room.
    pub streams: Vec<u32>,
    /// The session's room stream's SSRC, when the join asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_ssrc: Option<u32>,
    /// The credential that resumes this session (`docs/api.md`, "Resume"); each answer
    /// gives the next one, and only the newest is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// How to reach the session: one object keyed by the transport's name.
    #[serde(flatten)]
    pub transport: TransportAnswer,
    /// The replay the room plays, when it is a replay's room (`docs/recording.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayInfo>,
    /// The room it mirrors and how late, when it is a broadcast-delayed mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed: Option<Delayed>,
}

/// Where a replay is (`docs/recording.md`, "Replay").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayInfo {
    /// The recording it plays.
    pub recording: String,
    /// Its position, milliseconds from the recording's start.
    pub position_ms: u64,
    /// The recording's length, milliseconds.
    pub duration_ms: u64,
    /// Its speed (0.25 to 8).
    pub speed: f64,
    /// Whether it is paused.
    pub paused: bool,
    /// Whether it has played to the end.
    pub ended: bool,
}

/// A broadcast-delayed mirror (`docs/recording.md`, "Broadcast delay").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delayed {
    /// The room it mirrors.
    pub source: String,
    /// How late, milliseconds: nothing in the mirror is newer than now minus this.
    pub delay_ms: u64,
}

/// The per-transport part of a join's answer, which appears in the answer as one key
/// named for the transport (`"rtp"`, `"quic"`, `"webtransport"` or `"webrtc"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportAnswer {
    /// An RTP join: UDP, with SRTP unless plain.
    Rtp(RtpBody),
    /// A QUIC (RoQ) join.
    Quic(QuicBody),
    /// A WebTransport join.
    #[serde(rename = "webtransport")]
    WebTransport(WebTransportBody),
    /// A WebRTC join.
    #[serde(rename = "webrtc")]
    WebRtc(WebRtcBody),
}

/// The `rtp` object of an RTP join's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtpBody {
    /// Where the client sends RTP and RTCP (`host:port`).
    pub addr: String,
    /// The session's SRTP keys; `null` for plain RTP.
    pub srtp: Option<SrtpBody>,
}

/// SRTP keys handed to a client at join (RFC 4568 inline form: base64 of key ‖ salt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrtpBody {
    /// Protection profile.
    pub profile: SrtpProfile,
    /// What the client protects with (the relay unprotects with it).
    pub client_key: String,
    /// What the relay protects with (the client unprotects with it).
    pub relay_key: String,
}

/// The `quic` object of a QUIC join's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuicBody {
    /// The relay's QUIC address (`host:port`).
    pub addr: String,
    /// ALPN to offer.
    pub alpn: String,
    /// SHA-256 of the relay's certificate (DER), lowercase hex, to pin.
    pub cert_sha256: String,
    /// RoQ flow identifier of the session's RTP session (RTP and RTCP share it).
    pub flow_id: u64,
    /// Single-use, short-lived secret that ties a QUIC connection to the session.
    pub session_token: String,
}

/// The `webtransport` object of a WebTransport join's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebTransportBody {
    /// The session's WebTransport URL.
    pub url: String,
    /// SHA-256 of a generated certificate, lowercase hex, to pin; `null` for a
    /// configured certificate, which browsers verify as any web server's.
    pub cert_sha256: Option<String>,
    /// RoQ flow identifier of the session's RTP session.
    pub flow_id: u64,
    /// Single-use, short-lived secret that ties the WebTransport session to the session.
    pub session_token: String,
}

/// The `webrtc` object of a WebRTC join's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebRtcBody {
    /// The relay's SDP answer (ICE-lite, one host candidate).
    pub sdp_answer: String,
    /// The relay's ICE candidate address (`ip:port`).
    pub addr: String,
    /// The label of the data channel the client opens.
    pub channel: String,
    /// Largest message (one RTP or RTCP packet) the relay accepts; larger ones are
    /// dropped and counted.
    pub max_message_size: usize,
    /// Largest packet the relay sends the session.
    pub max_packet: usize,
}

/// Body of every error answer: `{"error":{"code","message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` object of an error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable machine-readable code (listed in `docs/api.md`).
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// Answer of `/healthz` and `/readyz` when healthy or ready: `{"status":"ok"}` or
/// `{"status":"ready"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusBody {
    /// `"ok"` or `"ready"`.
    pub status: String,
}

/// A participant as the room's players see it (presence): no session ids, which are
/// credentials' handles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PresenceParticipant {
    /// Its identity.
    pub identity: String,
    /// Its metadata (`null` when none was set).
    pub metadata: serde_json::Value,
    /// The SSRCs its sessions own: what names its streams.
    pub ssrcs: Vec<u32>,
    /// Whether its publishing is suspended.
    pub muted: bool,
}

/// A room's whole presence, sent first on a presence stream and again after a watcher
/// fell behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PresenceSnapshot {
    /// The room.
    pub room: String,
    /// Its metadata.
    pub metadata: serde_json::Value,
    /// Its participants, by identity.
    pub participants: Vec<PresenceParticipant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(transport: TransportAnswer) -> JoinAnswerBody {
        JoinAnswerBody {
            session_id: "s".into(),
            ssrc: 1,
            relay_ssrc: 2,
            streams: vec![3],
            room_ssrc: None,
            resume: None,
            transport,
            replay: None,
            delayed: None,
        }
    }

    #[test]
    fn the_transport_is_one_key_after_the_common_fields() {
        let rtp = answer(TransportAnswer::Rtp(RtpBody {
            addr: "127.0.0.1:5004".into(),
            srtp: None,
        }));
        let json = serde_json::to_string(&rtp).unwrap();
        assert_eq!(
            json,
            r#"{"session_id":"s","ssrc":1,"relay_ssrc":2,"streams":[3],"rtp":{"addr":"127.0.0.1:5004","srtp":null}}"#
        );
        assert_eq!(serde_json::from_str::<JoinAnswerBody>(&json).unwrap(), rtp);
        let wt = answer(TransportAnswer::WebTransport(WebTransportBody {
            url: "https://h:4433/webtransport".into(),
            cert_sha256: None,
            flow_id: 0,
            session_token: "t".into(),
        }));
        let json = serde_json::to_string(&wt).unwrap();
        assert!(json.contains(r#","webtransport":{"url""#), "{json}");
        assert_eq!(serde_json::from_str::<JoinAnswerBody>(&json).unwrap(), wt);
    }

    #[test]
    fn a_join_omits_what_it_leaves_to_the_relay() {
        let body = JoinBody {
            transport: "rtp".into(),
            ..JoinBody::default()
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"transport":"rtp","dialect":"draft01"}"#
        );
    }
}
