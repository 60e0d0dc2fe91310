//! gsrelay's sans-I/O core: everything a relay and a client agree on, and the relay's state
//! machine, with no runtime, no socket and no clock.
//!
//! - [`wire`]: the game-state payload codec (draft-01, both dialects, the aggregated
//!   container).
//! - [`rtp`]: RTP, RTCP and SRTP.
//! - [`relay`]: the relay core, a pure state machine: packets, control operations and
//!   time in ([`Input`]), packets and the next wake-up out ([`Reply`]); its API types are
//!   re-exported here.
//! - [`handover`]: the ownership messages (RTCP APP `GSOW`).
//! - [`roq`]: RTP over QUIC framing, and what the QUIC and WebTransport ends agree on.
//! - [`api`]: the HTTP API's JSON types; [`join`]: a join's answer as both ends hold it.
#![warn(missing_docs)]

pub mod api;
pub mod join;
pub mod relay;
pub mod roq;
pub mod rtp;
pub mod wire;

pub use relay::area::Area;
pub use relay::handover;
pub use relay::interest::{Filter, TypeSel};
pub use relay::pacing::{PredictionGate, RateTier};
pub use relay::{
    ControlError, Delivery, DeliveryMode, Event, Input, Interest, JoinRequest, Joined, OutboxMark,
    Relay, RelayConfig, RelayStats, Reply, RoomCounts, RoomInfo, RtcpStats, Sends, SessionId,
    SessionInfo, StatEvent, StreamInfo, Transmit, format_session_id, parse_session_id,
};
