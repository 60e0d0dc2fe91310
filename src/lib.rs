//! gsrelay: a selective forwarding relay for game state over RTP.
//!
//! This package is the `gsrelay` binary and this umbrella library, which puts the
//! workspace's crates (`docs/architecture.md`, "Crates") under one name for the
//! end-to-end tests and the examples. A program links the crate it needs:
//!
//! - `gsrelay-core`: the codec ([`wire`]), RTP/RTCP/SRTP ([`rtp`]), the relay core (its
//!   API types at the root here), the ownership codec ([`handover`]), RoQ framing and
//!   the HTTP API's JSON types ([`api`]); no runtime, no socket, no clock.
//! - `gsrelay-client`: the Rust client ([`client`]), what a game links.
//! - `gsrelay-server`: running a relay ([`serve`]) and minting its access tokens
//!   ([`token`]).
//! - `gsrelay-bench`: the load generator ([`bench`](mod@bench)).
//! - `gsrelay-record`: the recording format and the replay clock ([`record`]).
#![warn(missing_docs)]

pub use gsrelay_bench as bench;
pub use gsrelay_client as client;
pub use gsrelay_core::*;
pub use gsrelay_record as record;
pub use gsrelay_server::{serve, token};

/// Not a stable API: for this workspace's tests, benches and fuzz targets.
#[doc(hidden)]
pub mod internal {
    pub use gsrelay_server::internal::*;
}
