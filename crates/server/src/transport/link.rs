//! The link port: the link protocol (`docs/relay.md`, "Links") between the replicas of a
//! room, carried as [`Frame`]s. A peer is another shard of this relay, reached over one
//! bounded channel per shard, with no socket and no encryption (both ends are this
//! process), or a shard of another node of the cluster, reached through that node's
//! QUIC link (`crate::cluster`), which turns the same frames into its wire format.
//!
//! A room on several shards has a link session on each for every other (a full mesh).
//! A shard opens its side when the control plane joins a session to a room that the
//! directory has on other shards too ([`LinkPort::ensure`]): it joins a link session to
//! its core and sends the peer [`Frame::Open`]; the peer opens its own side if it has
//! none and sends its `Open` back. Every later frame of a link follows its `Open` on the
//! same channel, so a peer in this process always knows a link before its first packet.
//! A shard whose last session of a room leaves closes the room's links
//! ([`LinkPort::close_room`]); one asked to open a link for a room it holds no session of
//! refuses it, so a room never stays on a shard for its links alone.
//!
//! Between nodes, a link's packets travel as QUIC datagrams and its control frames on a
//! stream, so a packet may overtake the `Open` it follows and be dropped as
//! `link_unknown`: the side that sent the first `Open` therefore asks for the whole state
//! again, both ways, once the peer's `Open` confirms the link (with an RTCP PLI, as a
//! peer would). When a node is lost ([`Frame::NodeLost`]), every link to it closes, which
//! ends its streams with a BYE to every subscriber.
//!
//! A packet that finds its peer's channel full is dropped and counted (`link_full`): the
//! core sends each link its whole own state again every `link_refresh`, so what a
//! congested link lost is replaced by the newest state, never queued.

pub use super::port::Peer;
use super::port::{Core, Inbox, Port, RECV_BATCH};
use crate::metrics::export::StatsExporter;
use crate::metrics::{Metrics, TransportCounters};
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::{PacketClass, rtcp};
use prometheus::{IntCounter, IntGauge};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, error::TrySendError};

/// Frames a shard's link inbox holds before its peers' packets are dropped.
const LINK_DEPTH: usize = 4096;

/// Largest packet a link carries: the aggregated packets a shard builds for a link fit,
/// and a frame stays a small fixed size in the channel (no allocation per packet).
pub const LINK_MTU: usize = 1400;

/// How long a link the core refused waits before it is tried again (the room at its
/// cap while a peer's closed link is still counted, say).
const LINK_RETRY: Duration = Duration::from_secs(1);

/// The metrics' and logs' name of this transport.
const TRANSPORT: &str = "link";

/// One frame of the link protocol between two replicas.
// A packet is held in place in the channel's slot: boxing it, as the lint suggests,
// would allocate once per packet; control frames are rare.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Frame {
    /// Replica `from` opened link session `session` for `room` towards the receiver.
    Open {
        /// The sending replica.
        from: Peer,
        /// Its link session.
        session: SessionId,
        /// The room.
        room: Arc<str>,
    },
    /// Replica `from` closed its link session `session`.
    Close {
        /// The sending replica.
        from: Peer,
        /// Its link session.
        session: SessionId,
    },
    /// The receiver's link session `to` is refused: the sender holds no session of its
    /// room.
    Refuse {
        /// The receiver's link session.
        to: SessionId,
    },
    /// A packet replica `from` sent on its link session `session`.
    Packet(Packet),
    /// The link to node `0` is lost (its connection closed or went silent, or it left
    /// the directory): every link to its replicas closes.
    NodeLost(u16),
}

/// A packet on a link, in place (no allocation per packet).
pub struct Packet {
    /// The sending replica.
    pub from: Peer,
    /// Its link session.
    pub session: SessionId,
    /// RTP or RTCP.
    pub class: PacketClass,
    len: u16,
    bytes: [u8; LINK_MTU],
}

impl Packet {
    /// A packet of `bytes`; `None` past [`LINK_MTU`].
    pub fn new(from: Peer, session: SessionId, class: PacketClass, bytes: &[u8]) -> Option<Self> {
        let len = u16::try_from(bytes.len())
            .ok()
            .filter(|_| bytes.len() <= LINK_MTU)?;
        let mut packet = Self {
            from,
            session,
            class,
            len,
            bytes: [0; LINK_MTU],
        };
        packet.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(packet)
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len).min(LINK_MTU)]
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("from", &self.from)
            .field("session", &self.session)
            .field("class", &self.class)
            .field("len", &self.len)
            .finish()
    }
}

