//! Packets the core wants sent, queued in one reused buffer: no allocation per packet in
//! steady state. Each packet may be followed by spare bytes ([`Outbox::reserve_trailer`])
//! where a transport protects it in place, so a packet is written once, by the core, and
//! sent from where it was built ([`Outbox::transmitted`]).
//!
//! RTP packets for a session in aggregated delivery are not queued: [`Outbox::commit`]
//! diverts them, and the core re-packs their objects into that session's aggregated
//! stream (`relay::aggregate`), which it queues with [`Outbox::commit_direct`]. So every
//! path that decides what a subscriber gets (forwarding, snapshots, pacing, objects
//! entering an area) serves both delivery modes unchanged.

use super::api::SessionId;
use super::ids::IdSet;
use super::ledger::{Ledger, Queued};
use crate::rtp::packet::ssrc_seq_payload_len;
use crate::rtp::{PacketClass, RtpHeader};
use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

/// One packet to send to one session (plaintext; the transport encrypts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// Destination session.
    pub session: SessionId,
    /// RTP or RTCP.
    pub class: PacketClass,
    /// The packet.
    pub bytes: &'a [u8],
    /// Where it starts in the buffer `Relay::transmitted` lends; the reserved trailer room
    /// follows it.
    pub at: usize,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    to: SessionId,
    class: PacketClass,
    start: usize,
    end: usize,
}

/// How far the outbox was filled: what `Outbox::rewind` goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxMark {
    queued: usize,
    bytes: usize,
    diverted: usize,
    diverted_bytes: usize,
}

/// The output queue, with a ceiling on the bytes it holds.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
    queue: VecDeque<Pending>,
    /// Bytes it may hold; 0 means no ceiling.
    limit: usize,
    /// Spare bytes after each queued packet, for the transport's trailer.
    trailer: usize,
    /// Packets refused at the ceiling since the last [`Outbox::take_overflowed`].
    overflowed: u64,
    /// Sessions whose RTP is diverted to aggregation.
    mixed: IdSet,
    diverted: Diverted,
    /// What each session was sent, for Sender Reports and congestion feedback.
    pub sent: Ledger,
    /// The time of the input being handled (the core sets it): when packets are queued.
    pub now: Option<Instant>,
}

/// Per-stream RTP packets diverted from sessions in aggregated delivery.
#[derive(Debug, Default)]
pub struct Diverted {
    /// Their bytes.
    pub buf: Vec<u8>,
    /// Each packet's session and bytes, in the order they were made.
    pub packets: Vec<(SessionId, Range<usize>)>,
}

impl Outbox {
    /// An outbox holding at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// The current fill, to rewind to if the input being handled must be undone.
    pub fn mark(&self) -> OutboxMark {
        OutboxMark {
            queued: self.queue.len(),
            bytes: self.buf.len(),
            diverted: self.diverted.packets.len(),
            diverted_bytes: self.diverted.buf.len(),
        }
    }

    /// Drops what was queued since `mark` (nothing if it was sent meanwhile).
    pub fn rewind(&mut self, mark: OutboxMark) {
        if self.queue.len() >= mark.queued && self.buf.len() >= mark.bytes {
            self.queue.truncate(mark.queued);
            self.buf.truncate(mark.bytes);
        }
        if self.diverted.packets.len() >= mark.diverted {
            self.diverted.packets.truncate(mark.diverted);
            self.diverted.buf.truncate(mark.diverted_bytes);
        }
    }

    /// Gives back the capacity its buffers grew to under load, when nothing is queued;
    /// returns whether it did.
    pub fn release(&mut self) -> bool {
        if !self.queue.is_empty() || !self.diverted.packets.is_empty() {
            return false;
        }
        self.buf = Vec::new();
        self.queue = VecDeque::new();
        self.diverted = Diverted::default();
        self.mixed.shrink_to_fit();
        self.sent.shrink_to_fit();
        true
    }

    /// Bytes of capacity its buffers and tables hold (for bounded-state tests).
    pub fn capacity_bytes(&self) -> usize {
        self.buf.capacity()
            + self.queue.capacity() * size_of::<Pending>()
            + self.diverted.buf.capacity()
            + self.diverted.packets.capacity() * size_of::<(SessionId, Range<usize>)>()
    }

    /// Leaves `bytes` spare after each packet queued from now on: room for what a
    /// transport appends when it protects a packet in place (an SRTP tag and index).
    pub fn reserve_trailer(&mut self, bytes: usize) {
        self.trailer = bytes;
    }

