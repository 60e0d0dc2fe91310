//! A shard's WebRTC port: each session's peer connection, routes to it (by ufrag and by
//! checked address), data-channel messages as core inputs, the core's packets as
//! data-channel messages, the datagrams they make, and each session's send cap. Its
//! inputs and timers, as a [`crate::transport::port::Port`], are in [`super::shell`].
//!
//! `rtc` takes and gives owned buffers: datagrams arrive split off the reader's arena and
//! outgoing messages are carved from this port's, so the relay itself allocates once per
//! arena, not per packet (the stack's DTLS and SCTP layers allocate inside `rtc`).

use super::Inbound;
use super::peer::Peer;
use super::{
    CHANNEL_LABEL, MAX_SEND_PACKET, Routes, WebRtcConfig, candidate_addr, check_offer,
    new_password, new_ufrag,
};
use crate::metrics::{Metrics, TransportCounters};
use crate::transport::command::{CommandError, WebRtcAnswer, WebRtcOffer};
use crate::transport::port::{Core, Inbox};
use bytes::BytesMut;
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::{PacketClass, classify as classify_rtp};
use prometheus::{IntCounter, IntCounterVec};
use rtc::peer_connection::message::RTCMessage;
use rtc::sansio::Protocol;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::net::UdpSocket;
use std::time::Instant;
use tokio::sync::mpsc;

/// Transport label in metrics.
const TRANSPORT: &str = "webrtc";

/// Bytes the send arena grows by (see the module docs).
const ARENA: usize = 256 * 1024;

/// Addresses one session may have passed connectivity checks from (a browser checks
/// each of its interfaces); more are not routed.
const MAX_ADDRS: usize = 8;

/// What a shard owns for WebRTC.
pub(in crate::transport) struct WebRtcPort {
    /// Datagrams from the port's reader.
    pub(super) inbox: Inbox<Inbound>,
    /// Each WebRTC session's peer connection.
    pub(super) peers: HashMap<SessionId, Peer>,
    /// Packets the core took in the last batch.
    pub(super) packets: u32,
    pub(super) metrics: Metrics,
    shard: u8,
    socket: UdpSocket,
    bound: SocketAddr,
    advertise: Option<SocketAddr>,
    max_message: usize,
    max_buffered: usize,
    /// Checked addresses, shared with the reader.
    routes: Routes,
    pub(super) by_ufrag: HashMap<String, SessionId>,
    pub(super) by_addr: HashMap<SocketAddr, SessionId>,
    /// Sessions by deadline; an entry whose deadline is no longer its session's is stale.
    pub(super) timers: BinaryHeap<Reverse<(Instant, SessionId)>>,
    /// Sessions with messages queued, whose datagrams the next flush takes.
    dirty: Vec<SessionId>,
    arena: BytesMut,
    pub(super) counters: TransportCounters,
    /// `webrtc_send_blocked` drops: the socket's send buffer was full.
    send_blocked: IntCounter,
    /// `gsrelay_webrtc_connections_total`.
    outcomes: IntCounterVec,
}

/// What driving a peer connection produced.
#[derive(Default)]
pub(super) struct Driven {
    /// Packets handed to the core.
    pub(super) packets: u32,
    /// The connection failed or closed: the session leaves.
    pub(super) closed: bool,
}

impl WebRtcPort {
    pub(super) fn new(
        inbox: mpsc::Receiver<Inbound>,
        shard: u8,
        socket: UdpSocket,
        routes: Routes,
        cfg: &WebRtcConfig,
        bound: SocketAddr,
        m: &Metrics,
    ) -> Self {
        Self {
            inbox: Inbox::new(inbox),
            peers: HashMap::new(),
            packets: 0,
            metrics: m.clone(),
            shard,
            socket,
            bound,
            advertise: cfg.advertise,
            max_message: cfg.max_message,
            max_buffered: cfg.max_buffered,
            routes,
            by_ufrag: HashMap::new(),
            by_addr: HashMap::new(),
            timers: BinaryHeap::new(),
            dirty: Vec::new(),
            arena: BytesMut::new(),
            counters: m.transport(TRANSPORT),
            send_blocked: m.dropped.with_label_values(&["webrtc_send_blocked"]),
            outcomes: m.webrtc_connections.clone(),
        }
    }