/// A frame for a shard of another node, on its way to that node's QUIC link.
#[derive(Debug)]
pub struct Outbound {
    /// The receiving shard on that node.
    pub to_shard: u16,
    /// The frame (its `from` is this node's shard).
    pub frame: Frame,
}

/// Another node this relay has a link to, as its shards see it.
#[derive(Debug, Clone)]
pub struct RemoteNode {
    /// Its name in the directory.
    pub name: Arc<str>,
    /// The SSRC each of its shards' cores sends from, shard `k` at `k` (shared: a shard
    /// reads it without allocating).
    pub ssrcs: Arc<[u32]>,
    /// Largest packet a link to it carries.
    pub max_packet: usize,
    /// Where frames for it go.
    pub tx: mpsc::Sender<Outbound>,
}

/// The other nodes this relay has links to, by the number it gave each link; written by
/// the cluster as links come and go, read by the shards when they open a link.
#[derive(Debug, Default)]
pub struct RemoteNodes(RwLock<HashMap<u16, RemoteNode>>);

impl RemoteNodes {
    /// Adds (or replaces) node link `node`.
    pub fn insert(&self, node: u16, remote: RemoteNode) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(node, remote);
    }

    /// Removes node link `node`.
    pub fn remove(&self, node: u16) -> Option<RemoteNode> {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&node)
    }

    /// Node link `node`.
    pub fn get(&self, node: u16) -> Option<RemoteNode> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&node)
            .cloned()
    }

    /// The numbers of the links up, with their node's name.
    pub fn names(&self) -> Vec<(u16, Arc<str>)> {
        let nodes = self.0.read().unwrap_or_else(PoisonError::into_inner);
        nodes.iter().map(|(k, n)| (*k, n.name.clone())).collect()
    }
}

/// The shards' link inboxes, the SSRC each shard's core sends its links from, and the
/// other nodes' links.
#[derive(Debug)]
pub struct LinkNet {
    inboxes: Vec<mpsc::Sender<Frame>>,
    relay_ssrcs: Vec<u32>,
    remotes: Arc<RemoteNodes>,
}

impl LinkNet {
    /// The inbox of shard `shard` of this relay, where frames from other nodes go.
    pub fn inbox(&self, shard: usize) -> Option<&mpsc::Sender<Frame>> {
        self.inboxes.get(shard)
    }

    /// Every shard's inbox.
    pub fn inboxes(&self) -> &[mpsc::Sender<Frame>] {
        &self.inboxes
    }

    /// The SSRC each shard's core sends from.
    pub fn relay_ssrcs(&self) -> &[u32] {
        &self.relay_ssrcs
    }
}

/// One shard's end of the [`LinkNet`]: the net and its own inbox.
#[derive(Debug)]
pub struct LinkEnd {
    shard: usize,
    net: Arc<LinkNet>,
    inbox: mpsc::Receiver<Frame>,
}

/// A link net for shards whose cores send from `relay_ssrcs` (shard `k` from
/// `relay_ssrcs[k]`), reaching other nodes through `remotes`: the net, and each shard's
/// end of it.
pub fn net(relay_ssrcs: Vec<u32>, remotes: Arc<RemoteNodes>) -> (Arc<LinkNet>, Vec<LinkEnd>) {
    let (inboxes, receivers): (Vec<_>, Vec<_>) = relay_ssrcs
        .iter()
        .map(|_| mpsc::channel(LINK_DEPTH))
        .unzip();
    let net = Arc::new(LinkNet {
        inboxes,
        relay_ssrcs,
        remotes,
    });
    let ends = receivers
        .into_iter()
        .enumerate()
        .map(|(shard, inbox)| LinkEnd {
            shard,
            net: net.clone(),
            inbox,
        })
        .collect();
    (net, ends)
}

