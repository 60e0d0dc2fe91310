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
use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use gsrelay_core::relay::serde_secs as secs;
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;
use std::sync::Mutex;
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

/// Checks after which [`IdentityLimiter::check`] forgets identities whose bucket is full
/// again, however recent the last time it did (many new identities at once).
const FORGET_EVERY: u32 = 1024;

type Key = (String, String);

/// A token bucket per (room, identity), shared by joins and interest changes. The table
/// holds only identities active within a full bucket's refill time: every join is an
/// identity, and an identity that left is forgotten (with the table's spare capacity)
/// once its bucket is full again, so the table does not grow with the joins a relay has
/// seen.
pub struct IdentityLimiter<C: Clock = DefaultClock> {
    limiter: RateLimiter<Key, DefaultKeyedStateStore<Key>, C, NoOpMiddleware<C::Instant>>,
    checks: AtomicU32,
    /// How long an emptied bucket takes to fill again: past that, an identity's entry is
    /// the same as none.
    refill: Duration,
    /// When identities were last forgotten.
    forgot_at: Mutex<C::Instant>,
}

impl IdentityLimiter {
    /// A limiter with `limits`' rate and burst.
    pub fn new(limits: &HttpLimits) -> anyhow::Result<Self> {
        Self::with_clock(limits, DefaultClock::default())
    }
}

impl<C: Clock> IdentityLimiter<C> {
    /// A limiter with `limits`' rate and burst, timed by `clock`.
    pub fn with_clock(limits: &HttpLimits, clock: C) -> anyhow::Result<Self> {
        let quota = limits.quota()?;
        let now = clock.now();
        Ok(Self {
            limiter: RateLimiter::dashmap_with_clock(quota, clock),
            checks: AtomicU32::new(0),
            refill: quota.burst_size_replenished_in(),
            forgot_at: Mutex::new(now),
        })
    }

    /// Takes one request from the identity's bucket; when it is empty, returns how long
    /// until the next request would be allowed.
    pub fn check(&self, room: &str, identity: &str) -> Result<(), Duration> {
        let now = self.limiter.clock().now();
        let many = self.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1;
        self.forget_idle(now, many);
        let key = (room.to_owned(), identity.to_owned());
        self.limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(now))
    }

    /// Forgets the identities whose bucket is full again, when a refill time has passed
    /// since it last did (or `now_anyway`), and gives back the table's spare capacity.
    fn forget_idle(&self, now: C::Instant, now_anyway: bool) {
        // Another request forgetting just now is as good.
        let Ok(mut at) = self.forgot_at.try_lock() else {
            return;
        };
        if !now_anyway && Duration::from(now.duration_since(*at)) < self.refill {
            return;
        }
        *at = now;
        let before = self.limiter.len();
        self.limiter.retain_recent();
        if self.limiter.len() < before {
            self.limiter.shrink_to_fit();
        }
    }

    /// Identities held (for bounded-state tests).
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.limiter.is_empty()
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
    fn identities_are_forgotten_once_their_bucket_is_full_again() {
        use governor::clock::FakeRelativeClock;
        let clock = FakeRelativeClock::default();
        let limits = HttpLimits::default();
        let limiter = IdentityLimiter::with_clock(&limits, clock.clone()).unwrap();
        let refill = Duration::from_secs_f64(f64::from(limits.rate_burst) / limits.rate_per_sec);
        // A join a second for ten minutes, each a new identity that then leaves.
        for n in 0..600 {
            limiter.check("soak", &format!("sub-{n}")).unwrap();
            clock.advance(Duration::from_secs(1));
        }
        // At most one refill time's identities are held, not every one ever seen.
        let bound = refill.as_secs() as usize + 1;
        assert!(limiter.len() <= bound, "{} > {bound}", limiter.len());
        // A burst of new identities within one refill time is forgotten after it.
        for n in 0..3000 {
            limiter.check("burst", &format!("bot-{n}")).unwrap();
        }
        assert!(limiter.len() > 1000);
        clock.advance(refill);
        limiter.check("soak", "late").unwrap();
        assert!(limiter.len() <= 2, "{}", limiter.len());
        // Forgetting keeps an identity that is still limited.
        for _ in 0..limits.rate_burst {
            limiter.check("soak", "eager").unwrap();
        }
        clock.advance(refill);
        for n in 0..FORGET_EVERY {
            let _ = limiter.check("soak", &format!("again-{n}"));
        }
        for _ in 0..limits.rate_burst {
            limiter.check("soak", "eager").unwrap();
        }
        assert!(limiter.check("soak", "eager").is_err());
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
