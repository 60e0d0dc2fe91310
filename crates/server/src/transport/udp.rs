//! RTP/RTCP over UDP with SRTP: the UDP `Port` of a shard (`super::shard`).
//!
//! The port owns the shard's socket and every UDP session's transport state (SRTP
//! contexts, latched address); it reads datagrams into core inputs and protects and sends
//! the core's packets for UDP sessions.
//!
//! # Receive path
//!
//! Datagrams are demultiplexed on the one port (rtcp-mux, RFC 5761) by [`classify`]; the
//! SSRC in the clear header (RTP: the SSRC field; RTCP: the sender SSRC) names the session.
//! The packet is unprotected with that session's keys, and the first packet that
//! authenticates **latches** the session to its source address. A failed packet never
//! latches, so a forger cannot steal or block another session's address; nor can it poison
//! the replay window, which SRTP moves only for authenticated packets (see
//! [`gsrelay_core::rtp::srtp`]), so each session's SRTP context is made once at join and used
//! before and after latching. Packets are unprotected in place, in the receive buffer.
//!
//! **A session moves** when its client's address changes (Wi-Fi to cellular, a NAT
//! rebinding): a packet from another address that authenticates, and is no replay, moves
//! the session there, and the old address is sent nothing more (counted in
//! `gsrelay_address_moves_total{transport="udp"}`). Only the session's keys can produce
//! such a packet, so an off-path attacker cannot move it; one on the path, who could as well
//! drop the session's packets, could race a copy of a fresh packet from its own address,
//! the risk QUIC's migration also accepts without path validation (RFC 9000 §9.3). Trying
//! a packet from another address costs an authentication, so each session gets at most
//! [`MOVE_TRIES_PER_SEC`] such tries a second; beyond them, and always for plain-RTP
//! sessions (`--insecure-plain-rtp`, which latch on their first packet and cannot prove a
//! move), packets from another address are dropped before decryption
//! (`address_mismatch`). Drops are counted in `gsrelay_dropped_packets_total` by reason.
//!
//! Readable datagrams are read with `recvmmsg`, up to `RECV_BATCH` per syscall, with one
//! clock reading per batch (the core never reads the clock), and what a batch produced is
//! sent with `sendmmsg` (GSO for runs to one destination, `gsrelay_net::udp::batch`). A datagram
//! larger than a receive slot (the largest packet the relay accepts plus SRTP's overhead)
//! is dropped as `oversized`. The socket buffers are sized at start
//! ([`UdpConfig::recv_buffer`], [`UdpConfig::send_buffer`]; the kernel caps them at
//! `net.core.rmem_max`/`wmem_max`, and the effective sizes are logged).
//!
//! # Drop, don't queue
//!
//! The receive buffer is sized in bytes, for bursts; how long a datagram may wait in it
//! is bounded in time. The socket stamps each datagram with the kernel's receive time
//! (`SO_TIMESTAMPNS`), and an RTP packet that waited longer than
//! [`UdpConfig::max_queue_delay`] by the time its batch is read is dropped as `stale`
//! before anything else is done with it (no session look-up, no SRTP) when a later
//! packet of the same stream is in the same batch: past saturation the shard sheds what
//! newer state replaces for the price of reading it, and the newest packet of every
//! stream is handled however long it waited, since it may hold the only copy of a state
//! (a stall of the shard's thread sheds everything but each stream's newest, instead of
//! every stream's state for the stall's length). RTCP is never
//! shed: it is a small share of the input and carries what a late copy still serves
//! (a BYE, a joiner's FIR, NACKs, reports). SRTP does not mind the gaps: the replay
//! window takes packets out of order and after losses, and the rollover counter is
//! guessed from the nearest index, which a few milliseconds' shedding cannot confuse
//! (it would take 2^15 packets of one stream in a row). What the kernel itself drops
//! because the buffer is full is counted on this socket too, from the drop count it
//! hands over with each datagram (`SO_RXQ_OVFL`), as `socket_overflow`; the namespace's
//! total shows in `gsrelay_udp_receive_buffer_errors_total`. The forward latency
//! (`gsrelay_forward_latency_seconds{transport="udp"}`) counts from the kernel's receive
//! time, so the wait in the socket is in it.
//!
//! # Send path
//!
//! A packet for a session that has not latched an address yet is not sent: the relay does
//! not know where the client is. That is not counted (it is the normal state of a session
//! between its join and its first packet). No packet is copied: each is protected in
//! place, in the core's output buffer where the core wrote it, in the trailer room the
//! core leaves after every packet (`trailer_room`), and sent from there; nothing here
//! allocates per packet. A packet SRTP refuses to protect (an index this session's key
//! already sealed, see [`SrtpError::IndexReuse`]) is dropped and counted by reason.

