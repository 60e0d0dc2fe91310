//! Whole-state checks for the soak and chaos runs: publishers whose objects get new bytes
//! at every update, and a subscriber's view of the room (a fingerprint of the newest copy
//! of every object it received), compared object by object with what the publishers sent
//! last.

use super::run::{Chunk, pack};
use gsrelay_core::wire::{self, Dialect, Object};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// An object in a room: its stream's SSRC and its objectID.
pub type ObjectKey = (u32, u64);

/// Fingerprint of one object's TLV bytes (the relay forwards and caches them unchanged).
pub fn fingerprint(tlv: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    tlv.hash(&mut h);
    h.finish()
}

/// Every object with an objectID in a draft01 `payload`: objectID and fingerprint.
pub fn fingerprints(payload: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    wire::objects(payload, Dialect::Draft01)
        .flatten()
        .filter_map(move |o| Some((o.id?, fingerprint(o.bytes(payload)))))
}

/// What one subscriber holds: the fingerprint of the newest copy of every object.
#[derive(Debug, Default, Clone)]
pub struct View {
    objects: HashMap<ObjectKey, u64>,
}

impl View {
    /// Takes in a packet of stream `ssrc`; returns how many objects it carried.
    pub fn apply(&mut self, ssrc: u32, payload: &[u8]) -> usize {
        let mut n = 0;
        for (id, fp) in fingerprints(payload) {
            self.objects.insert((ssrc, id), fp);
            n += 1;
        }
        n
    }

    /// Forgets everything (a new session starts from nothing).
    pub fn clear(&mut self) {
        self.objects.clear();
    }

    /// Whether the view has some copy of every object in `keys`.
    pub fn holds_all<'a>(&self, mut keys: impl Iterator<Item = &'a ObjectKey>) -> bool {
        keys.all(|k| self.objects.contains_key(k))
    }

    /// Objects of `truth` that the view lacks or holds another copy of.
    pub fn differences(&self, truth: &HashMap<ObjectKey, u64>) -> usize {
        truth
            .iter()
            .filter(|(k, fp)| self.objects.get(k) != Some(fp))
            .count()
    }
}

/// Sets an object's 16-bit `time`, so that each update has new bytes. Types without a
/// `time` (Mesh1, Mesh2, HeadIPD1, unknown ones) keep theirs.
pub fn set_time(o: &mut Object, time: u16) {
    match o {
        Object::Head1(x) => x.time = time,
        Object::Hand1(x) => x.time = time,
        Object::Hand2(x) => x.time = time,
        Object::Object1(x) => x.time = time,
        Object::Object2(x) => x.time = time,
        Object::GameControl1(x) => x.time = time,
        Object::ThreeDof1(x) => x.time = time,
        Object::SixDof1(x) => x.time = time,
        _ => {}
    }
}

/// One publisher update, encoded: payloads of at most the budget, and the fingerprint of
/// every object in them by objectID.
#[derive(Debug, Default)]
pub struct Update {
    /// The payloads, in sending order.
    pub payloads: Vec<Vec<u8>>,
    /// objectID → fingerprint.
    pub fingerprints: Vec<(u64, u64)>,
}

/// Encodes `objects` (draft01) into payloads of at most `budget` bytes.
pub fn encode_update(objects: &[Object], budget: usize) -> anyhow::Result<Update> {
    let payloads: Vec<Vec<u8>> = pack(objects, budget)?
        .into_iter()
        .map(|c: Chunk| c.bytes)
        .collect();
    let fingerprints = payloads.iter().flat_map(|p| fingerprints(p)).collect();
    Ok(Update {
        payloads,
        fingerprints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;

    #[test]
    fn a_view_tells_new_copies_from_old() {
        let s = Scenario::default();
        let mut objects = s.live_objects(0);
        let first = encode_update(&objects, 1100).unwrap();
        for o in &mut objects {
            set_time(o, 2);
        }
        let second = encode_update(&objects, 1100).unwrap();
        let truth: HashMap<ObjectKey, u64> = second
            .fingerprints
            .iter()
            .map(|(id, fp)| ((7, *id), *fp))
            .collect();
        assert_eq!(truth.len(), s.objects);

        let mut view = View::default();
        assert_eq!(view.differences(&truth), s.objects);
        for p in &first.payloads {
            view.apply(7, p);
        }
        assert!(view.holds_all(truth.keys()));
        // The default mix has one Mesh1, which has no time: it is the one equal copy.
        assert_eq!(view.differences(&truth), s.objects - 1);
        for p in &second.payloads {
            view.apply(7, p);
        }
        assert_eq!(view.differences(&truth), 0);
        view.clear();
        assert!(!view.holds_all(truth.keys()));
    }
}
