//! A stream's latest state: one entry per objectID holding the sender's original TLV
//! bytes, and a short history of which objects each source packet carried (for NACK).
//!
//! Memory per object is what bounds a relay holding many rooms, so entries are compact
//! (`docs/benchmarks.md`, "Memory per cached object"): they sit in one vector in
//! first-seen order that grows by an eighth rather than doubling, the objectID index is a
//! table of 4-byte slot numbers beside it, an entry's TLV bytes are one exact-size
//! allocation reused while the size stays, and optional fields are flags rather than
//! `Option`s.

use super::grid::Cell;
use crate::wire::{ObjectKind, ObjectRef};
use hashbrown::HashTable;
use std::hash::{BuildHasher, RandomState};
use std::time::Instant;

/// Flag bits of [`Entry`].
const HAS_POSITION: u8 = 1;
const HAS_PARENT: u8 = 2;
const HAS_CELL: u8 = 4;

/// The latest state of one object: every TLV that carried its objectID in the newest
/// packet that carried it, in wire order (old format then new, as the draft allows).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The TLVs, back to back, exactly as the sender wrote them.
    pub bytes: Box<[u8]>,
    /// Tag of the last TLV (the newest format).
    pub tag: u64,
    parent: u64,
    /// When it was last refreshed, as time since the store's epoch (nanoseconds).
    updated: u64,
    position: [f32; 3],
    cell: Cell,
    /// Source sequence number of the packet that last refreshed it.
    pub seq: u16,
    /// Kind of the last TLV.
    pub kind: ObjectKind,
    flags: u8,
}

impl Entry {
    /// Position, if the object has one.
    pub fn position(&self) -> Option<[f32; 3]> {
        (self.flags & HAS_POSITION != 0).then_some(self.position)
    }

    /// Parent objectID, if declared.
    pub fn parent(&self) -> Option<u64> {
        (self.flags & HAS_PARENT != 0).then_some(self.parent)
    }

    /// The grid cell it is indexed under.
    pub fn cell(&self) -> Option<Cell> {
        (self.flags & HAS_CELL != 0).then_some(self.cell)
    }

    /// Records the grid cell it is indexed under.
    pub fn set_cell(&mut self, cell: Option<Cell>) {
        self.cell = cell.unwrap_or_default();
        self.set_flag(HAS_CELL, cell.is_some());
    }

    fn set_flag(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    fn set_position(&mut self, p: Option<[f32; 3]>) {
        self.position = p.unwrap_or_default();
        self.set_flag(HAS_POSITION, p.is_some());
    }

    fn set_parent(&mut self, p: Option<u64>) {
        self.parent = p.unwrap_or_default();
        self.set_flag(HAS_PARENT, p.is_some());
    }

    /// Replaces the bytes, reusing the allocation when the size is unchanged.
    fn replace_bytes(&mut self, bytes: &[u8]) {
        match self.bytes.get_mut(..) {
            Some(mine) if mine.len() == bytes.len() => mine.copy_from_slice(bytes),
            _ => self.bytes = bytes.into(),
        }
    }

    /// Appends a newer format of the same object (rare: the draft's migration case).
    fn append_bytes(&mut self, bytes: &[u8]) {
        let mut v = std::mem::take(&mut self.bytes).into_vec();
        v.extend_from_slice(bytes);
        self.bytes = v.into_boxed_slice();
    }
}

/// Objects of one stream, in first-seen order.
#[derive(Debug)]
pub struct Store {
    entries: Vec<(u64, Entry)>,
    /// objectID → index in `entries`.
    index: HashTable<u32>,
    /// Keyed per store: objectIDs come from clients, so their hashes must not be
    /// predictable (hash flooding).
    hasher: RandomState,
    epoch: Instant,
    /// The stream's avatar: its first Head1, else its first object with a position.
    avatar: Option<u64>,
}

impl Store {
    /// An empty store; `now` is the epoch its entries' times count from.
    pub fn new(now: Instant) -> Self {
        Self {
            entries: Vec::new(),
            index: HashTable::new(),
            hasher: RandomState::new(),
            epoch: now,
            avatar: None,
        }
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Cached bytes (the objects' wire size).
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|(_, e)| e.bytes.len()).sum()
    }

    fn slot(&self, id: u64) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        let entries = &self.entries;
        self.index
            .find(hash, |&i| {
                entries.get(i as usize).is_some_and(|(k, _)| *k == id)
            })
            .map(|&i| i as usize)
    }

    /// How many of `refs` are objects the store does not hold yet.
    pub fn count_new(&self, refs: &[ObjectRef]) -> usize {
        refs.iter()
            .filter_map(|r| r.id)
            .filter(|id| self.slot(*id).is_none())
            .count()
    }

    fn since_epoch(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(d).unwrap_or(u64::MAX)
    }

    /// Adds an entry for `id`; returns its slot.
    fn insert(&mut self, id: u64, e: Entry) -> usize {
        if self.entries.len() == self.entries.capacity() {
            // Grow by an eighth, not double: a big store keeps at most 1/8 spare.
            self.entries.reserve_exact((self.entries.len() / 8).max(4));
        }
        let slot = self.entries.len();
        self.entries.push((id, e));
        let (hasher, entries) = (&self.hasher, &self.entries);
        let hash = hasher.hash_one(id);
        self.index.insert_unique(hash, slot as u32, |&i| {
            entries
                .get(i as usize)
                .map_or(0, |(k, _)| hasher.hash_one(*k))
        });
        slot
    }

