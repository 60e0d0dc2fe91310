//! The pending content of one aggregated packet: per sender, the objects waiting to go,
//! with latest-value coalescing that keeps each source packet's objects fate-shared.
//!
//! Objects arrive in *units*: the objects of one source packet that a view admits (or a
//! group of cached entries). All pending objects of one sender form one container, written
//! in arrival order, and a container is never split across packets, so a unit always
//! travels whole. When a newer unit carries an objectID that an older pending unit of the
//! same sender carried, the older copy is dropped (coalescing): the older unit's other
//! objects still go, in the same container as the newer state that replaced part of it,
//! so the receiver never holds part of a source packet without the rest (or something
//! newer). A unit that does not fit is never squeezed in by coalescing: the caller sends
//! the pending packet first, as it is (see [`Builder::size_with`]).
//!
//! Buffers are reused between packets: nothing is allocated per packet in steady state.

use crate::wire::container::{container_len, write_header};
use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;

/// "No object" in the index links.
const NONE: u32 = u32::MAX;

/// Arena bytes kept beyond the live objects before they are compacted.
const SLACK_BYTES: usize = 16 * 1024;
/// Object records kept beyond the live ones before they are compacted.
const SLACK_OBJECTS: usize = 256;

/// One object of a unit: its objectID and the range of its TLV in the unit's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The objectID, if it has one (objects without one are never coalesced).
    pub id: Option<u64>,
    /// Its bytes.
    pub range: (usize, usize),
}

/// A pending object.
#[derive(Debug, Clone, Copy)]
struct Obj {
    id: Option<u64>,
    /// Its bytes in the arena.
    start: u32,
    end: u32,
    /// The unit it came with.
    unit: u32,
    alive: bool,
    /// The previous TLV of the same objectID in the same unit (old format, new format).
    prev_same: u32,
}

impl Obj {
    fn len(&self) -> usize {
        (self.end - self.start) as usize
    }
}

/// One sender's pending container.
#[derive(Debug, Default)]
struct Group {
    ssrc: u32,
    /// Bytes of its live objects.
    body: usize,
    /// Its objects (indexes into `objs`), in arrival order.
    objs: Vec<u32>,
}

/// One container of a written payload: the sender and the byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The sender's SSRC.
    pub ssrc: u32,
    /// The container's bytes in the payload.
    pub range: Range<usize>,
}

/// The pending content of one aggregated packet.
#[derive(Debug, Default)]
pub struct Builder {
    arena: Vec<u8>,
    objs: Vec<Obj>,
    /// Sender groups; the first `active` are in use, the rest are kept for their buffers.
    groups: Vec<Group>,
    active: usize,
    group_of: HashMap<u32, usize>,
    /// Newest pending object per (sender, objectID).
    latest: HashMap<(u32, u64), u32>,
    units: u32,
    /// Payload bytes if written now.
    size: usize,
    live_bytes: usize,
    live_objs: usize,
    /// When the oldest pending object arrived.
    since: Option<Instant>,
    /// Compaction scratch: old object index to new.
    remap: Vec<u32>,
}

impl Builder {
    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The payload size if written now.
    pub fn size(&self) -> usize {
        self.size
    }

    /// When the oldest pending object arrived.
    pub fn since(&self) -> Option<Instant> {
        self.since
    }

    /// The payload size once a unit of `pieces` from `ssrc` is added, counting the
    /// objects it would supersede as gone.
    pub fn size_with(&self, ssrc: u32, pieces: &[Piece]) -> usize {
        let added: usize = pieces.iter().map(|p| p.range.1 - p.range.0).sum();
        let Some(g) = self.group_of.get(&ssrc).and_then(|g| self.groups.get(*g)) else {
            return self.size + container_len(ssrc, added);
        };
        let mut killed = 0;
        for (i, p) in pieces.iter().enumerate() {
            let Some(id) = p.id else { continue };
            if pieces[..i].iter().any(|q| q.id == Some(id)) {
                continue;
            }
            let mut at = self.latest.get(&(ssrc, id)).copied().unwrap_or(NONE);
            while let Some(o) = self.objs.get(at as usize) {
                killed += o.len();
                at = o.prev_same;
            }
        }
        let body = g.body.saturating_sub(killed) + added;
        self.size.saturating_sub(container_len(ssrc, g.body)) + container_len(ssrc, body)
    }

