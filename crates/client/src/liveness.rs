//! Whether the relay is still there, from what the client hears of it. A live relay is
//! never quiet for long: besides the room's RTP, it sends every session an RTCP report
//! (an SR or RR, then an SR per stream sent) at least every `rtcp_min_interval` × 1.5 /
//! (e − 3/2), 6.2 s at the default 5 s (`docs/relay.md`, "RTCP reports"), and RFC 3550
//! spaces the reports further apart only on a leg that carries many streams and little
//! traffic. So silence longer than a few report intervals means the relay is gone (its
//! node died, or it restarted and forgot the session), and so does a link that failed.
//!
//! The threshold, unless the app sets one, is [`DEFAULT_SILENCE`], or
//! [`SILENCE_REPORT_GAPS`] times the longer of the last two gaps between the relay's
//! reports when that is longer: a report gap can be three times the one before it (RFC
//! 3550 randomises each over [0.5, 1.5] of its interval), so a quiet room whose reports
//! come far apart is not taken for dead. A threshold the app sets is used as it is: the
//! app knows how busy its room is.

use std::time::{Duration, Instant};

/// Silence from the relay after which the client takes it for gone, unless the app sets
/// its own ([`JoinOptions::silence`](super::JoinOptions::silence)) or the relay's reports
/// come further apart (see [`SILENCE_REPORT_GAPS`]): more than two of the longest gaps
/// between reports a relay at the default `rtcp_min_interval` (5 s) leaves on a leg whose
/// interval is at its minimum (6.2 s), so one lost report is no reason to rejoin.
pub const DEFAULT_SILENCE: Duration = Duration::from_secs(15);

/// Without a threshold set by the app, silence must also last this many of the longer of
/// the last two gaps between the relay's reports.
pub const SILENCE_REPORT_GAPS: u32 = 3;

/// Report datagrams closer together than this are one report split over several
/// datagrams (the relay puts at most 15 stream SRs in one), not two reports.
const REPORT_BURST: Duration = Duration::from_millis(50);

/// First wait before trying a failed rejoin again; it doubles with each failure.
const RETRY_FIRST: Duration = Duration::from_millis(250);

/// Longest wait between two rejoin attempts.
const RETRY_MAX: Duration = Duration::from_secs(8);

/// What the client heard of the relay since its latest join.
#[derive(Debug, Clone)]
pub(super) struct Liveness {
    /// The app's threshold; `None`: the default, stretched by the report gaps.
    silence: Option<Duration>,
    /// The latest packet from the relay, or the join.
    heard: Instant,
    /// When the latest report began (its first datagram).
    report: Option<Instant>,
    /// The gaps between the last three reports.
    gaps: [Duration; 2],
    /// The link failed (port unreachable, connection closed).
    failed: bool,
    /// Rejoin attempts that failed in a row, and when the next may go.
    retries: u32,
    retry_at: Option<Instant>,
}

impl Liveness {
    /// A session joined at `now`, its threshold `silence` (`None`: automatic).
    pub(super) fn new(silence: Option<Duration>, now: Instant) -> Self {
        Self {
            silence,
            heard: now,
            report: None,
            gaps: [Duration::ZERO; 2],
            failed: false,
            retries: 0,
            retry_at: None,
        }
    }

    /// A packet from the relay authenticated at `now`; `report` if it was one of the
    /// relay's periodic reports.
    pub(super) fn heard(&mut self, now: Instant, report: bool) {
        self.heard = now;
        if !report {
            return;
        }
        match self.report {
            Some(at) if now.saturating_duration_since(at) < REPORT_BURST => {}
            Some(at) => {
                self.gaps = [self.gaps[1], now.saturating_duration_since(at)];
                self.report = Some(now);
            }
            None => self.report = Some(now),
        }
    }

    /// The link failed: the relay is gone whatever the silence, and stays gone for this
    /// session even if a packet sent before the failure is read after it (a port that
    /// was closed means a relay that forgot the session, even if it is back).
    pub(super) fn failed(&mut self) {
        self.failed = true;
    }

    /// The latest packet from the relay, or the join.
    pub(super) fn last_heard(&self) -> Instant {
        self.heard
    }

