//! A join's answer as both ends hold it: what the server's shard answers and the HTTP layer
//! turns into [`crate::api::JoinAnswerBody`], and what the client reads back from it.

use crate::relay::Joined;
use crate::rtp::SrtpProfile;
use std::net::SocketAddr;

/// The label of the data channel a WebRTC client opens (`docs/transports.md`).
pub const CHANNEL_LABEL: &str = "gsrelay";

/// SRTP keys handed to a client at join (RFC 4568 inline form: base64 of key ‖ salt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrtpKeys {
    /// Protection profile.
    pub profile: SrtpProfile,
    /// What the client protects with (the relay unprotects with it).
    pub client_key: String,
    /// What the relay protects with (the client unprotects with it).
    pub relay_key: String,
}

/// What a shard answers to a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinAnswer {
    /// The core's answer.
    pub joined: Joined,
    /// The session's resume generation: how many times it was resumed.
    pub generation: u32,
    /// How the client reaches the session, by the transport it asked for.
    pub transport: TransportAnswer,
}

/// The transport's part of a join answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportAnswer {
    /// RTP/RTCP over UDP.
    Rtp {
        /// Where the client sends RTP/RTCP.
        addr: SocketAddr,
        /// SRTP keys; `None` in insecure plain-RTP mode.
        srtp: Option<SrtpKeys>,
    },
    /// RTP over QUIC (RoQ).
    Quic(QuicAnswer),
    /// WebTransport on the QUIC endpoint.
    WebTransport(QuicAnswer),
    /// WebRTC data channels: the relay's SDP answer.
    WebRtc(WebRtcAnswer),
}

impl JoinAnswer {
    /// Where a UDP session sends RTP/RTCP; `None` over the other transports.
    pub fn rtp_addr(&self) -> Option<SocketAddr> {
        match &self.transport {
            TransportAnswer::Rtp { addr, .. } => Some(*addr),
            _ => None,
        }
    }

    /// A UDP session's SRTP keys; `None` in plain-RTP mode and over the other transports.
    pub fn srtp(&self) -> Option<&SrtpKeys> {
        match &self.transport {
            TransportAnswer::Rtp { srtp, .. } => srtp.as_ref(),
            _ => None,
        }
    }

    /// How a QUIC or WebTransport session reaches the relay; `None` over the others.
    pub fn quic(&self) -> Option<&QuicAnswer> {
        match &self.transport {
            TransportAnswer::Quic(q) | TransportAnswer::WebTransport(q) => Some(q),
            _ => None,
        }
    }
}

/// What a WebRTC join answers (see `docs/transports.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebRtcAnswer {
    /// The relay's SDP answer (ICE-lite, one host candidate).
    pub sdp_answer: String,
    /// The relay's ICE candidate address.
    pub addr: SocketAddr,
    /// The label of the data channel the client opens.
    pub channel: &'static str,
    /// Largest message (one RTP or RTCP packet) the relay accepts; larger ones are
    /// dropped and counted.
    pub max_message_size: usize,
    /// Largest packet the relay sends the session.
    pub max_packet: usize,
}

/// What a client needs to carry its session over QUIC, RoQ or WebTransport (see
/// `docs/transports.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicAnswer {
    /// The relay's QUIC address (before any advertise address is applied).
    pub addr: SocketAddr,
    /// ALPN to offer.
    pub alpn: &'static str,
    /// SHA-256 of the relay's certificate (DER), lowercase hex.
    pub cert_sha256: String,
    /// Whether the relay generated the certificate (browsers then pin it by
    /// `cert_sha256`; a configured one they verify as any web server's).
    pub self_signed: bool,
    /// RoQ flow identifier of the session's RTP session (RTP and RTCP share it).
    pub flow_id: u64,
    /// Single-use, short-lived secret that ties a QUIC connection to the session.
    pub session_token: String,
}
