//! What the QUIC ends agree on: the protocols one endpoint serves, told apart by ALPN, the
//! transport parameters, the UDP socket under an endpoint, and the certificate fingerprint
//! a client pins.

use gsrelay_core::roq::{ALPN, webtransport};
use quinn::VarInt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Socket buffer asked for an endpoint (the kernel may grant less).
pub const SOCKET_BUFFER: usize = 8 << 20;

/// Datagram queue each way, in bytes.
pub const DATAGRAM_BUFFER: usize = 1 << 20;

/// What a connection to the endpoint speaks, by its ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// RTP over QUIC, ALPN `roq`.
    Roq,
    /// WebTransport over HTTP/3 (ALPN `h3`) carrying RoQ framing.
    WebTransport,
}

impl Protocol {
    /// Both, in the order the endpoint offers their ALPNs.
    pub const ALL: [Self; 2] = [Self::Roq, Self::WebTransport];

    /// Its place in [`Self::ALL`], for per-protocol tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The ALPN it is negotiated by.
    pub fn alpn(self) -> &'static str {
        match self {
            Self::Roq => ALPN,
            Self::WebTransport => web_transport_quinn::ALPN,
        }
    }

    /// The one `alpn` names.
    pub fn from_alpn(alpn: &[u8]) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.alpn().as_bytes() == alpn)
    }

    /// What each of its datagrams starts with before the RoQ flow identifier.
    pub fn datagram_header(self) -> &'static [u8] {
        match self {
            Self::Roq => &[],
            Self::WebTransport => webtransport::DATAGRAM_HEADER,
        }
    }

    /// The largest RoQ datagram (flow identifier and packet) `conn` takes now; `None`
    /// when the peer takes no datagrams.
    pub fn max_datagram(self, conn: &quinn::Connection) -> Option<usize> {
        let max = conn.max_datagram_size()?;
        max.checked_sub(self.datagram_header().len())
    }

    /// Its `transport` label in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Roq => "quic",
            Self::WebTransport => "webtransport",
        }
    }
}

/// Transport parameters shared by the relay and the bundled client. Two bidirectional
/// streams: WebTransport's CONNECT stays open beside the token's stream; eight
/// unidirectional ones: HTTP/3's control and QPACK streams come before the session's.
pub fn transport_config() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(2))
        .max_concurrent_uni_streams(VarInt::from_u32(8))
        .datagram_receive_buffer_size(Some(DATAGRAM_BUFFER))
        .datagram_send_buffer_size(DATAGRAM_BUFFER)
        .keep_alive_interval(Some(Duration::from_secs(5)));
    t
}

/// A UDP socket on `bind` with `SOCKET_BUFFER`-byte buffers where the kernel allows.
pub fn udp_socket(bind: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: a smaller buffer only means more drops under bursts.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&bind.into())?;
    Ok(socket.into())
}

/// SHA-256 of a certificate's DER, lowercase hex.
pub fn fingerprint(cert: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, cert))
}
