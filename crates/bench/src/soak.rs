//! `gsrelay bench soak`: a long run at a steady load with subscribers churning, against a
//! relay in a child process so its memory is its own. Reports the relay's RSS over time,
//! the joins and leaves done, how fast each new subscriber got the whole room, and whether
//! every subscriber present at the end holds every publisher's last state.

use super::impair::Rng;
use super::peers::{self, PUBLISHER, PubHandle, PubPlan, Room, SUBSCRIBER, SubHandle, SubPlan};
use super::process::{RelayProcess, RelaySpec, free_loopback_addrs};
use super::scenario::{STATIC_ID_BASE, Scenario, Security};
use super::state::ObjectKey;
use anyhow::{Context, bail};
use gsrelay_server::token::Tokens;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Between two readings of the relay's RSS.
const RSS_EVERY: Duration = Duration::from_secs(10);

/// Between two progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

/// Pause between the end of the load and the publishers' final update.
pub(super) const QUIET: Duration = Duration::from_millis(300);

/// Time the final update gets to reach every subscriber.
pub(super) const SETTLE: Duration = Duration::from_millis(700);

/// Between the last leave and the settled RSS reading.
const AFTER_LEAVE_WAIT: Duration = Duration::from_secs(5);

/// Longest soak, seconds.
const MAX_SECONDS: f64 = 86_400.0;

/// Most churn, joins (and leaves) per second.
const MAX_CHURN: f64 = 100.0;

/// Where the late RSS growth is measured from in a run of at least twice as long: minute
/// 10, past the first rooms' and sessions' tables reaching their working size.
const LATE_FROM: Duration = Duration::from_secs(600);

/// A command the relay runs under (words split at white space, e.g. a heap profiler's
/// wrapper that ends by exec-ing its arguments); unset or empty for none.
pub const WRAPPER_ENV: &str = "GSRELAY_SOAK_WRAPPER";

/// What a soak does. Counts are per room (one room).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Soak {
    /// Publishers.
    pub publishers: usize,
    /// Subscribers present at any time.
    pub subscribers: usize,
    /// Live objects per publisher (the bench's default mix), each with a new `time` at
    /// every update.
    pub objects: usize,
    /// Static objects per publisher, re-sent every 10 s: a joining subscriber gets them
    /// from the relay's store.
    pub static_objects: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// Load before the measurement starts (no churn), seconds.
    pub warmup_s: f64,
    /// Measured load with churn, seconds.
    pub duration_s: f64,
    /// Subscribers replaced per second: one leaves, a new one joins and sends a FIR.
    pub churn_per_s: f64,
    /// SRTP or plain RTP.
    pub security: Security,
    /// Seed of the choice of who leaves.
    pub seed: u64,
}

impl Default for Soak {
    /// Half the saturating load of the SRTP sweep (about 165 000 received packets/s
    /// saturates): 4 publishers × 2 packets × 1 290 Hz × 8 subscribers ≈ 82 600
    /// packets/s, for 10 minutes, one subscriber replaced per second.
    fn default() -> Self {
        Self {
            publishers: 4,
            subscribers: 8,
            objects: 20,
            static_objects: 100,
            rate_hz: 1290.0,
            warmup_s: 5.0,
            duration_s: 600.0,
            churn_per_s: 1.0,
            security: Security::Srtp,
            seed: 1,
        }
    }
}

impl Soak {
    /// The scenario that makes the objects and checks counts and rate.
    fn scenario(&self) -> anyhow::Result<Scenario> {
        let s = Scenario {
            name: "soak".into(),
            publishers: self.publishers,
            subscribers: self.subscribers,
            objects: self.objects,
            static_objects: self.static_objects,
            rate_hz: self.rate_hz,
            late_joiners: 0,
            duration_s: 1.0,
            warmup_s: 0.0,
            late_join_at_s: 0.0,
            security: self.security,
            seed: self.seed,
            ..Scenario::default()
        };
        s.validate()?;
        Ok(s)
    }

