//! I/O shells around the sans-I/O core: they turn sockets into core inputs and core
//! outputs into sends, and never decide what to forward.
//!
//! - [`command`]: the channel through which the control plane drives the relay task.
//! - [`guard`]: fault isolation every shell puts around its inputs to the core.
//! - [`batch`] and [`recv`]: datagrams sent with `sendmmsg` and read with `recvmmsg`.
//! - [`shards`]: routing of control operations to the shard owning a room or session.
//! - [`udp`]: RTP/RTCP over UDP (rtcp-mux) with SRTP.

pub mod batch;
pub mod command;
pub mod guard;
pub mod recv;
pub mod shards;
pub mod udp;
