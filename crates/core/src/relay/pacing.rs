//! Per-subscriber pacing: distance-based update-rate tiers and a bandwidth cap, with
//! latest-value coalescing. An update that may not go now becomes *pending*: at most one
//! per (stream, objectID), whose bytes are read from the store when it is finally sent,
//! so a subscriber that cannot keep up receives the newest state, never a backlog.
//! Pending objects are sent by priority (type and distance weight × time waited), so
//! every relevant object is eventually sent and none starves.

use super::limits::{
    HZ, MAX_ROTATION_DEG, MAX_SIZE, MAX_TIERS, MAX_TOLERANCE, MAX_TOLERANCE_PER_METER, in_range,
    positive_up_to,
};
use crate::wire::ObjectKind;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One distance tier: objects within `within` metres of the area's centre (or beyond
/// every tier's `within` for the last tier, which may omit it) are sent at most `max_hz`
/// times per second (no limit when absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateTier {
    /// Upper distance bound of the tier.
    #[serde(default)]
    pub within: Option<f32>,
    /// Highest update rate in the tier.
    #[serde(default)]
    pub max_hz: Option<f32>,
}

/// Checks rate tiers, naming the offending field and its allowed range.
pub fn validate_tiers(tiers: &[RateTier]) -> Result<(), String> {
    if tiers.len() > MAX_TIERS {
        return Err(format!("interest.rates: at most {MAX_TIERS} tiers"));
    }
    let mut last = 0.0f32;
    for (i, t) in tiers.iter().enumerate() {
        match t.within {
            Some(w) => {
                let field = format!("interest.rates[{i}].within");
                positive_up_to(&field, w, MAX_SIZE)?;
                if w <= last {
                    return Err(format!("{field}: must increase from tier to tier"));
                }
                last = w;
            }
            None if i + 1 != tiers.len() => {
                return Err(format!(
                    "interest.rates[{i}].within: only the last tier may omit it"
                ));
            }
            None => {}
        }
        if let Some(hz) = t.max_hz {
            in_range(&format!("interest.rates[{i}].max_hz"), hz, HZ.0, HZ.1)?;
        }
    }
    Ok(())
}

/// The minimum interval between sends at `distance`, if the tiers set one. Beyond the
/// last bounded tier with no open tier, the last tier applies. A rate outside the
/// validated range is clamped into it, so no input can overflow the interval.
pub fn min_interval(tiers: &[RateTier], distance: f32) -> Option<Duration> {
    let tier = tiers
        .iter()
        .find(|t| t.within.is_none_or(|w| distance <= w))
        .or(tiers.last())?;
    tier.max_hz.map(period)
}

/// `1 / hz` seconds, with `hz` clamped into the validated range (NaN counts as the lowest).
pub fn period(hz: f32) -> Duration {
    Duration::from_secs_f32(1.0 / hz.clamp(HZ.0, HZ.1).max(HZ.0))
}

/// How much an object matters when bandwidth is short: players' heads and hands first,
/// nearer objects first.
pub fn weight(kind: ObjectKind, distance: f32) -> f32 {
    let kind = match kind {
        ObjectKind::Head1 | ObjectKind::Hand1 | ObjectKind::Hand2 => 2.0,
        _ => 1.0,
    };
    kind / (1.0 + distance.max(0.0) / 10.0)
}

