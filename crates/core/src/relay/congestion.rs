//! A per-subscriber send budget from congestion feedback: RFC 8888 reports (what arrived,
//! when) drive a small delay- and loss-based controller in the spirit of GCC and RFC 8698
//! (NADA); its rate becomes the subscriber's bandwidth cap, which the pacer turns into
//! latest-value coalescing (under congestion a subscriber gets the newest state of each
//! object at the rate the path sustains, not a queue). Without feedback nothing changes.
//!
//! The same cap, set by [`super::Input::SetSendBudget`], serves a shell whose transport
//! already estimates the path (QUIC's congestion controller). The feedback's reading
//! (matching reports to what was sent) is [`super::feedback::ccfb`]'s.
//!
//! # The controller, once per feedback report
//!
//! - **Samples.** Each reported packet is matched to when the relay queued it (the
//!   [`super::ledger`] history, kept only for sessions that send feedback). A received
//!   packet's one-way delay is `report timestamp − arrival offset − send time`, in the
//!   receiver's clock minus the relay's: the unknown offset cancels against the *base*
//!   delay, the least one-way delay of the last [`BASE_WINDOW`] reports. Queuing delay is
//!   the report's least one-way delay above the base; loss is the share of the report's
//!   newly reported packets that did not arrive; the delivered rate is their octets over
//!   the time since the previous report.
//! - **Loss** above 10 %: `rate × (1 − loss / 2)` (GCC's loss-based controller).
//! - **Delay** above [`OVERUSE`] (25 ms of queue): `0.85 × min(rate, delivered)`, at most
//!   once per [`DECREASE_GAP`], so one standing queue is not punished twice.
//! - **Clear path** (loss below 2 %, queue below 10 ms): the rate grows by 8 % per second
//!   (at least 10 kbit/s per second), but not past 1.5 × the delivered rate plus 64 kbit/s:
//!   game state is application-limited, and a budget far above what the path was shown
//!   to carry would tell nothing.
//! - The first report sets the rate to 1.5 × its delivered rate (at least 256 kbit/s).
//! - The rate stays within the bandwidth caps an interest may ask for
//!   ([`super::limits::BITRATE`]).
//!
//! Bad feedback: a report whose timestamp goes backwards, one whose delays are beyond
//! [`MAX_DELAY`], or reports closer together than [`MIN_GAP`] are ignored and counted
//! (`ccfb_bad_timestamp`, `ccfb_flood`); a sender SSRC not the session's own is dropped
//! (`ssrc_mismatch`). Only the reporting session's budget ever changes.

use super::limits::BITRATE;
use std::time::{Duration, Instant};

/// Reports whose least one-way delay forms the base delay.
pub const BASE_WINDOW: usize = 32;
/// Queuing delay taken as congestion.
pub const OVERUSE: Duration = Duration::from_millis(25);
/// Queuing delay under which the path is clear.
const CLEAR: Duration = Duration::from_millis(10);
/// Least time between two delay-based decreases.
pub const DECREASE_GAP: Duration = Duration::from_millis(200);
/// Feedback closer together than this is a flood.
pub const MIN_GAP: Duration = Duration::from_millis(10);
/// A one-way delay difference beyond this is a bogus timestamp.
pub const MAX_DELAY: Duration = Duration::from_secs(10);
const LOSS_HIGH: f64 = 0.10;
const LOSS_LOW: f64 = 0.02;
const START_FLOOR_BPS: f64 = 256_000.0;

/// What one feedback report says about the path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathSample {
    /// Packets newly reported received.
    pub received: u32,
    /// Packets newly reported lost.
    pub lost: u32,
    /// Octets of the packets newly reported received.
    pub octets: u64,
    /// The report's least one-way delay, seconds, in an unknown clock offset.
    pub min_delay: Option<f64>,
}

/// One subscriber's controller.
#[derive(Debug, Clone)]
pub struct Controller {
    rate: Option<f64>,
    bases: [f64; BASE_WINDOW],
    next_base: usize,
    filled: usize,
    last_report: Option<(Instant, u32)>,
    last_decrease: Option<Instant>,
}

impl Default for Controller {
    fn default() -> Self {
        Self {
            rate: None,
            bases: [0.0; BASE_WINDOW],
            next_base: 0,
            filled: 0,
            last_report: None,
            last_decrease: None,
        }
    }
}

impl Controller {
    /// The send rate, bits per second, once a report gave one.
    pub fn rate_bps(&self) -> Option<u64> {
        self.rate.map(|r| r as u64)
    }

