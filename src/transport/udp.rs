//! RTP/RTCP over UDP with SRTP: the UDP port of the relay task ([`super::shard`]).
//!
//! The relay task owns the socket and every UDP session's transport state (SRTP
//! contexts, latched address); this module reads datagrams into core inputs and protects
//! and sends the core's packets for UDP sessions.
//!
//! # Receive path
//!
//! Datagrams are demultiplexed on the one port (rtcp-mux, RFC 5761) by [`classify`]; the
//! SSRC in the clear header (RTP: the SSRC field; RTCP: the sender SSRC) names the session.
//! The packet is unprotected with that session's keys, and the first packet that
//! authenticates **latches** the session to its source address (`docs/security.md`); after that,
//! packets for the session from any other address are dropped before decryption
//! (`address_mismatch`). A failed packet never latches, so a forger cannot steal or block
//! another session's address; nor can it poison the replay window, which SRTP moves only
//! for authenticated packets (see [`crate::rtp::srtp`]), so each session's SRTP context is
//! made once at join and used before and after latching. Packets are unprotected in place,
//! in the receive buffer. Plain-RTP sessions (`--insecure-plain-rtp`) latch on their first
//! packet. Drops are counted in `gsrelay_dropped_packets_total` by reason.
//!
//! Readable datagrams are read with `recvmmsg`, up to [`RECV_BATCH`] per syscall, with one
//! clock reading per batch (the core never reads the clock), and what a batch produced is
//! sent with `sendmmsg` (GSO for runs to one destination, [`super::batch`]). A datagram
//! larger than a receive slot (the largest packet the relay accepts plus SRTP's overhead)
//! is dropped as `oversized`. The socket buffers are sized at start
//! ([`UdpConfig::recv_buffer`], [`UdpConfig::send_buffer`]; the kernel caps them at
//! `net.core.rmem_max`/`wmem_max`, and the effective sizes are logged); what the kernel
//! still drops shows in `gsrelay_udp_receive_buffer_errors_total`.
//!
//! # Send path
//!
//! A packet for a session that has not latched an address yet is not sent: the relay does
//! not know where the client is. That is not counted (it is the normal state of a session
//! between its join and its first packet). Each packet is copied once, into the send
//! batch's arena, and protected there in place; nothing here allocates per packet. A
//! packet SRTP refuses to protect (an index this session's key already sealed, see
//! [`SrtpError::IndexReuse`]) is dropped and counted by reason.

use super::batch::SendBatch;
use super::command::{CommandError, RelayHandle, SrtpKeys};
use super::quic::QuicShard;
use super::recv::{Datagram, RecvBatch};
use super::shard::{Link, Shard, deliver};
use super::shards::RoomDirectory;
use super::webrtc::WebRtcShard;
use crate::metrics::export::StatsExporter;
use crate::metrics::{Metrics, TransportCounters};
use crate::relay::{Input, Relay, Transmit};
use crate::rtp::{KeyMaterial, PacketClass, SrtpError, SrtpProfile, SrtpSession, classify};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// Datagrams read per wake-up before the task looks at its other inputs again.
pub const RECV_BATCH: usize = 64;

/// Room in a receive slot beyond the relay's packet limit: SRTP's tag and MKI, and
/// enough that a datagram just over the limit is seen whole and refused by size.
const RECV_SLOT_SPARE: usize = 64;

/// Transport label in metrics.
const TRANSPORT: &str = "udp";

/// How the UDP transport runs.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// Address to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Address clients are told to send to (behind NAT / a Kubernetes Service).
    pub advertise: Option<SocketAddr>,
    /// Accept unencrypted RTP from sessions that ask for it (lab interop only).
    pub insecure_plain_rtp: bool,
    /// Profile a client gets when its join names none. The transport itself follows
    /// [`JoinCommand::profile`] (where `None` means plain RTP); the control plane applies
    /// this default before sending the command.
    pub default_profile: SrtpProfile,
    /// The room directory of a sharded relay: told of every session this task forgets.
    pub directory: Option<Arc<RoomDirectory>>,
    /// Socket receive buffer to ask for, bytes (`None`: the kernel's default).
    pub recv_buffer: Option<usize>,
    /// Socket send buffer to ask for, bytes (`None`: the kernel's default).
    pub send_buffer: Option<usize>,
}

impl UdpConfig {
    /// The defaults for `bind`: SRTP only, the default profile, no directory, the
    /// kernel's socket buffers.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            advertise: None,
            insecure_plain_rtp: false,
            default_profile: SrtpProfile::default(),
            directory: None,
            recv_buffer: None,
            send_buffer: None,
        }
    }
}

/// A running relay task with its transports.
pub struct UdpTransport {
    /// Handle for the control plane.
    pub handle: RelayHandle,
    /// The bound UDP address.
    pub local_addr: SocketAddr,
    /// The relay task; it ends when every handle is dropped.
    pub task: JoinHandle<()>,
}

