//! A stream's latest state: one entry per objectID holding the sender's original TLV
//! bytes, and a short history of which objects each source packet carried (for NACK).

use crate::wire::{ObjectKind, ObjectRef};
use indexmap::IndexMap;
use std::time::Instant;

/// The latest state of one object: every TLV that carried its objectID in the newest
/// packet that carried it, in wire order (old format then new, as the draft allows).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The TLVs, back to back, exactly as the sender wrote them.
    pub bytes: Vec<u8>,
    /// Tag of the last TLV (the newest format).
    pub tag: u64,
    /// Kind of the last TLV.
    pub kind: ObjectKind,
    /// Position, if the object has one.
    pub position: Option<[f32; 3]>,
    /// Parent objectID, if declared.
    pub parent: Option<u64>,
    /// When it was last refreshed.
    pub updated: Instant,
    /// Source packet that last refreshed it (to tell a second format in the same packet).
    packet: u64,
    /// The grid cell it is indexed under.
    pub cell: Option<super::grid::Cell>,
    /// Source sequence number of the packet that last refreshed it.
    pub seq: u16,
}

/// Objects of one stream, in first-seen order.
#[derive(Debug, Default)]
pub struct Store {
    objects: IndexMap<u64, Entry>,
    packets: u64,
    /// The stream's avatar: its first Head1, else its first object with a position.
    avatar: Option<u64>,
}

impl Store {
    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Cached bytes (the objects' wire size).
    pub fn bytes(&self) -> usize {
        self.objects.values().map(|e| e.bytes.len()).sum()
    }

    /// How many of `refs` are objects the store does not hold yet.
    pub fn count_new(&self, refs: &[ObjectRef]) -> usize {
        refs.iter()
            .filter_map(|r| r.id)
            .filter(|id| !self.objects.contains_key(id))
            .count()
    }

    /// Applies one accepted packet. Objects without an objectID are not cached. Reuses
    /// each entry's buffer, so a steady stream of updates allocates nothing.
    pub fn apply(&mut self, payload: &[u8], refs: &[ObjectRef], seq: u16, now: Instant) {
        self.packets += 1;
        let packet = self.packets;
        for r in refs {
            let Some(id) = r.id else { continue };
            let bytes = r.bytes(payload);
            let e = self.objects.entry(id).or_insert_with(|| Entry {
                bytes: Vec::with_capacity(bytes.len()),
                tag: r.tag,
                kind: r.kind,
                position: None,
                parent: None,
                updated: now,
                packet: 0,
                cell: None,
                seq,
            });
            // The first TLV of this id in a packet replaces the old state; later ones (the
            // same object in a newer format) are appended after it.
            if e.packet != packet {
                e.bytes.clear();
                e.position = None;
                e.parent = None;
                e.packet = packet;
            }
            e.bytes.extend_from_slice(bytes);
            e.tag = r.tag;
            e.kind = r.kind;
            e.position = r.position.or(e.position);
            e.parent = r.parent.or(e.parent);
            e.updated = now;
            e.seq = seq;
            self.elect_avatar(id);
        }
    }

    /// Makes `id` the avatar if there is none yet, or if it is a Head1 and the current
    /// avatar is not.
    fn elect_avatar(&mut self, id: u64) {
        let Some(candidate) = self.objects.get(&id).filter(|e| e.position.is_some()) else {
            return;
        };
        let current = self.avatar.and_then(|a| self.objects.get(&a));
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
        Some((id, self.objects.get(&id)?.position?))
    }

    /// The entry for an objectID.
    pub fn get(&self, id: u64) -> Option<&Entry> {
        self.objects.get(&id)
    }

    /// Whether a (reordered) packet `seq` still carries news for `id`: no newer packet
    /// has refreshed it.
    pub fn is_news(&self, id: u64, seq: u16) -> bool {
        self.objects
            .get(&id)
            .is_none_or(|e| seq.wrapping_sub(e.seq).wrapping_sub(1) < 0x7fff)
    }

    /// The entry for an objectID, to update its grid cell.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Entry> {
        self.objects.get_mut(&id)
    }

    /// All entries in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.objects.iter().map(|(id, e)| (*id, e))
    }

    /// Drops objects not refreshed since `cutoff`, telling `gone` about each; returns how
    /// many.
    pub fn expire(&mut self, cutoff: Instant, mut gone: impl FnMut(u64, &Entry)) -> usize {
        let before = self.objects.len();
        self.objects.retain(|id, e| {
            let keep = e.updated >= cutoff;
            if !keep {
                gone(*id, e);
            }
            keep
        });
        if self.avatar.is_some_and(|a| !self.objects.contains_key(&a)) {
            self.avatar = None;
        }
        before - self.objects.len()
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