    /// Whether a report with timestamp `ts` (compact NTP) arriving at `now` is read: not
    /// within [`MIN_GAP`] of the last, not going backwards. Says why not.
    pub fn admit(&self, now: Instant, ts: u32) -> Result<(), &'static str> {
        match self.last_report {
            Some((at, _)) if now.saturating_duration_since(at) < MIN_GAP => Err("ccfb_flood"),
            Some((_, last)) if (ts.wrapping_sub(last) as i32) < 0 => Err("ccfb_bad_timestamp"),
            _ => Ok(()),
        }
    }

    /// Updates the rate from one report's sample.
    pub fn update(&mut self, now: Instant, ts: u32, s: PathSample) {
        let since = self
            .last_report
            .map(|(at, _)| now.saturating_duration_since(at).as_secs_f64());
        self.last_report = Some((now, ts));
        let queue = s.min_delay.map(|d| {
            self.bases[self.next_base] = d;
            self.next_base = (self.next_base + 1) % BASE_WINDOW;
            self.filled = (self.filled + 1).min(BASE_WINDOW);
            let base = self.bases[..self.filled]
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min);
            d - base
        });
        let Some(dt) = since.filter(|dt| *dt > 0.0) else {
            return;
        };
        let delivered = s.octets as f64 * 8.0 / dt.max(MIN_GAP.as_secs_f64());
        let rate = *self
            .rate
            .get_or_insert((1.5 * delivered).max(START_FLOOR_BPS));
        let total = s.received + s.lost;
        let loss = if total == 0 {
            0.0
        } else {
            f64::from(s.lost) / f64::from(total)
        };
        let queue = queue.unwrap_or(0.0);
        let new = if loss > LOSS_HIGH {
            self.last_decrease = Some(now);
            rate * (1.0 - loss / 2.0)
        } else if queue > OVERUSE.as_secs_f64() {
            if self
                .last_decrease
                .is_some_and(|t| now.saturating_duration_since(t) < DECREASE_GAP)
            {
                rate
            } else {
                self.last_decrease = Some(now);
                0.85 * rate.min(delivered.max(1.0))
            }
        } else if loss < LOSS_LOW && queue < CLEAR.as_secs_f64() {
            let ceiling = 1.5 * delivered + 64_000.0;
            if rate < ceiling {
                (rate + (0.08 * rate).max(10_000.0) * dt).min(ceiling)
            } else {
                rate
            }
        } else {
            rate
        };
        self.rate = Some(new.clamp(BITRATE.0 as f64, BITRATE.1 as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(received: u32, lost: u32, octets: u64, delay: f64) -> PathSample {
        PathSample {
            received,
            lost,
            octets,
            min_delay: Some(delay),
        }
    }

    /// Feeds a report every 50 ms for `secs`; returns the rate.
    fn run(c: &mut Controller, t: &mut Instant, secs: f64, s: impl Fn(f64) -> PathSample) -> f64 {
        let steps = (secs / 0.05) as u32;
        for _ in 0..steps {
            *t += Duration::from_millis(50);
            let rate = c.rate.unwrap_or(0.0);
            c.update(*t, 0, s(rate));
        }
        c.rate.unwrap()
    }

    #[test]
    fn starts_from_the_delivered_rate_and_grows_only_with_it() {
        let mut c = Controller::default();
        let mut t = Instant::now();
        // 500 kbit/s delivered, clear path.
        let r = run(&mut c, &mut t, 10.0, |_| sample(10, 0, 3125, 0.02));
        assert!((750_000.0..=814_000.0).contains(&r), "{r}");
    }

    #[test]
    fn a_queue_cuts_the_rate_to_what_the_path_delivers() {
        let mut c = Controller::default();
        let mut t = Instant::now();
        run(&mut c, &mut t, 1.0, |_| sample(10, 0, 12_500, 0.02));
        // The path now carries 400 kbit/s and a queue builds (delay +50 ms).
        let r = run(&mut c, &mut t, 1.0, |_| sample(10, 0, 2500, 0.07));
        assert!(r <= 0.85 * 400_000.0 + 1.0, "{r}");
        assert!(r >= 100_000.0, "{r}");
    }

    #[test]
    fn heavy_loss_halves_in_proportion_and_the_floor_holds() {
        let mut c = Controller::default();
        let mut t = Instant::now();
        run(&mut c, &mut t, 0.5, |_| sample(10, 0, 12_500, 0.0));
        let before = c.rate.unwrap();
        t += Duration::from_millis(50);
        c.update(t, 0, sample(5, 5, 6250, 0.0));
        assert!((c.rate.unwrap() - before * 0.75).abs() < 1.0);
        let r = run(&mut c, &mut t, 30.0, |_| sample(0, 10, 0, 0.0));
        assert!(r >= BITRATE.0 as f64);
    }

    #[test]
    fn floods_and_timestamps_going_back_are_refused() {
        let mut c = Controller::default();
        let t = Instant::now();
        c.update(t, 1000, PathSample::default());
        assert_eq!(
            c.admit(t + Duration::from_millis(1), 2000),
            Err("ccfb_flood")
        );
        assert_eq!(
            c.admit(t + Duration::from_millis(50), 500),
            Err("ccfb_bad_timestamp")
        );
        assert_eq!(c.admit(t + Duration::from_millis(50), 3000), Ok(()));
    }
}
