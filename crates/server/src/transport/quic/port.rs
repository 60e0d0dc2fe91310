//! A shard's QUIC [`Port`]: session tokens, each QUIC session's connection, QUIC events
//! as core inputs, and the core's packets as DATAGRAM frames or stream frames.
//! RoQ and WebTransport sessions differ here only in their datagrams' header and their
//! metrics' `transport` label ([`Protocol`]).

use super::conn::ErrorCode;
use super::{Attached, Certificates, Protocol, QuicEvent, Token};
use crate::metrics::export::StatsExporter;
use crate::metrics::{Metrics, TransportCounters};
use crate::transport::command::{CommandError, QuicAnswer};
use crate::transport::port::{Core, Inbox, Port, RECV_BATCH};
use bytes::{Bytes, BytesMut};
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::roq;
use gsrelay_core::rtp::{PacketClass, classify};
use quinn::SendDatagramError;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use web_transport_quinn::Session;

/// Bytes the send arena grows by: outgoing frames are carved from it, so sending
/// allocates once per this many bytes, not per packet.
const ARENA: usize = 256 * 1024;

/// A QUIC session's link.
#[derive(Debug)]
pub(in crate::transport) struct Peer {
    protocol: Protocol,
    flow_id: u64,
    token: Token,
    expires: Instant,
    live: Option<Live>,
}

/// A session's attached connection.
#[derive(Debug)]
struct Live {
    conn: Box<Session>,
    id: usize,
    /// Frames for the session's unidirectional stream (its writer task).
    stream: mpsc::Sender<Bytes>,
    /// Largest RoQ datagram (flow identifier and packet) the peer takes; `None` without
    /// datagram support.
    max_datagram: Option<usize>,
}

/// What a shard owns for QUIC.
pub(in crate::transport) struct QuicPort {
    /// Events from the shard's connections.
    inbox: Inbox<QuicEvent>,
    /// Each QUIC session's link.
    peers: HashMap<SessionId, Peer>,
    /// Packets the core took in the last batch, by [`Protocol::index`].
    packets: [u32; 2],
    metrics: Metrics,
    /// The shard this port belongs to: the first byte of its tokens.
    shard: u8,
    addr: SocketAddr,
    certs: Arc<Certificates>,
    token_ttl: Duration,
    /// Tokens not used yet, with their session and expiry.
    tokens: HashMap<Token, (SessionId, Instant)>,
    /// Token count at which expired tokens are next swept.
    sweep_at: usize,
    arena: BytesMut,
    /// By [`Protocol::index`].
    counters: [TransportCounters; 2],
}

impl QuicPort {
    pub(super) fn new(
        inbox: mpsc::Receiver<QuicEvent>,
        shard: u8,
        addr: SocketAddr,
        certs: Arc<Certificates>,
        token_ttl: Duration,
        m: &Metrics,
    ) -> Self {
        Self {
            inbox: Inbox::new(inbox),
            peers: HashMap::new(),
            packets: [0; 2],
            metrics: m.clone(),
            shard,
            addr,
            certs,
            token_ttl,
            tokens: HashMap::new(),
            sweep_at: 64,
            arena: BytesMut::new(),
            counters: Protocol::ALL.map(|p| m.transport(p.label())),
        }
    }

    fn counters(&self, protocol: Protocol) -> &TransportCounters {
        &self.counters[protocol.index()]
    }

    /// A new link for a session over `protocol`, with a fresh token.
    pub(in crate::transport) fn new_link(
        &mut self,
        protocol: Protocol,
    ) -> Result<Peer, CommandError> {
        let token = Token::generate(self.shard).map_err(|e| {
            tracing::error!(error = %e, "cannot make a session token");
            CommandError::Stopped
        })?;
        Ok(Peer {
            protocol,
            flow_id: 0,
            token,
            expires: Instant::now() + self.token_ttl,
            live: None,
        })
    }

