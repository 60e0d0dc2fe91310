//! The relay task's side of QUIC: session tokens, each QUIC session's connection, QUIC
//! events as core inputs, and the core's packets as DATAGRAM frames or stream frames.

use super::conn::ErrorCode;
use super::{ALPN, Attached, QuicEvent, Token};
use crate::metrics::Metrics;
use crate::relay::{SessionId, Transmit};
use crate::rtp::{PacketClass, classify};
use crate::transport::command::{CommandError, QuicAnswer};
use crate::transport::guard::guarded;
use crate::transport::roq;
use crate::transport::shard::{Link, Shard, deliver};
use crate::transport::udp::RECV_BATCH;
use bytes::{Bytes, BytesMut};
use prometheus::{Histogram, IntCounter};
use quinn::{Connection, SendDatagramError};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Transport label in metrics.
const TRANSPORT: &str = "quic";

/// Bytes the send arena grows by: outgoing frames are carved from it, so sending
/// allocates once per this many bytes, not per packet.
const ARENA: usize = 256 * 1024;

/// A QUIC session's link.
#[derive(Debug)]
pub(in crate::transport) struct Peer {
    flow_id: u64,
    token: Token,
    expires: Instant,
    live: Option<Live>,
}

/// A session's attached connection.
#[derive(Debug)]
struct Live {
    conn: Connection,
    id: usize,
    /// Frames for the session's unidirectional stream (its writer task).
    stream: mpsc::Sender<Bytes>,
    /// Largest DATAGRAM payload the peer takes; `None` without datagram support.
    max_datagram: Option<usize>,
}

/// What the relay task owns for QUIC.
pub(in crate::transport) struct QuicPort {
    /// The shard this port belongs to: the first byte of its tokens.
    shard: u8,
    addr: SocketAddr,
    cert_sha256: String,
    token_ttl: Duration,
    /// Tokens not used yet, with their session and expiry.
    tokens: HashMap<Token, (SessionId, Instant)>,
    /// Token count at which expired tokens are next swept.
    sweep_at: usize,
    arena: BytesMut,
    counters: Counters,
}

struct Counters {
    packets_in: IntCounter,
    packets_out: IntCounter,
    bytes_in: IntCounter,
    bytes_out: IntCounter,
    /// From a batch's arrival at the relay task to its forwarded copies handed to quinn.
    latency: Histogram,
}

impl QuicPort {
    pub(super) fn new(
        shard: u8,
        addr: SocketAddr,
        cert_sha256: String,
        token_ttl: Duration,
        m: &Metrics,
    ) -> Self {
        Self {
            shard,
            addr,
            cert_sha256,
            token_ttl,
            tokens: HashMap::new(),
            sweep_at: 64,
            arena: BytesMut::new(),
            counters: Counters {
                packets_in: m.packets.with_label_values(&[TRANSPORT, "in"]),
                packets_out: m.packets.with_label_values(&[TRANSPORT, "out"]),
                bytes_in: m.bytes.with_label_values(&[TRANSPORT, "in"]),
                bytes_out: m.bytes.with_label_values(&[TRANSPORT, "out"]),
                latency: m.latency(TRANSPORT),
            },
        }
    }

