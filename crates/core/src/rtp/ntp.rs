//! NTP timestamps as RTCP carries them (RFC 3550 §4): 64-bit fixed point, seconds since
//! 1900 in the high 32 bits. The relay reads no clock: a [`Wallclock`] maps the monotonic
//! instants the core is given to NTP time from one anchor the shell takes.

use std::time::{Duration, Instant};

/// Seconds from the NTP era (1900) to the Unix epoch (1970).
const UNIX_TO_NTP_SECS: u64 = 2_208_988_800;

/// A duration as 64-bit NTP fixed point (seconds << 32 | fraction).
pub fn from_duration(d: Duration) -> u64 {
    let frac = (u64::from(d.subsec_nanos()) << 32) / 1_000_000_000;
    (d.as_secs() << 32).wrapping_add(frac)
}

/// The middle 32 bits of an NTP timestamp: the "compact" form of LSR, DLSR and RFC 8888
/// report timestamps, in units of 1/65536 s.
pub fn compact(ntp: u64) -> u32 {
    (ntp >> 16) as u32
}

/// A duration in compact NTP units (1/65536 s), saturating.
pub fn compact_from_duration(d: Duration) -> u32 {
    u32::try_from(from_duration(d) >> 16).unwrap_or(u32::MAX)
}

/// A compact NTP interval (1/65536 s) as a duration.
pub fn compact_to_duration(units: u32) -> Duration {
    Duration::from_nanos((u64::from(units) * 1_000_000_000) >> 16)
}

/// The mapping from the core's instants to NTP wall-clock time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wallclock {
    at: Instant,
    ntp: u64,
}

impl Wallclock {
    /// `at` was `since_unix` after the Unix epoch (the shell reads both clocks once).
    pub fn new(at: Instant, since_unix: Duration) -> Self {
        let ntp = from_duration(since_unix + Duration::from_secs(UNIX_TO_NTP_SECS));
        Self { at, ntp }
    }

    /// NTP time at `now` (instants before the anchor map to the anchor).
    pub fn ntp(&self, now: Instant) -> u64 {
        self.ntp
            .wrapping_add(from_duration(now.saturating_duration_since(self.at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_and_compact_form() {
        assert_eq!(from_duration(Duration::from_millis(1500)), 0x1_8000_0000);
        assert_eq!(compact(0x1234_5678_9abc_def0), 0x5678_9abc);
        assert_eq!(compact_from_duration(Duration::from_millis(250)), 0x4000);
        assert_eq!(compact_to_duration(0x8000), Duration::from_millis(500));
        let t = Instant::now();
        let w = Wallclock::new(t, Duration::from_secs(1));
        assert_eq!(w.ntp(t) >> 32, UNIX_TO_NTP_SECS + 1);
        assert_eq!(
            w.ntp(t + Duration::from_secs(2)) >> 32,
            UNIX_TO_NTP_SECS + 3
        );
    }
}
