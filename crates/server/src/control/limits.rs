//! Limits on the HTTP API: how long a client may take to send a request, how many
//! requests run at once, how often one identity may join or change its interest, and
//! which other origins' pages may call it at all.
//!
//! [`HttpLimits`] is the `[http]` table of the configuration. The connection timeouts are
//! enforced by `control::conn`, the body timeout, the in-flight limit and the rate limit by
//! the router in [`super::http`]; [`IdentityLimiter`] is the rate limit's state. The
//! allowed origins are [`super::cors`]'s policy.

use super::cors::AllowedOrigins;
use anyhow::ensure;
use governor::{DefaultKeyedRateLimiter, Quota};
use gsrelay_core::relay::serde_secs as secs;
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The HTTP API's limits (`[http]` in the configuration file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpLimits {
    /// A request head (request line and headers) must arrive whole within this long of
    /// the connection opening or of the first byte of a later request; otherwise the
    /// connection is closed (slowloris).
    #[serde(with = "secs")]
    pub header_timeout: Duration,
    /// A request body must arrive whole within this long of the handler asking for it;
    /// otherwise the answer is 408 `request_timeout`.
    #[serde(with = "secs")]
    pub body_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed. Longer than a
    /// load balancer's idle timeout, so the balancer, not the relay, closes first.
    #[serde(with = "secs")]
    pub idle_timeout: Duration,
    /// `/v1` requests handled at once; more get 503 `overloaded` at once instead of
    /// queueing. `/metrics`, `/healthz` and `/readyz` are not counted.
    pub max_in_flight: usize,
    /// Joins and interest changes one identity (room + token subject) may make per
    /// second, sustained; more get 429 `rate_limited`.
    pub rate_per_sec: f64,
    /// How many joins and interest changes one identity may make in a burst.
    pub rate_burst: u32,
    /// Origins whose pages may call the API and import `/client/gsrelay.js` (CORS):
    /// any origin by default, none when empty.
    pub cors_allowed_origins: AllowedOrigins,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            max_in_flight: 256,
            rate_per_sec: 5.0,
            rate_burst: 20,
            cors_allowed_origins: AllowedOrigins::default(),
        }
    }
}

impl HttpLimits {
    /// Refuses values that would disable a limit by accident (zero or negative).
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, d) in [
            ("header_timeout", self.header_timeout),
            ("body_timeout", self.body_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            ensure!(!d.is_zero(), "http.{name} must be more than zero");
        }
        ensure!(
            self.max_in_flight > 0,
            "http.max_in_flight must be at least 1"
        );
        ensure!(
            self.rate_per_sec.is_finite() && self.rate_per_sec > 0.0,
            "http.rate_per_sec must be a positive number"
        );
        ensure!(self.rate_burst > 0, "http.rate_burst must be at least 1");
        Ok(())
    }

    /// The rate limit as a quota: one request per `1 / rate_per_sec`, `rate_burst` at once.
    fn quota(&self) -> anyhow::Result<Quota> {
        let period = Duration::try_from_secs_f64(1.0 / self.rate_per_sec)?;
        let burst = NonZeroU32::new(self.rate_burst)
            .ok_or_else(|| anyhow::anyhow!("http.rate_burst must be at least 1"))?;
        let quota = Quota::with_period(period)
            .ok_or_else(|| anyhow::anyhow!("http.rate_per_sec is too high"))?;
        Ok(quota.allow_burst(burst))
    }
}

/// How often [`IdentityLimiter::check`] forgets identities whose bucket is full again, so
/// the table holds only identities active within the last burst's refill time.
const FORGET_EVERY: u32 = 1024;

/// A token bucket per (room, identity), shared by joins and interest changes.
pub struct IdentityLimiter {
    limiter: DefaultKeyedRateLimiter<(String, String)>,
    checks: AtomicU32,
}

impl IdentityLimiter {
    /// A limiter with `limits`' rate and burst.
    pub fn new(limits: &HttpLimits) -> anyhow::Result<Self> {
        Ok(Self {
            limiter: DefaultKeyedRateLimiter::keyed(limits.quota()?),
            checks: AtomicU32::new(0),
        })
    }

    /// Takes one request from the identity's bucket; when it is empty, returns how long
    /// until the next request would be allowed.
    pub fn check(&self, room: &str, identity: &str) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            self.limiter.retain_recent();
        }
        let key = (room.to_owned(), identity.to_owned());
        self.limiter.check_key(&key).map_err(|not_until| {
            use governor::clock::Clock as _;
            not_until.wait_time_from(self.limiter.clock().now())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        HttpLimits::default().validate().unwrap();
        IdentityLimiter::new(&HttpLimits::default()).unwrap();
    }

    #[test]
    fn zero_limits_are_refused() {
        let bad = [
            HttpLimits {
                header_timeout: Duration::ZERO,
                ..HttpLimits::default()
            },
            HttpLimits {
                max_in_flight: 0,
                ..HttpLimits::default()
            },
            HttpLimits {
                rate_per_sec: 0.0,
                ..HttpLimits::default()
            },
            HttpLimits {
                rate_per_sec: f64::NAN,
                ..HttpLimits::default()
            },
            HttpLimits {
                rate_burst: 0,
                ..HttpLimits::default()
            },
        ];
        for limits in bad {
            assert!(limits.validate().is_err(), "{limits:?}");
        }
    }

    #[test]
    fn buckets_are_per_room_and_identity() {
        let limiter = IdentityLimiter::new(&HttpLimits {
            rate_per_sec: 0.01,
            rate_burst: 2,
            ..HttpLimits::default()
        })
        .unwrap();
        assert!(limiter.check("a", "alice").is_ok());
        assert!(limiter.check("a", "alice").is_ok());
        let wait = limiter.check("a", "alice").unwrap_err();
        assert!(wait > Duration::from_secs(90) && wait <= Duration::from_secs(100));
        assert!(limiter.check("a", "bob").is_ok());
        assert!(limiter.check("b", "alice").is_ok());
    }
}
