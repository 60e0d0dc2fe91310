//! Forwarding: one accepted packet to every subscriber with only the objects its interest
//! admits, and relay-made packets of cached state (snapshots, objects entering an area).

use super::api::SessionId;
use super::core::admits;
use super::interest::Interest;
use super::outbox::Outbox;
use super::relevance;
use super::room::{Room, Stream};
use super::session::{Session, Subscription};
use super::store::Entry;
use crate::rtp::{PacketClass, RtpHeader, RtpPacket};
use crate::wire::{Dialect, ObjectRef};
use std::collections::HashMap;

/// Scratch buffers reused across packets, so forwarding allocates nothing per packet.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Per object of the packet: does the current subscriber get it.
    mask: Vec<bool>,
    /// ObjectIDs that entered the current subscriber's area with this packet.
    entered: Vec<u64>,
}

/// What is being forwarded.
pub struct Packet<'a, 'p> {
    /// The parsed source packet.
    pub rtp: &'a RtpPacket<'p>,
    /// Its objects.
    pub refs: &'a [ObjectRef],
    /// Its sender.
    pub from: SessionId,
    /// The sender's dialect.
    pub dialect: Dialect,
}

/// Sends `p` to every other subscriber of the room.
pub fn fan_out(
    room: &Room,
    sessions: &mut HashMap<SessionId, Session>,
    out: &mut Outbox,
    scratch: &mut Scratch,
    p: &Packet<'_, '_>,
    budget: usize,
) {
    let (ssrc, seq) = (p.rtp.ssrc(), p.rtp.sequence_number());
    let Some(stream) = room.streams.get(&ssrc) else {
        return;
    };
    for member in &room.members {
        let Some(sub) = sessions.get_mut(member) else {
            continue;
        };
        if !sub.subscribe || !sub.interest.admits_stream(ssrc, *member == p.from) {
            continue;
        }
        let center = relevance::center(room, sub);
        select(sub, center, stream, ssrc, p, scratch);
        let wanted = scratch.mask.iter().filter(|w| **w).count();
        let state = sub
            .subs
            .entry(ssrc)
            .or_insert_with(|| Subscription::new(seq));
        if wanted == 0 {
            state.rewriter.filter(seq);
            continue;
        }
        let Some(rw) = state.rewriter.forward(seq, p.rtp.timestamp()) else {
            continue;
        };
        state.record(rw.sequence_number, seq);
        let (buf, start) = out.begin();
        let header = RtpHeader {
            marker: p.rtp.marker(),
            payload_type: p.rtp.payload_type(),
            sequence_number: rw.sequence_number,
            timestamp: rw.timestamp,
            ssrc,
            csrcs: &[],
            extension: p.rtp.extension().map(Into::into),
        };
        if header.append_to(buf).is_err() {
            out.abandon(start);
            continue;
        }
        let payload = p.rtp.payload();
        if wanted == p.refs.len() {
            buf.extend_from_slice(payload);
        } else {
            for (r, _) in p.refs.iter().zip(&scratch.mask).filter(|(_, w)| **w) {
                buf.extend_from_slice(r.bytes(payload));
            }
        }
        out.commit(*member, PacketClass::Rtp, start);
        if !scratch.entered.is_empty() {
            send_followers(out, sub, ssrc, stream, p, &scratch.entered, budget);
        }
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
    for r in p.refs {
        let mut wanted = admits(&sub.interest, sub.dialect, p.dialect, r);
        if wanted && let Some(area) = &sub.interest.area {
            wanted = match relevance::locate(stream, r.id, r.position, r.parent) {
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
        scratch.mask.push(wanted);
    }
}

/// Objects that follow an object which just entered the area (its children, position-less
/// objects following the stream's avatar) and were not in the packet: sent from the store
/// at once, so that everything entering arrives in full.
fn send_followers(
    out: &mut Outbox,
    sub: &mut Session,
    ssrc: u32,
    stream: &Stream,
    p: &Packet<'_, '_>,
    entered: &[u64],
    budget: usize,
) {
    let Session {
        id,
        subs,
        interest,
        dialect,
        ..
    } = sub;
    let state = subs
        .entry(ssrc)
        .or_insert_with(|| Subscription::new(stream.last_seq));
    let in_packet = |id: u64| p.refs.iter().any(|r| r.id == Some(id));
    pack_entries(out, *id, state, ssrc, stream, budget, |eid, e| {
        !in_packet(eid)
            && relevance::locate(stream, Some(eid), e.position, e.parent)
                .is_some_and(|(k, _)| k.is_some_and(|k| entered.contains(&k)))
            && admits_entry(interest, *dialect, p.dialect, e)
    });
}

/// After a subscriber's own avatar moved: objects now inside its area that it has not got
/// are sent from the store at once; objects now beyond the exit size leave.
pub fn rescan_area(
    room: &Room,
    sessions: &mut HashMap<SessionId, Session>,
    out: &mut Outbox,
    who: SessionId,
    budget: usize,
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
    // Rescans cost a pass over the room's objects: only when the avatar moved by a tenth
    // of the area's size.
    let step = area
        .radius
        .or(area.half_extents.map(|h| h[0].min(h[1]).min(h[2])))
        .unwrap_or(0.0)
        * 0.1;
    if sub
        .last_scan
        .is_some_and(|c| dist2(c, center) < step * step)
    {
        return;
    }
    let mut ssrcs: Vec<u32> = room
        .streams
        .keys()
        .copied()
        .filter(|s| sub.interest.admits_stream(*s, *s == sub.ssrc))
        .collect();
    ssrcs.sort_unstable();
    let owner_dialect = |sessions: &HashMap<SessionId, Session>, s: &Stream| {
        sessions
            .get(&s.owner)
            .map(|o| o.dialect)
            .unwrap_or_default()
    };
    for ssrc in ssrcs {
        let Some(stream) = room.streams.get(&ssrc) else {
            continue;
        };
        let from = owner_dialect(sessions, stream);
        let Some(sub) = sessions.get_mut(&who) else {
            return;
        };
        let Session {
            id,
            subs,
            interest,
            dialect,
            inside,
            ..
        } = sub;
        let Some(area) = interest.area.as_ref() else {
            return;
        };
        let state = subs
            .entry(ssrc)
            .or_insert_with(|| Subscription::new(stream.last_seq));
        pack_entries(out, *id, state, ssrc, stream, budget, |eid, e| {
            if !admits_entry(interest, *dialect, from, e) {
                return false;
            }
            match relevance::locate(stream, Some(eid), e.position, e.parent) {
                Some((key, pos)) => {
                    relevance::evaluate(inside, area, Some(center), ssrc, key, pos).1
                }
                None => false,
            }
        });
    }
    if let Some(sub) = sessions.get_mut(&who) {
        sub.last_scan = Some(center);
    }
}

fn dist2(a: [f32; 3], b: [f32; 3]) -> f32 {
    (0..3).map(|i| (a[i] - b[i]) * (a[i] - b[i])).sum()
}

/// Packs the stream's cached entries that `keep` selects into packets of at most `budget`
/// payload bytes (an entry larger than that goes alone), numbered as injected packets.
/// Returns the number of packets.
pub fn pack_entries(
    out: &mut Outbox,
    to: SessionId,
    state: &mut Subscription,
    ssrc: u32,
    stream: &Stream,
    budget: usize,
    mut keep: impl FnMut(u64, &Entry) -> bool,
) -> u64 {
    let mut packets = 0;
    let mut open: Option<(usize, usize)> = None; // (start, payload bytes used)
    for (id, e) in stream.store.iter() {
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
                let (buf, start) = out.begin();
                let header = RtpHeader {
                    marker: false,
                    payload_type: stream.payload_type,
                    sequence_number: rw.sequence_number,
                    timestamp: rw.timestamp,
                    ssrc,
                    csrcs: &[],
                    extension: None,
                };
                if header.append_to(buf).is_err() {
                    out.abandon(start);
                    continue;
                }
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

/// Whether a cached entry goes to a subscriber (type filter and dialect).
pub fn admits_entry(interest: &Interest, to: Dialect, from: Dialect, e: &Entry) -> bool {
    interest.admits_object(e.tag, e.kind)
        && super::core::portable(e.tag, e.kind, None, e.bytes.len(), from, to)
}
