//! The room's state as a replay rebuilds it: per stream, each object's latest TLV bytes,
//! the way the relay's store keeps them (`gsrelay_core::relay::store`).

use gsrelay_core::rtp::RtpPacket;
use gsrelay_core::wire::{self, Dialect, ObjectRef};
use std::collections::{BTreeMap, HashMap};

/// One stream's objects, in the order they were first seen.
#[derive(Debug, Clone, Default)]
struct Stream {
    objects: Vec<(u64, Vec<u8>)>,
    index: HashMap<u64, usize>,
}

/// The whole room: streams by SSRC.
#[derive(Debug, Clone, Default)]
pub(crate) struct RoomState {
    streams: BTreeMap<u32, Stream>,
    /// Scratch for one packet's objects, kept to reuse its allocation.
    refs: Vec<ObjectRef>,
}

impl RoomState {
    /// Forgets everything (a checkpoint starts: it is the whole room).
    pub fn clear(&mut self) {
        self.streams.clear();
    }

    /// Removes a stream (it ended).
    pub fn remove(&mut self, ssrc: u32) {
        self.streams.remove(&ssrc);
    }

    /// Applies one packet: each object with an objectID gets the packet's TLV as its
    /// latest. As in the relay, the first TLV of an objectID in a packet replaces the
    /// object's bytes, later ones in the same packet (the object in a newer format) are
    /// appended. A packet that does not parse as RTP, or whose payload does not validate,
    /// changes nothing: the relay would have refused it.
    pub fn apply(&mut self, packet: &[u8]) {
        let Ok(rtp) = RtpPacket::parse(packet) else {
            return;
        };
        let payload = rtp.payload();
        self.refs.clear();
        for r in wire::objects(payload, Dialect::Draft01) {
            match r {
                Ok(r) => self.refs.push(r),
                Err(_) => return,
            }
        }
        let stream = self.streams.entry(rtp.ssrc()).or_default();
        for (i, r) in self.refs.iter().enumerate() {
            let Some(id) = r.id else { continue };
            let bytes = r.bytes(payload);
            let again = self.refs.iter().take(i).any(|p| p.id == Some(id));
            match stream.index.get(&id) {
                Some(&slot) => {
                    if let Some((_, b)) = stream.objects.get_mut(slot) {
                        if !again {
                            b.clear();
                        }
                        b.extend_from_slice(bytes);
                    }
                }
                None => {
                    stream.index.insert(id, stream.objects.len());
                    stream.objects.push((id, bytes.to_vec()));
                }
            }
        }
    }

    /// Each stream's objects, concatenated, by SSRC.
    pub fn snapshot(&self) -> impl Iterator<Item = (u32, Vec<u8>)> + '_ {
        self.streams.iter().map(|(&ssrc, s)| {
            (
                ssrc,
                s.objects
                    .iter()
                    .flat_map(|(_, b)| b.iter().copied())
                    .collect(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsrelay_core::wire::{Object, Object1};

    fn packet(ssrc: u32, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x80, 96, 0, 1, 0, 0, 0, 0];
        p.extend_from_slice(&ssrc.to_be_bytes());
        p.extend_from_slice(payload);
        p
    }

    fn object1(id: u64, time: u16) -> Vec<u8> {
        let o = Object::Object1(Object1 {
            id,
            time,
            ..Default::default()
        });
        wire::encode(&[o], Dialect::Draft01).unwrap()
    }

    #[test]
    fn latest_tlv_per_object_and_repeats_in_one_packet_append() {
        let mut s = RoomState::default();
        let (a1, b1, a2, a3) = (object1(1, 1), object1(2, 1), object1(1, 2), object1(1, 3));
        s.apply(&packet(5, &[a1.clone(), b1.clone()].concat()));
        s.apply(&packet(5, &a2));
        let snap: Vec<_> = s.snapshot().collect();
        assert_eq!(snap, [(5, [a2.clone(), b1.clone()].concat())]);
        // The same objectID twice in one packet: both kept, in order.
        s.apply(&packet(5, &[a3.clone(), a2.clone()].concat()));
        let snap: Vec<_> = s.snapshot().collect();
        assert_eq!(snap, [(5, [a3, a2, b1].concat())]);
        s.remove(5);
        assert_eq!(s.snapshot().count(), 0);
    }

    #[test]
    fn garbage_changes_nothing() {
        let mut s = RoomState::default();
        s.apply(&[1, 2, 3]);
        s.apply(&packet(5, &[0x03, 0xff]));
        assert_eq!(s.snapshot().count(), 0);
    }
}