/// Where a peer's frames go.
#[derive(Debug, Clone)]
enum Route {
    /// A shard of this relay: its inbox.
    Local(mpsc::Sender<Frame>),
    /// A shard of another node: that node's link.
    Remote {
        tx: mpsc::Sender<Outbound>,
        shard: u16,
    },
}

impl Route {
    // The frame comes back in place on a full channel, to be kept in the backlog: boxing
    // it, as the lint suggests, would allocate once per packet.
    #[allow(clippy::result_large_err)]
    fn try_send(&self, frame: Frame) -> Result<(), TrySendError<Frame>> {
        match self {
            Self::Local(tx) => tx.try_send(frame),
            Self::Remote { tx, shard } => tx
                .try_send(Outbound {
                    to_shard: *shard,
                    frame,
                })
                .map_err(|e| match e {
                    TrySendError::Full(o) => TrySendError::Full(o.frame),
                    TrySendError::Closed(o) => TrySendError::Closed(o.frame),
                }),
        }
    }
}

/// One link session of this shard.
#[derive(Debug)]
struct Link {
    room: Arc<str>,
    peer: Peer,
    route: Route,
}

/// What reaching a peer takes: the SSRC its core sends from, the largest packet its link
/// carries, and where its frames go; `None` for a peer that is gone or unknown.
fn reach(net: &LinkNet, peer: Peer) -> Option<(u32, usize, Route)> {
    let shard = usize::from(peer.shard);
    if peer.is_local() {
        let tx = net.inboxes.get(shard)?.clone();
        return Some((*net.relay_ssrcs.get(shard)?, LINK_MTU, Route::Local(tx)));
    }
    let node = net.remotes.get(peer.node)?;
    let ssrc = *node.ssrcs.get(shard)?;
    let route = Route::Remote {
        tx: node.tx,
        shard: peer.shard,
    };
    Some((ssrc, node.max_packet.min(LINK_MTU), route))
}

/// A shard's link port.
pub(super) struct LinkPort {
    /// This shard, as its peers know it.
    me: Peer,
    net: Arc<LinkNet>,
    inbox: Inbox<Frame>,
    /// This shard's link sessions.
    links: HashMap<SessionId, Link>,
    /// The link session for each (room, peer).
    by_room: HashMap<(Arc<str>, Peer), SessionId>,
    /// The link session each peer's link session (peer, its id) arrives on.
    inbound: HashMap<(Peer, SessionId), SessionId>,
    /// Control frames a full inbox did not take yet, in order, per peer: a peer whose
    /// inbox is full holds back only its own links' packets.
    backlog: HashMap<Peer, VecDeque<Frame>>,
    counters: TransportCounters,
    /// `gsrelay_room_replicas` of this shard.
    replicas: IntGauge,
    /// Packets dropped for a full peer inbox (`link_full`), resolved once and exported
    /// from the start, as the next one is.
    full: IntCounter,
    /// Packets for a link their receiver did not know (`link_unknown`).
    unknown: IntCounter,
    /// Links the core refused or whose peer was not reachable, to be tried again: (room,
    /// peer, when).
    retries: Vec<(Arc<str>, Peer, Instant)>,
}

impl LinkPort {
    /// Shard `end.shard`'s link port.
    pub(super) fn new(end: LinkEnd, metrics: &Metrics) -> Self {
        Self {
            me: Peer::local(end.shard),
            net: end.net,
            inbox: Inbox::new(end.inbox),
            links: HashMap::new(),
            by_room: HashMap::new(),
            inbound: HashMap::new(),
            backlog: HashMap::new(),
            counters: metrics.transport(TRANSPORT),
            replicas: metrics
                .room_replicas
                .with_label_values(&[&end.shard.to_string()]),
            full: metrics.dropped.with_label_values(&["link_full"]),
            unknown: metrics.dropped.with_label_values(&["link_unknown"]),
            retries: Vec::new(),
        }
    }

    /// Counts the rooms this shard has links for (after a link opened or closed: rare).
    fn count_replicas(&self) {
        let mut rooms: Vec<&Arc<str>> = self.links.values().map(|l| &l.room).collect();
        rooms.sort_unstable();
        rooms.dedup();
        self.replicas
            .set(i64::try_from(rooms.len()).unwrap_or(i64::MAX));
    }

