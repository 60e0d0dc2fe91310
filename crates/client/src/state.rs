//! What a subscriber hears, sender by sender, in either delivery mode: a per-stream packet
//! carries one sender's objects under that sender's SSRC; an aggregated packet (from the
//! relay's SSRC) carries many senders' objects, one container each (`wire::container`).

use super::Received;
use gsrelay_core::rtp::RtcpItem;
use gsrelay_core::wire::{self, DecodeError, Dialect, Object};
use std::collections::{BTreeMap, HashMap};

/// One thing the relay told a subscriber.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// Objects from one sender: a per-stream packet, or one container of an aggregated
    /// packet. They were sent together (fate-shared).
    Objects {
        /// The sender's SSRC.
        ssrc: u32,
        /// Its objects, in wire order.
        objects: Vec<Object>,
    },
    /// Senders that left the room (RTCP BYE).
    Left(Vec<u32>),
}

/// The updates one received packet carries, decoded in `dialect`. RTCP other than BYE
/// carries none.
pub fn updates(received: &Received, dialect: Dialect) -> Result<Vec<Update>, DecodeError> {
    match received {
        Received::Rtp { ssrc, payload, .. } => {
            let mut out = Vec::new();
            let mut own = Vec::new();
            for o in wire::decode(payload, dialect)? {
                match o {
                    Object::Container(c) => out.push(Update::Objects {
                        ssrc: c.ssrc,
                        objects: c.objects,
                    }),
                    other => own.push(other),
                }
            }
            if !own.is_empty() {
                out.insert(
                    0,
                    Update::Objects {
                        ssrc: *ssrc,
                        objects: own,
                    },
                );
            }
            Ok(out)
        }
        Received::Rtcp(items) => Ok(items
            .iter()
            .filter_map(|i| match i {
                RtcpItem::Bye { ssrcs } => Some(Update::Left(ssrcs.clone())),
                _ => None,
            })
            .collect()),
    }
}

/// The latest state of every sender's objects, as received: per sender SSRC, per
/// objectID, the newest object (objects without an objectID are not kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoomState {
    senders: HashMap<u32, BTreeMap<u64, Object>>,
}

impl RoomState {
    /// Applies an update: objects replace their older state; a sender that left is
    /// forgotten.
    pub fn apply(&mut self, update: &Update) {
        match update {
            Update::Objects { ssrc, objects } => {
                let sender = self.senders.entry(*ssrc).or_default();
                for o in objects {
                    if let Some(id) = o.id() {
                        sender.insert(id, o.clone());
                    }
                }
            }
            Update::Left(ssrcs) => {
                for s in ssrcs {
                    self.senders.remove(s);
                }
            }
        }
    }

    /// One sender's objects by objectID.
    pub fn sender(&self, ssrc: u32) -> Option<&BTreeMap<u64, Object>> {
        self.senders.get(&ssrc)
    }

    /// The senders heard from, in no particular order.
    pub fn senders(&self) -> impl Iterator<Item = u32> + '_ {
        self.senders.keys().copied()
    }

    /// Objects held, over every sender.
    pub fn objects(&self) -> usize {
        self.senders.values().map(BTreeMap::len).sum()
    }
}