    /// The bytes the packets [`Outbox::pop`] gave since the last input are in, each at its
    /// [`Transmit::at`] followed by the reserved trailer room: a transport may protect
    /// them there, in place, and send them from there. What is beside them is not to be
    /// sent.
    pub fn transmitted(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// Packets refused at the ceiling since the last call.
    pub fn take_overflowed(&mut self) -> u64 {
        std::mem::take(&mut self.overflowed)
    }

    /// Starts a packet: returns the buffer to append it to and where it starts.
    pub fn begin(&mut self) -> (&mut Vec<u8>, usize) {
        if self.queue.is_empty() {
            self.buf.clear();
        }
        let start = self.buf.len();
        (&mut self.buf, start)
    }

    /// Starts an RTP packet with `header`, as [`Outbox::begin`] does a packet: the
    /// buffer to append its payload to and where the packet starts; `None` (nothing left
    /// behind) when the header cannot be written.
    pub fn begin_rtp(&mut self, header: &RtpHeader<'_>) -> Option<(&mut Vec<u8>, usize)> {
        let (buf, start) = self.begin();
        if header.append_to(buf).is_err() {
            self.abandon(start);
            return None;
        }
        Some((&mut self.buf, start))
    }

    /// Queues the bytes appended since `start` (diverts them, for RTP to a session in
    /// aggregated delivery).
    pub fn commit(&mut self, to: SessionId, class: PacketClass, start: usize) {
        if class == PacketClass::Rtp && !self.mixed.is_empty() && self.mixed.contains(&to) {
            self.divert(to, start);
        } else {
            self.commit_direct(to, class, start);
        }
    }

    /// Moves the bytes appended since `start` to the diverted packets.
    fn divert(&mut self, to: SessionId, start: usize) {
        let packet = self.buf.get(start..).unwrap_or_default();
        let at = self.diverted.buf.len();
        if self.limit > 0 && at + packet.len() > self.limit {
            self.overflowed += 1;
        } else {
            self.diverted.buf.extend_from_slice(packet);
            let range = at..self.diverted.buf.len();
            self.diverted.packets.push((to, range));
        }
        self.buf.truncate(start);
    }

    /// Queues the bytes appended since `start`, never diverting them.
    pub fn commit_direct(&mut self, to: SessionId, class: PacketClass, start: usize) {
        let end = self.buf.len();
        // The ceiling counts the trailer room the packet takes too.
        if self.limit > 0 && end + self.trailer > self.limit {
            self.buf.truncate(start);
            self.overflowed += 1;
            return;
        }
        if end > start {
            if class == PacketClass::Rtp
                && let Some(now) = self.now
                && let Some((ssrc, seq, payload)) =
                    self.buf.get(start..end).and_then(ssrc_seq_payload_len)
            {
                let queued = Queued {
                    ssrc,
                    seq,
                    payload,
                    size: end - start,
                };
                self.sent.count(to, queued, now);
            }
            self.queue.push_back(Pending {
                to,
                class,
                start,
                end,
            });
            self.buf.resize(end + self.trailer, 0);
        }
    }

    /// Appends to the packet being built.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Drops a packet begun at `start` that will not be sent.
    pub fn abandon(&mut self, start: usize) {
        self.buf.truncate(start);
    }

    /// Queues an RTCP APP packet (`subtype`, `name`, `data`) from `sender` to session
    /// `to`: a link's interest union, an ownership notice.
    pub fn app(&mut self, to: SessionId, (sender, subtype, name): (u32, u8, [u8; 4]), data: &[u8]) {
        let (buf, start) = self.begin();
        if crate::rtp::rtcp::write_app(buf, subtype, sender, name, data).is_ok() {
            self.commit(to, PacketClass::Rtcp, start);
        } else {
            self.abandon(start);
        }
    }

    /// The next packet to send.
    pub fn pop(&mut self) -> Option<Transmit<'_>> {
        let p = self.queue.pop_front()?;
        let bytes = self.buf.get(p.start..p.end).unwrap_or_default();
        Some(Transmit {
            session: p.to,
            class: p.class,
            bytes,
            at: p.start,
        })
    }

    /// Diverts (or stops diverting) a session's RTP.
    pub fn set_mixed(&mut self, to: SessionId, mixed: bool) {
        if mixed {
            self.mixed.insert(to);
        } else {
            self.mixed.remove(&to);
        }
    }

    /// Takes the packets diverted so far; hand the buffers back with
    /// [`Outbox::restore_diverted`] to reuse them.
    pub fn take_diverted(&mut self) -> Diverted {
        std::mem::take(&mut self.diverted)
    }

    /// Returns the diverted buffers, emptied.
    pub fn restore_diverted(&mut self, mut d: Diverted) {
        d.buf.clear();
        d.packets.clear();
        self.diverted = d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(out: &mut Outbox, to: SessionId, bytes: &[u8]) {
        let (buf, start) = out.begin();
        buf.extend_from_slice(bytes);
        out.commit(to, PacketClass::Rtcp, start);
    }

    /// Each packet is where `Transmit::at` says in the buffer the transport protects and
    /// sends from, followed by the reserved room, which no other packet overlaps.
    #[test]
    fn packets_are_sent_from_where_they_were_written_with_room_after_each() {
        let mut out = Outbox::default();
        out.reserve_trailer(20);
        let packets: [&[u8]; 3] = [&[1; 40], &[2; 28], &[3; 100]];
        for (i, p) in packets.iter().enumerate() {
            queue(&mut out, i as SessionId + 1, p);
        }
        let mut seen = Vec::new();
        while let Some(t) = out.pop() {
            seen.push((t.at, t.bytes.to_vec()));
        }
        let buf = out.transmitted();
        for (i, (at, bytes)) in seen.iter().enumerate() {
            assert_eq!(&buf[*at..*at + bytes.len()], &bytes[..]);
            assert_eq!(bytes, packets[i]);
            let room = *at + bytes.len() + 20;
            assert!(buf.len() >= room, "the trailer room is there");
            if let Some((next, _)) = seen.get(i + 1) {
                assert!(*next >= room, "no packet starts in another's trailer room");
            }
        }
    }
}
