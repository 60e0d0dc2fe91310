//! Forwarding: one accepted packet to every subscriber with only the objects its interest
//! admits, and relay-made packets of cached state (snapshots, objects entering an area).

use super::admission::{admits, portable};
use super::api::SessionId;
use super::grid;
use super::interest::Interest;
use super::outbox::Outbox;
use super::pacing;
use super::relevance;
use super::room::{Room, Stream};
use super::session::{Session, Subscription, subscription};
use super::store::Entry;
use crate::rtp::packet::HeaderExtension;
use crate::rtp::{PacketClass, RtpHeader};
use crate::wire::motion::{Motion, motion};
use crate::wire::{Dialect, ObjectRef};
use std::collections::HashMap;
use std::time::Instant;

/// Scratch buffers reused across packets, so forwarding allocates nothing per packet.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Per object of the packet: does the current subscriber get it.
    mask: Vec<bool>,
    /// ObjectIDs that entered the current subscriber's area with this packet.
    entered: Vec<u64>,
    /// Per object of the packet: its distance from the subscriber's area centre.
    dist: Vec<f32>,
    /// Per object of the packet: its motion, when the subscriber gates by prediction.
    motion: Vec<Option<Motion>>,
    /// Grid cells the packet's objects are in.
    cells: Vec<grid::Cell>,
    /// Subscribers the packet may concern.
    audience: Vec<SessionId>,
    /// Cells the packet's objects just left: their subscribers must see them leave.
    pub moved_from: Vec<grid::Cell>,
    /// Subscribers that got relay-made sends queued (objects following an entered one),
    /// or whose snapshot live updates just completed: the core drains their pacing once
    /// the fan-out is done.
    pub to_drain: Vec<SessionId>,
    /// What pacing did to the objects fanned out, for the core to count.
    pub paced: PaceCounts,
    /// A paced subscriber's drain: its due updates and what it sends of them.
    pub drain: DrainScratch,
}

impl Scratch {
    /// Bytes of capacity its buffers hold.
    pub fn capacity_bytes(&self) -> usize {
        let d = &self.drain;
        self.mask.capacity()
            + self.entered.capacity() * size_of::<u64>()
            + self.dist.capacity() * size_of::<f32>()
            + self.motion.capacity() * size_of::<Option<Motion>>()
            + (self.cells.capacity() + self.moved_from.capacity()) * size_of::<grid::Cell>()
            + (self.audience.capacity() + self.to_drain.capacity()) * size_of::<SessionId>()
            + d.due.capacity() * size_of::<(f32, (u32, u64), usize)>()
            + d.gone.capacity() * size_of::<(u32, u64)>()
            + d.chosen.capacity() * size_of::<(u32, usize, u64)>()
    }
}

/// Buffers of [`drain_pending`], reused so a paced subscriber's drain allocates nothing.
#[derive(Debug, Default)]
pub struct DrainScratch {
    /// Due updates: priority, key and payload bytes.
    due: Vec<(f32, (u32, u64), usize)>,
    /// Pending updates whose object is gone or out of the area.
    gone: Vec<(u32, u64)>,
    /// The updates the budget allows: stream, rank by priority, objectID.
    chosen: Vec<(u32, usize, u64)>,
}

/// Objects pacing held back or dropped since the core last took the counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PaceCounts {
    /// Deferred by a rate tier.
    pub rate_tier: u64,
    /// Deferred by a bandwidth cap.
    pub cap_deferred: u64,
    /// Dropped by a bandwidth cap (no objectID: nothing cached to send later).
    pub cap_dropped: u64,
    /// Pending updates superseded by a newer one.
    pub coalesced: u64,
}

/// What is being forwarded: one stream's packet, as its sender sent it or as a container
/// from a link carried it (then with the carrying packet's header fields).
pub struct Packet<'a, 'p> {
    /// The stream.
    pub ssrc: u32,
    /// Its source sequence number.
    pub seq: u16,
    /// Its source RTP timestamp.
    pub timestamp: u32,
    /// The RTP marker bit.
    pub marker: bool,
    /// The RTP payload type.
    pub payload_type: u8,
    /// The header extension, passed on as it came.
    pub extension: Option<HeaderExtension<'p>>,
    /// The stream's game-state payload (the objects `refs` points into).
    pub payload: &'p [u8],
    /// Its objects (for a reordered packet, only those that are still news).
    pub refs: &'a [ObjectRef],
    /// Whether `refs` are all the payload's objects (the payload can be copied whole).
    pub complete: bool,
    /// The sender's dialect.
    pub dialect: Dialect,
    /// The session that sent it (the stream's publisher, a link, or a holder of one of
    /// its objects).
    pub sender: SessionId,
    /// Made by the relay rather than sent by the stream's publisher (updates from the
    /// holder of one of its objects): numbered in line for each subscriber, as a
    /// snapshot is, since it has no place in the source's numbering.
    pub injected: bool,
}

