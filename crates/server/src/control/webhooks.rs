//! Webhooks: the room service's [`HookEvent`]s POSTed to the backend's URLs, signed.
//!
//! Each configured URL has its own bounded queue and its own delivery task, so a receiver
//! that is slow or down holds up and loses only its own events, never another URL's.
//! [`Webhooks::deliver`] serializes the event once and offers it to every queue with
//! `try_send`: a full queue drops it and counts it, and nothing on the data path ever
//! waits for a receiver (`docs/webhooks.md`).
//!
//! A task delivers its URL's events one at a time, in the order they happened: an event
//! being retried holds up those behind it (which queue, or are dropped once the queue is
//! full) until it is delivered or given up on after [`WebhookConfig::attempts`] attempts.
//! Order matters more to a backend than latency (`participant_left` before
//! `participant_joined` would undo a join), and the queue's bound keeps the wait bounded.
//!
//! Every request carries `Authorization: Bearer <JWT>`, HS256 with the webhook key, whose
//! `sha256` claim is the base64 SHA-256 of the exact body, as LiveKit's webhooks do: the
//! receiver checks the signature (the sender) and the hash (the body). A retry sends the
//! same body, so the same event `id` (also in the `Webhook-Id` header), under a fresh
//! token: receivers drop repeats by `id`, which makes the at-least-once delivery
//! effectively once.

use super::rooms::{HookEvent, Hooks};
use crate::metrics::Metrics;
use crate::metrics::labels::webhook_outcome;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use prometheus::{Histogram, IntCounter, IntGauge};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use url::Url;

/// Events a URL's queue holds unless configured otherwise: minutes of a busy node's
/// joins and leaves, a few hundred kilobytes at most.
pub const DEFAULT_QUEUE: usize = 1024;

/// Seconds one request may take, connecting included, unless configured otherwise.
pub const DEFAULT_TIMEOUT_SECS: u64 = 5;

/// Attempts per event and URL unless configured otherwise: with the backoff, an event is
/// given up on about 15 s (plus the attempts' own time) after its first failure.
pub const DEFAULT_ATTEMPTS: u32 = 6;

/// The wait after the first failed attempt; each further one doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// The longest wait between two attempts, a `Retry-After` included.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Lifetime of a request's token: long enough for any clock skew, short enough that a
/// captured request cannot be replayed for long.
pub const TOKEN_TTL_SECS: u64 = 300;

/// The body's media type, as LiveKit sends it.
pub const MEDIA_TYPE: &str = "application/webhook+json";

/// The header carrying the event's id, the same on every retry.
pub const ID_HEADER: &str = "webhook-id";

/// Where and how webhooks are delivered.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The receivers, each sent every event.
    pub urls: Vec<Url>,
    /// The HS256 signing key (at least [`crate::control::token::MIN_SECRET_LEN`] bytes).
    pub key: Vec<u8>,
    /// The tokens' `iss`: the node's name, or `gsrelay`.
    pub issuer: String,
    /// Events each URL's queue holds; more are dropped.
    pub queue: usize,
    /// How long one request may take, connecting included.
    pub timeout: Duration,
    /// Attempts per event and URL before it is given up on.
    pub attempts: u32,
    /// The wait after the first failed attempt; each further one doubles it, up to
    /// [`MAX_BACKOFF`].
    pub first_backoff: Duration,
}

impl fmt::Debug for WebhookConfig {
    // Hand-written so the signing key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(origin).collect();
        f.debug_struct("WebhookConfig")
            .field("urls", &urls)
            .field("key", &"<redacted>")
            .field("issuer", &self.issuer)
            .field("queue", &self.queue)
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("first_backoff", &self.first_backoff)
            .finish()
    }
}

/// `scheme://host:port` of a receiver's URL, for logs: its path or query may hold a
/// credential.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The claims of a webhook's token.
#[derive(Debug, Serialize)]
struct Claims<'a> {
    iss: &'a str,
    iat: u64,
    exp: u64,
    sha256: &'a str,
}

/// One event ready to send: serialized once, shared by every URL's queue.
#[derive(Debug)]
struct Job {
    id: String,
    body: Bytes,
    /// The body's SHA-256, base64 (standard alphabet, padded).
    sha256: String,
    queued: Instant,
}

/// The webhook metrics, labels resolved once.
#[derive(Clone)]
struct Counters {
    delivered: IntCounter,
    retried: IntCounter,
    rejected: IntCounter,
    failed: IntCounter,
    dropped: IntCounter,
    queued: IntGauge,
    latency: Histogram,
}

impl Counters {
    fn new(metrics: &Metrics) -> Self {
        let outcome = |o| metrics.webhook_deliveries.with_label_values(&[o]);
        Self {
            delivered: outcome(webhook_outcome::DELIVERED),
            retried: outcome(webhook_outcome::RETRIED),
            rejected: outcome(webhook_outcome::REJECTED),
            failed: outcome(webhook_outcome::FAILED),
            dropped: outcome(webhook_outcome::DROPPED),
            queued: metrics.webhook_queued.clone(),
            latency: metrics.webhook_latency.clone(),
        }
    }
}