    /// Refuses soaks that make no sense or exceed the bench's bounds.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.scenario()?;
        let secs = |v: f64| v.is_finite() && v >= 0.0;
        if !(secs(self.warmup_s) && secs(self.duration_s) && self.duration_s > 0.0)
            || self.warmup_s + self.duration_s > MAX_SECONDS
        {
            bail!("duration must be > 0, warm-up >= 0, together at most {MAX_SECONDS} s");
        }
        if !(secs(self.churn_per_s) && self.churn_per_s <= MAX_CHURN) {
            bail!("churn must be 0..={MAX_CHURN} per second");
        }
        Ok(())
    }
}

/// Snapshot times of the subscribers that joined during the soak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JoinTimes {
    /// Joins that came to hold every object (join answer → whole room), ms.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// See `p50_ms`.
    pub max_ms: f64,
    /// Joiners that held every object before they left.
    pub completed: u64,
    /// Joiners that left (or the soak ended) before they did.
    pub incomplete: u64,
}

/// What a soak measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    /// What ran.
    pub soak: Soak,
    /// Publisher packets per second over warm-up and duration.
    pub sent_pps: f64,
    /// Packets received per second by all subscribers together.
    pub received_pps: f64,
    /// `received_pps` / (`sent_pps` × subscribers): below 1 by loss and by the moments a
    /// churned subscriber is between leaving and joining.
    pub delivery_ratio: f64,
    /// Subscribers that left.
    pub leaves: u64,
    /// Subscribers that joined in their place.
    pub joins: u64,
    /// How fast the new ones got the whole room.
    pub join_times: JoinTimes,
    /// Relay RSS once started, before any client, bytes.
    pub rss_idle_bytes: Option<u64>,
    /// Relay RSS at the end of the warm-up, bytes.
    pub rss_start_bytes: Option<u64>,
    /// Relay RSS at the end of the duration, bytes.
    pub rss_end_bytes: Option<u64>,
    /// Relay RSS after every client left, bytes.
    pub rss_after_leave_bytes: Option<u64>,
    /// Relay RSS 5 s after every client left (past the relay's own
    /// clean-up of what sessions leave behind for a while), bytes.
    pub rss_after_leave_settled_bytes: Option<u64>,
    /// Relay RSS every 10 s: seconds since the start of the duration, bytes.
    pub rss_samples: Vec<(f64, u64)>,
    /// (subscriber, object) pairs compared at the end: every subscriber present against
    /// every publisher's live and static objects.
    pub objects_compared: u64,
    /// Pairs where the subscriber lacked the object or held another copy than the one
    /// its publisher sent last.
    pub objects_lost: u64,
    /// `gsrelay_sessions` at the end, with every client joined.
    pub relay_sessions_end: f64,
    /// `gsrelay_cached_objects` at the end.
    pub relay_cached_objects_end: f64,
    /// `gsrelay_sessions` after every client left.
    pub relay_sessions_after_leave: f64,
    /// `gsrelay_cached_objects` after every client left.
    pub relay_cached_objects_after_leave: f64,
}

/// Runs a soak against `gsrelay serve` started from `exe` on free loopback ports.
pub fn run(soak: &Soak, exe: PathBuf, progress: bool) -> anyhow::Result<SoakReport> {
    soak.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("gsr-soak")
        .enable_all()
        .build()
        .context("starting the soak runtime")?;
    rt.block_on(drive(soak, exe, progress))
}

