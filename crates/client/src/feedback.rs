//! Congestion control feedback (RFC 8888) as a receiver writes it: the arrival of every
//! RTP packet since the last report, per stream, with losses in between.

use gsrelay_core::rtp::ccfb::{self, ATO_OVERRANGE};
use gsrelay_core::rtp::rtcp::RtcpWriteError;
use std::time::Instant;

/// Arrivals kept between two reports; beyond this the oldest are reported as they are.
const MAX_PENDING: usize = 8192;

/// Packets received since the last report.
#[derive(Debug, Default)]
pub struct Arrivals {
    packets: Vec<(u32, u16, Instant)>,
}

impl Arrivals {
    /// Records one RTP packet's arrival.
    pub fn record(&mut self, ssrc: u32, seq: u16, at: Instant) {
        if self.packets.len() < MAX_PENDING {
            self.packets.push((ssrc, seq, at));
        }
    }

    /// Writes one CCFB per stream for the packets recorded, reported at `now` whose NTP
    /// time is `ntp_now`, and forgets them. Returns whether anything was written.
    pub fn write(
        &mut self,
        out: &mut Vec<u8>,
        sender_ssrc: u32,
        now: Instant,
        ntp_now: u64,
    ) -> Result<bool, RtcpWriteError> {
        if self.packets.is_empty() {
            return Ok(false);
        }
        let report_ts = gsrelay_core::rtp::ntp::compact(ntp_now);
        // Per stream, in sequence order relative to its first packet (wrap-safe over the
        // few hundred packets between two reports).
        let firsts: Vec<(u32, u16)> = {
            let mut f: Vec<(u32, u16)> = Vec::new();
            for &(ssrc, seq, _) in &self.packets {
                if !f.iter().any(|(s, _)| *s == ssrc) {
                    f.push((ssrc, seq));
                }
            }
            f
        };
        let first_of = |ssrc: u32| firsts.iter().find(|(s, _)| *s == ssrc).map_or(0, |f| f.1);
        self.packets
            .sort_by_key(|&(ssrc, seq, _)| (ssrc, seq.wrapping_sub(first_of(ssrc))));
        let mut metrics = Vec::new();
        for &(ssrc, first) in &firsts {
            let mine = self.packets.iter().filter(|p| p.0 == ssrc);
            let begin = mine.clone().map(|p| p.1).next().unwrap_or(first);
            metrics.clear();
            for &(_, seq, at) in mine {
                let offset = usize::from(seq.wrapping_sub(begin));
                if offset < metrics.len() {
                    continue; // a duplicate
                }
                metrics.resize(offset, (false, 0));
                let ato = (now.saturating_duration_since(at).as_secs_f64() * 1024.0) as u64;
                metrics.push((true, ato.min(u64::from(ATO_OVERRANGE - 1)) as u16));
            }
            ccfb::write(out, sender_ssrc, ssrc, begin, &metrics, report_ts)?;
        }
        self.packets.clear();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reports_arrivals_and_the_gaps_between_them() {
        let t = Instant::now();
        let mut a = Arrivals::default();
        for (seq, ms) in [(65_535u16, 0u64), (1, 10), (2, 20)] {
            a.record(9, seq, t + Duration::from_millis(ms));
        }
        let mut out = Vec::new();
        let now = t + Duration::from_millis(30);
        assert!(a.write(&mut out, 7, now, 0x0000_1234_5678_0000).unwrap());
        let fb = ccfb::decode(&out[4..]).unwrap();
        assert_eq!(fb.report_timestamp, 0x1234_5678);
        let got: Vec<(u16, bool, u16)> = fb
            .reports
            .iter()
            .map(|r| (r.seq, r.received, r.ato))
            .collect();
        assert_eq!(
            got,
            [
                (65_535, true, 30),
                (0, false, 0),
                (1, true, 20),
                (2, true, 10)
            ]
        );
        assert!(!a.write(&mut out, 7, now, 0).unwrap());
    }
}