/// The webhooks of one node: [`Hooks`] for the room service. Dropping it (with the last
/// room service holding it) lets the delivery tasks finish their queues and end.
pub struct Webhooks {
    queues: Vec<mpsc::Sender<Arc<Job>>>,
    counters: Counters,
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhooks")
            .field("urls", &self.queues.len())
            .finish_non_exhaustive()
    }
}

/// The delivery tasks, kept by the server: [`Self::finish`] gives them a while to empty
/// their queues at shutdown; dropping them stops them at once.
pub struct WebhookTasks {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for WebhookTasks {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl WebhookTasks {
    /// Waits until every queue is empty (once the [`Webhooks`] is gone, so no event can
    /// come) or `within` has passed; then what is left, the event in flight included, is
    /// dropped and counted.
    pub async fn finish(mut self, within: Duration) {
        let tasks = std::mem::take(&mut self.tasks);
        let all = async {
            for t in tasks {
                // A task that panicked has nothing left to deliver.
                let _ = t.await;
            }
        };
        tokio::pin!(all);
        if tokio::time::timeout(within, &mut all).await.is_err() {
            tracing::warn!(
                "webhooks still undelivered at shutdown; dropping them (counted as dropped)"
            );
            let _ = self.stop.send(true);
            // Each task now counts its rest without sending anything: quick.
            all.await;
        }
    }
}

impl Webhooks {
    /// Starts one delivery task per URL, on the current Tokio runtime.
    pub fn start(cfg: WebhookConfig, metrics: &Metrics) -> anyhow::Result<(Self, WebhookTasks)> {
        let client = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout)
            // A redirect would turn the POST into a GET, or send the body and its token
            // somewhere not configured: a 3xx is a receiver's mistake, counted rejected.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("gsrelay/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let counters = Counters::new(metrics);
        let (stop, stopped) = watch::channel(false);
        let mut queues = Vec::with_capacity(cfg.urls.len());
        let mut tasks = Vec::with_capacity(cfg.urls.len());
        for url in &cfg.urls {
            let (tx, rx) = mpsc::channel(cfg.queue.max(1));
            let target = Target {
                url: url.clone(),
                client: client.clone(),
                key: EncodingKey::from_secret(&cfg.key),
                issuer: cfg.issuer.clone(),
                attempts: cfg.attempts.max(1),
                first_backoff: cfg.first_backoff,
                counters: counters.clone(),
            };
            queues.push(tx);
            tasks.push(tokio::spawn(target.run(rx, stopped.clone())));
        }
        tracing::info!(urls = ?cfg.urls.iter().map(origin).collect::<Vec<_>>(), "webhooks on");
        Ok((Self { queues, counters }, WebhookTasks { stop, tasks }))
    }
}

impl Hooks for Webhooks {
    fn deliver(&self, event: HookEvent) {
        let body = match serde_json::to_vec(&event) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                // Not expected: the event is plain data. Counted so it is not silent.
                tracing::error!(error = %e, event = event.event, "webhook body not serializable");
                self.counters.dropped.inc();
                return;
            }
        };
        let sha256 = STANDARD.encode(ring::digest::digest(&ring::digest::SHA256, &body));
        let job = Arc::new(Job {
            id: event.id,
            body,
            sha256,
            queued: Instant::now(),
        });
        for q in &self.queues {
            match q.try_send(job.clone()) {
                Ok(()) => self.counters.queued.inc(),
                // Full (a receiver slow or down for a while) or closed (shutting down).
                Err(_) => {
                    tracing::debug!(id = %job.id, event = event.event, "webhook queue full; dropped");
                    self.counters.dropped.inc();
                }
            }
        }
    }
}

/// What one attempt came to.
enum Verdict {
    /// A 2xx.
    Delivered,
    /// Worth another attempt (connection or timeout error, 408, 429, 5xx), after the
    /// receiver's `Retry-After` if it gave one.
    Retry(String, Option<Duration>),
    /// Not worth another (any other status): the receiver refuses this request.
    Refused(String),
}

/// One URL's delivery.
struct Target {
    url: Url,
    client: reqwest::Client,
    key: EncodingKey,
    issuer: String,
    attempts: u32,
    first_backoff: Duration,
    counters: Counters,
}

