//! RTP and RTCP primitives.
//!
//! - [`packet`]: zero-copy RTP header view ([`RtpPacket`]), header writer ([`RtpHeader`]) and
//!   the RTP/RTCP demultiplexing test for an rtcp-mux port ([`classify`]).
//! - [`rtcp`]: compound RTCP parsing into the [`RtcpItem`]s a relay acts on, and builders
//!   for the packets it sends.
//! - [`srtp`]: SRTP/SRTCP contexts per session ([`SrtpSession`]) and key material.
//! - [`rewrite`]: per-subscriber sequence number and timestamp rewriting ([`SeqRewriter`]).
//!
//! Everything here is pure: no I/O, no clock. Parsing treats input as hostile: malformed
//! bytes give a typed error whose `reason()` is a stable metric label, never a panic.

pub mod ntp;
pub mod packet;
pub mod reception;
pub mod rewrite;
pub mod rtcp;
pub mod srtp;

/// Congestion control feedback (RFC 8888), an RTCP transport-layer feedback message.
pub use rtcp::ccfb;

pub use packet::{
    ExtensionElement, ExtensionForm, HeaderExtension, PacketClass, RtpError, RtpHeader, RtpPacket,
    RtpWriteError, WriteExtension, classify,
};
pub use rewrite::{Rewritten, SeqRewriter};

/// The RTP clock rate of game state (draft §4): 90 kHz.
pub const CLOCK_RATE: u32 = 90_000;
pub use rtcp::{RtcpError, RtcpItem, RtcpWriteError, parse_compound};
pub use srtp::{KeyMaterial, SrtpError, SrtpProfile, SrtpSession};
