//! RTP from sessions into their room: the session's right to send what it sent (its own
//! streams, or containers from a link, [`super::Sends`]), the stream's order, the
//! latest-state store and the object grid, then the fan-out to subscribers in both
//! delivery modes. A container's objects become the stream of the SSRC it names, owned
//! by the session that carried it, exactly as if that sender had sent them itself.

use super::aggregate::{Aggregator, Tx};
use super::api::{Event, SessionId};
use super::forward::{self, Packet};
use super::grid::{self, Cell, Grid};
use super::ownership::lost_just_now;
use super::record;
use super::room::{Stream, held_elsewhere};
use super::session::Session;
use super::state::State;
use crate::rtp::RtpPacket;
use crate::rtp::packet::HeaderExtension;
use crate::wire::{self, Dialect, ObjectKind, ObjectRef, container};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a stream one link carries must have been quiet before another link of its
/// room may take it over. Its sender moved to another node (it resumed there after its
/// node froze, was cut off or died), whose link now carries it, while the old node's link
/// session, still up or not yet found lost, holds its SSRC: without a handover the room's
/// members on this node would not see that sender until the old link's session ends. A
/// stream two links carry at once (a thawed node's last queued packets of a sender that
/// left it) stays with the link that carried it within this time. A sender at the lowest
/// rate the relay serves well (10 Hz) leaves gaps shorter than this; and a client resumes
/// only after its own silence (300 ms at least), so the old link is quiet by then.
pub const LINK_TAKEOVER_QUIET: Duration = Duration::from_millis(250);

/// The reused scratch of the RTP path (no allocation per packet).
#[derive(Debug, Default)]
pub(super) struct Ingest {
    /// The objects of the packet being handled.
    refs: Vec<ObjectRef>,
    /// The objects of the container being handled.
    inner: Vec<ObjectRef>,
    /// The objects of the packet its sender holds of other streams.
    held: Held,
}

/// Scratch of the objects a sender holds of other streams ([`super::ownership`]).
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Each with the stream it belongs to.
    refs: Vec<(u32, ObjectRef)>,
    /// One stream's of them, as a packet's objects.
    group: Vec<ObjectRef>,
}

/// One stream's packet: the RTP header fields it is forwarded with and its payload.
#[derive(Clone, Copy)]
struct Carried<'p> {
    ssrc: u32,
    /// Whether a link's container carried it.
    carried: bool,
    seq: u16,
    timestamp: u32,
    marker: bool,
    payload_type: u8,
    extension: Option<HeaderExtension<'p>>,
    payload: &'p [u8],
    /// The sender's wire dialect.
    dialect: Dialect,
}

impl<'p> Carried<'p> {
    fn of(pkt: &RtpPacket<'p>, dialect: Dialect) -> Self {
        Self {
            ssrc: pkt.ssrc(),
            carried: false,
            seq: pkt.sequence_number(),
            timestamp: pkt.timestamp(),
            marker: pkt.marker(),
            payload_type: pkt.payload_type(),
            extension: pkt.extension(),
            payload: pkt.payload(),
            dialect,
        }
    }
}

impl Ingest {
    /// Handles one plaintext RTP packet from `from`; `Err` is the reason it was dropped
    /// whole. A refused container of a link's packet is counted on its own; the others
    /// go on.
    pub fn rtp(
        &mut self,
        st: &mut State,
        agg: &mut Aggregator,
        now: Instant,
        from: SessionId,
        packet: &[u8],
    ) -> Result<(), &'static str> {
        let sends_as = st.admit(now, from, packet.len())?.peer_ssrc;
        let pkt = RtpPacket::parse(packet).map_err(|e| e.reason())?;
        if st.owner_of(pkt.ssrc()) != Some(from) && sends_as != Some(pkt.ssrc()) {
            return Err("ssrc_mismatch");
        }
        let s = st.sessions.get_mut(&from).ok_or("unknown_session")?;
        if !s.publish {
            return Err("not_publisher");
        }
        let replay = s.replay;
        if s.muted {
            return Err("muted");
        }
        s.rtcp.received(packet.len());
        let (dialect, sends) = (s.dialect, s.sends);
        self.refs.clear();
        for r in wire::objects(pkt.payload(), dialect) {
            self.refs.push(r.map_err(|e| e.reason())?);
        }
        let containers = self
            .refs
            .iter()
            .filter(|r| r.kind == ObjectKind::Container)
            .count();
        let carried = Carried::of(&pkt, dialect);
        if containers == 0 {
            if !sends.streams() {
                return Err("not_container");
            }
            return stream(st, agg, now, from, carried, &mut self.refs, &mut self.held);
        }
        // Containers are the relay's own framing: towards subscribers in aggregated
        // delivery, and a link's towards its peer. A client may not send them.
        if !sends.containers() {
            return Err("container_from_sender");
        }
        if containers != self.refs.len() {
            return Err("not_container");
        }
        // A replay's containers carry their own stream's numbering in the outer header:
        // each stream's order is checked as any sender's is.
        if !replay {
            link_order(st, from, carried.seq)?;
        }
        for i in 0..self.refs.len() {
            let tlv = self.refs[i].bytes(carried.payload);
            let outcome = container::split(tlv)
                .ok_or("bad_container")
                .and_then(|(ssrc, body)| {
                    let inner = Carried {
                        ssrc,
                        carried: !replay,
                        payload: body,
                        ..carried
                    };
                    self.container(st, agg, now, from, inner)
                });
            if let Err(reason) = outcome {
                st.stats.drop(reason);
            }
        }
        Ok(())
    }

    /// One container of a link's packet: its sender's stream, owned by the link.
    fn container(
        &mut self,
        st: &mut State,
        agg: &mut Aggregator,
        now: Instant,
        from: SessionId,
        p: Carried<'_>,
    ) -> Result<(), &'static str> {
        claim(st, now, from, p.ssrc)?;
        self.inner.clear();
        for r in wire::objects(p.payload, p.dialect) {
            self.inner.push(r.map_err(|e| e.reason())?);
        }
        stream(st, agg, now, from, p, &mut self.inner, &mut self.held)
    }
}