/// Unix seconds now.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Target {
    /// Delivers the queue's events in order until the queue is closed and empty, or
    /// `stop` turns true (or its sender is gone); then counts what is left as dropped.
    async fn run(self, mut queue: mpsc::Receiver<Arc<Job>>, mut stop: watch::Receiver<bool>) {
        loop {
            let job = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                job = queue.recv() => match job {
                    Some(job) => job,
                    None => return,
                },
            };
            self.counters.queued.dec();
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => {
                    self.counters.dropped.inc();
                    break;
                }
                () = self.send(&job) => {}
            }
        }
        queue.close();
        while queue.try_recv().is_ok() {
            self.counters.queued.dec();
            self.counters.dropped.inc();
        }
    }

    /// Sends one event, retrying with backoff; counts how it ended.
    async fn send(&self, job: &Job) {
        let mut attempt = 1;
        loop {
            match self.attempt(job).await {
                Verdict::Delivered => {
                    self.counters.delivered.inc();
                    self.counters
                        .latency
                        .observe(job.queued.elapsed().as_secs_f64());
                    return;
                }
                Verdict::Refused(why) => {
                    self.counters.rejected.inc();
                    tracing::warn!(url = %origin(&self.url), id = %job.id, %why, "webhook refused; not retried");
                    return;
                }
                Verdict::Retry(why, _) if attempt >= self.attempts => {
                    self.counters.failed.inc();
                    tracing::warn!(url = %origin(&self.url), id = %job.id, %why, attempts = attempt, "webhook undelivered; given up");
                    return;
                }
                Verdict::Retry(why, after) => {
                    self.counters.retried.inc();
                    let wait = after.map_or_else(
                        || backoff(self.first_backoff, attempt),
                        |a| a.min(MAX_BACKOFF),
                    );
                    tracing::debug!(url = %origin(&self.url), id = %job.id, %why, ?wait, "webhook attempt failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    /// One POST of `job`, under a token made now.
    async fn attempt(&self, job: &Job) -> Verdict {
        let iat = unix_now();
        let claims = Claims {
            iss: &self.issuer,
            iat,
            exp: iat + TOKEN_TTL_SECS,
            sha256: &job.sha256,
        };
        let token = match jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.key) {
            Ok(t) => t,
            // Not expected with an HMAC key; retrying would fail the same way.
            Err(e) => return Verdict::Refused(format!("signing: {e}")),
        };
        let sent = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, MEDIA_TYPE)
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .header(ID_HEADER, job.id.as_str())
            .body(job.body.clone())
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            // Refused, reset, timed out, a broken answer: the receiver may be back soon.
            Err(e) => return Verdict::Retry(error_chain(&e.without_url()), None),
        };
        let status = resp.status();
        if status.is_success() {
            Verdict::Delivered
        } else if status.is_server_error()
            || status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT
        {
            let after = resp.headers().get(RETRY_AFTER).and_then(retry_after);
            Verdict::Retry(format!("status {status}"), after)
        } else {
            Verdict::Refused(format!("status {status}"))
        }
    }
}

/// An error and its causes, which say what actually failed (refused, reset, timed out).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// A `Retry-After` of whole seconds; its date form is ignored (the backoff applies).
fn retry_after(v: &HeaderValue) -> Option<Duration> {
    let secs: u64 = v.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs))
}

/// The wait after failed attempt `attempt` (1 for the first): `first` doubled each time,
/// at most [`MAX_BACKOFF`], with "equal jitter" (half of it fixed, half random) so that
/// many nodes retrying one receiver do not come back in step.
fn backoff(first: Duration, attempt: u32) -> Duration {
    let full = first
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
        .min(MAX_BACKOFF);
    // Without the OS's randomness the wait is the full one: still bounded, only in step.
    let r = getrandom::u32().unwrap_or(u32::MAX);
    let half = full / 2;
    half + half.mul_f64(f64::from(r) / f64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let first = Duration::from_millis(500);
        for attempt in 1..=10 {
            let full = (first * (1 << (attempt - 1))).min(MAX_BACKOFF);
            let b = backoff(first, attempt);
            assert!(b >= full / 2 && b <= full, "attempt {attempt}: {b:?}");
        }
        assert!(backoff(first, u32::MAX) <= MAX_BACKOFF);
    }

    #[test]
    fn retry_after_takes_seconds_only() {
        let v = |s: &str| retry_after(&HeaderValue::from_str(s).unwrap());
        assert_eq!(v("3"), Some(Duration::from_secs(3)));
        assert_eq!(v(" 0 "), Some(Duration::ZERO));
        assert_eq!(v("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(v("-1"), None);
    }

    #[test]
    fn debug_hides_the_key_and_the_paths() {
        let cfg = WebhookConfig {
            urls: vec![Url::parse("https://hooks.example.com/in?token=abc").unwrap()],
            key: b"very-secret-webhook-key".to_vec(),
            issuer: "gsrelay".into(),
            queue: 1,
            timeout: Duration::from_secs(1),
            attempts: 1,
            first_backoff: FIRST_BACKOFF,
        };
        let s = format!("{cfg:?}");
        assert!(!s.contains("very-secret"), "{s}");
        assert!(!s.contains("token=abc"), "{s}");
        assert!(s.contains("https://hooks.example.com"), "{s}");
    }
}