/// Binds the UDP socket and spawns the relay task that owns `relay`, UDP only.
pub async fn spawn(cfg: UdpConfig, relay: Relay, metrics: Metrics) -> io::Result<UdpTransport> {
    spawn_with(cfg, None, None, relay, metrics).await
}

/// Binds the UDP socket and spawns the relay task that owns `relay`, hosting this shard's
/// share of the QUIC endpoint when `quic` is given and of the WebRTC port when `webrtc`
/// is.
pub async fn spawn_with(
    cfg: UdpConfig,
    quic: Option<QuicShard>,
    webrtc: Option<WebRtcShard>,
    relay: Relay,
    metrics: Metrics,
) -> io::Result<UdpTransport> {
    let socket = UdpSocket::bind(cfg.bind).await?;
    size_buffers(&socket, cfg.recv_buffer, cfg.send_buffer)?;
    let local_addr = socket.local_addr()?;
    let slot = relay.config().max_packet_bytes + RECV_SLOT_SPARE;
    let mut relay = relay;
    // The core's NTP time (RTCP reports) from one reading of both clocks.
    let since_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let _ = relay.handle_input(Instant::now(), Input::SetWallclock { since_unix });
    let udp = UdpPort {
        counters: metrics.transport(TRANSPORT),
        socket,
        rtp_addr: cfg.advertise.unwrap_or(local_addr),
        insecure_plain_rtp: cfg.insecure_plain_rtp,
        recv: RecvBatch::new(RECV_BATCH, slot),
        batch: SendBatch::default(),
    };
    let (quic, events) = match quic {
        Some(q) => (Some(q.port), Some(q.events)),
        None => (None, None),
    };
    let (webrtc, inbox) = match webrtc {
        Some(w) => {
            let (port, inbox) = w.start();
            (Some(port), Some(inbox))
        }
        None => (None, None),
    };
    let shard = Shard {
        relay,
        exporter: StatsExporter::new(&metrics),
        metrics,
        links: HashMap::new(),
        rooms: HashMap::new(),
        directory: cfg.directory,
        udp,
        quic,
        webrtc,
    };
    let (handle, task) = shard.spawn(events, inbox);
    Ok(UdpTransport {
        handle,
        local_addr,
        task,
    })
}

/// Asks for the configured socket buffers and logs what the kernel granted.
fn size_buffers(socket: &UdpSocket, recv: Option<usize>, send: Option<usize>) -> io::Result<()> {
    let s = socket2::SockRef::from(socket);
    if let Some(bytes) = recv {
        s.set_recv_buffer_size(bytes)?;
    }
    if let Some(bytes) = send {
        s.set_send_buffer_size(bytes)?;
    }
    tracing::debug!(
        recv = s.recv_buffer_size()?,
        send = s.send_buffer_size()?,
        "UDP socket buffers (bytes, as the kernel reports them)"
    );
    Ok(())
}

/// A UDP session's transport state.
pub(super) struct Peer {
    sec: Security,
    /// Where its packets come from and where the relay sends; set by its first
    /// authenticated packet.
    addr: Option<SocketAddr>,
}

/// How a session's packets are protected.
enum Security {
    /// Plain RTP (`--insecure-plain-rtp`).
    Plain,
    /// SRTP with the session's keys, from its join on (boxed: the keyed ciphers are far
    /// larger than the other variant).
    Keyed(Box<SrtpSession>),
}

/// [`SrtpSession::protect_rtp_slice`] or [`SrtpSession::protect_rtcp_slice`].
type Protect = fn(&mut SrtpSession, &mut [u8], usize) -> Result<usize, SrtpError>;

/// What the relay task owns for UDP.
pub(super) struct UdpPort {
    pub(super) socket: UdpSocket,
    counters: TransportCounters,
    /// What join answers advertise.
    pub(super) rtp_addr: SocketAddr,
    insecure_plain_rtp: bool,
    /// Receive slots, reused for every batch.
    recv: RecvBatch,
    /// Outgoing datagrams, sent together.
    batch: SendBatch,
}

