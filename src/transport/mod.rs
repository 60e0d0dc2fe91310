//! I/O shells around the sans-I/O core: they turn sockets into core inputs and core
//! outputs into sends, and never decide what to forward.
//!
//! - [`activity`]: what happens in rooms (joins, ends, streams), for the room service.
//! - [`command`]: the channel through which the control plane drives a shard.
//! - [`guard`]: fault isolation every shell puts around its inputs to the core.
//! - [`batch`] and [`recv`]: datagrams sent with `sendmmsg` and read with `recvmmsg`
//!   (`mmsg`: both calls without allocation).
//! - [`directory`]: where rooms and sessions are, behind a trait the control plane calls,
//!   and the events shards report to it; [`redis_directory`]: the same in Redis, where
//!   a cluster's nodes register and its rooms record their nodes.
//! - [`shards`]: routing of control operations to the shard of a room or session.
//! - [`shard`]: a relay task, which owns the core and hosts the transports' ports;
//!   [`port`]: what a port is to it.
//! - [`udp`]: RTP/RTCP over UDP (rtcp-mux) with SRTP.
//! - [`quic`]: RTP over QUIC (RoQ) on quinn; [`roq`]: its framing.
//! - [`webrtc`]: RTP over WebRTC data channels on `rtc`, ICE-lite, one UDP port;
//!   [`offer`]: the check of a join's SDP offer.
//! - [`webtransport`]: WebTransport for browsers, on the QUIC endpoint, in RoQ framing.
//! - [`link`]: the link protocol between the shards that hold one room, in process.
//!
//! Imports among these modules go one way: the ports (`udp`, `quic`, `webrtc`, `link`) import
//! `port`, `command` and the leaves below them, never `shard`; `shard` imports the ports;
//! `shards` imports `command` and `directory`, never a shard or a port.

pub mod activity;
pub mod batch;
pub mod cluster;
pub mod command;
pub mod directory;
pub mod guard;
pub mod link;
mod mmsg;
mod offer;
mod port;
pub mod quic;
pub mod recv;
pub mod redis_directory;
pub mod roq;
pub mod shard;
pub mod shards;
pub mod udp;
pub mod webrtc;
pub mod webtransport;