/// The longest a bucket ever makes anything wait.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// A byte budget refilled at `rate_bps`, holding at most `burst` bytes.
#[derive(Debug, Clone)]
pub struct ByteBucket {
    rate_bps: u64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl ByteBucket {
    /// A full bucket holding 100 ms worth (and at least one MTU, so a single large packet
    /// can always go eventually): a subscriber's bandwidth cap.
    pub fn new(rate_bps: u64, now: Instant) -> Self {
        let burst = cap_burst(rate_bps);
        Self {
            rate_bps,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// A full bucket holding at most `burst` bytes (at least one MTU).
    pub fn with_burst(rate_bps: u64, burst: usize, now: Instant) -> Self {
        let burst = (burst as f64).max(MTU);
        Self {
            rate_bps,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Changes the rate, keeping the tokens.
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps;
        self.burst = cap_burst(rate_bps);
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + dt * self.rate_bps as f64 / 8.0).min(self.burst);
    }

    /// Takes `bytes` if the budget has them.
    pub fn take(&mut self, bytes: usize, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }

    /// When `bytes` will be available.
    pub fn ready_at(&self, bytes: usize) -> Instant {
        let missing = (bytes as f64 - self.tokens).max(0.0);
        // Saturates rather than panics: the rate is validated, but the bucket must not be
        // the place a bad rate turns into a crash.
        let wait = Duration::try_from_secs_f64(missing * 8.0 / self.rate_bps.max(1) as f64)
            .unwrap_or(MAX_WAIT)
            .min(MAX_WAIT);
        self.at.checked_add(wait).unwrap_or(self.at)
    }
}

/// The largest datagram a bucket must always be able to pass.
const MTU: f64 = 1500.0;

/// A bandwidth cap's burst: 100 ms worth, at least one MTU.
fn cap_burst(rate_bps: u64) -> f64 {
    (rate_bps as f64 / 8.0 * 0.1).max(MTU)
}

/// An update waiting to be sent.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// When it started waiting.
    pub since: Instant,
    /// Not before this (rate tier).
    pub due: Instant,
}

/// One subscriber's pacing state: rate tiers, bandwidth cap, and the budget of what the
/// relay itself sends it. The maps stay empty unless it has tiers, a cap, or relay-made
/// sends waiting.
#[derive(Debug)]
pub struct Pacing {
    /// Last time each (stream, objectID) was sent.
    pub last_sent: HashMap<(u32, u64), Instant>,
    /// Coalesced updates waiting: at most one per (stream, objectID).
    pub pending: HashMap<(u32, u64), Pending>,
    /// Bandwidth cap, when one applies.
    pub bucket: Option<ByteBucket>,
    /// Budget of relay-made sends when no cap applies (with a cap they count against it).
    own: ByteBucket,
    /// When the snapshot being sent was queued, until nothing is pending (for the
    /// snapshot-duration metric).
    pub snapshot_since: Option<Instant>,
}

impl Pacing {
    /// Pacing with no cap, whose relay-made sends are held to `rate_bps` in bursts of at
    /// most `burst` bytes.
    pub fn new(rate_bps: u64, burst: usize, now: Instant) -> Self {
        Self {
            last_sent: HashMap::new(),
            pending: HashMap::new(),
            bucket: None,
            own: ByteBucket::with_burst(rate_bps, burst, now),
            snapshot_since: None,
        }
    }

    /// The budget pending sends (deferred updates and relay-made sends) draw from: the
    /// cap when one applies, else the relay-made budget.
    pub fn budget(&mut self) -> &mut ByteBucket {
        match self.bucket {
            Some(ref mut b) => b,
            None => &mut self.own,
        }
    }

    /// Forgets every object of a stream that ended.
    pub fn forget_stream(&mut self, ssrc: u32) {
        self.last_sent.retain(|k, _| k.0 != ssrc);
        self.pending.retain(|k, _| k.0 != ssrc);
    }

    /// Forgets one object that expired.
    pub fn forget_object(&mut self, key: (u32, u64)) {
        self.last_sent.remove(&key);
        self.pending.remove(&key);
    }

    /// Makes `key` pending (keeping when it started waiting, and the earliest due time).
    /// Returns whether it already was: the update it stood for is then coalesced into the
    /// newer one.
    pub fn defer(&mut self, key: (u32, u64), now: Instant, due: Instant) -> bool {
        let mut was = true;
        self.pending
            .entry(key)
            .and_modify(|p| p.due = p.due.min(due))
            .or_insert_with(|| {
                was = false;
                Pending { since: now, due }
            });
        was
    }

    /// When nothing is pending any more, how long the snapshot that was being sent took.
    pub fn snapshot_done(&mut self, now: Instant) -> Option<std::time::Duration> {
        if !self.pending.is_empty() {
            return None;
        }
        let since = self.snapshot_since.take()?;
        Some(now.saturating_duration_since(since))
    }

    /// The earliest moment something pending could go.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.due).min()
    }

    /// Applies the effective cap: the lowest of the configured, requested and TMMBR caps.
    pub fn set_cap(&mut self, cap: Option<u64>, now: Instant) {
        match (cap, &mut self.bucket) {
            (None, b) => *b = None,
            (Some(rate), Some(b)) => b.set_rate(rate),
            (Some(rate), b) => *b = Some(ByteBucket::new(rate, now)),
        }
    }
}

/// Prediction-error gating (opt-in): skip an update the subscriber can already extrapolate
/// from the last state it received (Loc2 velocity, Rot2 rotation one second ahead) within
/// a tolerance, but send at least `heartbeat_hz` updates per second so nothing goes silent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PredictionGate {
    /// Position error tolerated, in metres.
    pub tolerance: f32,
    /// Extra tolerance per metre of distance from the area's centre.
    pub tolerance_per_meter: f32,
    /// Rotation error tolerated, in degrees.
    pub rotation_tolerance_deg: f32,
    /// Minimum update rate of every object, in Hz.
    pub heartbeat_hz: f32,
}

impl Default for PredictionGate {
    fn default() -> Self {
        Self {
            tolerance: 0.05,
            tolerance_per_meter: 0.0,
            rotation_tolerance_deg: 5.0,
            heartbeat_hz: 1.0,
        }
    }
}

impl PredictionGate {
    /// Checks the gate, naming the offending field and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        for (field, v, hi) in [
            ("tolerance", self.tolerance, MAX_TOLERANCE),
            (
                "tolerance_per_meter",
                self.tolerance_per_meter,
                MAX_TOLERANCE_PER_METER,
            ),
            (
                "rotation_tolerance_deg",
                self.rotation_tolerance_deg,
                MAX_ROTATION_DEG,
            ),
        ] {
            in_range(&format!("interest.prediction.{field}"), v, 0.0, hi)?;
        }
        in_range(
            "interest.prediction.heartbeat_hz",
            self.heartbeat_hz,
            HZ.0,
            HZ.1,
        )
    }

    /// Whether `now_state` is close enough to what `last` (sent `dt` seconds ago)
    /// predicts, at `distance` from the subscriber, to be skipped.
    pub fn predictable(
        &self,
        last: &crate::wire::motion::Motion,
        now_state: &crate::wire::motion::Motion,
        dt: f32,
        distance: f32,
    ) -> bool {
        if dt >= 1.0 / self.heartbeat_hz {
            return false;
        }
        let p = last.position_at(dt);
        let err = (0..3)
            .map(|i| (p[i] - now_state.position[i]).powi(2))
            .sum::<f32>()
            .sqrt();
        let tol = self.tolerance + self.tolerance_per_meter * distance;
        let angle = crate::wire::predict::angle_between(last.rotation_at(dt), now_state.rotation);
        err <= tol && angle.to_degrees() <= self.rotation_tolerance_deg
    }
}