    /// A new WebRTC session's link: a peer connection that has answered `offer`.
    pub(in crate::transport) fn new_link(
        &mut self,
        offer: &WebRtcOffer,
    ) -> Result<(Peer, WebRtcAnswer), CommandError> {
        let desc = check_offer(&offer.sdp)?;
        let local = candidate_addr(self.advertise, self.bound, offer.host)?;
        let (ufrag, password) = new_ufrag(self.shard)
            .and_then(|u| Ok((u, new_password()?)))
            .map_err(|e| {
                tracing::error!(error = %e, "cannot make ICE credentials");
                CommandError::Stopped
            })?;
        let (peer, sdp_answer) = Peer::answer(desc, local, ufrag, password)?;
        let answer = WebRtcAnswer {
            sdp_answer,
            addr: local,
            channel: CHANNEL_LABEL,
            max_message_size: self.max_message,
            max_packet: MAX_SEND_PACKET,
        };
        Ok((peer, answer))
    }

    /// Keeps a joined session's peer and makes it reachable: its STUN checks route to it.
    pub(in crate::transport) fn register(&mut self, id: SessionId, mut peer: Peer) {
        self.by_ufrag.insert(peer.ufrag.clone(), id);
        self.schedule(id, &mut peer);
        self.peers.insert(id, peer);
    }

    /// Forgets a removed session: its routes (those no other session has taken over since),
    /// and its peer connection (closed, its last datagrams sent with the next flush).
    pub(super) fn forget_peer(&mut self, id: SessionId) {
        let Some(mut peer) = self.peers.remove(&id) else {
            return;
        };
        self.by_ufrag.remove(&peer.ufrag);
        for addr in &peer.addrs {
            if self.by_addr.get(addr) == Some(&id) {
                self.by_addr.remove(addr);
                self.routes.remove_if(addr, |_, shard| *shard == self.shard);
            }
        }
        if !peer.connected {
            // Joined, never connected: the peer never reached the port (a firewall, a
            // wrong advertised address) or gave up.
            self.outcomes.with_label_values(&["never_connected"]).inc();
        }
        let _ = peer.pc.close();
        while let Some(w) = peer.pc.poll_write() {
            self.transmit(w.transport.peer_addr, &w.message);
        }
    }

    /// Schedules the peer's next deadline when it changed.
    fn schedule(&mut self, id: SessionId, peer: &mut Peer) {
        let next = peer.pc.poll_timeout();
        if next != peer.deadline {
            peer.deadline = next;
            if let Some(t) = next {
                self.timers.push(Reverse((t, id)));
            }
        }
    }

    /// Routes `addr` to the session, a connectivity check from it having passed. Each
    /// check does so again, so an address another session held and gave up routes back.
    fn learn(&mut self, id: SessionId, peer: &mut Peer, addr: SocketAddr) {
        if !peer.addrs.contains(&addr) {
            if peer.addrs.len() >= MAX_ADDRS {
                return;
            }
            tracing::debug!(session = id, %addr, "WebRTC connectivity check passed");
            peer.addrs.push(addr);
        }
        if self.by_addr.insert(addr, id).is_some_and(|old| old != id) {
            tracing::debug!(session = id, %addr, "address taken over from another session");
        }
        self.routes.insert(addr, self.shard);
    }

    /// Takes everything the peer connection has for the network, the events that change
    /// what the relay does, and its messages for the core. `checked` is the source of a
    /// STUN check just handed to it: a response to that address means the check passed.
    pub(super) fn drive(
        &mut self,
        now: Instant,
        id: SessionId,
        peer: &mut Peer,
        checked: Option<SocketAddr>,
        core: &mut impl Core,
    ) -> Driven {
        let mut out = Driven::default();
        self.take_datagrams(id, peer, checked);
        out.closed = peer.events(id, &self.outcomes);
        while let Some(m) = peer.pc.poll_read() {
            let RTCMessage::DataChannelMessage(_, msg) = m.message else {
                continue;
            };
            self.counters.packets_in.inc();
            self.counters.bytes_in.inc_by(msg.data.len() as u64);
            match self.packet_class(&msg.data) {
                Ok(class) => {
                    core.packet(now, id, class, &msg.data);
                    out.packets += 1;
                }
                Err(reason) => self.metrics.drop(reason),
            }
        }
        self.meter(now, id, peer, core);
        self.schedule(id, peer);
        out
    }

