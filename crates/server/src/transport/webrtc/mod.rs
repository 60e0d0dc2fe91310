//! WebRTC data channels on `rtc` (the sans-I/O stack of the webrtc-rs family): the
//! browsers' second way in, beside WebTransport.
//!
//! Every peer uses one UDP port (`--webrtc-addr`, its own beside the RTP port: DTLS and
//! SCTP never mix with SRTP sessions' packets). The relay is ICE-lite (RFC 8445 §2.5): it
//! answers connectivity checks on its one host candidate and never sends checks itself.
//!
//! - [`demux`]: the port's reader, a task shared by every shard. A STUN message is routed
//!   by its USERNAME, whose first half is the ufrag the relay put in its answer and whose
//!   first two characters name the shard; anything else by its source address, learnt when
//!   a connectivity check from it passed. Each datagram goes to the owning shard's relay
//!   task over a bounded channel; when that is full the datagram is dropped and counted
//!   (`webrtc_inbound_full`), never queued.
//! - [`port`], [`shell`] and [`peer`]: the shard's side. Each shard owns the peer
//!   connections of its sessions ([`peer`]) and drives them (DTLS, SCTP, data channels) on
//!   its own thread: [`shell`] is the port as the shard sees it (datagrams, deadlines,
//!   sends), [`port`] routes, sends and meters. A data-channel message in is one RTP or RTCP packet for the core, and
//!   each packet the core sends a WebRTC session is one message out. DTLS protects them:
//!   no SRTP.
//! - [`meter`]: a session's send budget from its SCTP send queue.
//! - [`super::offer`]: the check of a join's SDP offer.
//!
//! The signalling is one HTTP exchange in the style of WHIP (RFC 9725): the join carries
//! the offer and its answer the relay's SDP answer (`docs/transports.md`).

mod demux;
mod meter;
mod peer;
mod port;
mod shell;

pub use super::offer::{OfferError, check_offer};
pub(super) use peer::Peer;
pub(super) use port::WebRtcPort;

use crate::metrics::Metrics;
use bytes::BytesMut;
use dashmap::DashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Datagrams a shard's WebRTC inbox may hold before more are dropped.
const INBOX_DEPTH: usize = 4096;

/// The label of the data channel a client opens (`docs/transports.md`); the relay sends on the
/// first channel the peer opens whatever its label, and reads every channel.
pub use gsrelay_core::join::CHANNEL_LABEL;

/// Largest RTP/RTCP packet the relay sends a WebRTC session: what one SCTP DATA chunk
/// carries inside rtc's default SCTP packet budget (1191 bytes, which keeps a DTLS record
/// inside a 1280-byte IPv6 path even when TURN-relayed), less the common and chunk
/// headers, rounded down to SCTP's 4-byte padding. A message that fits one chunk is one
/// datagram, so losing a datagram loses one packet and nothing is reassembled.
pub const MAX_SEND_PACKET: usize = 1160;

/// The `a=max-message-size` of the relay's answers: RFC 8841's default. It is larger
/// than any packet the relay takes so that a larger message still reaches the relay whole
/// and is dropped there, counted (`oversized`); `rtc` would drop it unseen. The SCTP
/// receive window bounds what a peer can make the relay hold meanwhile.
const SCTP_MAX_MESSAGE: u32 = 64 * 1024;

/// How the WebRTC transport runs.
#[derive(Debug, Clone)]
pub struct WebRtcConfig {
    /// UDP address to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Address offered to peers as the relay's ICE candidate (behind NAT / a Kubernetes
    /// Service).
    pub advertise: Option<SocketAddr>,
    /// Largest RTP/RTCP packet accepted from a peer; a larger message is dropped and
    /// counted (`oversized`).
    pub max_message: usize,
    /// Bytes of messages one session may have waiting in its SCTP send queue; beyond that
    /// the core's packets for it are dropped and counted (`webrtc_send_buffer_full`), so a
    /// peer that stops reading holds at most this much of the relay's memory. From a
    /// quarter of it the core is given the queue's drain rate as the session's cap
    /// ([`meter`]), so it coalesces rather than fills the queue.
    pub max_buffered: usize,
}

impl WebRtcConfig {
    /// The defaults for `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            advertise: None,
            max_message: 1500,
            max_buffered: 256 * 1024,
        }
    }
}

/// One datagram for a shard: its source and bytes.
pub(super) type Inbound = (SocketAddr, BytesMut);

/// Source addresses whose connectivity check passed, with the shard that owns each:
/// written by the shards, read by the port's reader.
pub(super) type Routes = Arc<DashMap<SocketAddr, u8>>;

/// One shard's share of the WebRTC port: what its relay task needs to host it.
pub struct WebRtcShard {
    shard: u8,
    socket: std::net::UdpSocket,
    routes: Routes,
    inbox: mpsc::Receiver<Inbound>,
    cfg: WebRtcConfig,
    local_addr: SocketAddr,
    metrics: Metrics,
}

