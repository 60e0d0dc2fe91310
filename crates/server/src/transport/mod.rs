//! I/O shells around the sans-I/O core: they turn sockets into core inputs and core
//! outputs into sends, and never decide what to forward.
//!
//! - [`activity`]: what happens in rooms (joins, ends, streams), for the room service.
//! - [`command`]: the channel through which the control plane drives a shard.
//! - [`events`]: what a shard reports to the control plane (sessions joined and gone).
//! - [`guard`]: fault isolation every shell puts around its inputs to the core.
//! - [`shard`]: a relay task, which owns the core and hosts the transports' ports;
//!   [`port`]: what a port is to it.
//! - [`udp`]: RTP/RTCP over UDP (rtcp-mux) with SRTP, sent and read in batches
//!   (`gsrelay_net::udp`).
//! - [`quic`]: RTP over QUIC (RoQ) on quinn, in the core's RoQ framing.
//! - [`webrtc`]: RTP over WebRTC data channels on `rtc`, ICE-lite, one UDP port;
//!   [`offer`]: the check of a join's SDP offer.
//! - [`webtransport`]: WebTransport for browsers, on the QUIC endpoint, in RoQ framing.
//! - [`replay`]: replays, the sessions that play a recording into a room;
//!   [`mirror`]: broadcast-delayed mirrors of rooms; both play through `playback`.
//! - [`recorder`]: recorders, the sessions that record a room, fed to their writers
//!   through [`ring`]s (`docs/recording.md`).
//! - [`link`]: the link protocol between the shards that hold one room, in process; the
//!   cluster (`crate::cluster`) carries the same frames between nodes.
//!
//! Imports among these modules go one way: the ports (`udp`, `quic`, `webrtc`, `link`) import
//! `port`, `command` and the leaves below them, never `shard`; `shard` imports the ports.
//! Nothing here imports the cluster: a shard reports to it through [`events`].

pub mod activity;
pub mod command;
pub mod events;
pub mod guard;
pub mod link;
pub mod mirror;
mod offer;
mod playback;
mod port;
pub mod quic;
pub mod recorder;
pub mod replay;
pub mod ring;
pub mod shard;
pub mod udp;
pub mod webrtc;
pub mod webtransport;

/// Hands the pages the allocator holds free back to the OS. glibc keeps what a busy
/// relay freed in its arenas (only the top of the main heap is ever trimmed by itself),
/// so without this a relay whose sessions have all left stays at its busiest size
/// (docs/benchmarks.md, "Memory per join"). Other allocators: nothing to do.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and locks each arena it walks itself.
    unsafe {
        libc::malloc_trim(0);
    }
}
