//! The network layer gsrelay's client and server share, beneath both and above the core:
//!
//! - [`udp`]: datagrams in batches: `sendmmsg`/`recvmmsg` with GSO/GRO and kernel receive
//!   timestamps on Linux, one datagram per call elsewhere (and on Linux with the feature
//!   `portable`, so that path is built and tested here);
//! - [`quic`]: what the QUIC ends agree on (ALPNs, transport parameters, the socket under an
//!   endpoint, the certificate fingerprint).
#![warn(missing_docs)]

pub mod quic;
pub mod udp;
