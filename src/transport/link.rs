//! The in-process link: the link protocol (`docs/relay.md`, "Links") between the shards
//! of one relay, carried as [`Frame`]s over one bounded channel per shard, with no socket
//! and no encryption (both ends are this process).
//!
//! A room on several shards has a link session on each for every other (a full mesh).
//! A shard opens its side when the control plane joins a session to a room that the
//! directory has on other shards too ([`LinkPort::ensure`]): it joins a link session to
//! its core and sends the peer [`Frame::Open`]; the peer opens its own side if it has
//! none and sends its `Open` back. Every later frame of a link follows its `Open` on the
//! same channel, so a peer always knows a link before its first packet. A shard whose
//! last session of a room leaves closes the room's links ([`LinkPort::close_room`]); one
//! asked to open a link for a room it holds no session of refuses it, so a room never
//! stays on a shard for its links alone.
//!
//! A packet that finds its peer's channel full is dropped and counted (`link_full`): the
//! core sends each link its whole own state again every `link_refresh`, so what a
//! congested link lost is replaced by the newest state, never queued.

use super::port::{Core, Inbox, Port, RECV_BATCH};
use crate::metrics::export::StatsExporter;
use crate::metrics::{Metrics, TransportCounters};
use crate::relay::{SessionId, Transmit};
use crate::rtp::PacketClass;
use prometheus::{IntCounter, IntGauge};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

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

/// One frame of the link protocol between two shards.
// A packet is held in place in the channel's slot: boxing it, as the lint suggests,
// would allocate once per packet; control frames are rare.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Frame {
    /// Shard `from` opened link session `session` for `room` towards the receiver.
    Open {
        /// The sending shard.
        from: usize,
        /// Its link session.
        session: SessionId,
        /// The room.
        room: Arc<str>,
    },
    /// Shard `from` closed its link session `session`.
    Close {
        /// The sending shard.
        from: usize,
        /// Its link session.
        session: SessionId,
    },
    /// The receiver's link session `to` is refused: the sender holds no session of its
    /// room.
    Refuse {
        /// The receiver's link session.
        to: SessionId,
    },
    /// A packet shard `from` sent on its link session `session`.
    Packet(Packet),
}

/// A packet on a link, in place (no allocation per packet).
pub struct Packet {
    from: usize,
    session: SessionId,
    class: PacketClass,
    len: u16,
    bytes: [u8; LINK_MTU],
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("from", &self.from)
            .field("session", &self.session)
            .field("class", &self.class)
            .field("len", &self.len)
            .finish()
    }
}

/// The shards' link inboxes and the SSRC each shard's core sends its links from.
#[derive(Debug)]
pub struct LinkNet {
    inboxes: Vec<mpsc::Sender<Frame>>,
    relay_ssrcs: Vec<u32>,
}

/// One shard's end of the [`LinkNet`]: the net and its own inbox.
#[derive(Debug)]
pub struct LinkEnd {
    shard: usize,
    net: Arc<LinkNet>,
    inbox: mpsc::Receiver<Frame>,
}

/// A link net for shards whose cores send from `relay_ssrcs` (shard `k` from
/// `relay_ssrcs[k]`), and each shard's end of it.
pub fn net(relay_ssrcs: Vec<u32>) -> Vec<LinkEnd> {
    let (inboxes, receivers): (Vec<_>, Vec<_>) = relay_ssrcs
        .iter()
        .map(|_| mpsc::channel(LINK_DEPTH))
        .unzip();
    let net = Arc::new(LinkNet {
        inboxes,
        relay_ssrcs,
    });
    receivers
        .into_iter()
        .enumerate()
        .map(|(shard, inbox)| LinkEnd {
            shard,
            net: net.clone(),
            inbox,
        })
        .collect()
}

/// One link session of this shard.
#[derive(Debug)]
struct Link {
    room: Arc<str>,
    peer: usize,
}

