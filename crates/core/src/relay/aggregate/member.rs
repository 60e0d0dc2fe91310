//! One subscriber's aggregated stream (numbering, clock, what each packet carried) and a
//! view's record of its recent packets, for NACK repair.

use super::super::session::SENT_RING;
use super::builder::Segment;
use crate::relay::api::SessionId;
use crate::relay::outbox::Outbox;
use crate::rtp::packet::{FIXED_HEADER_LEN, append_padding_at};
use crate::rtp::{CLOCK_RATE, PacketClass, RtpHeader};
use crate::wire::Dialect;
use std::time::Instant;

/// Index of a view in the aggregator.
pub type ViewId = usize;

/// The RTP payload type of aggregated packets: the dynamic type the client uses for game
/// state (the payload is game state too; receivers tell the stream by its SSRC).
pub const PAYLOAD_TYPE: u8 = 96;

/// The most CSRCs an RTP header holds (RFC 3550 §5.1).
const MAX_CSRCS: usize = 15;

/// A subscriber in aggregated delivery.
#[derive(Debug, Clone)]
pub struct Member {
    /// The view it belongs to.
    pub view: ViewId,
    /// Its own SSRC (its own container is left out unless it asked for echo).
    pub own: u32,
    /// Whether it receives its own stream.
    pub echo: bool,
    /// Its dialect.
    pub dialect: Dialect,
    /// Whether its packets name their senders as CSRCs (RFC 3550 §5.1); a link's do not:
    /// its containers name them, and the CSRCs would cost 4 bytes per update crossing.
    csrcs: bool,
    next_seq: u16,
    ts_base: u32,
    epoch: Instant,
    /// (sequence number, view packet serial) of recent packets.
    sent: [(u16, u64); SENT_RING],
    recorded: usize,
}

impl Member {
    /// A member whose stream starts at a random sequence number and timestamp (RFC 3550).
    pub fn new(
        view: ViewId,
        (own, echo, csrcs): (u32, bool, bool),
        dialect: Dialect,
        random: u64,
        now: Instant,
    ) -> Self {
        Self {
            view,
            own,
            echo,
            dialect,
            csrcs,
            next_seq: random as u16,
            ts_base: (random >> 16) as u32,
            epoch: now,
            sent: [(0, 0); SENT_RING],
            recorded: 0,
        }
    }

    /// The container it must not get: its own, unless it asked for echo.
    fn skips(&self) -> Option<u32> {
        (!self.echo).then_some(self.own)
    }

    /// The stream's RTP timestamp at `now` (90 kHz from its start).
    pub fn timestamp(&self, now: Instant) -> u32 {
        let ticks = now.saturating_duration_since(self.epoch).as_micros() * u128::from(CLOCK_RATE)
            / 1_000_000;
        // RTP timestamps wrap: truncation is the arithmetic RFC 3550 wants.
        self.ts_base.wrapping_add(ticks as u32)
    }

    /// Forgets what its packets carried (they belong to the view it is leaving).
    pub fn forget_sent(&mut self) {
        self.recorded = 0;
    }

    fn record(&mut self, seq: u16, serial: u64) {
        if let Some(slot) = self.sent.get_mut(self.recorded % SENT_RING) {
            *slot = (seq, serial);
        }
        self.recorded = self.recorded.wrapping_add(1);
    }

