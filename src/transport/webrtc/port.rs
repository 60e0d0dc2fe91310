//! The relay task's side of WebRTC: each session's peer connection (ICE-lite, DTLS,
//! SCTP), driven on the shard's thread; datagrams from the port's reader as its input,
//! data-channel messages as core inputs, and the core's packets as data-channel messages.
//!
//! `rtc` takes and gives owned buffers: datagrams arrive split off the reader's arena and
//! outgoing messages are carved from this port's, so the relay itself allocates once per
//! arena, not per packet (the stack's DTLS and SCTP layers allocate inside `rtc`).

use super::demux::{Kind, classify};
use super::meter::SendMeter;
use super::{
    CHANNEL_LABEL, Inbound, MAX_SEND_PACKET, OfferError, Routes, SCTP_MAX_MESSAGE, WebRtcConfig,
    candidate_addr, check_offer, new_password, new_ufrag,
};
use crate::metrics::Metrics;
use crate::relay::{Relay, SessionId, Transmit};
use crate::rtp::{PacketClass, classify as classify_rtp};
use crate::transport::batch::SendBatch;
use crate::transport::command::{CommandError, WebRtcAnswer, WebRtcOffer};
use crate::transport::guard::guarded;
use crate::transport::shard::{Link, Shard, deliver};
use crate::transport::udp::RECV_BATCH;
use bytes::BytesMut;
use prometheus::{Histogram, IntCounter};
use rtc::data_channel::RTCDataChannelId;
use rtc::peer_connection::configuration::setting_engine::{
    SctpMaxMessageSize, SettingEngineBuilder,
};
use rtc::peer_connection::event::{RTCDataChannelEvent, RTCPeerConnectionEvent};
use rtc::peer_connection::message::RTCMessage;
use rtc::peer_connection::state::RTCPeerConnectionState;
use rtc::peer_connection::transport::{
    CandidateConfig, CandidateHostConfig, RTCIceCandidate, RTCIceCandidateInit,
};
use rtc::peer_connection::{RTCPeerConnection, RTCPeerConnectionBuilder};
use rtc::sansio::Protocol;
use rtc::shared::{TaggedBytesMut, TransportContext, TransportProtocol};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::time::Instant;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// Transport label in metrics.
const TRANSPORT: &str = "webrtc";

/// Bytes the send arena grows by (see the module docs).
const ARENA: usize = 256 * 1024;

/// SCTP receive window offered to each peer: a few hundred packets in flight, and a bound
/// on what one peer's unread reassembly can hold.
const RECEIVE_WINDOW: u32 = 256 * 1024;

/// Addresses one session may have passed connectivity checks from (a browser checks
/// each of its interfaces); more are not routed.
const MAX_ADDRS: usize = 8;

/// Peer-connection deadlines handled per wake-up, so a stack that keeps asking for the
/// past cannot hold the relay task.
const TIMERS_PER_WAKE: usize = 1024;

/// A WebRTC session's link: its peer connection and how it is reached.
pub(in crate::transport) struct Peer {
    pc: Box<RTCPeerConnection>,
    /// The relay's ICE ufrag for it (the key of STUN routing).
    ufrag: String,
    /// Its ICE candidate: the local address every datagram of this session is tagged with.
    local: SocketAddr,
    /// Addresses whose connectivity checks passed.
    addrs: Vec<SocketAddr>,
    /// The channel the relay sends on: the first the peer opened.
    channel: Option<RTCDataChannelId>,
    /// The deadline this session is scheduled at.
    deadline: Option<Instant>,
    /// Has messages queued since its datagrams were last taken.
    dirty: bool,
    /// Bytes handed to its channel so far.
    sent: u64,
    /// Its send budget from its queue.
    meter: SendMeter,
}

impl Peer {
    fn context(&self, from: SocketAddr) -> TransportContext {
        TransportContext {
            local_addr: self.local,
            peer_addr: from,
            transport_protocol: TransportProtocol::UDP,
            ecn: None,
        }
    }
}