    /// Gives the core the session's cap when its send queue's state changed it.
    fn meter(&self, now: Instant, id: SessionId, peer: &mut Peer, core: &mut impl Core) {
        let Some(queued) = peer.queued() else {
            return;
        };
        if let Some(cap) = peer.meter.update(now, peer.sent, queued, self.max_buffered) {
            tracing::debug!(session = id, cap_bps = ?cap, queued, "WebRTC send cap");
            core.set_path(now, id, MAX_SEND_PACKET, cap);
        }
    }

    /// Sends the peer connection's datagrams.
    fn take_datagrams(&mut self, id: SessionId, peer: &mut Peer, checked: Option<SocketAddr>) {
        while let Some(w) = peer.pc.poll_write() {
            let to = w.transport.peer_addr;
            if checked == Some(to) {
                self.learn(id, peer, to);
            }
            self.transmit(to, &w.message);
        }
    }

    /// Sends one datagram now. The socket is non-blocking and not registered with the
    /// shard's runtime (see `docs/architecture.md`, "Shards"): a full send buffer drops the
    /// datagram, counted, and SCTP recovers or the session's cap slows it.
    fn transmit(&self, to: SocketAddr, datagram: &[u8]) {
        match self.socket.send_to(datagram, to) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.send_blocked.inc();
            }
            // ICMP errors surfaced by some platforms: nothing to do for one datagram.
            Err(e) => tracing::debug!(error = %e, %to, "WebRTC send failed"),
        }
    }

    /// Whether a message is a packet the core takes.
    fn packet_class(&self, data: &[u8]) -> Result<PacketClass, &'static str> {
        if data.len() > self.max_message {
            return Err("oversized");
        }
        match classify_rtp(data) {
            PacketClass::Other => Err("not_rtp"),
            class => Ok(class),
        }
    }

    /// Sends one packet to a WebRTC session as one message on its channel; dropped and
    /// counted when the session's send queue is full.
    pub(super) fn send(&mut self, now: Instant, t: &Transmit<'_>) {
        let Self {
            peers,
            arena,
            dirty,
            counters,
            metrics,
            max_buffered,
            ..
        } = self;
        let Some(peer) = peers.get_mut(&t.session) else {
            return;
        };
        let Some(ch) = peer.channel else {
            return;
        };
        if t.class == PacketClass::Other {
            return;
        }
        let Some(mut dc) = peer.pc.data_channel(ch) else {
            peer.channel = None;
            return;
        };
        if dc.outstanding_bytes() + t.bytes.len() > *max_buffered {
            return metrics.drop("webrtc_send_buffer_full");
        }
        if arena.capacity() < t.bytes.len() {
            arena.reserve(ARENA.max(t.bytes.len()));
        }
        arena.extend_from_slice(t.bytes);
        let message = arena.split();
        match dc.send(now, message) {
            Ok(()) => {
                peer.sent += t.bytes.len() as u64;
                counters.packets_out.inc();
                counters.bytes_out.inc_by(t.bytes.len() as u64);
            }
            Err(_) => return metrics.drop("webrtc_send_failed"),
        }
        if !peer.dirty {
            peer.dirty = true;
            dirty.push(t.session);
        }
    }

    /// Sends the datagrams of every session sent to since the last call.
    pub(super) fn send_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            // Out of the map while the port drives it (put back unchanged in place).
            if let Some(mut peer) = self.peers.remove(&id) {
                peer.dirty = false;
                self.take_datagrams(id, &mut peer, None);
                self.schedule(id, &mut peer);
                self.peers.insert(id, peer);
            }
        }
        self.dirty = dirty;
    }
}
