//! Aggregated delivery (`docs/relay.md`, "Delivery modes"): towards a subscriber that asks
//! for it, the relay acts as an RTP mixer (RFC 7667 §3.6). It sends one stream from its
//! own SSRC whose packets carry the newest state of many senders' objects, each sender's
//! objects in a container (`wire::container`). A packet is closed when the next update
//! would not fit in the payload budget; the closed packets and the open one go together
//! when the oldest update among them has waited the subscriber's `max_delay_ms` (or
//! sooner, once they would fill one GSO buffer: `train`).
//!
//! - A **view** is what a set of subscribers receives: the pending content of its next
//!   packet (a [`Builder`]) and a record of its recent packets (for NACK). Subscribers
//!   whose selection depends on the packet alone — no area, rate tiers, bandwidth cap or
//!   prediction — and whose dialect, stream and type filters and delay are equal share one
//!   view: each packet is built once, and only its RTP header, the removal of the
//!   subscriber's own container, encryption and the send remain per subscriber. Everyone
//!   else has a view of their own, which the per-subscriber forwarding paths fill through
//!   the outbox's diversion (`relay::outbox`).
//! - A **member** is one subscriber's aggregated stream: its numbering and clock, and
//!   which view packet each of its sequence numbers carried.

mod builder;
mod member;
mod repair;
mod train;

use super::admission::admits;
use super::api::SessionId;
use super::forward::Packet;
use super::ids::IdMap;
use super::interest::{Filter, Interest, TypeSel};
use super::outbox::{Diverted, Outbox};
use super::relevance;
use super::rng::Rng;
use super::session::Session;
use super::state::State;
use super::stats::RelayStats;
use crate::rtp::RtpPacket;
use crate::wire::{self, Dialect};
use builder::{Builder, Piece};
use member::{History, Member, ViewId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use train::Train;

/// What makes two subscribers' shared views the same.
#[derive(Debug, Clone, PartialEq)]
struct ViewKey {
    dialect: Dialect,
    max_delay: Duration,
    /// Largest payload its members' paths take (QUIC datagrams, browsers): members of
    /// one shared packet must all be able to receive it whole.
    budget: usize,
    streams: Filter<u32>,
    types: Filter<TypeSel>,
}

/// Where a subscriber in aggregated delivery belongs.
struct Placement {
    own: u32,
    echo: bool,
    /// Its packets name their senders as CSRCs (not a link's).
    csrcs: bool,
    dialect: Dialect,
    max_delay: Duration,
    /// Payload budget of the subscriber's path.
    budget: usize,
    /// `None`: a view of its own.
    key: Option<ViewKey>,
}

impl Placement {
    fn of(s: &Session) -> Self {
        let i = &s.interest;
        let max_delay = i.delivery.max_delay();
        Self {
            own: s.ssrc,
            echo: i.echo,
            csrcs: !s.is_link(),
            dialect: s.dialect,
            max_delay,
            budget: s.payload_budget,
            key: s.shares_view().then(|| ViewKey {
                dialect: s.dialect,
                max_delay,
                budget: s.payload_budget,
                streams: i.streams.clone(),
                types: i.types.clone(),
            }),
        }
    }
}

/// What a set of subscribers receives, and its next packet.
#[derive(Debug)]
struct View {
    room: Arc<str>,
    /// `Some` for a shared view.
    key: Option<ViewKey>,
    /// A shared view's filters, to select each packet's objects once.
    filter: Interest,
    max_delay: Duration,
    /// Largest payload of its packets.
    budget: usize,
    members: Vec<SessionId>,
    pending: Builder,
    /// Its closed packets, waiting for the deadline.
    train: Train,
    history: History,
}

impl View {
    fn sink(&mut self) -> Sink<'_> {
        Sink {
            pending: &mut self.pending,
            train: &mut self.train,
            history: &mut self.history,
            targets: &self.members,
            max_delay: self.max_delay,
            budget: self.budget,
        }
    }

    /// When its packets must go.
    fn due(&self) -> Option<Instant> {
        oldest(&self.pending, &self.train).map(|t| t + self.max_delay)
    }
}

/// A room's views.
#[derive(Debug, Default)]
struct RoomViews {
    shared: Vec<ViewId>,
    own: Vec<ViewId>,
}