use super::command::{CommandError, SrtpKeys};
use super::port::{Core, Port, RECV_BATCH};
use crate::metrics::export::StatsExporter;
use crate::metrics::{Metrics, TransportCounters};
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::{KeyMaterial, PacketClass, SrtpError, SrtpProfile, SrtpSession, classify};
use gsrelay_net::udp::batch::SendBatch;
use gsrelay_net::udp::recv::{Datagram, RecvBatch};
use nix::sys::socket::{setsockopt, sockopt};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UdpSocket;

/// Room in a receive slot beyond the relay's packet limit: SRTP's tag and MKI, and
/// enough that a datagram just over the limit is seen whole and refused by size.
const RECV_SLOT_SPARE: usize = 64;

/// Transport label in metrics.
const TRANSPORT: &str = "udp";

/// A wait in the socket longer than any receive buffer holds at any rate worth serving:
/// beyond it the kernel's stamp and the relay's clock disagree (a step of the wall clock).
const IMPLAUSIBLE_WAIT: Duration = Duration::from_secs(10);

/// Packets from an address other than its own a session may have authenticated per
/// second, to move there: a legitimate move needs one, a forger's flood gets this many
/// authentications at most.
pub const MOVE_TRIES_PER_SEC: u32 = 8;

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
    /// `JoinCommand::profile` (where `None` means plain RTP); the control plane applies
    /// this default before sending the command.
    pub default_profile: SrtpProfile,
    /// Socket receive buffer to ask for, bytes (`None`: the kernel's default).
    pub recv_buffer: Option<usize>,
    /// Socket send buffer to ask for, bytes (`None`: the kernel's default).
    pub send_buffer: Option<usize>,
    /// Longest an RTP packet may have waited in the socket's receive queue when it is
    /// read; older ones are dropped as `stale` (`None`: never).
    pub max_queue_delay: Option<Duration>,
}

impl UdpConfig {
    /// The defaults for `bind`: SRTP only, the default profile, the kernel's socket
    /// buffers.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            advertise: None,
            insecure_plain_rtp: false,
            default_profile: SrtpProfile::default(),
            recv_buffer: None,
            send_buffer: None,
            max_queue_delay: None,
        }
    }
}

/// Asks the kernel for each datagram's receive time and for the socket's drop count,
/// as control messages (`gsrelay_net::udp`). Without them (a kernel that refuses)
/// nothing is shed and the socket's own drops go uncounted, which is logged.
fn stamp_arrivals(socket: &UdpSocket) {
    if let Err(e) = setsockopt(socket, sockopt::ReceiveTimestampns, &true) {
        tracing::warn!(error = %e, "SO_TIMESTAMPNS refused: no packet will be shed as stale");
    }
    if let Err(e) = setsockopt(socket, sockopt::RxqOvfl, &1) {
        tracing::warn!(error = %e, "SO_RXQ_OVFL refused: the socket's own drops are not counted");
    }
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
    /// authenticated packet, moved by a later one from elsewhere.
    addr: Option<SocketAddr>,
    /// Tries to move this second: when the second began, and how many so far.
    move_tries: (Option<Instant>, u32),
}

