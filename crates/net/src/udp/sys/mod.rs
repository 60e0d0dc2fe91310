//! The system calls under [`super::batch`] and [`super::recv`], chosen at build time:
//!
//! - `linux`: `sendmmsg`/`recvmmsg` on headers held on the stack, GSO super-buffers,
//!   GRO reads and the kernel's receive time and drop count from control messages;
//! - `portable`: one datagram per call through `socket2`, no GSO, no GRO, no kernel
//!   timestamps, on every system tokio runs on. Linux builds it too with the feature
//!   `portable`, and CI tests it there, so the fallback other systems get cannot rot.
//!
//! Both offer the same functions; the callers never know which they got.

use std::net::SocketAddr;
use std::time::Duration;

#[cfg(all(target_os = "linux", not(feature = "portable")))]
mod linux;
#[cfg(all(target_os = "linux", not(feature = "portable")))]
pub use linux::*;

#[cfg(any(not(target_os = "linux"), feature = "portable"))]
mod portable;
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
pub use portable::*;

/// Datagrams one call sends or receives at most.
pub const MAX_DATAGRAMS: usize = 64;

/// One datagram a [`recv`] read.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes written into the slot (at most the slot's size).
    pub len: usize,
    /// Its source, when the kernel gave an IP address.
    pub from: Option<SocketAddr>,
    /// Longer than its slot: the kernel cut it.
    pub truncated: bool,
    /// When the kernel received it, since the Unix epoch (`SCM_TIMESTAMPNS`, on a socket
    /// with `SO_TIMESTAMPNS`; the wall clock, the only one the kernel stamps with).
    pub arrived: Option<Duration>,
    /// How many datagrams the socket had dropped when this one was queued (`SO_RXQ_OVFL`,
    /// on a socket with that option; the kernel sends none while it is 0). It counts
    /// from the socket's creation and wraps at `u32::MAX`.
    pub drops: Option<u32>,
    /// The size of the datagrams the kernel coalesced into this one (`UDP_GRO`, on a
    /// socket with that option): each is that long but the last, which may be shorter.
    pub segment: Option<u16>,
}