/// Sends `p` to every other subscriber of the room. Returns the earliest time a paced
/// subscriber has a deferred update due; subscribers with relay-made sends queued are
/// left in `scratch.to_drain`.
pub fn fan_out(
    room: &Room,
    sessions: &mut HashMap<SessionId, Session>,
    out: &mut Outbox,
    scratch: &mut Scratch,
    p: &Packet<'_, '_>,
    now: Instant,
) -> Option<Instant> {
    scratch.to_drain.clear();
    let (ssrc, seq) = (p.ssrc, p.seq);
    let stream = room.streams.get(&ssrc)?;
    let mut next_due: Option<Instant> = None;
    let audience = audience(room, stream, p.refs, scratch);
    for member in &audience {
        let Some(sub) = sessions.get_mut(member) else {
            continue;
        };
        // Shared aggregated views get the packet once per view (`aggregate`).
        if !sub.subscribe || !sub.wants_from(ssrc, stream, p.sender) || sub.shares_view() {
            continue;
        }
        let center = relevance::center(room, sub);
        select(sub, center, stream, ssrc, p, scratch);
        if sub.interest.prediction.is_some() {
            gate(sub, ssrc, p, scratch, now);
        }
        if sub.paced() {
            let due = pace(sub, ssrc, p, scratch, now);
            next_due = next_due.into_iter().chain(due).min();
        }
        let wanted = scratch.mask.iter().filter(|w| **w).count();
        let state = subscription(&mut sub.subs, &mut sub.resume, ssrc, seq);
        let rw = match (wanted, p.injected) {
            (0, true) => continue,
            (0, false) => {
                state.rewriter.filter(seq);
                continue;
            }
            (_, true) => state.rewriter.inject(p.timestamp),
            (_, false) => {
                let Some(rw) = state.rewriter.forward(seq, p.timestamp) else {
                    continue;
                };
                state.record(rw.sequence_number, seq);
                rw
            }
        };
        let (buf, start) = out.begin();
        let header = RtpHeader {
            marker: p.marker,
            payload_type: p.payload_type,
            sequence_number: rw.sequence_number,
            timestamp: rw.timestamp,
            ssrc,
            csrcs: &[],
            extension: p.extension.map(Into::into),
        };
        if header.append_to(buf).is_err() {
            out.abandon(start);
            continue;
        }
        let payload = p.payload;
        if wanted == p.refs.len() && p.complete {
            buf.extend_from_slice(payload);
        } else {
            for (r, _) in p.refs.iter().zip(&scratch.mask).filter(|(_, w)| **w) {
                buf.extend_from_slice(r.bytes(payload));
            }
        }
        out.commit(*member, PacketClass::Rtp, start);
        if sub.interest.prediction.is_some() {
            remember_sent(sub, ssrc, p, scratch, now);
        }
        if !sub.paced() && !sub.pacing.pending.is_empty() {
            // A snapshot in progress need not send again what just went live.
            for (r, _) in p.refs.iter().zip(&scratch.mask).filter(|(_, w)| **w) {
                if let Some(id) = r.id {
                    sub.pacing.pending.remove(&(ssrc, id));
                }
            }
            if sub.pacing.pending.is_empty() && sub.pacing.snapshot_since.is_some() {
                // Its snapshot is complete: the core's drain records how long it took.
                scratch.to_drain.push(*member);
            }
        }
        if !scratch.entered.is_empty()
            && queue_followers(sub, ssrc, stream, p, &scratch.entered, now)
        {
            scratch.to_drain.push(*member);
        }
    }
    scratch.audience = audience;
    next_due
}

