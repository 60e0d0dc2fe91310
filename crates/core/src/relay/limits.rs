//! The ranges a client-supplied number must fall in. Checking only the sign is not enough:
//! a rate of 1e-30 Hz or a radius of 1e38 m is positive, finite, and makes the arithmetic
//! downstream overflow (a `Duration` or an `Instant`). Every bound here is documented in
//! `docs/interest.md`.

/// Largest coordinate of a fixed area centre, in metres (1 000 km).
pub const MAX_COORD: f32 = 1.0e6;
/// Largest area size (radius, half extent, exit size) or tier distance, in metres.
pub const MAX_SIZE: f32 = 1.0e5;
/// An exit size may be at most this multiple of the enter size.
pub const MAX_EXIT_SCALE: f32 = 10.0;
/// Most rate tiers in one interest.
pub const MAX_TIERS: usize = 8;
/// Lowest and highest rate of a tier or a prediction heartbeat, in Hz.
pub const HZ: (f32, f32) = (0.01, 1000.0);
/// Lowest and highest bandwidth cap a subscriber (interest or TMMBR) may set, in bit/s.
pub const BITRATE: (u64, u64) = (1_000, 10_000_000_000);
/// Largest position error a prediction gate tolerates, in metres.
pub const MAX_TOLERANCE: f32 = 1000.0;
/// Largest extra tolerance per metre of distance.
pub const MAX_TOLERANCE_PER_METER: f32 = 10.0;
/// Largest rotation error a prediction gate tolerates, in degrees.
pub const MAX_ROTATION_DEG: f32 = 180.0;
/// Longest an update may wait for an aggregated packet to fill, in ms: beyond a second,
/// game state is stale.
pub const MAX_DELAY_MS: u32 = 1000;

/// Checks that `v` is a finite number in `[lo, hi]`, naming `field` and the range.
pub fn in_range(field: &str, v: f32, lo: f32, hi: f32) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!("{field}: must be between {lo} and {hi}"))
    }
}

/// Checks that `v` is a finite number in `(0, hi]`, naming `field` and the range.
pub fn positive_up_to(field: &str, v: f32, hi: f32) -> Result<(), String> {
    if v.is_finite() && v > 0.0 && v <= hi {
        Ok(())
    } else {
        Err(format!("{field}: must be greater than 0 and at most {hi}"))
    }
}