async fn drive(soak: &Soak, exe: PathBuf, progress: bool) -> anyhow::Result<SoakReport> {
    let scenario = soak.scenario()?;
    let secret = gsrelay_server::token::dev_secret()?;
    let (http_addr, rtp_addr) = free_loopback_addrs()?;
    let wrapper = std::env::var(WRAPPER_ENV)
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let relay = RelayProcess::start(&RelaySpec {
        exe,
        wrapper,
        http_addr,
        rtp_addr,
        token_secret: secret.clone(),
        args: relay_args(soak),
    })
    .await?;
    let rss_idle_bytes = relay.rss_bytes();
    let room = Room {
        http: relay.http().to_owned(),
        tokens: Tokens::new(secret.as_bytes())?,
        name: "soak".into(),
        plain_rtp: soak.security == Security::Plain,
        ttl_s: (soak.warmup_s + soak.duration_s) as u64 + 600,
    };

    // Subscribers first, so that none misses the first packets.
    let mut subs = Vec::new();
    for n in 0..soak.subscribers {
        let c = room.join(&format!("sub-{n}"), SUBSCRIBER).await?;
        subs.push(SubHandle::spawn(c, SubPlan::default()));
    }
    let mut pubs = Vec::new();
    let mut expect = Vec::new();
    for n in 0..soak.publishers {
        let c = room.join(&format!("pub-{n}"), PUBLISHER).await?;
        let ids = (1..=soak.objects as u64)
            .chain((0..soak.static_objects as u64).map(|i| STATIC_ID_BASE + i));
        expect.extend(ids.map(|id| (c.ssrc(), id)));
        let plan = PubPlan {
            live: scenario.live_objects(n),
            statics: scenario.static_objects(n),
            period: scenario.period(),
            static_refresh: Duration::from_secs_f64(scenario.static_refresh_s),
            liveness: None,
            quiet: QUIET,
        };
        pubs.push(PubHandle::spawn(c, plan));
    }
    let expect: Arc<Vec<ObjectKey>> = Arc::new(expect);
    let t0 = Instant::now();

    tokio::time::sleep(Duration::from_secs_f64(soak.warmup_s)).await;
    let rss_start_bytes = relay.rss_bytes();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(soak.duration_s);
    let mut rss_samples = Vec::new();
    let mut next_rss = start;
    let churn_every =
        (soak.churn_per_s > 0.0).then(|| Duration::from_secs_f64(1.0 / soak.churn_per_s));
    let mut next_churn = churn_every.map(|d| start + d);
    let mut churn = Churn {
        rng: Rng::new(soak.seed),
        next_name: soak.subscribers,
        joins: 0,
        leaves: 0,
        received: 0,
        times: Vec::new(),
    };
    let mut next_report = start + PROGRESS_EVERY;
    loop {
        let now = Instant::now();
        if now >= next_rss {
            if let Some(rss) = relay.rss_bytes() {
                rss_samples.push(((now - start).as_secs_f64(), rss));
            }
            next_rss += RSS_EVERY;
        }
        if progress && now >= next_report {
            eprintln!(
                "soak: {:.0}/{:.0} s, relay RSS {:.1} MB, {} joins",
                (now - start).as_secs_f64(),
                soak.duration_s,
                relay.rss_bytes().unwrap_or(0) as f64 / 1e6,
                churn.joins
            );
            next_report += PROGRESS_EVERY;
        }
        if now >= end {
            break;
        }
        if let (Some(at), Some(every)) = (next_churn, churn_every)
            && now >= at
        {
            churn.replace_one(&mut subs, &room, &expect).await?;
            next_churn = Some(at + every);
        }
        let wake = [Some(next_rss), Some(end), next_churn]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
        tokio::time::sleep_until(wake.into()).await;
    }
    let rss_end_bytes = relay.rss_bytes();

    let relay_sessions_end = relay.metric("gsrelay_sessions").await?;
    let relay_cached_objects_end = relay.metric("gsrelay_cached_objects").await?;
    let end = peers::finish(pubs, subs, SETTLE).await?;
    let loaded = (t0.elapsed() - SETTLE).as_secs_f64();
    churn.received += end.received;
    churn.times.extend(end.completed_after);
    // A leave is handled before its DELETE answers: nothing is pending here.
    let relay_sessions_after_leave = relay.metric("gsrelay_sessions").await?;
    let relay_cached_objects_after_leave = relay.metric("gsrelay_cached_objects").await?;
    let rss_after_leave_bytes = relay.rss_bytes();
    tokio::time::sleep(AFTER_LEAVE_WAIT).await;
    let rss_after_leave_settled_bytes = relay.rss_bytes();
    relay.kill()?;

    let sent_pps = end.sent as f64 / loaded;
    let received_pps = churn.received as f64 / loaded;
    Ok(SoakReport {
        soak: soak.clone(),
        sent_pps,
        received_pps,
        delivery_ratio: received_pps / (sent_pps * soak.subscribers as f64).max(f64::MIN_POSITIVE),
        leaves: churn.leaves,
        joins: churn.joins,
        join_times: JoinTimes::from(&churn.times),
        rss_idle_bytes,
        rss_start_bytes,
        rss_end_bytes,
        rss_after_leave_bytes,
        rss_after_leave_settled_bytes,
        rss_samples,
        objects_compared: end.compared,
        objects_lost: end.lost,
        relay_sessions_end,
        relay_cached_objects_end,
        relay_sessions_after_leave,
        relay_cached_objects_after_leave,
    })
}

