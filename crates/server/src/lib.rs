//! The gsrelay server: the thin I/O shells around the sans-I/O core (`gsrelay-core`), the
//! control plane beside them, the cluster, metrics and configuration, and [`serve`], which
//! runs them all as `gsrelay serve` does.
//!
//! - `transport`: the shells, one per transport (UDP/SRTP, RTP over QUIC, WebTransport,
//!   WebRTC data channels, links between shards), and the shard task that owns a core.
//! - `cluster`: where rooms are and who serves a join: the room directory (in process or
//!   in Redis), placement across shards and nodes, and the QUIC links between nodes.
//! - `control`: the HTTP API, its access tokens, the room service, webhooks and presence.
//! - `metrics`: Prometheus metrics; `config`: the settings of `serve`.
//!
//! The modules are private; what a library user needs is public below.
#![warn(missing_docs)]

mod cluster;
mod config;
mod control;
mod metrics;
mod record;
mod server;
mod transport;

pub use control::token;
pub use record::writer::RECORDER_THREADS;
pub use transport::shard::SHARD_THREADS;

/// Running a relay: what `gsrelay serve` does, as a library call.
pub mod serve {
    pub use crate::config::{
        HttpArgs, LogFormat, RelayArgs, ServeArgs, ServeConfig, Setting, SettingDefault, settings,
    };
    pub use crate::server::{STOP_TIMEOUT, Server, start};
}

/// Not a stable API: for the workspace's tests, benches and fuzz targets.
#[doc(hidden)]
pub mod internal {
    pub use crate::cluster::{directory, redis_directory, shards, wire as link_wire};
    pub use crate::control::{cors, http, limits};
    pub use crate::metrics::Metrics;
    pub use crate::metrics::export::StatsExporter;
    pub use crate::metrics::labels;
    pub use crate::transport::{command, quic, shard, udp, webtransport};
    pub use gsrelay_core::relay::limits as relay_limits;
    pub use gsrelay_core::relay::pacing;
    pub use gsrelay_core::roq;

    /// The cluster: links between nodes and placement.
    pub mod cluster {
        pub use crate::cluster::*;
    }
}