impl Shard {
    /// Reads up to [`RECV_BATCH`] datagrams and handles them, then sends everything they
    /// produced together (one `sendmmsg` per [`super::batch::SEND_BATCH`] datagrams). Each accepted
    /// datagram's latency runs from the batch's arrival to the end of that send.
    pub(super) async fn receive_batch(&mut self) {
        let now = Instant::now();
        let mut accepted = 0u32;
        let mut recv = std::mem::take(&mut self.udp.recv);
        let n = match recv.recv(&self.udp.socket) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                // ICMP errors surfaced by some platforms; nothing to do for one datagram.
                tracing::debug!(error = %e, "UDP receive error");
                0
            }
        };
        for i in 0..n {
            self.udp.counters.packets_in.inc();
            let verdict = match recv.datagram(i) {
                Datagram::Whole(datagram, from) => {
                    self.udp.counters.bytes_in.inc_by(datagram.len() as u64);
                    self.ingest(now, datagram, from)
                }
                Datagram::Unusable => Err("oversized"),
            };
            match verdict {
                Ok(()) => accepted += 1,
                Err(reason) => self.exporter.drop(reason),
            }
        }
        self.udp.recv = recv;
        self.end_batch(now).await;
        let latency = now.elapsed().as_secs_f64();
        for _ in 0..accepted {
            self.udp.counters.latency.observe(latency);
        }
    }

    /// Authenticates one datagram, latches its session's address and hands the plaintext
    /// to the core; or says why it was dropped.
    fn ingest(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
        from: SocketAddr,
    ) -> Result<(), &'static str> {
        let class = classify(datagram);
        let ssrc_at = match class {
            PacketClass::Rtp => 8,
            PacketClass::Rtcp => 4,
            PacketClass::Other => return Err("not_rtp"),
        };
        let ssrc = be32(datagram, ssrc_at).ok_or("too_short")?;
        let id = self.relay.session_by_ssrc(ssrc).ok_or("unknown_ssrc")?;
        let Some(Link::Udp(peer)) = self.links.get_mut(&id) else {
            return Err("not_udp_session");
        };
        if peer.addr.is_some_and(|a| a != from) {
            return Err("address_mismatch");
        }
        let plain_len = match &mut peer.sec {
            Security::Keyed(srtp) => match class {
                PacketClass::Rtp => srtp.unprotect_rtp(datagram),
                _ => srtp.unprotect_rtcp(datagram),
            }
            .map_err(|e: SrtpError| e.reason())?,
            Security::Plain => datagram.len(),
        };
        let plain: &[u8] = datagram.get(..plain_len).unwrap_or_default();
        if peer.addr.is_none() {
            tracing::debug!(session = id, addr = %from, "session latched");
            peer.addr = Some(from);
        }
        deliver(&mut self.relay, &self.metrics, now, id, class, plain);
        Ok(())
    }
}

impl UdpPort {
    /// Protects one packet for a UDP session into the send batch; sent by
    /// [`UdpPort::send_queued`].
    pub(super) fn queue(&mut self, peer: &mut Peer, t: &Transmit<'_>, stats: &mut StatsExporter) {
        let Some(addr) = peer.addr else {
            return;
        };
        let batch = &mut self.batch;
        let queued = match &mut peer.sec {
            Security::Keyed(srtp) => {
                let profile = srtp.profile();
                let (room, protect): (usize, Protect) = match t.class {
                    PacketClass::Rtp => (profile.rtp_overhead(), SrtpSession::protect_rtp_slice),
                    PacketClass::Rtcp => (profile.rtcp_overhead(), SrtpSession::protect_rtcp_slice),
                    PacketClass::Other => return,
                };
                batch.push_sealed(addr, t.bytes, room, |buf, len| protect(srtp, buf, len))
            }
            Security::Plain => {
                batch.push(addr, t.bytes);
                Ok(())
            }
        };
        if let Err(e) = queued {
            tracing::debug!(error = %e, session = t.session, "SRTP protect refused");
            stats.drop(e.reason());
        }
    }

    /// Sends the batch (one `sendmmsg` per [`super::batch::SEND_BATCH`] datagrams).
    pub(super) async fn send_queued(&mut self) {
        if !self.batch.is_empty() {
            let sent = self.batch.flush(&self.socket).await;
            self.counters.packets_out.inc_by(sent.packets);
            self.counters.bytes_out.inc_by(sent.bytes);
        }
    }

    /// A new UDP session's link: its SRTP context and the keys its join answer carries.
    pub(super) fn new_link(
        &self,
        profile: Option<SrtpProfile>,
    ) -> Result<(Peer, Option<SrtpKeys>), CommandError> {
        let (sec, keys) = match profile {
            None if !self.insecure_plain_rtp => return Err(CommandError::PlainRtpDisabled),
            None => (Security::Plain, None),
            Some(profile) => {
                let (srtp, keys) = new_session(profile).map_err(|e| {
                    // The OS random source failing leaves the relay unable to key anyone.
                    tracing::error!(error = %e, "cannot make SRTP keys");
                    CommandError::Stopped
                })?;
                (Security::Keyed(Box::new(srtp)), Some(keys))
            }
        };
        Ok((Peer { sec, addr: None }, keys))
    }
}

/// The relay's SRTP context for a new session, with fresh keys for both directions, and
/// those keys as the join answer carries them.
fn new_session(profile: SrtpProfile) -> Result<(SrtpSession, SrtpKeys), SrtpError> {
    let client = KeyMaterial::generate(profile)?;
    let relay = KeyMaterial::generate(profile)?;
    let srtp = SrtpSession::for_relay(profile, &client, &relay)?;
    let keys = SrtpKeys {
        profile,
        client_key: client.to_base64(),
        relay_key: relay.to_base64(),
    };
    Ok((srtp, keys))
}

/// Reads a big-endian u32 at `at`, or `None` past the end.
fn be32(buf: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}