    /// The view packets of remembered sequence numbers after `seq` (modulo wrap-around).
    pub fn serials_after(&self, seq: u16) -> impl Iterator<Item = u64> + '_ {
        self.sent[..self.recorded.min(SENT_RING)]
            .iter()
            .filter(move |(s, _)| s.wrapping_sub(seq).wrapping_sub(1) < 0x7fff)
            .map(|(_, serial)| *serial)
    }

    /// The view packet a sequence number carried, if still remembered.
    pub fn serial_of(&self, seq: u16) -> Option<u64> {
        self.sent[..self.recorded.min(SENT_RING)]
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, serial)| *serial)
    }

    /// Which of a view packet's containers is its own (left out), if any; `None` as a
    /// whole when nothing would be left for it.
    fn own_of(&self, segments: &[Segment]) -> Option<Option<usize>> {
        let own = self
            .skips()
            .and_then(|o| segments.iter().position(|s| s.ssrc == o));
        (segments.len() > usize::from(own.is_some())).then_some(own)
    }

    /// The length of the RTP packet it gets for a view packet (`payload`, `segments`),
    /// before padding; `None` when nothing would be left for it.
    pub fn packet_len(&self, payload: &[u8], segments: &[Segment]) -> Option<usize> {
        let own = self.own_of(segments)?;
        let skipped = own
            .and_then(|i| segments.get(i))
            .map_or(0, |s| s.range.len());
        let csrcs = match self.csrcs {
            true => (segments.len() - usize::from(own.is_some())).min(MAX_CSRCS),
            false => 0,
        };
        Some(FIXED_HEADER_LEN + 4 * csrcs + payload.len() - skipped)
    }

    /// Writes one aggregated packet: `payload`'s containers but its own, numbered next,
    /// padded (RFC 3550 §5.1) up to `pad_to` bytes when it is shorter by 1 to 255.
    /// Returns false when nothing was left for it (no number is taken then).
    pub fn send(
        &mut self,
        out: &mut Outbox,
        (to, relay_ssrc): (SessionId, u32),
        now: Instant,
        packet: (&[u8], &[Segment], u64),
        pad_to: usize,
    ) -> bool {
        let (payload, segments, serial) = packet;
        let Some(own) = self.own_of(segments) else {
            return false;
        };
        let seq = self.next_seq;
        let ts = self.timestamp(now);
        let contributors = segments
            .iter()
            .enumerate()
            .filter(|(i, _)| self.csrcs && Some(*i) != own)
            .map(|(_, s)| s.ssrc);
        // The containers are the payload back to back, one per sender, so leaving out its
        // own is two copies around one range.
        let body = |buf: &mut Vec<u8>| match own.and_then(|i| segments.get(i)) {
            Some(s) => {
                buf.extend_from_slice(payload.get(..s.range.start).unwrap_or_default());
                buf.extend_from_slice(payload.get(s.range.end..).unwrap_or_default());
            }
            None => buf.extend_from_slice(payload),
        };
        let written = write_packet(out, (to, relay_ssrc), (seq, ts), contributors, body, pad_to);
        if written {
            self.next_seq = seq.wrapping_add(1);
            self.record(seq, serial);
        }
        written
    }
}

/// Writes one RTP packet of the aggregated stream: CSRCs name the first 15 contributing
/// senders (RFC 3550 §5.1), `body` appends the payload.
fn write_packet(
    out: &mut Outbox,
    (to, relay_ssrc): (SessionId, u32),
    (seq, timestamp): (u16, u32),
    contributors: impl Iterator<Item = u32>,
    body: impl FnOnce(&mut Vec<u8>),
    pad_to: usize,
) -> bool {
    let mut csrcs = [0u32; MAX_CSRCS];
    let mut n = 0;
    for (slot, ssrc) in csrcs.iter_mut().zip(contributors) {
        *slot = ssrc;
        n += 1;
    }
    let header = RtpHeader {
        marker: false,
        payload_type: PAYLOAD_TYPE,
        sequence_number: seq,
        timestamp,
        ssrc: relay_ssrc,
        csrcs: &csrcs[..n],
        extension: None,
    };
    let (buf, start) = out.begin();
    if header.append_to(buf).is_err() {
        out.abandon(start);
        return false;
    }
    body(buf);
    pad(buf, start, pad_to);
    out.commit_direct(to, PacketClass::Rtp, start);
    true
}

/// Pads the RTP packet begun at `start` in `buf` up to `to` bytes (RFC 3550 §5.1), when
/// it is shorter by 1 to 255 bytes; otherwise leaves it as it is.
fn pad(buf: &mut Vec<u8>, start: usize, to: usize) {
    let short = to.checked_sub(buf.len() - start);
    if let Some(n) = short.and_then(|n| u8::try_from(n).ok()).filter(|n| *n > 0) {
        // Cannot fail: the packet's header is there and `n` is not zero.
        let _ = append_padding_at(buf, start, n);
    }
}

/// Packets a view remembers for NACK repair.
const HISTORY: usize = 128;

/// What a view's recent packets carried: (sender, objectID)s per packet serial.
#[derive(Debug, Default)]
pub struct History {
    slots: Vec<(u64, Vec<(u32, u64)>)>,
    last: u64,
}

impl History {
    /// Records a packet's content; returns its serial (never 0).
    pub fn record(&mut self, carried: &[(u32, u64)]) -> u64 {
        self.last += 1;
        let at = (self.last % HISTORY as u64) as usize;
        if self.slots.len() <= at {
            self.slots.resize_with(at + 1, Default::default);
        }
        let slot = &mut self.slots[at];
        slot.0 = self.last;
        slot.1.clear();
        slot.1.extend_from_slice(carried);
        self.last
    }

    /// What packet `serial` carried, if still remembered.
    pub fn get(&self, serial: u64) -> Option<&[(u32, u64)]> {
        self.slots
            .get((serial % HISTORY as u64) as usize)
            .filter(|s| s.0 == serial && serial != 0)
            .map(|s| &s.1[..])
    }
}