/// The subscribers a packet may concern: those registered everywhere, and those whose
/// area covers a cell one of its objects is in — or every member when an object cannot
/// be placed on the grid. Reuses the scratch buffers (returned to them by the caller).
fn audience(
    room: &Room,
    stream: &Stream,
    refs: &[ObjectRef],
    scratch: &mut Scratch,
) -> Vec<SessionId> {
    let mut audience = std::mem::take(&mut scratch.audience);
    audience.clear();
    scratch.cells.clear();
    for r in refs {
        let cell = relevance::locate(stream, r.id, r.position, r.parent)
            .and_then(|(_, p)| grid::cell_of(p));
        match cell {
            Some(c) => scratch.cells.push(c),
            None => {
                audience.extend_from_slice(&room.members);
                return audience;
            }
        }
    }
    scratch.cells.extend_from_slice(&scratch.moved_from);
    scratch.cells.sort_unstable();
    scratch.cells.dedup();
    audience.extend_from_slice(&room.everywhere);
    for c in &scratch.cells {
        audience.extend_from_slice(room.subscribers.get(*c));
    }
    audience.sort_unstable();
    audience.dedup();
    audience
}

/// Applies a paced subscriber's rate tiers and bandwidth cap to the packet's wanted
/// objects: what may not go now is deferred (coalesced). Returns the earliest due time.
fn pace(
    sub: &mut Session,
    ssrc: u32,
    p: &Packet<'_, '_>,
    scratch: &mut Scratch,
    now: Instant,
) -> Option<Instant> {
    let pacing = &mut sub.pacing;
    let mut next: Option<Instant> = None;
    let mut bytes = 0;
    for (i, r) in p.refs.iter().enumerate() {
        if scratch.mask.get(i) != Some(&true) {
            continue;
        }
        // Objects without an objectID have no rate state; they still cost bandwidth.
        let Some(id) = r.id else {
            bytes += r.end - r.start;
            continue;
        };
        let key = (ssrc, id);
        let distance = scratch.dist.get(i).copied().unwrap_or(0.0);
        let wait = pacing::min_interval(&sub.interest.rates, distance)
            .and_then(|iv| pacing.last_sent.get(&key).map(|t| *t + iv))
            .filter(|due| *due > now);
        if let Some(due) = wait {
            scratch.paced.rate_tier += 1;
            scratch.paced.coalesced += u64::from(pacing.defer(key, now, due));
            next = next.into_iter().chain([due]).min();
            if let Some(m) = scratch.mask.get_mut(i) {
                *m = false;
            }
        } else {
            bytes += r.end - r.start;
        }
    }
    let fits = bytes == 0
        || pacing
            .bucket
            .as_mut()
            .is_none_or(|b| b.take(bytes + RTP_HEADER, now));
    for (i, r) in p.refs.iter().enumerate() {
        if scratch.mask.get(i) != Some(&true) {
            continue;
        }
        match (fits, r.id) {
            (true, Some(id)) => {
                pacing.pending.remove(&(ssrc, id));
                pacing.last_sent.insert((ssrc, id), now);
            }
            (true, None) => {}
            (false, id) => {
                // Cached objects wait, coalesced; objects without an objectID have no
                // cached state to send later and are dropped.
                if let Some(id) = id {
                    scratch.paced.cap_deferred += 1;
                    scratch.paced.coalesced += u64::from(pacing.defer((ssrc, id), now, now));
                    next = Some(now);
                } else {
                    scratch.paced.cap_dropped += 1;
                }
                if let Some(m) = scratch.mask.get_mut(i) {
                    *m = false;
                }
            }
        }
    }
    next
}

/// Drops from the mask the objects whose new state the subscriber can already extrapolate
/// from what it last received.
fn gate(sub: &mut Session, ssrc: u32, p: &Packet<'_, '_>, scratch: &mut Scratch, now: Instant) {
    let Some(g) = sub.interest.prediction.as_ref() else {
        return;
    };
    scratch.motion.clear();
    for (i, r) in p.refs.iter().enumerate() {
        let m = motion(r.bytes(p.payload), r.kind, p.dialect);
        scratch.motion.push(m);
        let (Some(true), Some(id), Some(m)) = (scratch.mask.get(i).copied(), r.id, m) else {
            continue;
        };
        let Some((last, at)) = sub.predicted.get(&(ssrc, id)) else {
            continue;
        };
        let dt = now.saturating_duration_since(*at).as_secs_f32();
        let distance = scratch.dist.get(i).copied().unwrap_or(0.0);
        if g.predictable(last, &m, dt, distance)
            && let Some(w) = scratch.mask.get_mut(i)
        {
            *w = false;
        }
    }
}

