//! Receiver statistics of one RTP source (RFC 3550 A.1, A.3, A.8): what a reception
//! report block says about it. Fixed-size state, updated per packet without allocating.

use super::ntp;
use super::rewrite::{MAX_DROPOUT, MAX_MISORDER};
use super::rtcp::ReceptionReport;
use std::time::Instant;

/// Largest magnitude of the 24-bit signed cumulative loss field.
const LOST_MAX: i64 = 0x7f_ffff;
const LOST_MIN: i64 = -0x80_0000;

/// One source as a receiver sees it.
#[derive(Debug, Clone, Copy)]
pub struct Reception {
    clock_rate: u32,
    epoch: Instant,
    max_seq: u16,
    /// Sequence number wraps, shifted left 16 (RFC 3550 A.1 `cycles`).
    cycles: u32,
    base_seq: u32,
    /// A sequence number that would start the source again if the next one follows it.
    bad_seq: Option<u16>,
    received: u32,
    expected_prior: u32,
    received_prior: u32,
    last_transit: Option<u32>,
    /// Interarrival jitter, in timestamp units scaled by 16 (RFC 3550 A.8).
    jitter16: u32,
    /// Compact NTP time of the source's last SR, and when it arrived.
    last_sr: Option<(u32, Instant)>,
}

impl Reception {
    /// A source whose first packet (`seq`) arrives at `now`, to be counted by
    /// [`Reception::packet`] like every other; timestamps tick at `clock_rate` Hz.
    pub fn new(seq: u16, clock_rate: u32, now: Instant) -> Self {
        Self {
            clock_rate,
            epoch: now,
            max_seq: seq,
            cycles: 0,
            base_seq: u32::from(seq),
            bad_seq: None,
            received: 0,
            expected_prior: 0,
            received_prior: 0,
            last_transit: None,
            jitter16: 0,
            last_sr: None,
        }
    }

    /// Counts one packet (RFC 3550 A.1 `update_seq`, A.8 jitter).
    pub fn packet(&mut self, seq: u16, ts: u32, now: Instant) {
        let delta = seq.wrapping_sub(self.max_seq);
        if delta < MAX_DROPOUT {
            if seq < self.max_seq {
                self.cycles = self.cycles.wrapping_add(1 << 16);
            }
            self.max_seq = seq;
        } else if delta <= u16::MAX - MAX_MISORDER {
            // A big jump: a restart if the next packet follows this one.
            if self.bad_seq == Some(seq) {
                *self = Self::new(seq, self.clock_rate, now);
            } else {
                self.bad_seq = Some(seq.wrapping_add(1));
                return;
            }
        }
        // Else a duplicate or reordered packet: counted, the highest stays.
        self.bad_seq = None;
        self.received = self.received.wrapping_add(1);
        self.update_jitter(ts, now);
    }

    fn update_jitter(&mut self, ts: u32, now: Instant) {
        let elapsed = now.saturating_duration_since(self.epoch).as_nanos();
        // RTP arithmetic wraps: truncation is intended.
        let arrival = (elapsed * u128::from(self.clock_rate) / 1_000_000_000) as u32;
        let transit = arrival.wrapping_sub(ts);
        if let Some(last) = self.last_transit {
            // J += |D| - J/16 (rounded), in the scaled integer form of RFC 3550 A.8.
            let d = i64::from((transit.wrapping_sub(last) as i32).unsigned_abs());
            let j = i64::from(self.jitter16);
            self.jitter16 = u32::try_from((j + d - ((j + 8) >> 4)).max(0)).unwrap_or(u32::MAX);
        }
        self.last_transit = Some(transit);
    }

    /// Records the source's SR: its NTP time, arrived at `now`.
    pub fn sender_report(&mut self, ntp_time: u64, now: Instant) {
        self.last_sr = Some((ntp::compact(ntp_time), now));
    }

    /// Packets received so far (duplicates included, as RFC 3550 counts them).
    pub fn received(&self) -> u32 {
        self.received
    }

    /// Interarrival jitter in timestamp units.
    pub fn jitter_units(&self) -> u32 {
        self.jitter16 >> 4
    }

    /// The extended highest sequence number received.
    pub fn extended_max(&self) -> u32 {
        self.cycles | u32::from(self.max_seq)
    }

    /// Packets lost since the start (negative with duplicates), unclamped.
    pub fn cumulative_lost(&self) -> i64 {
        let expected = i64::from(self.extended_max()) - i64::from(self.base_seq) + 1;
        expected - i64::from(self.received)
    }