impl Peer {
    /// Whether a packet from another address than the session's may be tried, at `now`.
    fn may_try_move(&mut self, now: Instant) -> bool {
        if matches!(self.sec, Security::Plain) {
            return false;
        }
        let (since, tries) = &mut self.move_tries;
        if since.is_none_or(|s| now.saturating_duration_since(s).as_secs() >= 1) {
            *since = Some(now);
            *tries = 0;
        }
        *tries += 1;
        *tries <= MOVE_TRIES_PER_SEC
    }
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

/// What the core must leave after each packet for this port to protect it in place: the
/// longest SRTP or SRTCP trailer of any profile.
pub(super) fn trailer_room() -> usize {
    SrtpProfile::ALL
        .iter()
        .map(|p| p.rtp_overhead().max(p.rtcp_overhead()))
        .max()
        .unwrap_or(0)
}

/// A packet of the core's queued for a latched session, still in the core's buffer.
struct Queued {
    session: SessionId,
    to: SocketAddr,
    class: PacketClass,
    at: usize,
    len: usize,
}

/// What a shard owns for UDP.
pub(super) struct UdpPort {
    socket: UdpSocket,
    counters: TransportCounters,
    /// What join answers advertise.
    pub(super) rtp_addr: SocketAddr,
    insecure_plain_rtp: bool,
    /// Each UDP session's transport state.
    peers: HashMap<SessionId, Peer>,
    /// Receive slots, reused for every batch.
    recv: RecvBatch,
    /// The core's packets to send, protected when the batch goes.
    queued: Vec<Queued>,
    /// The room the core leaves after each packet ([`trailer_room`]).
    trailer: usize,
    /// Outgoing datagrams, sent together.
    batch: SendBatch,
    /// Datagrams the core took in the last batch.
    accepted: u32,
    /// How long each of them waited in the socket before the batch was read, seconds.
    waited: [f64; RECV_BATCH],
    /// See [`UdpConfig::max_queue_delay`].
    max_queue_delay: Option<Duration>,
    /// The socket's drop count last seen (`SO_RXQ_OVFL`).
    socket_drops: u32,
    /// The streams (SSRC and source) met so far in a backward look at a batch (scratch,
    /// [`UdpPort::supersede`]).
    later: Vec<(u32, SocketAddr)>,
}

impl UdpPort {
    /// Binds the socket for `cfg`, with receive slots for packets up to `max_packet`
    /// bytes.
    pub(super) async fn bind(
        cfg: &UdpConfig,
        max_packet: usize,
        metrics: &Metrics,
    ) -> io::Result<Self> {
        let socket = UdpSocket::bind(cfg.bind).await?;
        size_buffers(&socket, cfg.recv_buffer, cfg.send_buffer)?;
        stamp_arrivals(&socket);
        let local_addr = socket.local_addr()?;
        Ok(Self {
            counters: metrics.transport(TRANSPORT),
            socket,
            rtp_addr: cfg.advertise.unwrap_or(local_addr),
            insecure_plain_rtp: cfg.insecure_plain_rtp,
            peers: HashMap::new(),
            recv: RecvBatch::new(RECV_BATCH, max_packet + RECV_SLOT_SPARE),
            queued: Vec::new(),
            trailer: trailer_room(),
            batch: SendBatch::default(),
            accepted: 0,
            waited: [0.0; RECV_BATCH],
            max_queue_delay: cfg.max_queue_delay,
            socket_drops: 0,
            later: Vec::with_capacity(RECV_BATCH),
        })
    }