/// The relay's flags for a soak: no per-session rate limit in the way, room enough for
/// the clients, no drain wait at the end.
fn relay_args(soak: &Soak) -> Vec<String> {
    let mut args: Vec<String> = [
        "--max-packets-per-sec",
        "1000000",
        "--drain-grace-secs",
        "0",
        "--max-sessions-per-room",
    ]
    .map(str::to_owned)
    .to_vec();
    args.push((soak.publishers + soak.subscribers + 8).to_string());
    if soak.security == Security::Plain {
        args.push("--insecure-plain-rtp".to_owned());
    }
    args
}

/// Subscribers leaving and joining, and what they leave behind.
struct Churn {
    rng: Rng,
    next_name: usize,
    joins: u64,
    leaves: u64,
    /// Packets received by the subscribers that have stopped.
    received: u64,
    /// Join → whole room of each joiner that has stopped.
    times: Vec<Option<Duration>>,
}

impl Churn {
    /// One subscriber, picked at random, leaves; a new one joins, asks for the room and
    /// waits for all of it.
    async fn replace_one(
        &mut self,
        subs: &mut Vec<SubHandle>,
        room: &Room,
        expect: &Arc<Vec<ObjectKey>>,
    ) -> anyhow::Result<()> {
        let i = (self.rng.next_u64() % subs.len().max(1) as u64) as usize;
        if i < subs.len() {
            let gone = subs.swap_remove(i);
            let waits = gone.waits;
            let done = gone.stop().await?;
            self.received += done.packets;
            if waits {
                self.times.push(done.completed_after);
            }
            done.client.leave().await.context("leaving")?;
            self.leaves += 1;
        }
        let name = format!("sub-{}", self.next_name);
        let c = room.join(&name, SUBSCRIBER).await?;
        self.next_name += 1;
        self.joins += 1;
        let plan = SubPlan {
            expect: expect.clone(),
            liveness: None,
        };
        subs.push(SubHandle::spawn(c, plan));
        Ok(())
    }
}

impl JoinTimes {
    fn from(times: &[Option<Duration>]) -> Self {
        let mut done: Vec<f64> = times
            .iter()
            .flatten()
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        done.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let i = ((done.len() as f64 * p).ceil() as usize).saturating_sub(1);
            done.get(i).copied().unwrap_or(0.0)
        };
        Self {
            p50_ms: q(0.5),
            p99_ms: q(0.99),
            max_ms: done.last().copied().unwrap_or(0.0),
            completed: done.len() as u64,
            incomplete: times.iter().filter(|t| t.is_none()).count() as u64,
        }
    }
}