    /// Keeps a joined session's link and makes its token usable; answers what its join
    /// returns.
    pub(in crate::transport) fn register(&mut self, id: SessionId, mut peer: Peer) -> QuicAnswer {
        // The flow identifier only has to be the session's own: a two-byte varint
        // derived from the session id exercises a peer's varint parsing from the start.
        peer.flow_id = 0x40 | (id & 0x3fbf);
        if self.tokens.len() >= self.sweep_at {
            let now = Instant::now();
            self.tokens.retain(|_, (_, expires)| *expires > now);
            self.sweep_at = (self.tokens.len() * 2).max(64);
        }
        self.tokens.insert(peer.token, (id, peer.expires));
        let answer = QuicAnswer {
            addr: self.addr,
            alpn: peer.protocol.alpn(),
            cert_sha256: self.certs.sha256(),
            self_signed: self.certs.generated(),
            flow_id: peer.flow_id,
            session_token: peer.token.to_string(),
        };
        self.peers.insert(id, peer);
        answer
    }

    /// Sends one packet to a QUIC session: a DATAGRAM frame when it fits the peer's
    /// current maximum, else a frame on the session's unidirectional stream.
    fn send(&mut self, t: &Transmit<'_>) {
        if t.class == PacketClass::Other {
            return;
        }
        let Some(Peer {
            protocol,
            flow_id,
            live: Some(live),
            ..
        }) = self.peers.get(&t.session)
        else {
            return;
        };
        let (protocol, flow_id) = (*protocol, *flow_id);
        let datagram_len = roq::varint_len(flow_id) + t.bytes.len();
        if live.max_datagram.is_some_and(|max| datagram_len <= max) {
            let header = protocol.datagram_header();
            let frame = frame(&mut self.arena, header, flow_id, t.bytes);
            // quinn's own send: the frame already holds the HTTP/3 header, so the
            // library's (which copies each datagram to prepend it) is not needed.
            match quinn::Connection::send_datagram(&live.conn, frame) {
                Ok(()) => return self.count_out(protocol, datagram_len),
                // The path shrank since the last look: the stream carries it.
                Err(SendDatagramError::TooLarge) => {}
                Err(_) => return self.metrics.drop("quic_send_failed"),
            }
        }
        let frame = frame(&mut self.arena, &[], t.bytes.len() as u64, t.bytes);
        let len = frame.len();
        match live.stream.try_send(frame) {
            Ok(()) => self.count_out(protocol, len),
            Err(_) => self.metrics.drop("quic_stream_full"),
        }
    }

    fn count_out(&self, protocol: Protocol, bytes: usize) {
        let c = self.counters(protocol);
        c.packets_out.inc();
        c.bytes_out.inc_by(bytes as u64);
    }
}

impl Port for QuicPort {
    type Input = QuicEvent;

    /// The next event from a connection; never, once every connection task is gone.
    async fn next(&mut self) -> QuicEvent {
        self.inbox.recv().await
    }

    /// Handles `first` and whatever else the inbox holds, up to [`RECV_BATCH`] events.
    fn receive(&mut self, now: Instant, first: QuicEvent, core: &mut impl Core) {
        self.event(now, first, core);
        for _ in 1..RECV_BATCH {
            let Some(event) = self.inbox.try_recv() else {
                break;
            };
            self.event(now, event, core);
        }
    }

    fn observe_latency(&mut self, seconds: f64) {
        for (counters, n) in self.counters.iter().zip(std::mem::take(&mut self.packets)) {
            for _ in 0..n {
                counters.latency.observe(seconds);
            }
        }
    }

    fn queue(&mut self, _now: Instant, t: &Transmit<'_>, _stats: &mut StatsExporter) {
        self.send(t);
    }

    /// Nothing: QUIC sends as it queues.
    async fn send_queued(&mut self, _: &mut [u8], _: &mut StatsExporter) {}

    /// Forgets a removed session: its token, and its connection (closed).
    fn forget(&mut self, id: SessionId) {
        let Some(peer) = self.peers.remove(&id) else {
            return;
        };
        self.tokens.remove(&peer.token);
        if let Some(live) = peer.live {
            live.conn
                .close(ErrorCode::SessionClosed.code(), b"session closed");
        }
    }
}