/// A link's packets must come in order: a late or repeated one would apply stale state
/// over newer (latest value wins), so it is dropped whole (`late`, `duplicate`).
fn link_order(st: &mut State, from: SessionId, seq: u16) -> Result<(), &'static str> {
    let s = st.sessions.get_mut(&from).ok_or("unknown_session")?;
    if let Some(last) = s.link_seq {
        match seq.wrapping_sub(last) {
            0 => return Err("duplicate"),
            d if d >= 0x8000 => return Err("late"),
            _ => {}
        }
    }
    s.link_seq = Some(seq);
    Ok(())
}

/// Makes `ssrc` a stream of `from` when no one owns it, or when another link of the same
/// room carried it last longer ago than [`LINK_TAKEOVER_QUIET`]: a link learns its
/// senders from its containers. A session owns at most as many streams as a room holds
/// sessions.
fn claim(st: &mut State, now: Instant, from: SessionId, ssrc: u32) -> Result<(), &'static str> {
    match st.owner_of(ssrc) {
        Some(owner) if owner == from => return Ok(()),
        Some(owner) if moved_between_links(st, now, (owner, from), ssrc) => {
            hand_over(st, owner, from, ssrc)?;
            return Ok(());
        }
        Some(_) => return Err("ssrc_mismatch"),
        None if !st.ssrc_free(ssrc) => return Err("ssrc_mismatch"),
        None => {}
    }
    let cap = st.cfg.max_sessions_per_room;
    let s = st.sessions.get_mut(&from).ok_or("unknown_session")?;
    if s.counted_streams() >= cap {
        return Err("too_many_streams");
    }
    s.streams.push(ssrc);
    st.by_ssrc.insert(ssrc, from);
    Ok(())
}

/// Whether stream `ssrc`, which link session `old` carries, has been quiet for
/// [`LINK_TAKEOVER_QUIET`] while link session `new`, of the same room, carries it now.
fn moved_between_links(
    st: &State,
    now: Instant,
    (old, new): (SessionId, SessionId),
    ssrc: u32,
) -> bool {
    let (Some(o), Some(n)) = (st.sessions.get(&old), st.sessions.get(&new)) else {
        return false;
    };
    if !o.sends.containers() || o.room != n.room {
        return false;
    }
    st.rooms
        .get(&o.room)
        .and_then(|r| r.streams.get(&ssrc))
        .is_some_and(|s| {
            s.carried && now.saturating_duration_since(s.last_packet) >= LINK_TAKEOVER_QUIET
        })
}

/// Moves carried stream `ssrc` from link session `old` to link session `new`: its
/// objects stay, later packets come from `new`.
fn hand_over(
    st: &mut State,
    old: SessionId,
    new: SessionId,
    ssrc: u32,
) -> Result<(), &'static str> {
    let cap = st.cfg.max_sessions_per_room;
    let n = st.sessions.get_mut(&new).ok_or("unknown_session")?;
    if n.counted_streams() >= cap {
        return Err("too_many_streams");
    }
    n.streams.push(ssrc);
    let room = n.room.clone();
    if let Some(o) = st.sessions.get_mut(&old) {
        o.streams.retain(|s| *s != ssrc);
    }
    st.by_ssrc.insert(ssrc, new);
    if let Some(stream) = st
        .rooms
        .get_mut(&room)
        .and_then(|r| r.streams.get_mut(&ssrc))
    {
        stream.owner = new;
    }
    Ok(())
}