    /// A new QUIC session's link, with a fresh token.
    pub(in crate::transport) fn new_link(&mut self) -> Result<Peer, CommandError> {
        let token = Token::generate(self.shard).map_err(|e| {
            tracing::error!(error = %e, "cannot make a session token");
            CommandError::Stopped
        })?;
        Ok(Peer {
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
            alpn: ALPN,
            cert_sha256: self.cert_sha256.clone(),
            flow_id: peer.flow_id,
            session_token: peer.token.to_string(),
        }
    }

    /// Forgets a removed session: its token, and its connection (closed).
    pub(in crate::transport) fn forget(&mut self, peer: Peer) {
        self.tokens.remove(&peer.token);
        if let Some(live) = peer.live {
            live.conn
                .close(ErrorCode::SessionClosed.varint(), b"session closed");
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
            let frame = self.frame(peer.flow_id, t.bytes);
            match live.conn.send_datagram(frame) {
                Ok(()) => return self.count_out(datagram_len),
                // The path shrank since the last look: the stream carries it.
                Err(SendDatagramError::TooLarge) => {}
                Err(_) => return metrics.drop("quic_send_failed"),
            }
        }
        let frame = self.frame(t.bytes.len() as u64, t.bytes);
        let len = frame.len();
        match live.stream.try_send(frame) {
            Ok(()) => self.count_out(len),
            Err(_) => metrics.drop("quic_stream_full"),
        }
    }

    /// `prefix` as a varint followed by `packet`, carved from the arena.
    fn frame(&mut self, prefix: u64, packet: &[u8]) -> Bytes {
        let len = roq::varint_len(prefix) + packet.len();
        if self.arena.capacity() - self.arena.len() < len {
            self.arena.reserve(ARENA.max(len));
        }
        roq::write_varint(prefix, &mut self.arena);
        self.arena.extend_from_slice(packet);
        self.arena.split().freeze()
    }

    fn count_out(&self, bytes: usize) {
        self.counters.packets_out.inc();
        self.counters.bytes_out.inc_by(bytes as u64);
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
        let mut packets = u32::from(self.quic_event(now, first));
        for _ in 1..RECV_BATCH {
            match inbox.try_recv() {
                Ok(event) => packets += u32::from(self.quic_event(now, event)),
                Err(_) => break,
            }
        }
        self.end_batch(now).await;
        if let Some(port) = &self.quic {
            let latency = now.elapsed().as_secs_f64();
            for _ in 0..packets {
                port.counters.latency.observe(latency);
            }
        }
    }

    /// Handles one event; true when it was a packet the core took.
    fn quic_event(&mut self, now: Instant, event: QuicEvent) -> bool {
        match event {
            QuicEvent::Attach {
                token,
                conn,
                stream,
                reply,
            } => {
                let _ = reply.send(self.attach(now, token, conn, stream));
                false
            }
            QuicEvent::Packet {
                session,
                conn,
                data,
            } => match self.quic_packet(now, session, conn, &data) {
                Ok(()) => true,
                Err(reason) => {
                    self.exporter.drop(reason);
                    false
                }
            },
            QuicEvent::Path {
                session,
                conn,
                max_datagram,
                send_bps,
            } => {
                let Some(peer) = self.live_peer(session, conn) else {
                    return false;
                };
                let flow = roq::varint_len(peer.flow_id);
                if let Some(live) = &mut peer.live {
                    live.max_datagram = max_datagram;
                }
                // Without datagrams everything goes on the stream: no packet size limit.
                let max_packet = max_datagram.map_or(usize::MAX, |m| m.saturating_sub(flow));
                guarded(&mut self.relay, &self.metrics, "path", now, |r| {
                    r.set_session_path(now, session, max_packet, send_bps)
                });
                false
            }
            QuicEvent::Closed { session, conn } => {
                if self.live_peer(session, conn).is_some() {
                    tracing::debug!(session, "QUIC connection closed: session leaves");
                    guarded(&mut self.relay, &self.metrics, "command", now, |r| {
                        r.leave(session)
                    });
                    self.unlink(session);
                }
                false
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
        conn: Connection,
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
        let max_datagram = conn.max_datagram_size();
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
            r.set_session_path(now, session, max_packet, None)
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
    ) -> Result<(), &'static str> {
        if let Some(port) = &self.quic {
            port.counters.packets_in.inc();
            port.counters.bytes_in.inc_by(data.len() as u64);
        }
        self.live_peer(session, conn)
            .ok_or("quic_stale_connection")?;
        let class = classify(data);
        if class == PacketClass::Other {
            return Err("not_rtp");
        }
        deliver(&mut self.relay, &self.metrics, now, session, class, data);
        Ok(())
    }
}
