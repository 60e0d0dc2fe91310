//! The core's control surface: what joining asks and answers, and how it can fail.

use super::delivery::DeliveryMode;
use super::interest::Interest;
use crate::wire::Dialect;
use serde::Serialize;

/// A session's handle, unique for the relay's lifetime.
pub type SessionId = u64;

/// Everything a join needs (the HTTP layer has checked the token).
#[derive(Debug, Clone, Default)]
pub struct JoinRequest {
    /// Room name.
    pub room: String,
    /// Who joins (the token's subject).
    pub identity: String,
    /// May publish a stream.
    pub publish: bool,
    /// May receive the room's streams.
    pub subscribe: bool,
    /// Wanted SSRC.
    pub ssrc: Option<u32>,
    /// Fail with [`ControlError::SsrcTaken`] instead of picking another SSRC.
    pub require_ssrc: bool,
    /// Wire dialect the session speaks.
    pub dialect: Dialect,
    /// Initial interest.
    pub interest: Interest,
}

/// A successful join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The new session.
    pub session: SessionId,
    /// The SSRC the session publishes (and signs its RTCP) with.
    pub ssrc: u32,
    /// The relay's own SSRC (a FIR naming it asks for every stream).
    pub relay_ssrc: u32,
    /// SSRCs of the streams already in the room.
    pub streams: Vec<u32>,
}

/// Why a control operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The room holds its maximum number of sessions.
    #[error("room {0:?} is full")]
    RoomFull(String),
    /// The relay holds its maximum number of rooms and the join would open another.
    #[error("the relay holds its maximum of {0} rooms")]
    TooManyRooms(usize),
    /// The relay holds its maximum number of sessions.
    #[error("the relay holds its maximum of {0} sessions")]
    RelayFull(usize),
    /// The SSRC asked for is in use and the client required it.
    #[error("SSRC {0} is already taken")]
    SsrcTaken(u32),
    /// No such session.
    #[error("no session {0}")]
    NoSuchSession(SessionId),
    /// The interest is invalid; the message names the field.
    #[error("{0}")]
    InvalidInterest(String),
    /// The relay is draining and takes no new sessions.
    #[error("the relay is draining")]
    Draining,
}

/// A room as `GET /v1/rooms/{room}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomInfo {
    /// Room name.
    pub room: String,
    /// Sessions in join order.
    pub sessions: Vec<SessionInfo>,
    /// Streams with their cached state.
    pub streams: Vec<StreamInfo>,
}

/// One session of a room.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    /// Session id.
    pub session_id: String,
    /// Identity from the token.
    pub identity: String,
    /// SSRC.
    pub ssrc: u32,
    /// May publish.
    pub publish: bool,
    /// May subscribe.
    pub subscribe: bool,
    /// Wire dialect.
    pub dialect: Dialect,
    /// Per-stream or aggregated delivery.
    pub delivery: DeliveryMode,
    /// Round-trip time between the relay and the session, smoothed, in milliseconds:
    /// from the session's RTCP reception reports on the relay's SRs; `null` until then.
    pub rtt_ms: Option<f64>,
    /// Send budget from the session's transport or congestion feedback (RFC 8888), bits
    /// per second; `null` without one.
    pub send_budget_bps: Option<u64>,
}

/// One stream of a room.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamInfo {
    /// SSRC.
    pub ssrc: u32,
    /// Objects cached.
    pub objects: usize,
    /// Their wire size in bytes.
    pub bytes: usize,
}

/// Session ids as the HTTP API spells them.
pub fn format_session_id(id: SessionId) -> String {
    format!("s{id:016x}")
}

/// Parses [`format_session_id`]'s form.
pub fn parse_session_id(s: &str) -> Option<SessionId> {
    s.strip_prefix('s')
        .filter(|h| h.len() == 16)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
}