/// One stream's packet from `from`, whose objects are `refs`: ordered, stored, indexed
/// and fanned out. Objects the sender holds from other streams (`held`, scratch) go on
/// as updates of those streams; objects of this stream that another session holds are
/// not its publisher's to update and are dropped (`not_owner`).
fn stream(
    st: &mut State,
    agg: &mut Aggregator,
    now: Instant,
    from: SessionId,
    p: Carried<'_>,
    refs: &mut Vec<ObjectRef>,
    held: &mut Held,
) -> Result<(), &'static str> {
    let sender = st.sessions.get(&from).ok_or("unknown_session")?;
    let name = sender.room.clone();
    let mut not_owner = if p.carried {
        held.refs.clear();
        0
    } else {
        take_foreign(sender, refs, &mut held.refs, now)
    };
    // The payload is forwarded whole only when every object in it is this stream's.
    let whole = held.refs.is_empty() && not_owner == 0;
    let room = st.rooms.get_mut(&name).ok_or("unknown_session")?;
    let ts = p.timestamp;
    let (stats, events) = (&mut st.stats, &mut st.stream_events);
    let stream = room.streams.entry(p.ssrc).or_insert_with(|| {
        stats.streams += 1;
        if !p.carried {
            events.push_back(Event::StreamStarted {
                room: name.clone(),
                session: from,
                ssrc: p.ssrc,
            });
        }
        let mut stream = Stream::new(from, p.seq, ts, p.payload_type, now);
        stream.carried = p.carried;
        stream.replayed = sender.replay;
        stream.dialect = p.dialect;
        if sender.room_ssrc == Some(p.ssrc) {
            stream.room_owned = true;
            stream.publisher = Some(sender.identity.as_str().into());
        }
        stream
    });
    // A carried stream is numbered here, one by one: the link's own numbering counts
    // every sender's containers, and its gaps are not this sender's loss. The link's
    // order was checked for the whole packet.
    let seq = if p.carried {
        stream.last_seq.wrapping_add(1)
    } else {
        p.seq
    };
    if std::mem::take(&mut stream.renumbered) {
        // A room stream taken up again: its new session's numbering starts here.
        stream.last_seq = seq.wrapping_sub(1);
    }
    stream.reception.packet(seq, ts, now);
    let late = match seq.wrapping_sub(stream.last_seq) {
        0 => return Err("duplicate"),
        d => d >= 0x8000,
    };
    if late {
        // Reordered: keep the objects no newer packet has refreshed; stale game state is
        // never applied over newer state. Objects without an objectID are never cached,
        // so they cannot regress anything and go through. What it held elsewhere is as
        // stale.
        refs.retain(|r| r.id.is_none_or(|id| stream.store.is_news(id, seq)));
        held.refs.clear();
        if refs.is_empty() {
            return Err("late");
        }
    }
    let all = refs.len();
    if !room.holds.is_empty() {
        refs.retain(|r| {
            r.id.is_none_or(|id| !held_elsewhere(&room.holds, p.ssrc, id))
        });
        not_owner += all - refs.len();
    }
    if not_owner > 0 {
        // Counted once per packet, as every drop reason is.
        st.stats.drop("not_owner");
    }
    let new = stream.store.count_new(refs);
    if stream.store.len() + new > st.cfg.max_objects_per_stream {
        return Err("too_many_objects");
    }
    let room_owned = stream.room_owned;
    if room_owned && new > 0 && room.room_objects() + new > st.cfg.max_room_objects {
        return Err("room_objects_full");
    }
    let stream = room.streams.get_mut(&p.ssrc).ok_or("unknown_session")?;
    let before = stream.store.len();
    stream.store.apply(p.payload, refs, seq, now);
    st.scratch.moved_from.clear();
    index_objects(
        &mut room.objects,
        stream,
        p.ssrc,
        refs,
        &mut st.scratch.moved_from,
    );
    st.stats.objects_changed(stream.store.len() - before, 0);
    stream.history.record(seq, refs);
    if !late {
        stream.last_seq = seq;
        stream.last_ts = ts;
        stream.payload_type = p.payload_type;
    }
    stream.last_packet = now;
    let packet = Packet {
        ssrc: p.ssrc,
        seq,
        timestamp: ts,
        marker: p.marker,
        payload_type: p.payload_type,
        extension: p.extension,
        payload: p.payload,
        refs,
        complete: !late && refs.len() == all && whole,
        dialect: p.dialect,
        sender: from,
        injected: false,
    };
    deliver(st, agg, &name, &packet, now);
    // A subscriber whose area follows its own avatar may have walked up to objects.
    let follows = st
        .sessions
        .get(&from)
        .is_some_and(|s| s.interest.area.as_ref().is_some_and(|a| a.center.is_none()));
    if follows && let Some(room) = st.rooms.get_mut(&name) {
        forward::rescan_area(room, &mut st.sessions, from, now);
        st.drain_session(now, from);
    }
    if !held.refs.is_empty() {
        held_updates(st, agg, now, (from, &name), p, held);
    }
    Ok(())
}

