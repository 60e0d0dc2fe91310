//! gsrelay: a selective forwarding relay for game state over RTP.
//!
//! Layout (see `docs/architecture.md`): `wire` is the game-state payload codec, `rtp` the
//! RTP/RTCP/SRTP primitives beneath the relay, `relay` the sans-I/O core, `transport` the
//! I/O shells around it, `control` the HTTP API and its access tokens, `api` the API's
//! JSON types, `client` the Rust client, `config` and `server` what `gsrelay serve` runs,
//! and `bench` (feature `bench`, on by default) the bundled load generator.
//!
//! The modules are private; what a library user needs is public in the one block below:
//! the codec ([`wire`]), the RTP primitives ([`rtp`]), the HTTP API's JSON types ([`api`]),
//! the [`client`], the relay core and its API types (at the crate root), running a relay
//! ([`serve`]), minting its access tokens ([`token`]) and the load generator
//! ([`bench`](mod@bench)).
#![warn(missing_docs)]

mod config;
mod control;
mod metrics;
mod relay;
mod server;
mod transport;

pub mod api;
#[cfg(feature = "bench")]
pub mod bench;
pub mod client;
pub mod rtp;
pub mod wire;

pub use control::token;
pub use relay::area::Area;
pub use relay::handover;
pub use relay::interest::{Filter, TypeSel};
pub use relay::pacing::{PredictionGate, RateTier};
pub use relay::{
    ControlError, Delivery, DeliveryMode, Event, Input, Interest, JoinRequest, Joined, OutboxMark,
    Relay, RelayConfig, RelayStats, Reply, RoomCounts, RoomInfo, RtcpStats, Sends, SessionId,
    SessionInfo, StatEvent, StreamInfo, Transmit, format_session_id, parse_session_id,
};

/// Running a relay: what `gsrelay serve` does, as a library call.
pub mod serve {
    pub use crate::config::{LogFormat, ServeArgs, ServeConfig};
    pub use crate::server::{STOP_TIMEOUT, Server, start};
}

/// Not a stable API: for this crate's tests, benches and fuzz targets.
#[doc(hidden)]
pub mod internal {
    pub use crate::control::{cors, http, limits};
    pub use crate::metrics::Metrics;
    pub use crate::metrics::export::StatsExporter;
    pub use crate::metrics::labels;
    pub use crate::relay::limits as relay_limits;
    pub use crate::relay::pacing;
    pub use crate::transport::cluster::{self, wire as link_wire};
    pub use crate::transport::{command, directory, quic, roq, shard, shards, udp, webtransport};
}