/// Records the motion of what was just sent, the baseline of the next predictions.
fn remember_sent(
    sub: &mut Session,
    ssrc: u32,
    p: &Packet<'_, '_>,
    scratch: &Scratch,
    now: Instant,
) {
    for ((r, sent), m) in p.refs.iter().zip(&scratch.mask).zip(&scratch.motion) {
        if let (true, Some(id), Some(m)) = (*sent, r.id, m) {
            sub.predicted.insert((ssrc, id), (*m, now));
        }
    }
}

/// RTP header bytes, charged against a bandwidth cap with the payload.
pub const RTP_HEADER: usize = 12;

/// Sends a paced subscriber's due pending updates, highest priority first, while its
/// budget lasts; each is read from the store, so it carries the newest state. Returns
/// when it next has something due (or budget for what waits).
pub fn drain_pending(
    room: &Room,
    sub: &mut Session,
    out: &mut Outbox,
    scratch: &mut DrainScratch,
    now: Instant,
    budget: usize,
) -> Option<Instant> {
    let DrainScratch { due, gone, chosen } = scratch;
    collect_due(room, sub, now, due, gone);
    for key in gone.drain(..) {
        sub.pacing.pending.remove(&key);
    }
    due.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
    chosen.clear();
    let mut blocked = None;
    for (rank, &(_, key, bytes)) in due.iter().enumerate() {
        let cost = bytes + RTP_HEADER;
        let b = sub.pacing.budget();
        if !b.take(cost, now) {
            blocked = Some(b.ready_at(cost));
            break;
        }
        sub.pacing.pending.remove(&key);
        sub.pacing.last_sent.insert(key, now);
        chosen.push((key.0, rank, key.1));
    }
    // By stream, each stream's objects in priority order.
    chosen.sort_unstable();
    for group in chosen.chunk_by(|a, b| a.0 == b.0) {
        let ssrc = group[0].0;
        let Some(stream) = room.streams.get(&ssrc) else {
            continue;
        };
        let Session {
            id, subs, resume, ..
        } = sub;
        let state = subscription(subs, resume, ssrc, stream.last_seq);
        let entries = group
            .iter()
            .filter_map(|&(_, _, i)| stream.store.get(i).map(|e| (i, e)));
        pack_entries(out, *id, state, ssrc, stream, budget, entries, |_, _| true);
    }
    blocked
        .into_iter()
        .chain(sub.pacing.next_due().filter(|d| *d > now))
        .min()
}

/// The subscriber's pending updates due at `now` into `due`, with their priority (kind,
/// distance and time waited); those whose object is gone or left the area into `gone`.
fn collect_due(
    room: &Room,
    sub: &mut Session,
    now: Instant,
    due: &mut Vec<(f32, (u32, u64), usize)>,
    gone: &mut Vec<(u32, u64)>,
) {
    due.clear();
    gone.clear();
    let center = relevance::center(room, sub);
    for (key, pend) in &sub.pacing.pending {
        if pend.due > now {
            continue;
        }
        let Some((stream, e)) = room
            .streams
            .get(&key.0)
            .and_then(|s| s.store.get(key.1).map(|e| (s, e)))
        else {
            gone.push(*key);
            continue;
        };
        let located = relevance::locate(stream, Some(key.1), e.position(), e.parent());
        let distance = match (located, center) {
            (Some((_, pos)), Some(c)) => dist2(pos, c).sqrt(),
            _ => 0.0,
        };
        if let (Some(area), Some((k, pos))) = (sub.interest.area.as_ref(), located)
            && !relevance::evaluate(&mut sub.inside, area, center, key.0, k, pos).0
        {
            gone.push(*key);
            continue;
        }
        let waited = now.saturating_duration_since(pend.since).as_secs_f32() + 1e-3;
        due.push((
            pacing::weight(e.kind, distance) * waited,
            *key,
            e.bytes.len(),
        ));
    }
}