    /// Where the socket is bound.
    pub(super) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Marks in `shed` the RTP datagrams of the batch that waited past the budget and
    /// that a later datagram of the same stream (its SSRC, from the same address) in the
    /// same batch supersedes: past the budget only those are shed, so that the newest
    /// state of every stream is always handled. Looks nothing up when nothing waited
    /// past the budget.
    fn supersede(&mut self, recv: &RecvBatch, waits: &[Duration], shed: &mut [bool]) {
        let Some(max) = self.max_queue_delay else {
            return;
        };
        if waits.iter().all(|w| *w <= max) {
            return;
        }
        self.later.clear();
        for (i, (wait, shed)) in waits.iter().zip(shed.iter_mut()).enumerate().rev() {
            let Some((datagram, from)) = recv.peek(i) else {
                continue;
            };
            if classify(datagram) != PacketClass::Rtp {
                continue;
            }
            let Some(ssrc) = be32(datagram, 8) else {
                continue;
            };
            let stream = (ssrc, from);
            if self.later.contains(&stream) {
                *shed = *wait > max;
            } else {
                self.later.push(stream);
            }
        }
    }

    /// Authenticates one datagram, which `shed` says to drop as superseded past the
    /// budget, latches its session's address and hands the plaintext to the core; or
    /// says why it was dropped.
    fn ingest(
        &mut self,
        now: Instant,
        (datagram, from, shed): (&mut [u8], SocketAddr, bool),
        core: &mut impl Core,
    ) -> Result<(), &'static str> {
        let class = classify(datagram);
        let ssrc_at = match class {
            PacketClass::Rtp if shed => return Err("stale"),
            PacketClass::Rtp => 8,
            PacketClass::Rtcp => 4,
            PacketClass::Other => return Err("not_rtp"),
        };
        let ssrc = be32(datagram, ssrc_at).ok_or("too_short")?;
        let id = core.session_by_ssrc(ssrc).ok_or("unknown_ssrc")?;
        let Some(peer) = self.peers.get_mut(&id) else {
            return Err("not_udp_session");
        };
        let moving = peer.addr.is_some_and(|a| a != from);
        if moving && !peer.may_try_move(now) {
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
        } else if moving {
            tracing::info!(session = id, addr = %from, "session moved to a new address");
            peer.addr = Some(from);
            self.counters.moves.inc();
        }
        core.packet(now, id, class, plain);
        Ok(())
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
        let peer = Peer {
            sec,
            addr: None,
            move_tries: (None, 0),
        };
        Ok((peer, keys))
    }

    /// Keeps a joined session's link until [`Port::forget`].
    pub(super) fn register(&mut self, id: SessionId, peer: Peer) {
        self.peers.insert(id, peer);
    }
}

impl Port for UdpPort {
    /// The socket is readable (or says why not).
    type Input = io::Result<()>;

    async fn next(&mut self) -> io::Result<()> {
        self.socket.readable().await
    }