/// What the relay task owns for WebRTC.
pub(in crate::transport) struct WebRtcPort {
    shard: u8,
    socket: UdpSocket,
    bound: SocketAddr,
    advertise: Option<SocketAddr>,
    max_message: usize,
    max_buffered: usize,
    /// Checked addresses, shared with the reader.
    routes: Routes,
    by_ufrag: HashMap<String, SessionId>,
    by_addr: HashMap<SocketAddr, SessionId>,
    /// Sessions by deadline; an entry whose deadline is no longer its session's is stale.
    timers: BinaryHeap<Reverse<(Instant, SessionId)>>,
    /// Sessions with messages queued, whose datagrams the next flush takes.
    dirty: Vec<SessionId>,
    batch: SendBatch,
    arena: BytesMut,
    counters: Counters,
}

struct Counters {
    packets_in: IntCounter,
    packets_out: IntCounter,
    bytes_in: IntCounter,
    bytes_out: IntCounter,
    /// From a batch's arrival at the relay task to its forwarded copies sent.
    latency: Histogram,
}

/// What driving a peer connection produced.
#[derive(Default)]
struct Driven {
    /// Packets handed to the core.
    packets: u32,
    /// The connection failed or closed: the session leaves.
    closed: bool,
}

impl WebRtcPort {
    pub(super) fn new(
        shard: u8,
        socket: UdpSocket,
        routes: Routes,
        cfg: &WebRtcConfig,
        bound: SocketAddr,
        m: &Metrics,
    ) -> Self {
        Self {
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
            batch: SendBatch::default(),
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
        let refused = |e: rtc::shared::error::Error| OfferError::Refused(e.to_string());
        let settings = SettingEngineBuilder::new()
            .with_lite(true)
            .with_ice_credentials(ufrag.clone(), password)
            .with_sctp_max_message_size(SctpMaxMessageSize::Bounded(SCTP_MAX_MESSAGE))
            .with_sctp_max_receive_buffer_size(RECEIVE_WINDOW)
            .build();
        let now = Instant::now();
        let mut pc = RTCPeerConnectionBuilder::new()
            .with_setting_engine(settings)
            .build(now)
            .map_err(refused)?;
        pc.set_remote_description(now, desc).map_err(refused)?;
        let host = CandidateHostConfig {
            base_config: CandidateConfig {
                network: "udp".to_owned(),
                address: local.ip().to_string(),
                port: local.port(),
                component: 1,
                ..CandidateConfig::default()
            },
            ..CandidateHostConfig::default()
        }
        .new_candidate_host()
        .map_err(refused)?;
        pc.add_local_candidate(RTCIceCandidate::from(&host).to_json().map_err(refused)?)
            .map_err(refused)?;
        // The only candidate: gathering is complete.
        pc.add_local_candidate(RTCIceCandidateInit::default())
            .map_err(refused)?;
        let answer = pc.create_answer(None).map_err(refused)?;
        pc.set_local_description(now, answer).map_err(refused)?;
        let sdp_answer = pc
            .local_description()
            .map(|d| d.sdp)
            .ok_or_else(|| OfferError::Refused("no local description".to_owned()))?;
        let peer = Peer {
            pc: Box::new(pc),
            ufrag,
            local,
            addrs: Vec::new(),
            channel: None,
            deadline: None,
            dirty: false,
            sent: 0,
            meter: SendMeter::default(),
        };
        let answer = WebRtcAnswer {
            sdp_answer,
            addr: local,
            channel: CHANNEL_LABEL,
            max_message_size: self.max_message,
            max_packet: MAX_SEND_PACKET,
        };
        Ok((peer, answer))
    }

    /// Makes a joined session's peer reachable: its STUN checks route to it.
    pub(in crate::transport) fn register(&mut self, id: SessionId, peer: &mut Peer) {
        self.by_ufrag.insert(peer.ufrag.clone(), id);
        self.schedule(id, peer);
    }

    /// Forgets a removed session: its routes (those no other session has taken over since),
    /// and its peer connection (closed, its last datagrams sent with the next flush).
    pub(in crate::transport) fn forget(&mut self, id: SessionId, mut peer: Peer) {
        self.by_ufrag.remove(&peer.ufrag);
        for addr in &peer.addrs {
            if self.by_addr.get(addr) == Some(&id) {
                self.by_addr.remove(addr);
                self.routes.remove_if(addr, |_, shard| *shard == self.shard);
            }
        }
        let _ = peer.pc.close();
        while let Some(w) = peer.pc.poll_write() {
            self.batch.push(w.transport.peer_addr, &w.message);
        }
    }

    /// The earliest peer-connection deadline (possibly a stale one: an early wake-up).
    pub(in crate::transport) fn next_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
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
    fn drive(
        &mut self,
        now: Instant,
        id: SessionId,
        peer: &mut Peer,
        checked: Option<SocketAddr>,
        relay: &mut Relay,
        metrics: &Metrics,
    ) -> Driven {
        let mut out = Driven::default();
        self.take_datagrams(id, peer, checked);
        out.closed = self.take_events(id, peer);
        while let Some(m) = peer.pc.poll_read() {
            let RTCMessage::DataChannelMessage(_, msg) = m.message else {
                continue;
            };
            self.counters.packets_in.inc();
            self.counters.bytes_in.inc_by(msg.data.len() as u64);
            match self.packet_class(&msg.data) {
                Ok(class) => {
                    deliver(relay, metrics, now, id, class, &msg.data);
                    out.packets += 1;
                }
                Err(reason) => metrics.drop(reason),
            }
        }
        self.meter(now, id, peer, relay, metrics);
        self.schedule(id, peer);
        out
    }

    /// Gives the core the session's cap when its send queue's state changed it.
    fn meter(
        &self,
        now: Instant,
        id: SessionId,
        peer: &mut Peer,
        relay: &mut Relay,
        metrics: &Metrics,
    ) {
        let Some(ch) = peer.channel else {
            return;
        };
        let queued = peer
            .pc
            .data_channel(ch)
            .map_or(0, |dc| dc.outstanding_bytes());
        if let Some(cap) = peer.meter.update(now, peer.sent, queued, self.max_buffered) {
            tracing::debug!(session = id, cap_bps = ?cap, queued, "WebRTC send cap");
            guarded(relay, metrics, "path", now, |r| {
                r.set_session_path(now, id, MAX_SEND_PACKET, cap)
            });
        }
    }

    /// Queues the peer connection's datagrams in the send batch.
    fn take_datagrams(&mut self, id: SessionId, peer: &mut Peer, checked: Option<SocketAddr>) {
        while let Some(w) = peer.pc.poll_write() {
            let to = w.transport.peer_addr;
            if checked == Some(to) {
                self.learn(id, peer, to);
            }
            self.batch.push(to, &w.message);
        }
    }

    /// Handles the peer connection's events; true when it failed or closed.
    fn take_events(&mut self, id: SessionId, peer: &mut Peer) -> bool {
        let mut closed = false;
        while let Some(event) = peer.pc.poll_event() {
            match event {
                RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnOpen(ch))
                    if peer.channel.is_none() =>
                {
                    tracing::debug!(session = id, "WebRTC data channel open");
                    peer.channel = Some(ch);
                }
                RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnClose(ch))
                    if peer.channel == Some(ch) =>
                {
                    peer.channel = None;
                }
                RTCPeerConnectionEvent::OnConnectionStateChangeEvent(state) => {
                    tracing::debug!(session = id, %state, "WebRTC connection state");
                    closed |= matches!(
                        state,
                        RTCPeerConnectionState::Failed | RTCPeerConnectionState::Closed
                    );
                }
                _ => {}
            }
        }
        closed
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
    pub(in crate::transport) fn send(
        &mut self,
        now: Instant,
        peer: &mut Peer,
        t: &Transmit<'_>,
        metrics: &Metrics,
    ) {
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
        if dc.outstanding_bytes() + t.bytes.len() > self.max_buffered {
            return metrics.drop("webrtc_send_buffer_full");
        }
        if self.arena.capacity() < t.bytes.len() {
            self.arena.reserve(ARENA.max(t.bytes.len()));
        }
        self.arena.extend_from_slice(t.bytes);
        let message = self.arena.split();
        match dc.send(now, message) {
            Ok(()) => {
                peer.sent += t.bytes.len() as u64;
                self.counters.packets_out.inc();
                self.counters.bytes_out.inc_by(t.bytes.len() as u64);
            }
            Err(_) => return metrics.drop("webrtc_send_failed"),
        }
        if !peer.dirty {
            peer.dirty = true;
            self.dirty.push(t.session);
        }
    }