    /// The report block for `ssrc` at `now`; starts the next reporting interval.
    pub fn report(&mut self, ssrc: u32, now: Instant) -> ReceptionReport {
        let expected = (i64::from(self.extended_max()) - i64::from(self.base_seq) + 1).max(0);
        let expected = u32::try_from(expected).unwrap_or(u32::MAX);
        let expected_interval = expected.wrapping_sub(self.expected_prior);
        let received_interval = self.received.wrapping_sub(self.received_prior);
        self.expected_prior = expected;
        self.received_prior = self.received;
        let lost_interval = i64::from(expected_interval) - i64::from(received_interval);
        let fraction_lost = if expected_interval == 0 || lost_interval <= 0 {
            0
        } else {
            u8::try_from((lost_interval << 8) / i64::from(expected_interval)).unwrap_or(255)
        };
        let lost = self.cumulative_lost().clamp(LOST_MIN, LOST_MAX);
        let (last_sender_report, delay) = match self.last_sr {
            Some((lsr, at)) => (
                lsr,
                ntp::compact_from_duration(now.saturating_duration_since(at)),
            ),
            None => (0, 0),
        };
        ReceptionReport {
            ssrc,
            fraction_lost,
            // 24-bit two's complement on the wire.
            total_lost: (lost as i32 as u32) & 0xff_ffff,
            last_sequence_number: self.extended_max(),
            jitter: self.jitter_units(),
            last_sender_report,
            delay,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const RATE: u32 = 90_000;

    #[test]
    fn loss_fraction_extended_sequence_and_wrap() {
        let t = Instant::now();
        let mut r = Reception::new(65_530, RATE, t);
        // 65530..=65535, 0..=9 with 3 and 4 lost: 16 expected, 14 received.
        for seq in (65_530u16..=65_535)
            .chain(0..10)
            .filter(|s| *s != 3 && *s != 4)
        {
            r.packet(seq, 0, t);
        }
        let b = r.report(1, t);
        assert_eq!(b.last_sequence_number, (1 << 16) | 9);
        assert_eq!(b.total_lost, 2);
        assert_eq!(b.fraction_lost, (2 * 256 / 16) as u8);
        // The next interval without loss reports a zero fraction, the same total.
        r.packet(10, 0, t);
        let b = r.report(1, t);
        assert_eq!((b.fraction_lost, b.total_lost), (0, 2));
    }

    #[test]
    fn duplicates_make_the_loss_negative_in_24_bits() {
        let t = Instant::now();
        let mut r = Reception::new(0, RATE, t);
        for seq in [0, 1, 1, 2] {
            r.packet(seq, 0, t);
        }
        assert_eq!(r.report(1, t).total_lost, 0xff_ffff);
    }

    #[test]
    fn jitter_follows_rfc_3550_a8() {
        let t = Instant::now();
        let mut r = Reception::new(0, RATE, t);
        // Sent every 20 ms (1800 units), arriving alternately 0 and 10 ms late.
        for i in 0..400u32 {
            let late = if i % 2 == 1 { 10 } else { 0 };
            let at = t + Duration::from_millis(u64::from(20 * i + late));
            r.packet(i as u16, i * 1800, at);
        }
        // |D| is always 900 units: J converges to 900.
        let j = r.jitter_units();
        assert!((880..=900).contains(&j), "{j}");
    }

    #[test]
    fn lsr_and_dlsr_from_the_last_sender_report() {
        let t = Instant::now();
        let mut r = Reception::new(0, RATE, t);
        r.packet(0, 0, t);
        r.sender_report(0x1122_3344_5566_7788, t);
        let b = r.report(1, t + Duration::from_millis(500));
        assert_eq!(b.last_sender_report, 0x3344_5566);
        assert_eq!(b.delay, 0x8000);
    }

    #[test]
    fn a_far_jump_restarts_only_when_confirmed() {
        let t = Instant::now();
        let mut r = Reception::new(100, RATE, t);
        r.packet(100, 0, t);
        r.packet(30_000, 0, t);
        assert_eq!(r.extended_max(), 100, "one stray packet is not a restart");
        r.packet(30_001, 0, t);
        r.packet(30_002, 0, t);
        assert_eq!((r.extended_max(), r.cumulative_lost()), (30_002, 0));
    }
}