    /// Sets the app's threshold (`None`: automatic).
    pub(super) fn set_silence(&mut self, silence: Option<Duration>) {
        self.silence = silence;
    }

    /// The silence after which the relay counts as gone.
    pub(super) fn threshold(&self) -> Duration {
        self.silence.unwrap_or_else(|| {
            let gap = self.gaps[0].max(self.gaps[1]);
            DEFAULT_SILENCE.max(gap.saturating_mul(SILENCE_REPORT_GAPS))
        })
    }

    /// Whether the relay counts as gone at `now`.
    pub(super) fn is_silent(&self, now: Instant) -> bool {
        self.failed || now.saturating_duration_since(self.heard) >= self.threshold()
    }

    /// Whether a rejoin may be tried at `now` (none failed lately).
    pub(super) fn may_retry(&self, now: Instant) -> bool {
        self.retry_at.is_none_or(|at| now >= at)
    }

    /// A rejoin failed at `now`: the next waits twice as long as the last, within
    /// [`RETRY_FIRST`, `RETRY_MAX`], times `jitter` in [0.5, 1.5] so that the clients of
    /// a node that died do not all come back in step.
    pub(super) fn retry_failed(&mut self, now: Instant, jitter: f64) {
        let wait = RETRY_FIRST
            .saturating_mul(1 << self.retries.min(5))
            .min(RETRY_MAX)
            .mul_f64(jitter.clamp(0.5, 1.5));
        self.retries = self.retries.saturating_add(1);
        self.retry_at = Some(now + wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn silent_after_the_threshold_and_heard_again_after_a_packet() {
        let t = Instant::now();
        let mut l = Liveness::new(None, t);
        assert!(!l.is_silent(t + DEFAULT_SILENCE - MS));
        assert!(l.is_silent(t + DEFAULT_SILENCE));
        l.heard(t + 10_000 * MS, false);
        assert_eq!(l.last_heard(), t + 10_000 * MS);
        assert!(!l.is_silent(t + DEFAULT_SILENCE));
    }

    #[test]
    fn far_apart_reports_stretch_the_default_but_not_a_threshold_set() {
        let t = Instant::now();
        let mut l = Liveness::new(None, t);
        // Reports 20 s then 10 s apart, the second split over two datagrams.
        for (ms, report) in [(0, true), (20_000, true), (20_010, true), (25_000, false)] {
            l.heard(t + ms * MS, report);
        }
        l.heard(t + 30_000 * MS, true);
        assert_eq!(l.threshold(), 60_000 * MS);
        assert!(!l.is_silent(t + 89_999 * MS));
        assert!(l.is_silent(t + 90_000 * MS));
        l.set_silence(Some(2_000 * MS));
        assert!(l.is_silent(t + 32_000 * MS));
    }

    #[test]
    fn reports_at_the_minimum_interval_keep_the_default() {
        let t = Instant::now();
        let mut l = Liveness::new(None, t);
        for ms in [0, 3_000, 6_000] {
            l.heard(t + ms * MS, true);
        }
        assert_eq!(l.threshold(), DEFAULT_SILENCE);
    }

    #[test]
    fn a_failed_link_is_silent_at_once_and_stays_so() {
        let t = Instant::now();
        let mut l = Liveness::new(None, t);
        l.failed();
        assert!(l.is_silent(t));
        l.heard(t + MS, false);
        assert!(l.is_silent(t + MS));
    }

    #[test]
    fn failed_rejoins_back_off_to_a_bound() {
        let t = Instant::now();
        let mut l = Liveness::new(None, t);
        assert!(l.may_retry(t));
        l.retry_failed(t, 1.0);
        assert!(!l.may_retry(t + 249 * MS) && l.may_retry(t + 250 * MS));
        for _ in 0..10 {
            l.retry_failed(t, 1.0);
        }
        assert!(!l.may_retry(t + RETRY_MAX - MS) && l.may_retry(t + RETRY_MAX));
        l.retry_failed(t, 9.0);
        assert!(l.may_retry(t + RETRY_MAX.mul_f64(1.5)));
    }
}