    /// Opens a link of `room` to every replica of `peers` that has none yet.
    pub(super) fn ensure(
        &mut self,
        now: Instant,
        room: &Arc<str>,
        peers: &[Peer],
        core: &mut impl Core,
    ) {
        for &peer in peers {
            if peer != self.me && !self.by_room.contains_key(&(room.clone(), peer)) {
                self.open(now, room, peer, core);
            }
        }
    }

    /// Joins this shard's link session of `room` for `peer` and tells the peer; tried
    /// again later when the core refuses it or the peer cannot be reached yet.
    fn open(
        &mut self,
        now: Instant,
        room: &Arc<str>,
        peer: Peer,
        core: &mut impl Core,
    ) -> Option<SessionId> {
        let joined = reach(&self.net, peer).and_then(|(ssrc, max_packet, route)| {
            let id = core.join_link(now, room, peer, ssrc)?;
            Some((id, max_packet, route))
        });
        let Some((id, max_packet, route)) = joined else {
            if !peer.is_local() && self.net.remotes.get(peer.node).is_none() {
                // Its node's link is gone; the cluster links the room again when it is back.
                tracing::warn!(%room, %peer, "link not opened: its node's link is gone");
                return None;
            }
            tracing::warn!(%room, %peer, "link not opened (refused or unreachable); trying again");
            if !self.retries.iter().any(|r| r.0 == *room && r.1 == peer) {
                self.retries.push((room.clone(), peer, now + LINK_RETRY));
            }
            return None;
        };
        core.set_path(now, id, max_packet.min(core.max_packet()), None);
        let link = Link {
            room: room.clone(),
            peer,
            route,
        };
        self.links.insert(id, link);
        self.by_room.insert((room.clone(), peer), id);
        self.count_replicas();
        let open = Frame::Open {
            from: self.me,
            session: id,
            room: room.clone(),
        };
        self.control(peer, open);
        Some(id)
    }

    /// Closes every link of `room` (this shard holds no other session of it any more),
    /// telling the peers.
    pub(super) fn close_room(&mut self, now: Instant, room: &str, core: &mut impl Core) {
        self.retries.retain(|r| &*r.0 != room);
        for id in self.links_where(|l| &*l.room == room) {
            self.close(id);
            core.leave(now, id);
        }
    }