impl WebRtcShard {
    /// Its port, fed by the reader.
    pub(super) fn start(self) -> WebRtcPort {
        WebRtcPort::new(
            self.inbox,
            self.shard,
            self.socket,
            self.routes,
            &self.cfg,
            self.local_addr,
            &self.metrics,
        )
    }
}

/// The bound port; dropping it stops its reader.
pub struct WebRtcEndpoint {
    /// The bound address.
    pub local_addr: SocketAddr,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for WebRtcEndpoint {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Binds the port and starts its reader in the calling runtime; answers the endpoint and
/// each of `shards` shards' share (shard `k` at index `k`; at most 256 shards).
pub fn bind(
    cfg: WebRtcConfig,
    metrics: &Metrics,
    shards: usize,
) -> io::Result<(WebRtcEndpoint, Vec<WebRtcShard>)> {
    if shards == 0 || shards > 256 {
        return Err(io::Error::other("WebRTC serves 1 to 256 shards"));
    }
    let socket = super::quic::udp_socket(cfg.bind)?;
    socket.set_nonblocking(true)?;
    let local_addr = socket.local_addr()?;
    let routes: Routes = Arc::new(DashMap::new());
    let mut inboxes = Vec::with_capacity(shards);
    let mut parts = Vec::with_capacity(shards);
    for k in 0..shards {
        let (tx, inbox) = mpsc::channel(INBOX_DEPTH);
        inboxes.push(tx);
        parts.push(WebRtcShard {
            shard: u8::try_from(k).map_err(io::Error::other)?,
            socket: socket.try_clone()?,
            routes: routes.clone(),
            inbox,
            cfg: cfg.clone(),
            local_addr,
            metrics: metrics.clone(),
        });
    }
    let reader = tokio::net::UdpSocket::from_std(socket)?;
    let reader = tokio::spawn(demux::run(reader, inboxes, routes, metrics.clone()));
    Ok((WebRtcEndpoint { local_addr, reader }, parts))
}

/// The address a session's ICE candidate names: the advertised one, else the bound one,
/// else (bound to the unspecified address) the bound port on `host`, the address the
/// client reached the relay's API on.
pub(super) fn candidate_addr(
    advertise: Option<SocketAddr>,
    bound: SocketAddr,
    host: Option<IpAddr>,
) -> Result<SocketAddr, OfferError> {
    if let Some(a) = advertise {
        return Ok(a);
    }
    if !bound.ip().is_unspecified() {
        return Ok(bound);
    }
    host.filter(|h| !h.is_unspecified())
        .map(|h| SocketAddr::new(h, bound.port()))
        .ok_or(OfferError::NoAddress)
}

/// A session's ICE username fragment: the shard as two hex digits, then 14 random ones.
fn new_ufrag(shard: u8) -> io::Result<String> {
    let mut b = [0u8; 7];
    getrandom::fill(&mut b).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!("{shard:02x}{}", hex::encode(b)))
}

/// A session's ICE password: 32 random hex digits (RFC 8839 asks for at least 22
/// characters; this is 128 bits).
fn new_password() -> io::Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(hex::encode(b))
}

/// The shard a relay ufrag names, if it has the relay's form.
fn shard_of_ufrag(ufrag: &[u8]) -> Option<u8> {
    if ufrag.len() != 16 {
        return None;
    }
    let digits = std::str::from_utf8(ufrag.get(..2)?).ok()?;
    u8::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ufrags_name_their_shard() {
        for shard in [0u8, 7, 255] {
            let u = new_ufrag(shard).unwrap();
            assert_eq!(u.len(), 16);
            assert_eq!(shard_of_ufrag(u.as_bytes()), Some(shard));
        }
        assert_eq!(shard_of_ufrag(b"zz00000000000000"), None);
        assert_eq!(shard_of_ufrag(b"00"), None);
        assert!(new_password().unwrap().len() >= 22);
    }

    #[test]
    fn the_candidate_is_advertised_bound_or_the_clients_host() {
        let any: SocketAddr = "0.0.0.0:8445".parse().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let adv: SocketAddr = "203.0.113.5:30445".parse().unwrap();
        assert_eq!(candidate_addr(Some(adv), any, Some(lo)), Ok(adv));
        assert_eq!(
            candidate_addr(None, any, Some(lo)),
            Ok("127.0.0.1:8445".parse().unwrap())
        );
        let bound: SocketAddr = "10.0.0.2:8445".parse().unwrap();
        assert_eq!(candidate_addr(None, bound, Some(lo)), Ok(bound));
        assert_eq!(candidate_addr(None, any, None), Err(OfferError::NoAddress));
    }
}