/// Buffers reused for every packet built.
#[derive(Debug, Default)]
struct Scratch {
    carried: Vec<(u32, u64)>,
}

/// What sending needs from the relay.
pub(super) struct Tx<'a> {
    out: &'a mut Outbox,
    stats: &'a mut RelayStats,
    relay_ssrc: u32,
    now: Instant,
}

impl<'a> Tx<'a> {
    /// Borrows what sending needs.
    pub(super) fn new(
        out: &'a mut Outbox,
        stats: &'a mut RelayStats,
        relay_ssrc: u32,
        now: Instant,
    ) -> Self {
        Self {
            out,
            stats,
            relay_ssrc,
            now,
        }
    }
}

/// Where a unit goes and who gets the packet: a view's pending packet and its members, or
/// the direct builder and one member.
struct Sink<'a> {
    pending: &'a mut Builder,
    train: &'a mut Train,
    history: &'a mut History,
    targets: &'a [SessionId],
    max_delay: Duration,
    budget: usize,
}

/// Every view and member of the relay.
#[derive(Debug)]
pub struct Aggregator {
    views: Vec<Option<View>>,
    free: Vec<ViewId>,
    rooms: HashMap<Arc<str>, RoomViews>,
    members: IdMap<Member>,
    /// The earliest pending deadline (possibly early: recomputed when reached).
    due: Option<Instant>,
    rng: Rng,
    pieces: Vec<Piece>,
    /// Packets for one member of a shared view (snapshots), sent at once.
    direct: Builder,
    direct_train: Train,
    scratch: Scratch,
}

impl Aggregator {
    /// No views; `seed` draws the members' initial sequence numbers and timestamps.
    pub fn new(seed: u64) -> Self {
        Self {
            views: Vec::new(),
            free: Vec::new(),
            rooms: HashMap::new(),
            members: IdMap::default(),
            due: None,
            rng: Rng::new(seed),
            pieces: Vec::new(),
            direct: Builder::default(),
            direct_train: Train::default(),
            scratch: Scratch::default(),
        }
    }

    /// When a pending packet must go.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The RTP timestamp of a member's aggregated stream at `now`.
    pub fn member_timestamp(&self, id: SessionId, now: Instant) -> Option<u32> {
        self.members.get(&id).map(|m| m.timestamp(now))
    }

    fn is_member(&self, id: SessionId) -> bool {
        self.members.contains_key(&id)
    }

    fn in_shared_view(&self, id: SessionId) -> bool {
        self.members
            .get(&id)
            .and_then(|m| self.views.get(m.view))
            .and_then(Option::as_ref)
            .is_some_and(|v| v.key.is_some())
    }

    fn view_mut(&mut self, vid: ViewId) -> Option<&mut View> {
        self.views.get_mut(vid).and_then(Option::as_mut)
    }

    /// Puts a subscriber in the view its interest asks for, keeping its numbering when it
    /// moves (the old view's pending packet is sent first, so the move loses nothing).
    fn place(&mut self, id: SessionId, room: &Arc<str>, p: Placement, tx: &mut Tx<'_>) {
        if let Some(m) = self.members.get_mut(&id) {
            (m.own, m.echo, m.dialect) = (p.own, p.echo, p.dialect);
            let vid = m.view;
            if let Some(view) = self.view_mut(vid)
                && view.room == *room
                && (view.key.is_none() && p.key.is_none() || p.key.is_some() && view.key == p.key)
            {
                view.max_delay = p.max_delay;
                view.budget = p.budget;
                return;
            }
            self.leave_view(id, vid, Some(tx));
        }
        let vid = match &p.key {
            Some(key) => self.find_shared(room, key),
            None => None,
        }
        .unwrap_or_else(|| self.new_view(room, p.key, p.max_delay, p.budget));
        let Self { views, members, .. } = self;
        if let Some(view) = views.get_mut(vid).and_then(Option::as_mut) {
            // Packets closed before it joined go now, to the members they were closed
            // for: they may hold older state than the snapshot a joiner asks for.
            send_train(&mut view.sink(), members, tx);
            view.members.push(id);
        }
        let random = self.rng.next_u64();
        self.members
            .entry(id)
            .and_modify(|m| {
                m.view = vid;
                m.forget_sent();
            })
            .or_insert_with(|| {
                Member::new(vid, (p.own, p.echo, p.csrcs), p.dialect, random, tx.now)
            });
    }

