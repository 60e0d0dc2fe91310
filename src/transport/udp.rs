//! RTP/RTCP over UDP with SRTP: the relay task.
//!
//! One tokio task owns the [`Relay`] core, the socket and every session's transport state
//! (SRTP contexts, latched address). It waits on three inputs at once: datagrams, control
//! [`Command`]s and the core's next timeout. After each input it drains the core's output,
//! protects each packet for its destination and sends it.
//!
//! # Receive path
//!
//! Datagrams are demultiplexed on the one port (rtcp-mux, RFC 5761) by [`classify`]; the
//! SSRC in the clear header (RTP: the SSRC field; RTCP: the sender SSRC) names the session.
//! The packet is unprotected with that session's keys, and the first packet that
//! authenticates **latches** the session to its source address (DESIGN §2); after that,
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
//! sent with `sendmmsg`. A datagram larger than a receive slot (the largest packet the
//! relay accepts plus SRTP's overhead) is dropped as `oversized`. The socket buffers are
//! sized at start ([`UdpConfig::recv_buffer`], [`UdpConfig::send_buffer`]; the kernel caps
//! them at `net.core.rmem_max`/`wmem_max`, and the effective sizes are logged); what the
//! kernel still drops shows in `gsrelay_udp_receive_buffer_errors_total`.
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
use super::command::{
    Command, CommandError, JoinAnswer, JoinCommand, RelayHandle, SessionOwner, SrtpKeys,
};
use super::guard::guarded;
use super::recv::{Datagram, RecvBatch};
use super::shards::RoomDirectory;
use crate::metrics::Metrics;
use crate::metrics::export::StatsExporter;
use crate::relay::{Relay, SessionId};
use crate::rtp::{KeyMaterial, PacketClass, SrtpError, SrtpProfile, SrtpSession, classify};
use prometheus::{Histogram, IntCounter};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Datagrams read per wake-up before the task looks at its other inputs again.
pub const RECV_BATCH: usize = 64;

/// Commands that may wait in the channel before senders block.
const COMMAND_DEPTH: usize = 256;

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

/// A running UDP transport.
pub struct UdpTransport {
    /// Handle for the control plane.
    pub handle: RelayHandle,
    /// The bound address.
    pub local_addr: SocketAddr,
    /// The relay task; it ends when every handle is dropped.
    pub task: JoinHandle<()>,
}

/// Binds the socket and spawns the relay task that owns `relay`.
pub async fn spawn(
    cfg: UdpConfig,
    relay: Relay,
    metrics: Metrics,
) -> std::io::Result<UdpTransport> {
    let socket = UdpSocket::bind(cfg.bind).await?;
    size_buffers(&socket, cfg.recv_buffer, cfg.send_buffer)?;
    let local_addr = socket.local_addr()?;
    let slot = relay.config().max_packet_bytes + RECV_SLOT_SPARE;
    let mut relay = relay;
    // The core's NTP time (RTCP reports) from one reading of both clocks.
    let since_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    relay.set_wallclock(Instant::now(), since_unix);
    let (handle, commands) = RelayHandle::channel(COMMAND_DEPTH);
    let shell = Shell {
        counters: Counters::new(&metrics),
        exporter: StatsExporter::new(&metrics),
        socket,
        relay,
        metrics,
        peers: HashMap::new(),
        rtp_addr: cfg.advertise.unwrap_or(local_addr),
        insecure_plain_rtp: cfg.insecure_plain_rtp,
        directory: cfg.directory,
        recv: RecvBatch::new(RECV_BATCH, slot),
        batch: SendBatch::default(),
    };
    let task = tokio::spawn(shell.run(commands));
    Ok(UdpTransport {
        handle,
        local_addr,
        task,
    })
}