    /// Applies one accepted packet. Objects without an objectID are not cached. An
    /// update of the same size as the object's last reuses its bytes, so a steady stream
    /// of updates allocates nothing.
    pub fn apply(&mut self, payload: &[u8], refs: &[ObjectRef], seq: u16, now: Instant) {
        let at = self.since_epoch(now);
        for (i, r) in refs.iter().enumerate() {
            let Some(id) = r.id else { continue };
            let bytes = r.bytes(payload);
            let (slot, fresh) = match self.slot(id) {
                Some(slot) => (slot, false),
                None => {
                    let e = Entry {
                        bytes: Box::default(),
                        tag: r.tag,
                        parent: 0,
                        updated: at,
                        position: [0.0; 3],
                        cell: Cell::default(),
                        seq,
                        kind: r.kind,
                        flags: 0,
                    };
                    (self.insert(id, e), true)
                }
            };
            let Some((_, e)) = self.entries.get_mut(slot) else {
                continue;
            };
            // The first TLV of this id in a packet replaces the old state; later ones (the
            // same object in a newer format) are appended after it. A packet is told by
            // its sequence number and arrival together: duplicates are refused before
            // this, and one arrival time never spans 65 536 packets of a stream. Objects
            // a holder sends for this stream come with its newest number, so the object
            // must also be earlier in these `refs` (rare: the scan runs only then).
            if !fresh
                && e.seq == seq
                && e.updated == at
                && refs.iter().take(i).any(|p| p.id == Some(id))
            {
                e.append_bytes(bytes);
            } else {
                e.replace_bytes(bytes);
                e.set_position(None);
                e.set_parent(None);
            }
            e.tag = r.tag;
            e.kind = r.kind;
            e.set_position(r.position.or(e.position()));
            e.set_parent(r.parent.or(e.parent()));
            e.updated = at;
            e.seq = seq;
            self.elect_avatar(id);
        }
    }

    /// Makes `id` the avatar if there is none yet, or if it is a Head1 and the current
    /// avatar is not.
    fn elect_avatar(&mut self, id: u64) {
        let Some(candidate) = self.get(id).filter(|e| e.position().is_some()) else {
            return;
        };
        let current = self.avatar.and_then(|a| self.get(a));
        let better = match current {
            None => true,
            Some(cur) => cur.kind != ObjectKind::Head1 && candidate.kind == ObjectKind::Head1,
        };
        if better {
            self.avatar = Some(id);
        }
    }

    /// The avatar's objectID and position: `preferred` if it has a position, else the
    /// elected avatar.
    pub fn avatar(&self, preferred: Option<u64>) -> Option<(u64, [f32; 3])> {
        let id = preferred.or(self.avatar)?;
        Some((id, self.get(id)?.position()?))
    }

    /// The entry for an objectID.
    pub fn get(&self, id: u64) -> Option<&Entry> {
        self.entries.get(self.slot(id)?).map(|(_, e)| e)
    }

    /// Whether a (reordered) packet `seq` still carries news for `id`: no newer packet
    /// has refreshed it.
    pub fn is_news(&self, id: u64, seq: u16) -> bool {
        self.get(id)
            .is_none_or(|e| seq.wrapping_sub(e.seq).wrapping_sub(1) < 0x7fff)
    }

    /// The entry for an objectID, to update its grid cell.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Entry> {
        let slot = self.slot(id)?;
        self.entries.get_mut(slot).map(|(_, e)| e)
    }

    /// All entries in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.entries.iter().map(|(id, e)| (*id, e))
    }

    /// Drops objects not refreshed since `cutoff`, telling `gone` about each; returns how
    /// many.
    pub fn expire(&mut self, cutoff: Instant, mut gone: impl FnMut(u64, &Entry)) -> usize {
        let cutoff = self.since_epoch(cutoff);
        let before = self.entries.len();
        self.entries.retain(|(id, e)| {
            let keep = e.updated >= cutoff;
            if !keep {
                gone(*id, e);
            }
            keep
        });
        let removed = before - self.entries.len();
        if removed > 0 {
            self.reindex();
        }
        if self.avatar.is_some_and(|a| self.slot(a).is_none()) {
            self.avatar = None;
        }
        removed
    }

    /// Rebuilds the index after entries moved (expiry keeps first-seen order).
    fn reindex(&mut self) {
        let (hasher, entries) = (&self.hasher, &self.entries);
        self.index.clear();
        for (slot, (id, _)) in entries.iter().enumerate() {
            self.index
                .insert_unique(hasher.hash_one(*id), slot as u32, |&i| {
                    entries
                        .get(i as usize)
                        .map_or(0, |(k, _)| hasher.hash_one(*k))
                });
        }
    }
}

/// Source sequence number → objectIDs it carried, for the last [`History::LEN`] packets.
#[derive(Debug)]
pub struct History {
    slots: Vec<(u16, Vec<u64>)>,
}

impl Default for History {
    fn default() -> Self {
        Self {
            slots: (0..Self::LEN).map(|_| (0, Vec::new())).collect(),
        }
    }
}

impl History {
    /// Packets remembered per stream.
    pub const LEN: usize = 512;

    /// Records what source packet `seq` carried, reusing the slot's buffer.
    pub fn record(&mut self, seq: u16, refs: &[ObjectRef]) {
        if let Some(slot) = self.slots.get_mut(usize::from(seq) % Self::LEN) {
            slot.0 = seq;
            slot.1.clear();
            slot.1.extend(refs.iter().filter_map(|r| r.id));
        }
    }

    /// The objectIDs source packet `seq` carried, if still remembered.
    pub fn ids(&self, seq: u16) -> Option<&[u64]> {
        self.slots
            .get(usize::from(seq) % Self::LEN)
            .filter(|s| s.0 == seq)
            .map(|s| &s.1[..])
    }
}