    /// Takes a subscriber out of aggregated delivery (it left, or went per-stream).
    fn remove(&mut self, id: SessionId, tx: Option<&mut Tx<'_>>) {
        if let Some(m) = self.members.remove(&id) {
            self.leave_view(id, m.view, tx);
        }
    }

    /// Takes `id` out of a view, sending the view's pending packet first when `tx` is
    /// given; an empty view is dropped.
    fn leave_view(&mut self, id: SessionId, vid: ViewId, tx: Option<&mut Tx<'_>>) {
        let Self {
            views,
            members,
            scratch,
            ..
        } = self;
        let Some(view) = views.get_mut(vid).and_then(Option::as_mut) else {
            return;
        };
        if let Some(tx) = tx {
            flush(&mut view.sink(), members, scratch, tx);
        }
        view.members.retain(|m| *m != id);
        if !view.members.is_empty() {
            return;
        }
        let room = view.room.clone();
        self.views[vid] = None;
        self.free.push(vid);
        if let Some(rv) = self.rooms.get_mut(&room) {
            rv.shared.retain(|v| *v != vid);
            rv.own.retain(|v| *v != vid);
            if rv.shared.is_empty() && rv.own.is_empty() {
                self.rooms.remove(&room);
            }
        }
    }

    fn find_shared(&self, room: &str, key: &ViewKey) -> Option<ViewId> {
        let rv = self.rooms.get(room)?;
        rv.shared.iter().copied().find(|v| {
            self.views
                .get(*v)
                .and_then(Option::as_ref)
                .is_some_and(|view| view.key.as_ref() == Some(key))
        })
    }

    fn new_view(
        &mut self,
        room: &Arc<str>,
        key: Option<ViewKey>,
        max_delay: Duration,
        budget: usize,
    ) -> ViewId {
        let filter = key.as_ref().map_or_else(Interest::default, |k| Interest {
            streams: k.streams.clone(),
            types: k.types.clone(),
            ..Interest::default()
        });
        let shared = key.is_some();
        let view = View {
            room: room.clone(),
            key,
            filter,
            max_delay,
            budget,
            members: Vec::new(),
            pending: Builder::default(),
            train: Train::default(),
            history: History::default(),
        };
        let vid = match self.free.pop() {
            Some(v) => {
                self.views[v] = Some(view);
                v
            }
            None => {
                self.views.push(Some(view));
                self.views.len() - 1
            }
        };
        let rv = self.rooms.entry(room.clone()).or_default();
        if shared {
            rv.shared.push(vid);
        } else {
            rv.own.push(vid);
        }
        vid
    }

    /// Adds an accepted packet's objects to every shared view of its room, once per view.
    pub(super) fn fan_out(&mut self, room: &str, p: &Packet<'_, '_>, tx: &mut Tx<'_>) {
        let Self {
            rooms,
            views,
            members,
            scratch,
            pieces,
            due,
            ..
        } = self;
        let Some(rv) = rooms.get(room) else {
            return;
        };
        let (ssrc, payload) = (p.ssrc, p.payload);
        for &vid in &rv.shared {
            let Some(view) = views.get_mut(vid).and_then(Option::as_mut) else {
                continue;
            };
            let Some(dialect) = view.key.as_ref().map(|k| k.dialect) else {
                continue;
            };
            // Every member's own container is left out when its packet is written.
            if !view.filter.admits_stream(ssrc, false) {
                continue;
            }
            pieces.clear();
            pieces.extend(
                p.refs
                    .iter()
                    .filter(|r| admits(&view.filter, dialect, p.dialect, r))
                    .map(|r| Piece {
                        id: r.id,
                        range: (r.start, r.end),
                    }),
            );
            let at = add_unit(
                &mut view.sink(),
                members,
                scratch,
                tx,
                ssrc,
                payload,
                pieces,
            );
            *due = earliest(*due, at);
        }
    }

