//! The relay core, sans-I/O: rooms, sessions, streams, the latest-state store,
//! forwarding with per-subscriber filtering and sequence rewriting, and snapshots.
//!
//! Inputs: control operations ([`Relay::join`], [`Relay::leave`], [`Relay::set_interest`]),
//! packets ([`Relay::handle_rtp`], [`Relay::handle_rtcp`]) and time
//! ([`Relay::handle_timeout`]). Outputs: packets ([`Relay::poll_transmit`]) and the next
//! wake-up ([`Relay::poll_timeout`]). Time is always an argument; nothing here reads a
//! clock, owns a socket or spawns a task, so tests drive it faster than real time.

mod admission;
mod aggregate;
mod api;
pub mod area;
mod budget;
mod config;
mod congestion;
mod core;
mod delivery;
mod feedback;
mod forward;
mod grid;
mod ids;
pub mod interest;
mod ledger;
pub mod limits;
mod outbox;
pub mod pacing;
mod relevance;
mod reports;
mod room;
mod session;
pub mod stats;
mod store;

pub use api::{
    ControlError, JoinRequest, Joined, RoomInfo, SessionId, SessionInfo, StreamInfo,
    format_session_id, parse_session_id,
};
pub use config::RelayConfig;
pub(crate) use config::secs as serde_secs;
pub use core::{Relay, shard_of};
pub use delivery::{Delivery, DeliveryMode};
pub use interest::Interest;
pub use outbox::{OutboxMark, Transmit};
pub use reports::RtcpStats;
pub use session::Session;
pub use stats::{RelayStats, StatEvent};