    /// Takes the datagrams of every session sent to since the last call, and sends the
    /// batch.
    pub(in crate::transport) async fn send_queued(&mut self, links: &mut HashMap<SessionId, Link>) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            if let Some(Link::WebRtc(peer)) = links.get_mut(&id) {
                peer.dirty = false;
                self.take_datagrams(id, peer, None);
                self.schedule(id, peer);
            }
        }
        self.dirty = dirty;
        if !self.batch.is_empty() {
            self.batch.flush(&self.socket).await;
        }
    }
}

impl Shard {
    /// Handles `first` and whatever else the WebRTC inbox holds, up to [`RECV_BATCH`]
    /// datagrams, then sends what they produced.
    pub(in crate::transport) async fn webrtc_batch(
        &mut self,
        first: Inbound,
        inbox: &mut mpsc::Receiver<Inbound>,
    ) {
        let now = Instant::now();
        let mut packets = self.webrtc_datagram(now, first);
        for _ in 1..RECV_BATCH {
            match inbox.try_recv() {
                Ok(d) => packets += self.webrtc_datagram(now, d),
                Err(_) => break,
            }
        }
        self.end_batch(now).await;
        if let Some(port) = &self.webrtc {
            let latency = now.elapsed().as_secs_f64();
            for _ in 0..packets {
                port.counters.latency.observe(latency);
            }
        }
    }