    /// Re-packs packets diverted from members (their per-stream output) into their views;
    /// what a shared view's member gets alone (a snapshot) is sent at once, and so is a
    /// view of its own when `urgent` (feedback asked for it).
    fn absorb(&mut self, d: &mut Diverted, urgent: bool, tx: &mut Tx<'_>) {
        // Each session's packets stay in the order they were made.
        d.packets.sort_unstable_by_key(|(to, r)| (*to, r.start));
        let Self {
            views,
            members,
            scratch,
            pieces,
            direct,
            direct_train,
            due,
            ..
        } = self;
        for run in d.packets.chunk_by(|a, b| a.0 == b.0) {
            let to = run[0].0;
            let Some((vid, dialect)) = members.get(&to).map(|m| (m.view, m.dialect)) else {
                continue;
            };
            let Some(view) = views.get_mut(vid).and_then(Option::as_mut) else {
                continue;
            };
            let shared = view.key.is_some();
            let mut sink = match shared {
                true => Sink {
                    pending: &mut *direct,
                    train: &mut *direct_train,
                    history: &mut view.history,
                    targets: std::slice::from_ref(&run[0].0),
                    max_delay: Duration::ZERO,
                    budget: view.budget,
                },
                false => view.sink(),
            };
            for (_, range) in run {
                let Some(rtp) = d
                    .buf
                    .get(range.clone())
                    .and_then(|b| RtpPacket::parse(b).ok())
                else {
                    continue;
                };
                pieces_of(rtp.payload(), dialect, pieces);
                let ssrc = rtp.ssrc();
                let at = add_unit(&mut sink, members, scratch, tx, ssrc, rtp.payload(), pieces);
                if !shared {
                    *due = earliest(*due, at);
                }
            }
            if shared || urgent {
                flush(&mut sink, members, scratch, tx);
            }
        }
    }

    /// Sends every pending packet whose delay is up.
    fn flush_due(&mut self, tx: &mut Tx<'_>) {
        if self.due.is_none_or(|t| tx.now < t) {
            return;
        }
        let mut next = None;
        for view in self.views.iter_mut().flatten() {
            match view.due() {
                Some(at) if at <= tx.now => {
                    flush(&mut view.sink(), &mut self.members, &mut self.scratch, tx)
                }
                at => next = earliest(next, at),
            }
        }
        self.due = next;
    }

    /// Drops what a sender that left still had pending, so no packet revives it after its
    /// BYE.
    pub(super) fn sender_left(&mut self, room: &str, ssrc: u32) {
        let Some(rv) = self.rooms.get(room) else {
            return;
        };
        for vid in rv.shared.iter().chain(&rv.own) {
            if let Some(view) = self.views.get_mut(*vid).and_then(Option::as_mut) {
                view.pending.remove_sender(ssrc);
                view.train.remove_sender(ssrc);
            }
        }
    }
}

/// The objects of a payload the relay made, as pieces; none if it does not scan (one
/// source packet's objects go together or not at all).
fn pieces_of(payload: &[u8], dialect: Dialect, pieces: &mut Vec<Piece>) {
    pieces.clear();
    for r in wire::objects(payload, dialect) {
        match r {
            Ok(r) => pieces.push(Piece {
                id: r.id,
                range: (r.start, r.end),
            }),
            Err(_) => {
                pieces.clear();
                return;
            }
        }
    }
}

/// Adds a unit to a sink: the pending packet is closed first if the unit does not fit,
/// and closed when full (a unit larger than the budget makes a packet alone). Returns
/// when the sink's packets are due.
fn add_unit(
    sink: &mut Sink<'_>,
    members: &mut IdMap<Member>,
    s: &mut Scratch,
    tx: &mut Tx<'_>,
    ssrc: u32,
    bytes: &[u8],
    pieces: &[Piece],
) -> Option<Instant> {
    if !pieces.is_empty() {
        if !sink.pending.is_empty() && sink.pending.size_with(ssrc, pieces) > sink.budget {
            close(sink, members, s, tx);
        }
        sink.pending.add(tx.now, ssrc, bytes, pieces);
        if sink.pending.size() >= sink.budget {
            close(sink, members, s, tx);
        }
    }
    oldest(sink.pending, sink.train).map(|t| t + sink.max_delay)
}

/// Closes the sink's pending packet: it joins the train, which goes at once if that
/// filled it.
fn close(sink: &mut Sink<'_>, members: &mut IdMap<Member>, s: &mut Scratch, tx: &mut Tx<'_>) {
    hold(sink, s, tx);
    if sink.train.is_full() {
        send_train(sink, members, tx);
    }
}

