//! Playing recorded streams into a room as one session's containers: what a replay
//! ([`super::replay`]) and a broadcast-delayed mirror ([`super::mirror`]) share. The
//! session is a replay session of the core (`JoinRequest::replay`): each container is one
//! recorded sender's objects under the outer header's sequence number and timestamp,
//! which the core makes that sender's stream in the room.
//!
//! - a recorded RTP packet: a container of its payload under its sender's SSRC (the
//!   recorded one when free on this shard, another otherwise: a recording of a room that
//!   is still live plays beside it), numbered one by one per stream, with its recorded
//!   timestamp;
//! - a stream's end: an RTCP BYE for it;
//! - a whole room (after a seek, at a mirror's start): a BYE for every stream it plays,
//!   then each stream's objects, so that the room's cache and every subscriber hold that
//!   room.

use super::port::Core;
use gsrelay_core::relay::SessionId;
use gsrelay_core::rtp::{PacketClass, RtpHeader, RtpPacket, rtcp};
use gsrelay_core::wire::{self, Dialect, container};
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// Largest run of objects a state container carries: a snapshot's packets fit any path.
const STATE_CHUNK: usize = 1100;

/// The payload type of the containers of a state.
const STATE_PT: u8 = 96;

/// One session's playing of recorded streams.
#[derive(Debug)]
pub struct Playback {
    /// The session.
    id: SessionId,
    /// Its own SSRC: the outer header's.
    ssrc: u32,
    /// The SSRC each recorded one plays under.
    ssrcs: HashMap<u32, u32>,
    /// Each played stream's next sequence number and last timestamp.
    numbering: HashMap<u32, (u16, u32)>,
    /// Played streams the room holds now.
    live: HashSet<u32>,
    /// The packet being built (reused).
    out: Vec<u8>,
}

impl Playback {
    /// Playing as session `id`, which sends from `ssrc`.
    pub fn new(id: SessionId, ssrc: u32) -> Self {
        Self {
            id,
            ssrc,
            ssrcs: HashMap::new(),
            numbering: HashMap::new(),
            live: HashSet::new(),
            out: Vec::new(),
        }
    }

    /// Each recorded SSRC that plays under another one, as `(recorded, played)`.
    pub fn remapped(&self) -> Vec<(u32, u32)> {
        let mut remapped: Vec<(u32, u32)> = self
            .ssrcs
            .iter()
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        remapped.sort_unstable();
        remapped
    }

    /// The SSRC recorded stream `ssrc` plays under: its own when no session of this
    /// shard holds it, another free one otherwise.
    fn played(&mut self, ssrc: u32, core: &impl Core) -> u32 {
        if let Some(p) = self.ssrcs.get(&ssrc) {
            return *p;
        }
        let mut candidate = ssrc;
        while core.session_by_ssrc(candidate).is_some() || candidate == self.ssrc {
            // A fixed odd step walks every 32-bit value before coming back: the search
            // ends.
            candidate = candidate.wrapping_add(0x9E37_79B9);
        }
        self.ssrcs.insert(ssrc, candidate);
        candidate
    }

    /// One recorded RTP packet of `ssrc`, as a container.
    pub fn play(&mut self, now: Instant, ssrc: u32, packet: &[u8], core: &mut impl Core) {
        let Ok(pkt) = RtpPacket::parse(packet) else {
            return;
        };
        let played = self.played(ssrc, core);
        let (pt, ts, marker) = (pkt.payload_type(), pkt.timestamp(), pkt.marker());
        self.send(now, (played, pt, ts, marker), &[pkt.payload()], core);
    }

    /// Sends `body` (the objects of `played`'s stream, in parts) as one container packet.
    fn send(
        &mut self,
        now: Instant,
        (played, pt, ts, marker): (u32, u8, u32, bool),
        body: &[&[u8]],
        core: &mut impl Core,
    ) {
        let (seq, last_ts) = self.numbering.entry(played).or_insert((0, ts));
        *last_ts = ts;
        let header = RtpHeader {
            marker,
            payload_type: pt,
            sequence_number: *seq,
            timestamp: ts,
            ssrc: self.ssrc,
            csrcs: &[],
            extension: None,
        };
        *seq = seq.wrapping_add(1);
        self.out.clear();
        if header.append_to(&mut self.out).is_err() {
            return;
        }
        let len = body.iter().map(|b| b.len()).sum();
        container::write_header(&mut self.out, played, len);
        for b in body {
            self.out.extend_from_slice(b);
        }
        self.live.insert(played);
        core.packet(now, self.id, PacketClass::Rtp, &self.out);
    }

    /// Ends recorded stream `ssrc`, if it plays.
    pub fn end_recorded(&mut self, now: Instant, ssrc: u32, core: &mut impl Core) {
        if let Some(played) = self.ssrcs.get(&ssrc).copied() {
            self.end(now, &[played], core);
        }
    }

    /// Ends the played streams `ssrcs` with an RTCP BYE.
    fn end(&mut self, now: Instant, ssrcs: &[u32], core: &mut impl Core) {
        // A BYE names at most 31 sources.
        for chunk in ssrcs.chunks(31) {
            self.out.clear();
            if rtcp::write_bye(&mut self.out, chunk).is_ok() {
                core.packet(now, self.id, PacketClass::Rtcp, &self.out);
            }
            for s in chunk {
                self.live.remove(s);
            }
        }
    }

    /// Makes the room hold `streams` (recorded SSRC, objects' TLVs) and nothing else:
    /// every played stream ends, then each of these starts again with its objects.
    pub fn restore(&mut self, now: Instant, streams: &[(u32, Vec<u8>)], core: &mut impl Core) {
        let mut live: Vec<u32> = self.live.iter().copied().collect();
        live.sort_unstable();
        self.end(now, &live, core);
        for (ssrc, objects) in streams {
            let played = self.played(*ssrc, core);
            let ts = self.numbering.get(&played).map_or(0, |n| n.1);
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut size = 0;
            for r in wire::objects(objects, Dialect::Draft01).filter_map(Result::ok) {
                let tlv = r.bytes(objects);
                if size > 0 && size + tlv.len() > STATE_CHUNK {
                    self.send(now, (played, STATE_PT, ts, false), &parts, core);
                    parts.clear();
                    size = 0;
                }
                parts.push(tlv);
                size += tlv.len();
            }
            if !parts.is_empty() {
                self.send(now, (played, STATE_PT, ts, false), &parts, core);
            }
        }
    }
}
