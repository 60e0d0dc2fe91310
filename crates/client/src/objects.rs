//! Room objects and ownership from the client's side (`docs/relay.md`, "Room objects
//! and ownership"): the room stream, requests and releases, and what the relay's
//! notices say the client holds.

use super::{Client, ClientError};
use gsrelay_core::relay::handover::{self, Entry, Kind};
use gsrelay_core::rtp::PacketClass;
use gsrelay_core::rtp::rtcp::{self, RtcpItem};
use gsrelay_core::wire::{self, Object};
use std::collections::HashSet;

/// One ownership notice from the relay: what it says of which object, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    /// Granted, lost or refused.
    pub kind: Kind,
    /// The object (its stream and objectID) and the reason.
    pub entry: Entry,
}

/// The ownership notices among RTCP items the relay sent.
pub fn notices(items: &[RtcpItem]) -> Vec<Notice> {
    let mut out = Vec::new();
    for item in items {
        let RtcpItem::App {
            subtype,
            name: handover::NAME,
            data,
            ..
        } = item
        else {
            continue;
        };
        let (Some(kind), Ok(entries)) = (Kind::from_subtype(*subtype), handover::decode(data))
        else {
            continue;
        };
        out.extend(entries.map(|entry| Notice { kind, entry }));
    }
    out
}

impl Client {
    /// Its room stream's SSRC, when it joined with
    /// [`room_stream`](super::JoinOptions::room_stream).
    pub fn room_ssrc(&self) -> Option<u32> {
        self.joined.room_ssrc
    }

    /// Encodes `objects` and sends them as one packet of its room stream: they belong to
    /// the room and stay in it after this session ends.
    pub async fn send_room_objects(&mut self, objects: &[Object]) -> Result<(), ClientError> {
        let ssrc = self.joined.room_ssrc.ok_or_else(|| {
            ClientError::BadAnswer("no room stream: join with room_stream".into())
        })?;
        let payload = wire::encode(objects, self.dialect)?;
        let seq = self.room_seq;
        self.room_seq = self.room_seq.wrapping_add(1);
        self.send_rtp(ssrc, seq, &payload).await
    }

    /// Asks the relay for objects (stream SSRC, objectID); its answer comes as notices
    /// ([`notices`], [`Client::holds`]). Once granted, the client updates an object by
    /// sending its objectID in its own packets ([`Client::send_objects`]).
    pub async fn request_objects(&mut self, objects: &[(u32, u64)]) -> Result<(), ClientError> {
        self.send_ownership(Kind::Request, objects).await
    }

    /// Gives objects it holds back to their streams' publishers.
    pub async fn release_objects(&mut self, objects: &[(u32, u64)]) -> Result<(), ClientError> {
        for key in objects {
            self.holds.remove(key);
        }
        self.send_ownership(Kind::Release, objects).await
    }

    /// Whether it holds object `objectID` of stream `ssrc`, as the relay's last notice
    /// about it said.
    pub fn holds(&self, ssrc: u32, object: u64) -> bool {
        self.holds.contains(&(ssrc, object))
    }

    async fn send_ownership(
        &mut self,
        kind: Kind,
        objects: &[(u32, u64)],
    ) -> Result<(), ClientError> {
        for chunk in objects.chunks(handover::MAX_ENTRIES) {
            let entries: Vec<Entry> = chunk.iter().map(|(s, o)| Entry::new(*s, *o)).collect();
            let mut data = Vec::with_capacity(16 * entries.len());
            handover::encode(&entries, &mut data);
            self.out.clear();
            rtcp::write_app(
                &mut self.out,
                kind.subtype(),
                self.joined.ssrc,
                handover::NAME,
                &data,
            )?;
            self.send_out(PacketClass::Rtcp).await?;
        }
        Ok(())
    }

    /// Keeps what it holds in step with the relay's notices (an object of its own stream
    /// given back to it is noted as held too).
    pub(super) fn note_ownership(&mut self, items: &[RtcpItem]) {
        note_ownership(&mut self.holds, items);
    }
}

/// Takes note of the relay's grants and losses in `items` in `holds`.
pub(super) fn note_ownership(holds: &mut HashSet<(u32, u64)>, items: &[RtcpItem]) {
    for n in notices(items) {
        let key = (n.entry.ssrc, n.entry.object);
        match n.kind {
            Kind::Granted => {
                holds.insert(key);
            }
            Kind::Lost => {
                holds.remove(&key);
            }
            _ => {}
        }
    }
}