/// A session's transport state.
struct Peer {
    sec: Security,
    /// Where its packets come from and where the relay sends; set by its first
    /// authenticated packet.
    addr: Option<SocketAddr>,
    /// Its room, for the directory.
    room: Arc<str>,
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

/// The per-packet metrics, resolved once so the hot path does no label lookup.
struct Counters {
    packets_in: IntCounter,
    packets_out: IntCounter,
    bytes_in: IntCounter,
    bytes_out: IntCounter,
    latency: Histogram,
}

impl Counters {
    fn new(m: &Metrics) -> Self {
        Self {
            packets_in: m.packets.with_label_values(&[TRANSPORT, "in"]),
            packets_out: m.packets.with_label_values(&[TRANSPORT, "out"]),
            bytes_in: m.bytes.with_label_values(&[TRANSPORT, "in"]),
            bytes_out: m.bytes.with_label_values(&[TRANSPORT, "out"]),
            latency: m.latency(TRANSPORT),
        }
    }
}

/// Everything the relay task owns.
struct Shell {
    socket: UdpSocket,
    relay: Relay,
    metrics: Metrics,
    counters: Counters,
    /// Exports the core's statistics after each input.
    exporter: StatsExporter,
    peers: HashMap<SessionId, Peer>,
    /// What join answers advertise.
    rtp_addr: SocketAddr,
    insecure_plain_rtp: bool,
    directory: Option<Arc<RoomDirectory>>,
    /// Receive slots, reused for every batch.
    recv: RecvBatch,
    /// Outgoing datagrams, sent together.
    batch: SendBatch,
}

impl Shell {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        tracing::info!(addr = %self.rtp_addr, "RTP/UDP transport running");
        loop {
            let deadline = self.relay.poll_timeout();
            // Biased, commands first: a join or an interest change waits behind at most
            // one receive batch, however saturated the socket; timers before the socket
            // so pacing and deadlines are not starved by input.
            tokio::select! {
                biased;
                cmd = commands.recv() => match cmd {
                    Some(cmd) => self.command(cmd).await,
                    None => break,
                },
                () = sleep_until(deadline) => self.timeout().await,
                ready = self.socket.readable() => match ready {
                    Ok(()) => self.receive_batch().await,
                    Err(e) => tracing::warn!(error = %e, "UDP socket not readable"),
                },
            }
            self.exporter.export(&mut self.relay);
        }
        tracing::info!("RTP/UDP transport stopped: every relay handle dropped");
    }