    /// Reads up to [`RECV_BATCH`] datagrams with one `recvmmsg` and handles them.
    fn receive(&mut self, now: Instant, ready: io::Result<()>, core: &mut impl Core) {
        if let Err(e) = ready {
            return tracing::warn!(error = %e, "UDP socket not readable");
        }
        let mut accepted = 0u32;
        let mut recv = std::mem::take(&mut self.recv);
        // The kernel stamps arrivals with the wall clock: one reading of it per batch,
        // taken with `now` before the read, so that the read itself is not counted twice
        // and what arrived during it waited no time. A step of that clock misjudges only
        // what is queued at that moment.
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let n = match recv.recv(&self.socket) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                // ICMP errors surfaced by some platforms; nothing to do for one datagram.
                tracing::debug!(error = %e, "UDP receive error");
                0
            }
        };
        let mut waits = [Duration::ZERO; RECV_BATCH];
        let mut shed = [false; RECV_BATCH];
        let n = n.min(RECV_BATCH);
        for (i, w) in waits.iter_mut().enumerate().take(n) {
            // A wait no receive buffer could hold is a clock step (or a stamp in another
            // time base), not queueing: taken as unknown, so it neither sheds nor skews
            // the latency.
            *w = recv
                .arrived(i)
                .map(|t| wall.saturating_sub(t))
                .filter(|w| *w < IMPLAUSIBLE_WAIT)
                .unwrap_or_default();
        }
        self.supersede(&recv, &waits[..n], &mut shed[..n]);
        for i in 0..n {
            self.counters.packets_in.inc();
            let waited = waits[i];
            let verdict = match recv.datagram(i) {
                Datagram::Whole(datagram, from) => {
                    self.counters.bytes_in.inc_by(datagram.len() as u64);
                    self.ingest(now, (datagram, from, shed[i]), core)
                }
                Datagram::Unusable => Err("oversized"),
            };
            match verdict {
                Ok(()) => {
                    if let Some(w) = self.waited.get_mut(accepted as usize) {
                        *w = waited.as_secs_f64();
                    }
                    accepted += 1;
                }
                Err(reason) => core.drop_packet(reason),
            }
        }
        if let Some(drops) = recv.socket_drops() {
            // The count only grows (and wraps): what it grew by since the last batch
            // was dropped by the kernel before the relay could read it.
            let new = drops.wrapping_sub(self.socket_drops);
            self.socket_drops = drops;
            if new > 0 {
                core.drop_packets("socket_overflow", u64::from(new));
            }
        }
        self.recv = recv;
        self.accepted = accepted;
    }

    /// Each packet's latency is the batch's plus its own wait in the socket.
    fn observe_latency(&mut self, seconds: f64) {
        let accepted = std::mem::take(&mut self.accepted) as usize;
        for waited in self.waited.iter().take(accepted) {
            self.counters.latency.observe(seconds + waited);
        }
    }

    /// Queues one of the core's packets (nothing for a session that has not latched an
    /// address yet); it is protected and sent by [`Port::send_queued`].
    fn queue(&mut self, _now: Instant, t: &Transmit<'_>, _stats: &mut StatsExporter) {
        let Some(to) = self.peers.get(&t.session).and_then(|p| p.addr) else {
            return;
        };
        self.queued.push(Queued {
            session: t.session,
            to,
            class: t.class,
            at: t.at,
            len: t.bytes.len(),
        });
    }

    /// Protects the queued packets in place in `transmitted` (the core's output buffer)
    /// and sends them (one `sendmmsg` per [`gsrelay_net::udp::batch::SEND_BATCH`] datagrams, or a GSO
    /// buffer per run to one destination).
    /// The send plan and queue grow to the largest burst (a snapshot to many
    /// subscribers: thousands of datagrams), the session table to the most sessions.
    fn release_idle(&mut self) {
        self.queued = Vec::new();
        self.batch = SendBatch::default();
        self.peers.shrink_to_fit();
    }

    async fn send_queued(&mut self, transmitted: &mut [u8], stats: &mut StatsExporter) {
        for q in self.queued.drain(..) {
            let Some(peer) = self.peers.get_mut(&q.session) else {
                continue;
            };
            // Bounded by the room the core left: a trailer never reaches the next packet
            // (a slot cut short makes SRTP refuse the packet, counted).
            let end = q.at + q.len + self.trailer;
            let slot = transmitted.get_mut(q.at..end).unwrap_or_default();
            let sealed = match &mut peer.sec {
                Security::Keyed(srtp) => {
                    let protect: Protect = match q.class {
                        PacketClass::Rtp => SrtpSession::protect_rtp_slice,
                        PacketClass::Rtcp => SrtpSession::protect_rtcp_slice,
                        PacketClass::Other => continue,
                    };
                    protect(srtp, slot, q.len)
                }
                Security::Plain => Ok(q.len),
            };
            match sealed {
                Ok(len) => self.batch.push(q.to, q.at..q.at + len),
                Err(e) => {
                    tracing::debug!(error = %e, session = q.session, "SRTP protect refused");
                    stats.drop(e.reason());
                }
            }
        }
        if !self.batch.is_empty() {
            let sent = self.batch.flush(&self.socket, transmitted).await;
            self.counters.packets_out.inc_by(sent.packets);
            self.counters.bytes_out.inc_by(sent.bytes);
        }
    }

    fn forget(&mut self, id: SessionId) {
        self.peers.remove(&id);
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