    /// Adds a unit: `pieces` of `bytes` from sender `ssrc`, superseding the older pending
    /// copies of their objectIDs.
    pub fn add(&mut self, now: Instant, ssrc: u32, bytes: &[u8], pieces: &[Piece]) {
        if pieces.is_empty() {
            return;
        }
        if self.size == 0 {
            self.since = Some(now);
        }
        self.units = self.units.wrapping_add(1);
        let unit = self.units;
        let g = self.group(ssrc);
        let before = container_len(ssrc, self.groups[g].body);
        let fresh = self.groups[g].objs.is_empty();
        for p in pieces {
            let Some(src) = bytes.get(p.range.0..p.range.1) else {
                continue;
            };
            let mut prev_same = NONE;
            if let Some(id) = p.id
                && let Some(&last) = self.latest.get(&(ssrc, id))
            {
                if self.objs[last as usize].unit == unit {
                    prev_same = last;
                } else {
                    self.kill_chain(g, last);
                }
            }
            let start = self.arena.len() as u32;
            self.arena.extend_from_slice(src);
            let index = self.objs.len() as u32;
            self.objs.push(Obj {
                id: p.id,
                start,
                end: self.arena.len() as u32,
                unit,
                alive: true,
                prev_same,
            });
            if let Some(id) = p.id {
                self.latest.insert((ssrc, id), index);
            }
            self.groups[g].objs.push(index);
            self.groups[g].body += src.len();
            self.live_bytes += src.len();
            self.live_objs += 1;
        }
        let before = if fresh { 0 } else { before };
        self.size = self.size.saturating_sub(before) + container_len(ssrc, self.groups[g].body);
        self.compact_if_sparse();
    }

    /// Drops everything pending from `ssrc` (the sender left).
    pub fn remove_sender(&mut self, ssrc: u32) {
        let Some(g) = self.group_of.remove(&ssrc) else {
            return;
        };
        let objs = std::mem::take(&mut self.groups[g].objs);
        for &i in &objs {
            if let Some(o) = self.objs.get_mut(i as usize).filter(|o| o.alive) {
                o.alive = false;
                self.live_bytes -= o.len();
                self.live_objs -= 1;
            }
        }
        self.size = self
            .size
            .saturating_sub(container_len(ssrc, self.groups[g].body));
        self.groups[g].objs = objs;
        self.groups[g].objs.clear();
        self.groups[g].body = 0;
        self.latest.retain(|k, _| k.0 != ssrc);
        if self.size == 0 {
            self.clear();
        }
    }