    /// Reads up to [`RECV_BATCH`] datagrams and handles them, then sends everything they
    /// produced together (one `sendmmsg` per [`super::batch::SEND_BATCH`] datagrams). Each accepted
    /// datagram's latency runs from the batch's arrival to the end of that send.
    async fn receive_batch(&mut self) {
        let now = Instant::now();
        let mut accepted = 0u32;
        let mut recv = std::mem::replace(&mut self.recv, RecvBatch::new(0, 0));
        let n = match recv.recv(&self.socket) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                // ICMP errors surfaced by some platforms; nothing to do for one datagram.
                tracing::debug!(error = %e, "UDP receive error");
                0
            }
        };
        for i in 0..n {
            let verdict = match recv.datagram(i) {
                Datagram::Whole(datagram, from) => {
                    self.counters.packets_in.inc();
                    self.counters.bytes_in.inc_by(datagram.len() as u64);
                    self.ingest(now, datagram, from)
                }
                Datagram::Unusable => {
                    self.counters.packets_in.inc();
                    Err("oversized")
                }
            };
            match verdict {
                Ok(()) => accepted += 1,
                Err(reason) => self.exporter.drop(reason),
            }
        }
        self.recv = recv;
        // Aggregated delivery with `max_delay_ms: 0` sends what this batch brought.
        guarded(&mut self.relay, &self.metrics, "aggregate", now, |r| {
            r.flush_aggregates(now)
        });
        self.flush().await;
        self.forget_closed();
        let latency = now.elapsed().as_secs_f64();
        for _ in 0..accepted {
            self.counters.latency.observe(latency);
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
        let peer = self.peers.get_mut(&id).ok_or("unknown_ssrc")?;
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
        let rtp = class == PacketClass::Rtp;
        let place = if rtp { "rtp" } else { "rtcp" };
        guarded(&mut self.relay, &self.metrics, place, now, |r| {
            if rtp {
                r.handle_rtp(now, id, plain);
            } else {
                r.handle_rtcp(now, id, plain);
            }
        });
        Ok(())
    }

    /// Sends everything the core has queued, each packet protected in the batch's arena.
    async fn flush(&mut self) {
        let Self {
            relay,
            peers,
            socket,
            exporter,
            counters,
            batch,
            ..
        } = self;
        while let Some(t) = relay.poll_transmit() {
            let Some(peer) = peers.get_mut(&t.session) else {
                continue;
            };
            let Some(addr) = peer.addr else {
                continue;
            };
            let queued = match &mut peer.sec {
                Security::Keyed(srtp) => {
                    let profile = srtp.profile();
                    let (room, protect): (usize, Protect) = match t.class {
                        PacketClass::Rtp => {
                            (profile.rtp_overhead(), SrtpSession::protect_rtp_slice)
                        }
                        PacketClass::Rtcp => {
                            (profile.rtcp_overhead(), SrtpSession::protect_rtcp_slice)
                        }
                        PacketClass::Other => continue,
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
                exporter.drop(e.reason());
            }
        }
        if !batch.is_empty() {
            let sent = batch.flush(socket).await;
            counters.packets_out.inc_by(sent.packets);
            counters.bytes_out.inc_by(sent.bytes);
        }
    }

    /// Runs the core's timers, sends what they produce and forgets removed sessions.
    async fn timeout(&mut self) {
        let now = Instant::now();
        guarded(&mut self.relay, &self.metrics, "timeout", now, |r| {
            r.handle_timeout(now);
        });
        self.flush().await;
        self.forget_closed();
    }

    /// Forgets the transport state of sessions the core removed by itself.
    fn forget_closed(&mut self) {
        while let Some(id) = self.relay.poll_closed() {
            self.forget(id);
        }
    }

    /// Drops a session's transport state and tells the directory.
    fn forget(&mut self, id: SessionId) {
        if let (Some(peer), Some(dir)) = (self.peers.remove(&id), &self.directory) {
            dir.release(&peer.room);
        }
    }

    async fn command(&mut self, cmd: Command) {
        let now = Instant::now();
        let metrics = self.metrics.clone();
        let fault = || CommandError::Internal;
        match cmd {
            Command::Join(join, reply) => {
                let answer = self.join(join);
                let _ = reply.send(answer);
            }
            Command::Leave(id, reply) => {
                let result = guarded(&mut self.relay, &metrics, "command", now, |r| r.leave(id))
                    .ok_or_else(fault)
                    .and_then(|r| r.map_err(CommandError::from));
                if result.is_ok() {
                    self.forget(id);
                }
                // The BYEs for its stream go to the others now, not at the next input.
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::SetInterest(id, interest, reply) => {
                let result = guarded(&mut self.relay, &metrics, "command", now, |r| {
                    r.set_interest(now, id, interest)
                })
                .ok_or_else(fault)
                .and_then(|r| r.map_err(CommandError::from));
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::SessionOwner(id, reply) => {
                let owner = self.relay.session(id).map(|s| SessionOwner {
                    room: s.room.to_string(),
                    identity: s.identity.clone(),
                });
                let _ = reply.send(owner);
            }
            Command::RoomInfo(room, reply) => {
                let _ = reply.send(self.relay.room_info(&room));
            }
            Command::Drain(reply) => {
                self.relay.set_draining(true);
                let _ = reply.send(self.relay.session_count());
            }
        }
    }

    /// Makes the session's keys, then joins it to the core.
    fn join(&mut self, cmd: JoinCommand) -> Result<JoinAnswer, CommandError> {
        let (sec, keys) = match cmd.profile {
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
        let now = Instant::now();
        let room: Arc<str> = Arc::from(cmd.request.room.as_str());
        let joined = guarded(&mut self.relay, &self.metrics, "command", now, |r| {
            r.join(now, cmd.request)
        })
        .ok_or(CommandError::Internal)??;
        let peer = Peer {
            sec,
            addr: None,
            room,
        };
        self.peers.insert(joined.session, peer);
        Ok(JoinAnswer {
            joined,
            rtp_addr: self.rtp_addr,
            srtp: keys,
        })
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

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Reads a big-endian u32 at `at`, or `None` past the end.
fn be32(buf: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}
