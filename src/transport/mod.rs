//! I/O shells around the sans-I/O core: they turn sockets into core inputs and core
//! outputs into sends, and never decide what to forward.
//!
//! - [`command`]: the channel through which the control plane drives the relay task.
//! - [`udp`]: RTP/RTCP over UDP (rtcp-mux) with SRTP.

pub mod batch;
pub mod command;
pub mod udp;
