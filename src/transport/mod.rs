//! I/O shells around the sans-I/O core: they turn sockets into core inputs and core
//! outputs into sends, and never decide what to forward.
//!
//! - [`command`]: the channel through which the control plane drives the relay task.
//! - [`guard`]: fault isolation every shell puts around its inputs to the core.
//! - [`batch`] and [`recv`]: datagrams sent with `sendmmsg` and read with `recvmmsg`
//!   (`mmsg`: both calls without allocation).
//! - [`shards`]: routing of control operations to the shard owning a room or session.
//! - [`shard`]: the relay task, which owns the core and hosts the transports' ports.
//! - [`udp`]: RTP/RTCP over UDP (rtcp-mux) with SRTP.
//! - [`quic`]: RTP over QUIC (RoQ) on quinn; [`roq`]: its framing.
//! - [`webrtc`]: RTP over WebRTC data channels on `rtc`, ICE-lite, one UDP port.
//! - [`webtransport`]: WebTransport for browsers, on the QUIC endpoint, in RoQ framing.

pub mod batch;
pub mod command;
pub mod guard;
mod mmsg;
pub mod quic;
pub mod recv;
pub mod roq;
mod shard;
pub mod shards;
pub mod udp;
pub mod webrtc;
pub mod webtransport;
