//! The relay task's side of QUIC: session tokens, each QUIC session's connection, QUIC
//! events as core inputs, and the core's packets as DATAGRAM frames or stream frames.
//! RoQ and WebTransport sessions differ here only in their datagrams' header and their
//! metrics' `transport` label ([`Protocol`]).

use super::conn::ErrorCode;
use super::{Attached, Certificates, Protocol, QuicEvent, Token};
use crate::metrics::{Metrics, TransportCounters};
use crate::relay::{Input, SessionId, Transmit};
use crate::rtp::{PacketClass, classify};
use crate::transport::command::{CommandError, QuicAnswer};
use crate::transport::guard::guarded;
use crate::transport::roq;
use crate::transport::shard::{Link, Shard, deliver};
use crate::transport::udp::RECV_BATCH;
use bytes::{Bytes, BytesMut};
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

/// What the relay task owns for QUIC.
pub(in crate::transport) struct QuicPort {
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
        shard: u8,
        addr: SocketAddr,
        certs: Arc<Certificates>,
        token_ttl: Duration,
        m: &Metrics,
    ) -> Self {
        Self {
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

    /// Makes the joined session's token usable; answers what its join returns.
    pub(in crate::transport) fn register(&mut self, id: SessionId, peer: &mut Peer) -> QuicAnswer {
        // The flow identifier only has to be the session's own: a two-byte varint
        // derived from the session id exercises a peer's varint parsing from the start.
        peer.flow_id = 0x40 | (id & 0x3fbf);
        if self.tokens.len() >= self.sweep_at {
            let now = Instant::now();
            self.tokens.retain(|_, (_, expires)| *expires > now);
            self.sweep_at = (self.tokens.len() * 2).max(64);
        }
        self.tokens.insert(peer.token, (id, peer.expires));
        QuicAnswer {
            addr: self.addr,
            alpn: peer.protocol.alpn(),
            cert_sha256: self.certs.sha256(),
            self_signed: self.certs.generated(),
            flow_id: peer.flow_id,
            session_token: peer.token.to_string(),
        }
    }

    /// Forgets a removed session: its token, and its connection (closed).
    pub(in crate::transport) fn forget(&mut self, peer: Peer) {
        self.tokens.remove(&peer.token);
        if let Some(live) = peer.live {
            live.conn
                .close(ErrorCode::SessionClosed.code(), b"session closed");
        }
    }

    /// Sends one packet to a QUIC session: a DATAGRAM frame when it fits the peer's
    /// current maximum, else a frame on the session's unidirectional stream.
    pub(in crate::transport) fn send(
        &mut self,
        peer: &mut Peer,
        t: &Transmit<'_>,
        metrics: &Metrics,
    ) {
        let Some(live) = &peer.live else {
            return;
        };
        if t.class == PacketClass::Other {
            return;
        }
        let datagram_len = roq::varint_len(peer.flow_id) + t.bytes.len();
        if live.max_datagram.is_some_and(|max| datagram_len <= max) {
            let header = peer.protocol.datagram_header();
            let frame = self.frame(header, peer.flow_id, t.bytes);
            // quinn's own send: the frame already holds the HTTP/3 header, so the
            // library's (which copies each datagram to prepend it) is not needed.
            match quinn::Connection::send_datagram(&live.conn, frame) {
                Ok(()) => return self.count_out(peer.protocol, datagram_len),
                // The path shrank since the last look: the stream carries it.
                Err(SendDatagramError::TooLarge) => {}
                Err(_) => return metrics.drop("quic_send_failed"),
            }
        }
        let frame = self.frame(&[], t.bytes.len() as u64, t.bytes);
        let len = frame.len();
        match live.stream.try_send(frame) {
            Ok(()) => self.count_out(peer.protocol, len),
            Err(_) => metrics.drop("quic_stream_full"),
        }
    }

    /// `header`, then `prefix` as a varint, then `packet`, carved from the arena.
    fn frame(&mut self, header: &[u8], prefix: u64, packet: &[u8]) -> Bytes {
        let len = header.len() + roq::varint_len(prefix) + packet.len();
        if self.arena.capacity() - self.arena.len() < len {
            self.arena.reserve(ARENA.max(len));
        }
        self.arena.extend_from_slice(header);
        roq::write_varint(prefix, &mut self.arena);
        self.arena.extend_from_slice(packet);
        self.arena.split().freeze()
    }

    fn count_out(&self, protocol: Protocol, bytes: usize) {
        let c = self.counters(protocol);
        c.packets_out.inc();
        c.bytes_out.inc_by(bytes as u64);
    }
}

impl Shard {
    /// Handles `first` and whatever else the QUIC inbox holds, up to [`RECV_BATCH`]
    /// events, then sends what they produced.
    pub(in crate::transport) async fn quic_batch(
        &mut self,
        first: QuicEvent,
        inbox: &mut mpsc::Receiver<QuicEvent>,
    ) {
        let now = Instant::now();
        // Packets the core took, by `Protocol::index`.
        let mut packets = [0u32; 2];
        let mut take = |shard: &mut Self, event| {
            if let Some(p) = shard.quic_event(now, event) {
                packets[p.index()] += 1;
            }
        };
        take(self, first);
        for _ in 1..RECV_BATCH {
            match inbox.try_recv() {
                Ok(event) => take(self, event),
                Err(_) => break,
            }
        }
        self.end_batch(now).await;
        if let Some(port) = &self.quic {
            let latency = now.elapsed().as_secs_f64();
            for (counters, n) in port.counters.iter().zip(packets) {
                for _ in 0..n {
                    counters.latency.observe(latency);
                }
            }
        }
    }

    /// A new session's link over `protocol`; refused when the relay runs no QUIC.
    pub(in crate::transport) fn quic_link(
        &mut self,
        protocol: Protocol,
    ) -> Result<Link, CommandError> {
        let port = self.quic.as_mut().ok_or(CommandError::QuicDisabled)?;
        Ok(Link::Quic(port.new_link(protocol)?))
    }

    /// Handles one event; the protocol of the session when it was a packet the core took.
    fn quic_event(&mut self, now: Instant, event: QuicEvent) -> Option<Protocol> {
        match event {
            QuicEvent::Attach {
                token,
                protocol,
                conn,
                stream,
                reply,
            } => {
                let _ = reply.send(self.attach(now, token, protocol, conn, stream));
                None
            }
            QuicEvent::Packet {
                session,
                conn,
                data,
            } => match self.quic_packet(now, session, conn, &data) {
                Ok(protocol) => Some(protocol),
                Err(reason) => {
                    self.exporter.drop(reason);
                    None
                }
            },
            QuicEvent::Path {
                session,
                conn,
                max_datagram,
                send_bps,
            } => {
                let peer = self.live_peer(session, conn)?;
                let flow = roq::varint_len(peer.flow_id);
                if let Some(live) = &mut peer.live {
                    live.max_datagram = max_datagram;
                }
                // Without datagrams everything goes on the stream: no packet size limit.
                let max_packet = max_datagram.map_or(usize::MAX, |m| m.saturating_sub(flow));
                guarded(&mut self.relay, &self.metrics, "path", now, |r| {
                    let path = Input::SetPath {
                        session,
                        max_packet,
                        send_bps,
                    };
                    let _ = r.handle_input(now, path);
                });
                None
            }
            QuicEvent::Closed { session, conn } => {
                if self.live_peer(session, conn).is_some() {
                    tracing::debug!(session, "QUIC connection closed: session leaves");
                    guarded(&mut self.relay, &self.metrics, "command", now, |r| {
                        r.handle_input(now, Input::Leave(session))
                    });
                    self.unlink(session);
                }
                None
            }
        }
    }

    /// The session's peer, if `conn` is its attached connection.
    fn live_peer(&mut self, session: SessionId, conn: usize) -> Option<&mut Peer> {
        match self.links.get_mut(&session) {
            Some(Link::Quic(peer)) if peer.live.as_ref().is_some_and(|l| l.id == conn) => {
                Some(peer)
            }
            _ => None,
        }
    }

    /// Ties a connection to the session its token names, once.
    fn attach(
        &mut self,
        now: Instant,
        token: Token,
        protocol: Protocol,
        conn: Box<Session>,
        stream: mpsc::Sender<Bytes>,
    ) -> Result<Attached, &'static str> {
        let port = self.quic.as_mut().ok_or("token_invalid")?;
        let (session, expires) = port.tokens.remove(&token).ok_or("token_invalid")?;
        if now >= expires {
            return Err("token_expired");
        }
        let Some(Link::Quic(peer)) = self.links.get_mut(&session) else {
            return Err("token_invalid");
        };
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
        guarded(&mut self.relay, &self.metrics, "path", now, |r| {
            let path = Input::SetPath {
                session,
                max_packet,
                send_bps: None,
            };
            let _ = r.handle_input(now, path);
        });
        Ok(Attached {
            session,
            flow_id,
            max_packet: self.relay.config().max_packet_bytes,
        })
    }

    /// One packet from a QUIC session's connection, to the core.
    fn quic_packet(
        &mut self,
        now: Instant,
        session: SessionId,
        conn: usize,
        data: &[u8],
    ) -> Result<Protocol, &'static str> {
        let protocol = self
            .live_peer(session, conn)
            .ok_or("quic_stale_connection")?
            .protocol;
        if let Some(port) = &self.quic {
            let c = port.counters(protocol);
            c.packets_in.inc();
            c.bytes_in.inc_by(data.len() as u64);
        }
        let class = classify(data);
        if class == PacketClass::Other {
            return Err("not_rtp");
        }
        deliver(&mut self.relay, &self.metrics, now, session, class, data);
        Ok(protocol)
    }
}