    /// One datagram to its session's peer connection; the packets it gave the core.
    fn webrtc_datagram(&mut self, now: Instant, (from, data): Inbound) -> u32 {
        let Self {
            relay,
            links,
            webrtc,
            metrics,
            ..
        } = self;
        let Some(port) = webrtc.as_mut() else {
            return 0;
        };
        let (id, checked) = match classify(&data) {
            Ok(Kind::Stun(ufrag)) => {
                let id = std::str::from_utf8(ufrag)
                    .ok()
                    .and_then(|u| port.by_ufrag.get(u));
                (id.copied(), Some(from))
            }
            Ok(_) => (port.by_addr.get(&from).copied(), None),
            Err(reason) => {
                metrics.drop(reason);
                return 0;
            }
        };
        let Some((id, Link::WebRtc(peer))) = id.and_then(|id| links.get_mut(&id).map(|l| (id, l)))
        else {
            let reason = if checked.is_some() {
                "webrtc_unknown_username"
            } else {
                "webrtc_unknown_address"
            };
            metrics.drop(reason);
            return 0;
        };
        let context = peer.context(from);
        let _ = peer.pc.handle_read(TaggedBytesMut {
            now,
            transport: context,
            message: data,
        });
        let driven = port.drive(now, id, peer, checked, relay, metrics);
        if driven.closed {
            self.webrtc_leave(now, id);
        }
        driven.packets
    }

    /// Runs the peer connections whose deadline has come, then sends what they produced.
    pub(in crate::transport) async fn webrtc_timeout(&mut self) {
        let now = Instant::now();
        let mut closed = Vec::new();
        {
            let Self {
                relay,
                links,
                webrtc,
                metrics,
                ..
            } = self;
            let Some(port) = webrtc.as_mut() else {
                return;
            };
            for _ in 0..TIMERS_PER_WAKE {
                let Some(&Reverse((t, id))) = port.timers.peek() else {
                    break;
                };
                if t > now {
                    break;
                }
                port.timers.pop();
                let Some(Link::WebRtc(peer)) = links.get_mut(&id) else {
                    continue;
                };
                if peer.deadline != Some(t) {
                    continue;
                }
                peer.deadline = None;
                let _ = peer.pc.handle_timeout(now);
                if port.drive(now, id, peer, None, relay, metrics).closed {
                    closed.push(id);
                }
            }
        }
        for id in closed {
            self.webrtc_leave(now, id);
        }
        self.end_batch(now).await;
    }

    /// A session whose peer connection failed or closed leaves the room.
    fn webrtc_leave(&mut self, now: Instant, id: SessionId) {
        tracing::debug!(session = id, "WebRTC connection gone: session leaves");
        guarded(&mut self.relay, &self.metrics, "command", now, |r| {
            r.leave(id)
        });
        self.unlink(id);
    }
}
