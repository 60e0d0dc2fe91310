//! gsrelay: a selective forwarding relay for game state over RTP.
//!
//! Layout (see `docs/architecture.md`): `wire` is the game-state payload codec, `rtp` the
//! RTP/RTCP/SRTP primitives beneath the relay, `relay` the sans-I/O core, `transport` the
//! I/O shells around it, `control` the HTTP API and its access tokens, `client` the Rust
//! client, `config` and `server` what `gsrelay serve` runs, and `bench` (feature `bench`, on
//! by default) the bundled load generator.
#![warn(missing_docs)]

pub mod api;
#[cfg(feature = "bench")]
pub mod bench;
pub mod client;
pub mod config;
pub mod control;
pub mod metrics;
pub mod relay;
pub mod rtp;
pub mod server;
pub mod transport;
pub mod wire;