    /// Writes the pending content as a payload of containers, one per sender in order of
    /// first arrival, and lists each container and the (sender, objectID)s it carries.
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        segments: &mut Vec<Segment>,
        carried: &mut Vec<(u32, u64)>,
    ) {
        for g in &self.groups[..self.active] {
            if g.objs.is_empty() {
                continue;
            }
            let start = out.len();
            write_header(out, g.ssrc, g.body);
            for o in g.objs.iter().filter_map(|i| self.objs.get(*i as usize)) {
                if !o.alive {
                    continue;
                }
                let bytes = self.arena.get(o.start as usize..o.end as usize);
                out.extend_from_slice(bytes.unwrap_or_default());
                if let Some(id) = o.id {
                    carried.push((g.ssrc, id));
                }
            }
            segments.push(Segment {
                ssrc: g.ssrc,
                range: start..out.len(),
            });
        }
    }

    /// Empties the builder, keeping its buffers.
    pub fn clear(&mut self) {
        self.arena.clear();
        self.objs.clear();
        for g in &mut self.groups[..self.active] {
            g.objs.clear();
            g.body = 0;
        }
        self.active = 0;
        self.group_of.clear();
        self.latest.clear();
        self.size = 0;
        self.live_bytes = 0;
        self.live_objs = 0;
        self.since = None;
    }

    /// The group of `ssrc`, opened (from the pool) if it has none.
    fn group(&mut self, ssrc: u32) -> usize {
        if let Some(g) = self.group_of.get(&ssrc) {
            return *g;
        }
        if self.active == self.groups.len() {
            self.groups.push(Group::default());
        }
        let g = self.active;
        self.active += 1;
        self.groups[g].ssrc = ssrc;
        self.group_of.insert(ssrc, g);
        g
    }

    /// Drops object `last` and the earlier TLVs of its objectID in the same unit.
    fn kill_chain(&mut self, g: usize, mut at: u32) {
        while let Some(o) = self.objs.get_mut(at as usize) {
            if o.alive {
                o.alive = false;
                let len = o.len();
                self.groups[g].body -= len;
                self.live_bytes -= len;
                self.live_objs -= 1;
            }
            at = o.prev_same;
        }
    }

    /// Reclaims the space of superseded objects once it outweighs the live ones, so a
    /// view with a long delay and fast updates stays bounded by what it will send.
    fn compact_if_sparse(&mut self) {
        if self.arena.len() <= 2 * self.live_bytes + SLACK_BYTES
            && self.objs.len() <= 2 * self.live_objs + SLACK_OBJECTS
        {
            return;
        }
        self.remap.clear();
        let (mut bytes, mut kept) = (0usize, 0usize);
        for i in 0..self.objs.len() {
            let o = self.objs[i];
            if !o.alive {
                self.remap.push(NONE);
                continue;
            }
            self.arena
                .copy_within(o.start as usize..o.end as usize, bytes);
            self.objs[kept] = Obj {
                start: bytes as u32,
                end: (bytes + o.len()) as u32,
                ..o
            };
            bytes += o.len();
            self.remap.push(kept as u32);
            kept += 1;
        }
        self.arena.truncate(bytes);
        self.objs.truncate(kept);
        let remap = &self.remap;
        let moved = |i: u32| remap.get(i as usize).copied().unwrap_or(NONE);
        for o in &mut self.objs {
            o.prev_same = moved(o.prev_same);
        }
        for g in &mut self.groups[..self.active] {
            g.objs.retain_mut(|i| {
                *i = moved(*i);
                *i != NONE
            });
        }
        self.latest.retain(|_, i| {
            *i = moved(*i);
            *i != NONE
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::container::split;
    use crate::wire::writer::WriteExt;

    /// A fake TLV: tag 5, objectID `id`, `n` filler bytes.
    fn tlv(id: u64, fill: u8, n: usize) -> Vec<u8> {
        let mut body = Vec::new();
        body.put_varuint(id);
        body.extend(std::iter::repeat_n(fill, n));
        let mut v = vec![5];
        v.put_blob(&body);
        v
    }

    /// A unit of TLVs back to back, and its pieces.
    fn unit(tlvs: &[(u64, Vec<u8>)]) -> (Vec<u8>, Vec<Piece>) {
        let mut bytes = Vec::new();
        let mut pieces = Vec::new();
        for (id, t) in tlvs {
            let start = bytes.len();
            bytes.extend_from_slice(t);
            pieces.push(Piece {
                id: Some(*id),
                range: (start, bytes.len()),
            });
        }
        (bytes, pieces)
    }

    fn written(b: &Builder) -> (Vec<u8>, Vec<Segment>, Vec<(u32, u64)>) {
        let (mut out, mut segs, mut carried) = (Vec::new(), Vec::new(), Vec::new());
        b.write(&mut out, &mut segs, &mut carried);
        (out, segs, carried)
    }

    #[test]
    fn coalesces_across_units_and_keeps_two_formats_of_one_unit() {
        let now = Instant::now();
        let mut b = Builder::default();
        let (x1, y1) = (tlv(1, 0xa1, 4), tlv(2, 0xb1, 4));
        let (bytes, pieces) = unit(&[(1, x1.clone()), (2, y1.clone())]);
        b.add(now, 9, &bytes, &pieces);
        // The newer unit carries object 1 twice (old format, new format).
        let (x2a, x2b) = (tlv(1, 0xa2, 4), tlv(1, 0xa3, 6));
        let (bytes, pieces) = unit(&[(1, x2a.clone()), (1, x2b.clone())]);
        let predicted = b.size_with(9, &pieces);
        b.add(now, 9, &bytes, &pieces);
        assert_eq!(b.size(), predicted);
        let (out, segs, carried) = written(&b);
        assert_eq!(out.len(), b.size());
        assert_eq!(segs.len(), 1);
        let (ssrc, objs) = split(&out).unwrap();
        assert_eq!(ssrc, 9);
        assert_eq!(objs, [y1, x2a, x2b].concat());
        assert_eq!(carried, vec![(9, 2), (9, 1), (9, 1)]);
    }

    #[test]
    fn removing_a_sender_drops_its_container_only() {
        let now = Instant::now();
        let mut b = Builder::default();
        let (bytes, pieces) = unit(&[(1, tlv(1, 1, 3))]);
        b.add(now, 7, &bytes, &pieces);
        b.add(now, 8, &bytes, &pieces);
        b.remove_sender(7);
        let (out, segs, _) = written(&b);
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].ssrc, 8);
        assert_eq!(out.len(), b.size());
        b.remove_sender(8);
        assert!(b.is_empty());
        assert_eq!(b.since(), None);
    }

    #[test]
    fn compaction_keeps_the_newest_state() {
        let now = Instant::now();
        let mut b = Builder::default();
        for round in 0..2000u32 {
            let fill = (round % 251) as u8;
            let (bytes, pieces) = unit(&[(1, tlv(1, fill, 40)), (2, tlv(2, fill, 40))]);
            b.add(now, 3, &bytes, &pieces);
        }
        assert!(b.arena.len() <= 2 * b.live_bytes + SLACK_BYTES);
        let (out, _, carried) = written(&b);
        let last = (1999 % 251) as u8;
        assert_eq!(
            split(&out).unwrap().1,
            [tlv(1, last, 40), tlv(2, last, 40)].concat()
        );
        assert_eq!(carried, vec![(3, 1), (3, 2)]);
    }
}
