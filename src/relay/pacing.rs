//! Per-subscriber pacing: distance-based update-rate tiers and a bandwidth cap, with
//! latest-value coalescing. An update that may not go now becomes *pending*: at most one
//! per (stream, objectID), whose bytes are read from the store when it is finally sent,
//! so a subscriber that cannot keep up receives the newest state, never a backlog.
//! Pending objects are sent by priority (type and distance weight × time waited), so
//! every relevant object is eventually sent and none starves.

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

/// Checks rate tiers, naming the offending field.
pub fn validate_tiers(tiers: &[RateTier]) -> Result<(), String> {
    let mut last = 0.0f32;
    for (i, t) in tiers.iter().enumerate() {
        match t.within {
            Some(w) if !(w.is_finite() && w > last) => {
                return Err(format!(
                    "interest.rates[{i}].within: must be finite and increase"
                ));
            }
            Some(w) => last = w,
            None if i + 1 != tiers.len() => {
                return Err(format!(
                    "interest.rates[{i}].within: only the last tier may omit it"
                ));
            }
            None => {}
        }
        if t.max_hz.is_some_and(|hz| !(hz.is_finite() && hz > 0.0)) {
            return Err(format!(
                "interest.rates[{i}].max_hz: must be a positive number"
            ));
        }
    }
    Ok(())
}

/// The minimum interval between sends at `distance`, if the tiers set one. Beyond the
/// last bounded tier with no open tier, the last tier applies.
pub fn min_interval(tiers: &[RateTier], distance: f32) -> Option<Duration> {
    let tier = tiers
        .iter()
        .find(|t| t.within.is_none_or(|w| distance <= w))
        .or(tiers.last())?;
    tier.max_hz.map(|hz| Duration::from_secs_f32(1.0 / hz))
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

/// A byte budget refilled at `rate_bps`, holding at most 100 ms worth (and at least one
/// MTU, so a single large packet can always go eventually).
#[derive(Debug, Clone)]
pub struct ByteBucket {
    rate_bps: u64,
    tokens: f64,
    at: Instant,
}

impl ByteBucket {
    fn capacity(&self) -> f64 {
        (self.rate_bps as f64 / 8.0 * 0.1).max(1500.0)
    }

    /// A full bucket.
    pub fn new(rate_bps: u64, now: Instant) -> Self {
        let mut b = Self {
            rate_bps,
            tokens: 0.0,
            at: now,
        };
        b.tokens = b.capacity();
        b
    }

    /// Changes the rate, keeping the tokens.
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps;
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + dt * self.rate_bps as f64 / 8.0).min(self.capacity());
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
        self.at + Duration::from_secs_f64(missing * 8.0 / self.rate_bps.max(1) as f64)
    }
}

/// An update waiting to be sent.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// When it started waiting.
    pub since: Instant,
    /// Not before this (rate tier).
    pub due: Instant,
}

/// One subscriber's pacing state; empty (and free) unless it has tiers or a cap.
#[derive(Debug, Default)]
pub struct Pacing {
    /// Last time each (stream, objectID) was sent.
    pub last_sent: HashMap<(u32, u64), Instant>,
    /// Coalesced updates waiting: at most one per (stream, objectID).
    pub pending: HashMap<(u32, u64), Pending>,
    /// Bandwidth cap, when one applies.
    pub bucket: Option<ByteBucket>,
}

impl Pacing {
    /// Makes `key` pending (keeping when it started waiting, and the earliest due time).
    pub fn defer(&mut self, key: (u32, u64), now: Instant, due: Instant) {
        self.pending
            .entry(key)
            .and_modify(|p| p.due = p.due.min(due))
            .or_insert(Pending { since: now, due });
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
    /// Checks the gate, naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        for (field, v) in [
            ("tolerance", self.tolerance),
            ("tolerance_per_meter", self.tolerance_per_meter),
            ("rotation_tolerance_deg", self.rotation_tolerance_deg),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "interest.prediction.{field}: must be a non-negative number"
                ));
            }
        }
        if !(self.heartbeat_hz.is_finite() && self.heartbeat_hz > 0.0) {
            return Err("interest.prediction.heartbeat_hz: must be a positive number".into());
        }
        Ok(())
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