/// Fills the scratch mask: which of the packet's objects this subscriber gets.
fn select(
    sub: &mut Session,
    center: Option<[f32; 3]>,
    stream: &Stream,
    ssrc: u32,
    p: &Packet<'_, '_>,
    scratch: &mut Scratch,
) {
    scratch.mask.clear();
    scratch.entered.clear();
    scratch.dist.clear();
    for r in p.refs {
        let located = relevance::locate(stream, r.id, r.position, r.parent);
        let distance = match (located, center) {
            (Some((_, pos)), Some(c)) => dist2(pos, c).sqrt(),
            _ => 0.0,
        };
        scratch.dist.push(distance);
        let mut wanted = admits(&sub.interest, sub.dialect, p.dialect, r);
        if wanted && let Some(area) = &sub.interest.area {
            wanted = match located {
                None => true,
                Some((key, pos)) => {
                    let (inside, entered) =
                        relevance::evaluate(&mut sub.inside, area, center, ssrc, key, pos);
                    if let (true, Some(k)) = (entered, key) {
                        scratch.entered.push(k);
                    }
                    inside
                }
            };
        }
        // A link's peer wants at full rate only what its own subscribers look at; the
        // rest reaches it with the link's refresh.
        if wanted && let (Some(union), Some((_, pos))) = (&sub.union, located) {
            wanted = union.contains(pos);
        }
        scratch.mask.push(wanted);
    }
}

/// Objects that follow an object which just entered the area (its children, position-less
/// objects following the stream's avatar) and were not in the packet: queued as pending
/// updates from the store, so that everything entering arrives in full, within the
/// subscriber's budget. Returns whether anything was queued.
fn queue_followers(
    sub: &mut Session,
    ssrc: u32,
    stream: &Stream,
    p: &Packet<'_, '_>,
    entered: &[u64],
    now: Instant,
) -> bool {
    let Session {
        interest,
        dialect,
        pacing,
        ..
    } = sub;
    let in_packet = |id: u64| p.refs.iter().any(|r| r.id == Some(id));
    let mut queued = false;
    for (eid, e) in stream.store.iter() {
        if !in_packet(eid)
            && follows(stream, eid, e, entered)
            && admits_entry(interest, *dialect, p.dialect, e)
        {
            pacing.defer((ssrc, eid), now, now);
            queued = true;
        }
    }
    queued
}

/// After a subscriber's own avatar moved: objects now inside its area that it has not got
/// are queued from the store at once (with the objects that follow them) for the pacer;
/// objects now beyond the exit size leave. Only the grid cells around the area are
/// visited.
pub fn rescan_area(
    room: &mut Room,
    sessions: &mut HashMap<SessionId, Session>,
    who: SessionId,
    now: Instant,
) {
    let Some(sub) = sessions.get(&who) else {
        return;
    };
    let Some(area) = sub.interest.area.as_ref().filter(|a| a.center.is_none()) else {
        return;
    };
    let Some(center) = relevance::center(room, sub) else {
        return;
    };
    // A rescan costs a visit of the area's cells: only after the avatar moved by a tenth
    // of the area's size (the grid placement keeps that much margin).
    let step = area.drift_margin();
    if sub
        .last_scan
        .is_some_and(|c| dist2(c, center) < step * step)
    {
        return;
    }
    let candidates = candidates_near(room, center, area.reach());
    let owners: HashMap<u32, Dialect> = room
        .streams
        .iter()
        .map(|(ssrc, s)| (*ssrc, s.dialect))
        .collect();
    let Some(sub) = sessions.get_mut(&who) else {
        return;
    };
    for (ssrc, ids) in candidates {
        let Some(stream) = room.streams.get(&ssrc) else {
            continue;
        };
        if !sub.wants_stream(ssrc, stream) {
            continue;
        }
        let from = owners.get(&ssrc).copied().unwrap_or_default();
        let Session {
            interest,
            dialect,
            inside,
            pacing,
            ..
        } = &mut *sub;
        let mut entered = Vec::new();
        for &eid in &ids {
            let Some(e) = stream.store.get(eid) else {
                continue;
            };
            if entry_relevance(
                inside,
                interest,
                *dialect,
                from,
                Some(center),
                stream,
                ssrc,
                eid,
                e,
            )
            .is_some_and(|r| r.1)
            {
                entered.push(eid);
            }
        }
        if entered.is_empty() {
            continue;
        }
        // The entered objects, and the objects located through them (children, objects
        // following the stream's avatar).
        for (eid, e) in stream.store.iter() {
            if entered.contains(&eid)
                || (follows(stream, eid, e, &entered) && admits_entry(interest, *dialect, from, e))
            {
                pacing.defer((ssrc, eid), now, now);
            }
        }
    }
    if let Some(sub) = sessions.get_mut(&who) {
        sub.last_scan = Some(center);
        relevance::place(room, sub, Some(center));
    }
}