impl QuicPort {
    /// Handles one event, counting a packet the core took by its session's protocol.
    fn event(&mut self, now: Instant, event: QuicEvent, core: &mut impl Core) {
        match event {
            QuicEvent::Attach {
                token,
                protocol,
                conn,
                stream,
                reply,
            } => {
                let _ = reply.send(self.attach(now, token, protocol, conn, stream, core));
            }
            QuicEvent::Packet {
                session,
                conn,
                data,
            } => match self.packet(now, session, conn, &data, core) {
                Ok(protocol) => self.packets[protocol.index()] += 1,
                Err(reason) => core.drop_packet(reason),
            },
            QuicEvent::Path {
                session,
                conn,
                max_datagram,
                send_bps,
            } => {
                let Some(peer) = self.live_peer(session, conn) else {
                    return;
                };
                let flow = roq::varint_len(peer.flow_id);
                if let Some(live) = &mut peer.live {
                    live.max_datagram = max_datagram;
                }
                // Without datagrams everything goes on the stream: no packet size limit.
                let max_packet = max_datagram.map_or(usize::MAX, |m| m.saturating_sub(flow));
                core.set_path(now, session, max_packet, send_bps);
            }
            QuicEvent::Closed { session, conn } => {
                if self.live_peer(session, conn).is_some() {
                    tracing::debug!(session, "QUIC connection closed: session leaves");
                    self.forget(session);
                    core.leave(now, session);
                }
            }
        }
    }

    /// The session's peer, if `conn` is its attached connection.
    fn live_peer(&mut self, session: SessionId, conn: usize) -> Option<&mut Peer> {
        self.peers
            .get_mut(&session)
            .filter(|peer| peer.live.as_ref().is_some_and(|l| l.id == conn))
    }

    /// Ties a connection to the session its token names, once.
    fn attach(
        &mut self,
        now: Instant,
        token: Token,
        protocol: Protocol,
        conn: Box<Session>,
        stream: mpsc::Sender<Bytes>,
        core: &mut impl Core,
    ) -> Result<Attached, &'static str> {
        let (session, expires) = self.tokens.remove(&token).ok_or("token_invalid")?;
        if now >= expires {
            return Err("token_expired");
        }
        let peer = self.peers.get_mut(&session).ok_or("token_invalid")?;
        if peer.protocol != protocol {
            return Err("token_wrong_protocol");
        }
        let max_datagram = protocol.max_datagram(&conn);
        peer.live = Some(Live {
            id: conn.stable_id(),
            conn,
            stream,
            max_datagram,
        });
        let flow_id = peer.flow_id;
        let max_packet =
            max_datagram.map_or(usize::MAX, |m| m.saturating_sub(roq::varint_len(flow_id)));
        core.set_path(now, session, max_packet, None);
        Ok(Attached {
            session,
            flow_id,
            max_packet: core.max_packet(),
        })
    }

    /// One packet from a QUIC session's connection, to the core.
    fn packet(
        &mut self,
        now: Instant,
        session: SessionId,
        conn: usize,
        data: &[u8],
        core: &mut impl Core,
    ) -> Result<Protocol, &'static str> {
        let protocol = self
            .live_peer(session, conn)
            .ok_or("quic_stale_connection")?
            .protocol;
        let c = self.counters(protocol);
        c.packets_in.inc();
        c.bytes_in.inc_by(data.len() as u64);
        let class = classify(data);
        if class == PacketClass::Other {
            return Err("not_rtp");
        }
        core.packet(now, session, class, data);
        Ok(protocol)
    }
}

/// `header`, then `prefix` as a varint, then `packet`, carved from `arena`.
fn frame(arena: &mut BytesMut, header: &[u8], prefix: u64, packet: &[u8]) -> Bytes {
    let len = header.len() + roq::varint_len(prefix) + packet.len();
    if arena.capacity() - arena.len() < len {
        arena.reserve(ARENA.max(len));
    }
    arena.extend_from_slice(header);
    roq::write_varint(prefix, arena);
    arena.extend_from_slice(packet);
    arena.split().freeze()
}