    /// The link sessions `pick` takes.
    fn links_where(&self, pick: impl Fn(&Link) -> bool) -> Vec<SessionId> {
        self.links
            .iter()
            .filter(|(_, l)| pick(l))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Forgets link session `id` and tells its peer.
    fn close(&mut self, id: SessionId) {
        if let Some(peer) = self.drop_link(id) {
            let close = Frame::Close {
                from: self.me,
                session: id,
            };
            self.control(peer, close);
        }
    }

    /// Forgets link session `id`; its peer, if it was a link.
    fn drop_link(&mut self, id: SessionId) -> Option<Peer> {
        let link = self.links.remove(&id)?;
        self.by_room.remove(&(link.room, link.peer));
        self.inbound.retain(|_, local| *local != id);
        self.count_replicas();
        Some(link.peer)
    }

    /// Closes every link to node `node`, whose link is lost: the core ends their streams.
    fn node_lost(&mut self, now: Instant, node: u16, core: &mut impl Core) {
        self.backlog.retain(|peer, _| peer.node != node);
        self.retries.retain(|r| r.1.node != node);
        for id in self.links_where(|l| l.peer.node == node) {
            self.drop_link(id);
            core.leave(now, id);
        }
    }

    /// Sends a control frame to `peer`, after any still waiting for it.
    fn control(&mut self, peer: Peer, frame: Frame) {
        self.backlog.entry(peer).or_default().push_back(frame);
        self.send_backlog();
    }

    /// Sends each peer its waiting control frames, in order, while its inbox takes them.
    fn send_backlog(&mut self) {
        let net = &self.net;
        self.backlog.retain(|&peer, waiting| {
            let Some((_, _, route)) = reach(net, peer) else {
                // The peer is gone: nothing to tell it.
                return false;
            };
            while let Some(frame) = waiting.pop_front() {
                match route.try_send(frame) {
                    Ok(()) => {}
                    Err(TrySendError::Full(frame)) => {
                        waiting.push_front(frame);
                        return true;
                    }
                    // The peer has stopped: nothing to tell it.
                    Err(TrySendError::Closed(_)) => return false,
                }
            }
            false
        });
    }

    /// Handles one frame from a peer.
    fn handle(&mut self, now: Instant, frame: Frame, core: &mut impl Core) {
        match frame {
            Frame::Open {
                from,
                session,
                room,
            } => self.on_open(now, from, session, room, core),
            Frame::Close { from, session } => {
                if let Some(local) = self.inbound.get(&(from, session)).copied() {
                    self.drop_link(local);
                    core.leave(now, local);
                }
            }
            Frame::Refuse { to } => {
                if self.drop_link(to).is_some() {
                    core.leave(now, to);
                }
            }
            Frame::Packet(p) => self.on_packet(now, &p, core),
            Frame::NodeLost(node) => self.node_lost(now, node, core),
        }
    }

    /// A peer opened its side of a link: this shard opens its own if it has none and
    /// holds a session of the room, and refuses it if it holds none.
    fn on_open(
        &mut self,
        now: Instant,
        from: Peer,
        session: SessionId,
        room: Arc<str>,
        core: &mut impl Core,
    ) {
        let (local, confirms) = match self.by_room.get(&(room.clone(), from)) {
            Some(id) => (Some(*id), true),
            None if core.hosts(&room) => (self.open(now, &room, from, core), false),
            None => (None, false),
        };
        match local {
            Some(id) => {
                self.inbound.insert((from, session), id);
                if confirms && !from.is_local() {
                    self.refresh_both(now, id, core);
                }
            }
            None => self.control(from, Frame::Refuse { to: session }),
        }
    }

    /// Asks for the whole state again both ways on link session `id`, whose first
    /// packets each side sent may have overtaken the other's `Open` between nodes: this
    /// core is asked as if by the peer, the peer by a PLI on the link.
    fn refresh_both(&mut self, now: Instant, id: SessionId, core: &mut impl Core) {
        let Some(link) = self.links.get(&id) else {
            return;
        };
        let own = self
            .net
            .relay_ssrcs
            .get(usize::from(self.me.shard))
            .copied();
        let (Some(own), Some((peer_ssrc, _, _))) = (own, reach(&self.net, link.peer)) else {
            return;
        };
        let mut pli = Vec::with_capacity(12);
        if rtcp::write_pli(&mut pli, peer_ssrc, own).is_ok() {
            core.packet(now, id, PacketClass::Rtcp, &pli);
        }
        pli.clear();
        if rtcp::write_pli(&mut pli, own, peer_ssrc).is_ok()
            && let Some(packet) = Packet::new(self.me, id, PacketClass::Rtcp, &pli)
        {
            // Lost, the next `link_refresh` sends the state anyway.
            let _ = link.route.try_send(Frame::Packet(packet));
        }
    }

    /// A peer's packet: handed to the core from this shard's link session for the peer.
    fn on_packet(&mut self, now: Instant, p: &Packet, core: &mut impl Core) {
        let Some(local) = self.inbound.get(&(p.from, p.session)).copied() else {
            self.unknown.inc();
            return;
        };
        let bytes = p.bytes();
        self.counters.packets_in.inc();
        self.counters.bytes_in.inc_by(bytes.len() as u64);
        core.packet(now, local, p.class, bytes);
    }
}

impl Port for LinkPort {
    type Input = Frame;

    async fn next(&mut self) -> Frame {
        self.inbox.recv().await
    }

    fn receive(&mut self, now: Instant, first: Frame, core: &mut impl Core) {
        self.handle(now, first, core);
        for _ in 1..RECV_BATCH {
            let Some(frame) = self.inbox.try_recv() else {
                break;
            };
            self.handle(now, frame, core);
        }
    }

    fn observe_latency(&mut self, seconds: f64) {
        self.counters.latency.observe(seconds);
    }