/// Objects with a position in the cells within `reach` of `center`, by stream; every
/// object of the room when the area covers too many cells.
fn candidates_near(room: &Room, center: [f32; 3], reach: [f32; 3]) -> Vec<(u32, Vec<u64>)> {
    let mut by_stream: HashMap<u32, Vec<u64>> = HashMap::new();
    match grid::cells_covering(center, reach) {
        Some(cells) => {
            for cell in cells {
                for (ssrc, id) in room.objects.get(cell) {
                    by_stream.entry(*ssrc).or_default().push(*id);
                }
            }
        }
        None => {
            for (ssrc, s) in &room.streams {
                by_stream.insert(*ssrc, s.store.iter().map(|(id, _)| id).collect());
            }
        }
    }
    let mut v: Vec<(u32, Vec<u64>)> = by_stream.into_iter().collect();
    v.sort_unstable_by_key(|(ssrc, _)| *ssrc);
    v
}

/// Whether an entry is located through one of the `entered` objects (a child of one, or a
/// position-less object following its stream's avatar).
fn follows(stream: &Stream, id: u64, e: &Entry, entered: &[u64]) -> bool {
    relevance::locate(stream, Some(id), e.position(), e.parent())
        .is_some_and(|(k, _)| k.is_some_and(|k| k != id && entered.contains(&k)))
}

fn dist2(a: [f32; 3], b: [f32; 3]) -> f32 {
    (0..3).map(|i| (a[i] - b[i]) * (a[i] - b[i])).sum()
}

/// Packs the stream's cached entries that `keep` selects into packets of at most `budget`
/// payload bytes (an entry larger than that goes alone), numbered as injected packets.
/// Returns the number of packets.
#[allow(clippy::too_many_arguments)] // destination, stream, candidates and filter
pub fn pack_entries<'s>(
    out: &mut Outbox,
    to: SessionId,
    state: &mut Subscription,
    ssrc: u32,
    stream: &Stream,
    budget: usize,
    entries: impl IntoIterator<Item = (u64, &'s Entry)>,
    mut keep: impl FnMut(u64, &Entry) -> bool,
) -> u64 {
    let mut packets = 0;
    let mut open: Option<(usize, usize)> = None; // (start, payload bytes used)
    for (id, e) in entries {
        if !keep(id, e) {
            continue;
        }
        if let Some((start, used)) = open
            && used + e.bytes.len() > budget
        {
            out.commit(to, PacketClass::Rtp, start);
            open = None;
        }
        let (start, used) = match open {
            Some(o) => o,
            None => {
                let rw = state.rewriter.inject(stream.last_ts);
                let header = RtpHeader {
                    marker: false,
                    payload_type: stream.payload_type,
                    sequence_number: rw.sequence_number,
                    timestamp: rw.timestamp,
                    ssrc,
                    csrcs: &[],
                    extension: None,
                };
                let Some((_, start)) = out.begin_rtp(&header) else {
                    continue;
                };
                packets += 1;
                (start, 0)
            }
        };
        out.extend(&e.bytes);
        open = Some((start, used + e.bytes.len()));
    }
    if let Some((start, _)) = open {
        out.commit(to, PacketClass::Rtp, start);
    }
    packets
}

/// Whether a cached entry goes to a subscriber, as (inside its area, entered just now);
/// `None` when its type or dialect is not wanted. Evaluating records area membership. An
/// entry the area cannot locate is always inside and never "enters" (its own updates
/// bring it).
#[allow(clippy::too_many_arguments)] // one subscriber's view and one entry, kept flat for the borrow checker
pub fn entry_relevance(
    inside: &mut std::collections::HashSet<(u32, u64)>,
    interest: &Interest,
    to: Dialect,
    from: Dialect,
    center: Option<[f32; 3]>,
    stream: &Stream,
    ssrc: u32,
    id: u64,
    e: &Entry,
) -> Option<(bool, bool)> {
    if !admits_entry(interest, to, from, e) {
        return None;
    }
    match (
        interest.area.as_ref(),
        relevance::locate(stream, Some(id), e.position(), e.parent()),
    ) {
        (Some(area), Some((key, pos))) => {
            Some(relevance::evaluate(inside, area, center, ssrc, key, pos))
        }
        _ => Some((true, false)),
    }
}

/// Whether a cached entry goes to a subscriber (type filter and dialect).
pub fn admits_entry(interest: &Interest, to: Dialect, from: Dialect, e: &Entry) -> bool {
    interest.admits_object(e.tag, e.kind) && portable(e.tag, e.kind, None, e.bytes.len(), from, to)
}
