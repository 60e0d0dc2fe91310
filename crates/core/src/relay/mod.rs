//! The relay core, sans-I/O: rooms, sessions, streams, the latest-state store,
//! forwarding with per-subscriber filtering and sequence rewriting, and snapshots.
//!
//! One door in: every input, packets, time and control operations alike, is an
//! [`Input`] handed to [`Relay::handle_input`]. Out: packets ([`Relay::poll_transmit`]),
//! events ([`Relay::poll_event`]) and the next wake-up ([`Relay::poll_timeout`]). Time is
//! always an argument; nothing here reads a clock, owns a socket or spawns a task, so
//! tests drive it faster than real time. `docs/architecture.md` draws the modules and
//! the one direction in which they import each other.

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
mod ingest;
pub mod interest;
mod ledger;
mod leg;
pub mod limits;
mod outbox;
mod ownership;
pub mod pacing;
mod record;
mod relevance;
mod replica;
mod reports;
mod rng;
mod room;
mod session;
mod state;
pub mod stats;
mod store;
mod union;

pub use api::{
    CHECKPOINT_PACKET, ControlError, Event, Input, JoinRequest, Joined, Reply, RoomCounts,
    RoomInfo, Sends, SessionId, SessionInfo, StreamInfo, format_session_id, parse_session_id,
};
pub use config::RelayConfig;
/// Durations as (fractional) seconds in serde, the form of the settings in config files.
#[doc(hidden)]
pub use config::secs as serde_secs;
pub use core::Relay;
pub use delivery::{Delivery, DeliveryMode};
pub use ingest::LINK_TAKEOVER_QUIET;
pub use interest::Interest;
pub use outbox::{OutboxMark, Transmit};
pub use ownership::message as handover;
pub use stats::{RelayStats, RtcpStats, StatEvent};