/// Takes out of `refs` the objects of a sender's packet that are not its stream's: those
/// it lost or gave back just now are dropped (their count is returned), those it holds of
/// other streams go to `held` with their stream. Nothing to do, and no pass over `refs`,
/// for a sender that holds and lost nothing.
fn take_foreign(
    sender: &Session,
    refs: &mut Vec<ObjectRef>,
    held: &mut Vec<(u32, ObjectRef)>,
    now: Instant,
) -> usize {
    held.clear();
    let mut dropped = 0;
    if !sender.lost.is_empty() {
        let before = refs.len();
        refs.retain(|r| r.id.is_none_or(|id| !lost_just_now(sender, id, now)));
        dropped = before - refs.len();
    }
    if !sender.holds.is_empty() {
        // Its objectIDs are unique among what it holds and owns (`id_in_use`).
        let target = |r: &ObjectRef| {
            let id = r.id?;
            sender.holds.iter().find(|k| k.1 == id).map(|k| k.0)
        };
        held.extend(refs.iter().filter_map(|r| Some((target(r)?, *r))));
        refs.retain(|r| target(r).is_none());
    }
    dropped
}

/// Objects a session holds of other streams, from its packet `p` (in `held`): each
/// stream's are stored and sent on as a packet of that stream the relay made (numbered in
/// line for each subscriber, as a snapshot is).
fn held_updates(
    st: &mut State,
    agg: &mut Aggregator,
    now: Instant,
    (from, name): (SessionId, &Arc<str>),
    p: Carried<'_>,
    held: &mut Held,
) {
    held.refs.sort_by_key(|(ssrc, _)| *ssrc);
    for chunk in held.refs.chunk_by(|a, b| a.0 == b.0) {
        let Some(&(ssrc, _)) = chunk.first() else {
            continue;
        };
        held.group.clear();
        held.group.extend(chunk.iter().map(|(_, r)| *r));
        let Some(room) = st.rooms.get_mut(name) else {
            return;
        };
        let Some(stream) = room.streams.get_mut(&ssrc) else {
            continue;
        };
        let seq = stream.last_seq;
        stream.store.apply(p.payload, &held.group, seq, now);
        // Its holder's updates keep the stream alive, as its publisher's do.
        stream.last_packet = now;
        st.scratch.moved_from.clear();
        index_objects(
            &mut room.objects,
            stream,
            ssrc,
            &held.group,
            &mut st.scratch.moved_from,
        );
        let packet = Packet {
            ssrc,
            seq,
            timestamp: stream.last_ts,
            marker: false,
            payload_type: stream.payload_type,
            extension: None,
            payload: p.payload,
            refs: &held.group,
            complete: false,
            dialect: p.dialect,
            sender: from,
            injected: true,
        };
        deliver(st, agg, name, &packet, now);
    }
}

/// Fans an accepted packet out to the room's subscribers in both delivery modes, then
/// drains the paced subscribers it left something for.
fn deliver(st: &mut State, agg: &mut Aggregator, name: &Arc<str>, packet: &Packet, now: Instant) {
    let Some(room) = st.rooms.get(name) else {
        return;
    };
    if !room.recorders.is_empty() {
        record::copy(room, &mut st.out, packet);
    }
    let due = forward::fan_out(
        room,
        &mut st.sessions,
        &mut st.out,
        &mut st.scratch,
        packet,
        now,
    );
    st.pace_at = st.pace_at.into_iter().chain(due).min();
    let mut tx = Tx::new(&mut st.out, &mut st.stats, st.relay_ssrc, now);
    agg.fan_out(name, packet, &mut tx);
    st.count_paced();
    st.drain_followers(now);
}

/// Keeps the room's object grid in step with the objects' new positions, noting the
/// cells objects left.
fn index_objects(
    grid: &mut Grid<(u32, u64)>,
    stream: &mut Stream,
    ssrc: u32,
    refs: &[ObjectRef],
    moved_from: &mut Vec<Cell>,
) {
    for id in refs.iter().filter_map(|r| r.id) {
        let Some(e) = stream.store.get_mut(id) else {
            continue;
        };
        let cell = e.position().and_then(grid::cell_of);
        if cell != e.cell() {
            if let Some(old) = e.cell() {
                grid.remove(old, (ssrc, id));
                moved_from.push(old);
            }
            if let Some(new) = cell {
                grid.insert(new, (ssrc, id));
            }
            e.set_cell(cell);
        }
    }
}
