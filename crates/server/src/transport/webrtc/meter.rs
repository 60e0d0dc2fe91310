//! A WebRTC session's send budget, from its SCTP send queue: while the queue backs up,
//! the core is told the rate at which it drains, which caps the session like TMMBR or the
//! QUIC port's path rate do. The core then paces the session and coalesces to the newest
//! state of each object, instead of the queue growing with stale updates.

use std::time::{Duration, Instant};

/// How often the drain rate is measured.
const WINDOW: Duration = Duration::from_millis(100);

/// The lowest cap: a stalled peer still gets the newest state at a trickle.
const FLOOR_BPS: u64 = 32_000;

/// Measures one session's drain rate and decides its cap.
#[derive(Debug, Default)]
pub(super) struct SendMeter {
    /// Start of the current window, and the bytes released by then.
    window: Option<(Instant, u64)>,
    /// The drain rate measured over the last window the queue was backed up in.
    rate_bps: Option<u64>,
    /// The cap the core has.
    cap: Option<u64>,
}

impl SendMeter {
    /// Looks at the queue: `sent` bytes handed to the channel so far, `queued` of them not
    /// yet released (acknowledged or abandoned), `limit` the queue's bound. Answers the new
    /// cap when it changed (`Some(None)`: lifted).
    pub(super) fn update(
        &mut self,
        now: Instant,
        sent: u64,
        queued: usize,
        limit: usize,
    ) -> Option<Option<u64>> {
        let released = sent.saturating_sub(queued as u64);
        let (start, released_then) = *self.window.get_or_insert((now, released));
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= WINDOW {
            self.window = Some((now, released));
            if queued > limit / 8 {
                // Backed up: what left the queue is what the path carried.
                let bits = released.saturating_sub(released_then).saturating_mul(8);
                let micros = u64::try_from(elapsed.as_micros())
                    .unwrap_or(u64::MAX)
                    .max(1);
                self.rate_bps = Some(bits.saturating_mul(1_000_000) / micros);
            }
        }
        let want = if queued > limit / 4 {
            let rate = self.rate_bps.unwrap_or(FLOOR_BPS);
            Some((rate / 10 * 9).max(FLOOR_BPS))
        } else if queued < limit / 16 {
            None
        } else {
            self.cap
        };
        (want != self.cap).then(|| {
            self.cap = want;
            want
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 256 * 1024;

    #[test]
    fn a_short_queue_is_never_capped() {
        let mut m = SendMeter::default();
        let t = Instant::now();
        for i in 0..50u64 {
            let at = t + Duration::from_millis(20 * i);
            assert_eq!(m.update(at, i * 10_000, 1_000, LIMIT), None);
        }
    }

    #[test]
    fn a_backed_up_queue_is_capped_below_its_drain_rate_then_lifted() {
        let mut m = SendMeter::default();
        let t = Instant::now();
        // 1 Mbit/s drains (12 500 bytes per 100 ms) while 100 KiB wait.
        let queued = 100 * 1024;
        assert_eq!(
            m.update(t, queued as u64, queued, LIMIT),
            Some(Some(FLOOR_BPS))
        );
        let later = t + Duration::from_millis(100);
        let cap = m.update(later, queued as u64 + 12_500, queued, LIMIT);
        assert_eq!(cap, Some(Some(900_000)));
        // Drained: the cap goes.
        let drained = later + Duration::from_millis(50);
        assert_eq!(
            m.update(drained, queued as u64 + 12_500, 0, LIMIT),
            Some(None)
        );
    }

    #[test]
    fn a_peer_that_acknowledges_nothing_gets_the_floor() {
        let mut m = SendMeter::default();
        let t = Instant::now();
        let mut cap = None;
        for i in 0..10u64 {
            let queued = 200 * 1024;
            if let Some(c) = m.update(
                t + Duration::from_millis(100 * i),
                queued,
                queued as usize,
                LIMIT,
            ) {
                cap = c;
            }
        }
        assert_eq!(cap, Some(FLOOR_BPS));
    }
}