    fn queue(&mut self, _now: Instant, t: &Transmit<'_>, stats: &mut StatsExporter) {
        let Some(link) = self.links.get(&t.session) else {
            return;
        };
        if self.backlog.get(&link.peer).is_some_and(|w| !w.is_empty()) {
            // Its `Open` may still be waiting: the peer would not know the packet's link.
            self.full.inc();
            return;
        }
        let Some(packet) = Packet::new(self.me, t.session, t.class, t.bytes) else {
            stats.drop("link_oversized");
            return;
        };
        let len = packet.len;
        match link.route.try_send(Frame::Packet(packet)) {
            Ok(()) => {
                self.counters.packets_out.inc();
                self.counters.bytes_out.inc_by(u64::from(len));
            }
            Err(TrySendError::Full(_)) => self.full.inc(),
            Err(TrySendError::Closed(_)) => {}
        }
    }

    async fn send_queued(&mut self, _: &mut [u8], _: &mut StatsExporter) {
        self.send_backlog();
    }

    fn forget(&mut self, id: SessionId) {
        self.close(id);
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.retries.iter().map(|r| r.2).min()
    }

    /// Tries again the links not opened yet, of rooms this shard still holds.
    fn handle_timeout(&mut self, now: Instant, core: &mut impl Core) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|r| r.2 <= now);
        self.retries = later;
        for (room, peer, _) in due {
            if core.hosts(&room) && !self.by_room.contains_key(&(room.clone(), peer)) {
                // Scheduled again if not opened again.
                self.open(now, &room, peer, core);
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use gsrelay_core::rtp::PacketClass;

    /// A shard's core that refuses the first `refusals` link joins.
    #[derive(Default)]
    struct Refusing {
        refusals: usize,
        joined: Vec<SessionId>,
        hosts: bool,
    }

    impl Core for Refusing {
        fn packet(&mut self, _: Instant, _: SessionId, _: PacketClass, _: &[u8]) {}
        fn set_path(&mut self, _: Instant, _: SessionId, _: usize, _: Option<u64>) {}
        fn leave(&mut self, _: Instant, _: SessionId) {}
        fn session_by_ssrc(&self, _: u32) -> Option<SessionId> {
            None
        }
        fn max_packet(&self) -> usize {
            1500
        }
        fn drop_packets(&mut self, _: &'static str, _: u64) {}
        fn join_link(&mut self, _: Instant, _: &Arc<str>, _: Peer, _: u32) -> Option<SessionId> {
            if self.refusals > 0 {
                self.refusals -= 1;
                return None;
            }
            let id = 100 + self.joined.len() as u64;
            self.joined.push(id);
            Some(id)
        }
        fn hosts(&self, _: &str) -> bool {
            self.hosts
        }
        fn checkpoint(&mut self, _: Instant, _: SessionId) {}
    }

    fn port() -> LinkPort {
        let (_net, mut ends) = net(vec![1, 2], Arc::default());
        let _peer = ends.pop();
        LinkPort::new(ends.remove(0), &Metrics::new())
    }

    #[test]
    fn a_link_the_core_refused_is_tried_again_while_the_shard_holds_the_room() {
        let mut port = port();
        let mut core = Refusing {
            refusals: 2,
            hosts: true,
            ..Refusing::default()
        };
        let t0 = Instant::now();
        let room: Arc<str> = Arc::from("r");
        port.ensure(t0, &room, &[Peer::local(1)], &mut core);
        assert!(core.joined.is_empty());
        assert_eq!(port.next_timeout(), Some(t0 + LINK_RETRY));
        // Not yet due: nothing happens.
        port.handle_timeout(t0, &mut core);
        assert!(core.joined.is_empty());
        // Refused again: scheduled again; then it opens.
        port.handle_timeout(t0 + LINK_RETRY, &mut core);
        assert!(core.joined.is_empty());
        port.handle_timeout(t0 + LINK_RETRY * 2, &mut core);
        assert_eq!(core.joined, [100]);
        assert_eq!(port.next_timeout(), None);
    }

    #[test]
    fn a_refused_link_of_a_room_the_shard_left_is_not_tried_again() {
        let mut port = port();
        let mut core = Refusing {
            refusals: 1,
            hosts: true,
            ..Refusing::default()
        };
        let t0 = Instant::now();
        port.ensure(t0, &Arc::from("r"), &[Peer::local(1)], &mut core);
        core.hosts = false;
        port.handle_timeout(t0 + LINK_RETRY, &mut core);
        assert!(core.joined.is_empty());
        assert_eq!(port.next_timeout(), None);
    }
}