/// `a` → `b` as a change in MB and per cent, or `-`.
fn growth(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!(
            "{:+.2} MB ({:+.1}%)",
            (b as f64 - a as f64) / 1e6,
            (b as f64 / a as f64 - 1.0) * 100.0
        ),
        _ => "-".to_owned(),
    }
}

impl SoakReport {
    /// The late RSS growth: from the sample at minute 10 (or, in a run shorter than 20
    /// minutes, halfway) to the last sample; the start's seconds and both readings.
    pub fn late_growth(&self) -> Option<(f64, u64, u64)> {
        let from = LATE_FROM
            .as_secs_f64()
            .min(self.soak.duration_s / 2.0)
            .max(0.0);
        let first = self.rss_samples.iter().find(|s| s.0 >= from)?;
        let last = self.rss_samples.last()?;
        (last.0 > first.0).then_some((first.0, first.1, last.1))
    }

    /// Bytes of RSS the relay kept per join: after every client left (settled) against
    /// idle, over the joins.
    pub fn kept_per_join(&self) -> Option<f64> {
        let (idle, after) = (self.rss_idle_bytes?, self.rss_after_leave_settled_bytes?);
        let joins = self.joins + (self.soak.publishers + self.soak.subscribers) as u64;
        Some((after as f64 - idle as f64) / joins.max(1) as f64)
    }

    /// The report as a text table.
    pub fn table(&self) -> String {
        let mb = |b: Option<u64>| b.map_or("-".to_owned(), |b| format!("{:.2} MB", b as f64 / 1e6));
        let late = self.late_growth();
        let j = &self.join_times;
        let rows = [
            (
                "duration (+ warm-up)",
                format!("{} s (+ {} s)", self.soak.duration_s, self.soak.warmup_s),
            ),
            ("sent pps", format!("{:.0}", self.sent_pps)),
            ("received pps", format!("{:.0}", self.received_pps)),
            ("delivery ratio", format!("{:.4}", self.delivery_ratio)),
            (
                "leaves / joins",
                format!("{} / {}", self.leaves, self.joins),
            ),
            (
                "join → whole room p50 / p99 / max ms",
                format!("{:.1} / {:.1} / {:.1}", j.p50_ms, j.p99_ms, j.max_ms),
            ),
            (
                "joins complete / incomplete",
                format!("{} / {}", j.completed, j.incomplete),
            ),
            ("relay RSS idle", mb(self.rss_idle_bytes)),
            ("relay RSS start", mb(self.rss_start_bytes)),
            ("relay RSS end", mb(self.rss_end_bytes)),
            (
                "relay RSS growth",
                growth(self.rss_start_bytes, self.rss_end_bytes),
            ),
            (
                "relay RSS late growth (from)",
                late.map_or("-".to_owned(), |(at, a, b)| {
                    format!("{} (from {at:.0} s)", growth(Some(a), Some(b)))
                }),
            ),
            ("relay RSS after all left", mb(self.rss_after_leave_bytes)),
            (
                "relay RSS 5 s after all left",
                mb(self.rss_after_leave_settled_bytes),
            ),
            (
                "relay RSS after all left − idle, per join",
                self.kept_per_join()
                    .map_or("-".to_owned(), |b| format!("{b:.0} B")),
            ),
            (
                "objects lost / compared",
                format!("{} / {}", self.objects_lost, self.objects_compared),
            ),
            (
                "relay sessions / cached objects at end",
                format!(
                    "{} / {}",
                    self.relay_sessions_end, self.relay_cached_objects_end
                ),
            ),
            (
                "relay sessions / cached objects after all left",
                format!(
                    "{} / {}",
                    self.relay_sessions_after_leave, self.relay_cached_objects_after_leave
                ),
            ),
        ];
        rows.iter().map(|(k, v)| format!("{k:<48} {v}\n")).collect()
    }
}