/// A shard's in-process link port.
pub(super) struct LinkPort {
    shard: usize,
    net: Arc<LinkNet>,
    inbox: Inbox<Frame>,
    /// This shard's link sessions.
    links: HashMap<SessionId, Link>,
    /// The link session for each (room, peer shard).
    by_room: HashMap<(Arc<str>, usize), SessionId>,
    /// The link session each peer's link session (peer shard, its id) arrives on.
    inbound: HashMap<(usize, SessionId), SessionId>,
    /// Control frames a full inbox did not take yet, in order, per peer shard.
    /// Control frames a full inbox did not take yet, in order, per peer shard: a peer
    /// whose inbox is full holds back only its own links' packets.
    backlog: Vec<VecDeque<Frame>>,
    counters: TransportCounters,
    /// `gsrelay_room_replicas` of this shard.
    replicas: IntGauge,
    /// Packets dropped for a full peer inbox (`link_full`), resolved once and exported
    /// from the start, as the next one is.
    full: IntCounter,
    /// Packets for a link their receiver did not know (`link_unknown`).
    unknown: IntCounter,
    /// Links the core refused, to be tried again: (room, peer shard, when).
    retries: Vec<(Arc<str>, usize, Instant)>,
}

impl LinkPort {
    /// Shard `end.shard`'s link port.
    pub(super) fn new(end: LinkEnd, metrics: &Metrics) -> Self {
        let peers = end.net.inboxes.len();
        Self {
            shard: end.shard,
            net: end.net,
            inbox: Inbox::new(end.inbox),
            links: HashMap::new(),
            by_room: HashMap::new(),
            inbound: HashMap::new(),
            backlog: (0..peers).map(|_| VecDeque::new()).collect(),
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

    /// Opens a link of `room` to every shard of `peers` that has none yet.
    pub(super) fn ensure(
        &mut self,
        now: Instant,
        room: &Arc<str>,
        peers: &[usize],
        core: &mut impl Core,
    ) {
        for &peer in peers {
            if peer != self.shard && !self.by_room.contains_key(&(room.clone(), peer)) {
                self.open(now, room, peer, core);
            }
        }
    }

    /// Joins this shard's link session of `room` for `peer` and tells the peer.
    fn open(
        &mut self,
        now: Instant,
        room: &Arc<str>,
        peer: usize,
        core: &mut impl Core,
    ) -> Option<SessionId> {
        let ssrc = *self.net.relay_ssrcs.get(peer)?;
        let Some(id) = core.join_link(now, room, peer, ssrc) else {
            tracing::warn!(%room, peer, "the core refused a link session; trying again");
            if !self.retries.iter().any(|r| r.0 == *room && r.1 == peer) {
                self.retries.push((room.clone(), peer, now + LINK_RETRY));
            }
            return None;
        };
        core.set_path(now, id, LINK_MTU.min(core.max_packet()), None);
        self.links.insert(
            id,
            Link {
                room: room.clone(),
                peer,
            },
        );
        self.by_room.insert((room.clone(), peer), id);
        self.count_replicas();
        let open = Frame::Open {
            from: self.shard,
            session: id,
            room: room.clone(),
        };
        self.control(peer, open);
        Some(id)
    }

    /// Closes every link of `room` (this shard holds no other session of it any more).
    pub(super) fn close_room(&mut self, now: Instant, room: &str, core: &mut impl Core) {
        self.retries.retain(|r| &*r.0 != room);
        let ids: Vec<SessionId> = self
            .links
            .iter()
            .filter(|(_, l)| &*l.room == room)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(peer) = self.drop_link(id) {
                let close = Frame::Close {
                    from: self.shard,
                    session: id,
                };
                self.control(peer, close);
            }
            core.leave(now, id);
        }
    }

    /// Forgets link session `id`; its peer shard, if it was a link.
    fn drop_link(&mut self, id: SessionId) -> Option<usize> {
        let link = self.links.remove(&id)?;
        self.by_room.remove(&(link.room, link.peer));
        self.inbound.retain(|_, local| *local != id);
        self.count_replicas();
        Some(link.peer)
    }

    /// Sends a control frame to `peer`, after any still waiting for it.
    fn control(&mut self, peer: usize, frame: Frame) {
        if let Some(waiting) = self.backlog.get_mut(peer) {
            waiting.push_back(frame);
        }
        self.send_backlog();
    }

    /// Sends each peer its waiting control frames, in order, while its inbox takes them.
    fn send_backlog(&mut self) {
        for (waiting, tx) in self.backlog.iter_mut().zip(&self.net.inboxes) {
            while let Some(frame) = waiting.pop_front() {
                match tx.try_send(frame) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(frame)) => {
                        waiting.push_front(frame);
                        break;
                    }
                    // The peer shard has stopped: nothing to tell it.
                    Err(mpsc::error::TrySendError::Closed(_)) => waiting.clear(),
                }
            }
        }
    }

    /// Handles one frame from a peer shard.
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
        }
    }

    /// A peer opened its side of a link: this shard opens its own if it has none and
    /// holds a session of the room, and refuses it if it holds none.
    fn on_open(
        &mut self,
        now: Instant,
        from: usize,
        session: SessionId,
        room: Arc<str>,
        core: &mut impl Core,
    ) {
        let local = match self.by_room.get(&(room.clone(), from)) {
            Some(id) => Some(*id),
            None if core.hosts(&room) => self.open(now, &room, from, core),
            None => None,
        };
        match local {
            Some(id) => {
                self.inbound.insert((from, session), id);
            }
            None => self.control(from, Frame::Refuse { to: session }),
        }
    }

    /// A peer's packet: handed to the core from this shard's link session for the peer.
    fn on_packet(&mut self, now: Instant, p: &Packet, core: &mut impl Core) {
        let Some(local) = self.inbound.get(&(p.from, p.session)).copied() else {
            self.unknown.inc();
            return;
        };
        let bytes = &p.bytes[..usize::from(p.len).min(LINK_MTU)];
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
        let Ok(len) = u16::try_from(t.bytes.len()) else {
            stats.drop("link_oversized");
            return;
        };
        if t.bytes.len() > LINK_MTU {
            stats.drop("link_oversized");
            return;
        }
        let Some(tx) = self.net.inboxes.get(link.peer) else {
            return;
        };
        if self.backlog.get(link.peer).is_some_and(|w| !w.is_empty()) {
            // Its `Open` may still be waiting: the peer would not know the packet's link.
            self.full.inc();
            return;
        }
        let mut packet = Packet {
            from: self.shard,
            session: t.session,
            class: t.class,
            len,
            bytes: [0; LINK_MTU],
        };
        packet.bytes[..t.bytes.len()].copy_from_slice(t.bytes);
        match tx.try_send(Frame::Packet(packet)) {
            Ok(()) => {
                self.counters.packets_out.inc();
                self.counters.bytes_out.inc_by(u64::from(len));
            }
            Err(mpsc::error::TrySendError::Full(_)) => self.full.inc(),
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    async fn send_queued(&mut self) {
        self.send_backlog();
    }

    fn forget(&mut self, id: SessionId) {
        if let Some(peer) = self.drop_link(id) {
            let close = Frame::Close {
                from: self.shard,
                session: id,
            };
            self.control(peer, close);
        }
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.retries.iter().map(|r| r.2).min()
    }

    /// Tries again the links the core refused, of rooms this shard still holds.
    fn handle_timeout(&mut self, now: Instant, core: &mut impl Core) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|r| r.2 <= now);
        self.retries = later;
        for (room, peer, _) in due {
            if core.hosts(&room) && !self.by_room.contains_key(&(room.clone(), peer)) {
                // Scheduled again if refused again.
                self.open(now, &room, peer, core);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::PacketClass;

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
        fn drop_packet(&mut self, _: &'static str) {}
        fn join_link(&mut self, _: Instant, _: &Arc<str>, _: usize, _: u32) -> Option<SessionId> {
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
    }

    fn port() -> LinkPort {
        let mut ends = net(vec![1, 2]);
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
        port.ensure(t0, &room, &[1], &mut core);
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
        port.ensure(t0, &Arc::from("r"), &[1], &mut core);
        core.hosts = false;
        port.handle_timeout(t0 + LINK_RETRY, &mut core);
        assert!(core.joined.is_empty());
        assert_eq!(port.next_timeout(), None);
    }
}