/// Sends everything the sink holds: its train and its pending packet.
fn flush(sink: &mut Sink<'_>, members: &mut IdMap<Member>, s: &mut Scratch, tx: &mut Tx<'_>) {
    if !sink.pending.is_empty() {
        hold(sink, s, tx);
    }
    send_train(sink, members, tx);
}

/// Builds the sink's pending packet, once, into its train.
fn hold(sink: &mut Sink<'_>, s: &mut Scratch, tx: &mut Tx<'_>) {
    sink.train.hold(sink.pending, &mut s.carried, sink.history);
    tx.stats.aggregate_payloads += 1;
}

/// Sends the train to each target: every packet but the last padded to the longest, so
/// that the transport can send them as one GSO buffer.
fn send_train(sink: &mut Sink<'_>, members: &mut IdMap<Member>, tx: &mut Tx<'_>) {
    if sink.train.is_empty() {
        return;
    }
    for id in sink.targets {
        let Some(m) = members.get_mut(id) else {
            continue;
        };
        let cars = sink.train.cars().enumerate();
        // The longest packet it gets, and which is its last (never padded).
        let (longest, last) = cars
            .clone()
            .filter_map(|(i, (p, segs, _))| m.packet_len(p, segs).map(|len| (i, len)))
            .fold((0, None), |(longest, _), (i, len)| {
                (longest.max(len), Some(i))
            });
        for (i, car) in cars {
            let pad_to = if Some(i) == last { 0 } else { longest };
            if m.send(tx.out, (*id, tx.relay_ssrc), tx.now, car, pad_to) {
                tx.stats.aggregate_packets += 1;
            }
        }
    }
    sink.train.clear();
}

/// When the oldest update a sink holds arrived.
fn oldest(pending: &Builder, train: &Train) -> Option<Instant> {
    earliest(pending.since(), train.since())
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    a.into_iter().chain(b).min()
}

impl Aggregator {
    /// Sends the aggregated packets whose delay is up (the end of a batch of inputs, so
    /// that `max_delay_ms: 0` sends what one batch brought as one packet per view; other
    /// delays are kept by the core's timeout).
    pub(super) fn flush(&mut self, st: &mut State, now: Instant) {
        st.out.now = Some(now);
        let mut tx = Tx::new(&mut st.out, &mut st.stats, st.relay_ssrc, now);
        self.flush_due(&mut tx);
    }

    /// Re-packs what the input diverted for members in aggregated delivery (see
    /// [`Aggregator::absorb`]).
    pub(super) fn mix(&mut self, st: &mut State, now: Instant, urgent: bool) {
        let mut d = st.out.take_diverted();
        if !d.packets.is_empty() {
            let mut tx = Tx::new(&mut st.out, &mut st.stats, st.relay_ssrc, now);
            self.absorb(&mut d, urgent, &mut tx);
        }
        st.out.restore_diverted(d);
    }

    /// Brings a session's delivery in line with its interest, rights and cap: joins,
    /// moves or leaves aggregated delivery. Switching modes starts a new numbering of the
    /// streams the session gets.
    pub(super) fn sync(&mut self, st: &mut State, id: SessionId, now: Instant) {
        let Some(s) = st.sessions.get_mut(&id) else {
            return self.end(st, id);
        };
        let want = (s.subscribe && s.interest.delivery.is_aggregated()).then(|| Placement::of(s));
        if want.is_some() != self.is_member(id) {
            s.forget_subscriptions();
            st.out.set_mixed(id, want.is_some());
        }
        let shared = want.as_ref().is_some_and(|p| p.key.is_some());
        if shared != self.in_shared_view(id)
            && let Some(room) = st.rooms.get_mut(&s.room)
        {
            // Shared members are not in the room's grid (`relevance::place`).
            let center = s.interest.area.as_ref().and_then(|a| a.center);
            relevance::place(room, s, center);
        }
        let room = s.room.clone();
        let mut tx = Tx::new(&mut st.out, &mut st.stats, st.relay_ssrc, now);
        match want {
            Some(p) => self.place(id, &room, p, &mut tx),
            None => self.remove(id, Some(&mut tx)),
        }
    }

    /// Forgets a departed session's aggregated delivery.
    pub(super) fn end(&mut self, st: &mut State, id: SessionId) {
        self.remove(id, None);
        st.out.set_mixed(id, false);
    }
}
