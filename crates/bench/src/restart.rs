//! `gsrelay bench restart`: a relay process killed (SIGKILL) and started again on the same
//! ports while publishers and subscribers are in a room. The clients notice the silence
//! (or the port-unreachable errors), resume their sessions with the credential of their
//! join ([`Client::resume`](gsrelay_client::Client::resume); the new relay opens each with
//! its SSRC; a refused credential falls back to a rejoin) and ask for the room again; publishers re-send their static objects on rejoining. The
//! run measures the time from the new relay being ready to every subscriber holding every
//! object again, then checks that they end with the publishers' last state.

use super::peers::{
    self, Liveness, PLAYER, PubHandle, PubPlan, Room, SUBSCRIBER, SubHandle, SubPlan,
};
use super::process::{RelayProcess, RelaySpec, free_loopback_addrs};
use super::scenario::{ChurnRoom, STATIC_ID_BASE, Scenario, Security};
use super::soak::SETTLE;
use anyhow::{Context, bail};
use gsrelay_server::token::Tokens;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long the subscribers get to hold the whole room, before and after the restart.
const FULL_STATE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the run looks at the subscribers.
const POLL: Duration = Duration::from_millis(5);

/// Pause between the publishers' last update and their final one.
const QUIET: Duration = Duration::from_millis(100);

/// What a restart run does (one room).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restart {
    /// Publishers; they also subscribe, so that each hears the others and notices when
    /// the relay goes silent (at least 2).
    pub publishers: usize,
    /// Subscribers.
    pub subscribers: usize,
    /// Live objects per publisher (the bench's default mix).
    pub objects: usize,
    /// Static objects per publisher, sent at start, every 10 s and after a rejoin.
    pub static_objects: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// Silence from the relay after which a client rejoins, ms.
    pub silence_ms: u64,
    /// Time between the kill and the start of the new relay, ms.
    pub down_ms: u64,
    /// SRTP or plain RTP.
    pub security: Security,
}

impl Default for Restart {
    /// The default scenario's room (4 publishers × 20 objects at 30 Hz, 8 subscribers)
    /// with 100 static objects per publisher; clients rejoin after 500 ms of silence; the
    /// relay is started again at once.
    fn default() -> Self {
        Self {
            publishers: 4,
            subscribers: 8,
            objects: 20,
            static_objects: 100,
            rate_hz: 30.0,
            silence_ms: 500,
            down_ms: 0,
            security: Security::Srtp,
        }
    }
}

impl Restart {
    fn scenario(&self) -> anyhow::Result<Scenario> {
        ChurnRoom {
            name: "restart",
            publishers: self.publishers,
            subscribers: self.subscribers,
            objects: self.objects,
            static_objects: self.static_objects,
            rate_hz: self.rate_hz,
            security: self.security,
        }
        .scenario()
    }

    /// Refuses runs that make no sense or exceed the bench's bounds.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.scenario()?;
        if self.publishers < 2 {
            bail!(
                "a restart run needs at least 2 publishers (each notices silence by hearing the others)"
            );
        }
        if !(50..=60_000).contains(&self.silence_ms) || self.down_ms > 60_000 {
            bail!("silence must be 50..=60000 ms and down time at most 60000 ms");
        }
        Ok(())
    }
}

/// What a restart run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartReport {
    /// What ran.
    pub restart: Restart,
    /// First start: from the last subscriber's join to every subscriber holding every
    /// object, ms.
    pub initial_full_ms: f64,
    /// From the kill to the new relay answering `/readyz`, ms.
    pub down_ms: f64,
    /// From the new relay answering `/readyz` to every subscriber holding every object
    /// again, ms. Includes noticing the silence.
    pub restart_to_full_ms: f64,
    /// From the kill to every subscriber holding every object again, ms.
    pub kill_to_full_ms: f64,
    /// Objects each subscriber waited for.
    pub objects: u64,
    /// Rejoins by publishers.
    pub publisher_rejoins: u64,
    /// Rejoins by subscribers.
    pub subscriber_rejoins: u64,
    /// Of all the rejoins, those that resumed the session with its credential (every
    /// client's SSRC is checked unchanged; a changed one fails the run).
    #[serde(default)]
    pub resumes: u64,
    /// `gsrelay_sessions` of the new relay once every subscriber held every object.
    pub sessions_after: f64,
    /// (subscriber, object) pairs compared at the end.
    pub objects_compared: u64,
    /// Pairs where the subscriber lacked the object or held another copy than the last.
    pub objects_lost: u64,
}

impl RestartReport {
    /// The report as a text table.
    pub fn table(&self) -> String {
        let rows = [
            ("objects per subscriber", self.objects.to_string()),
            (
                "initial join → whole room ms",
                format!("{:.1}", self.initial_full_ms),
            ),
            ("kill → new relay ready ms", format!("{:.1}", self.down_ms)),
            (
                "new relay ready → whole room again ms",
                format!("{:.1}", self.restart_to_full_ms),
            ),
            (
                "kill → whole room again ms",
                format!("{:.1}", self.kill_to_full_ms),
            ),
            (
                "rejoins publishers / subscribers",
                format!("{} / {}", self.publisher_rejoins, self.subscriber_rejoins),
            ),
            ("of them resumed (SSRCs kept)", self.resumes.to_string()),
            ("relay sessions after", format!("{}", self.sessions_after)),
            (
                "objects lost / compared",
                format!("{} / {}", self.objects_lost, self.objects_compared),
            ),
        ];
        rows.iter().map(|(k, v)| format!("{k:<40} {v}\n")).collect()
    }
}

/// Runs a restart against `gsrelay serve` started from `exe` on free loopback ports.
pub fn run(r: &Restart, exe: PathBuf) -> anyhow::Result<RestartReport> {
    r.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("gsr-restart")
        .enable_all()
        .build()
        .context("starting the restart runtime")?;
    rt.block_on(drive(r, exe))
}

async fn drive(r: &Restart, exe: PathBuf) -> anyhow::Result<RestartReport> {
    let scenario = r.scenario()?;
    let secret = gsrelay_server::token::dev_secret()?;
    let (http_addr, rtp_addr) = free_loopback_addrs()?;
    let mut args = vec!["--drain-grace-secs".to_owned(), "0".to_owned()];
    if r.security == Security::Plain {
        args.push("--insecure-plain-rtp".to_owned());
    }
    let spec = RelaySpec {
        exe,
        wrapper: Vec::new(),
        http_addr,
        rtp_addr,
        token_secret: secret.clone(),
        args,
    };
    let relay = RelayProcess::start(&spec).await?;
    let room = Room {
        http: relay.http().to_owned(),
        tokens: Tokens::new(secret.as_bytes())?,
        name: "restart".into(),
        plain_rtp: r.security == Security::Plain,
        ttl_s: 3600,
    };
    let liveness = Some(Liveness {
        silence: Duration::from_millis(r.silence_ms),
    });
    let mut publishers = Vec::new();
    let mut expect = Vec::new();
    for n in 0..r.publishers {
        let c = room.join(&format!("pub-{n}"), PLAYER).await?;
        let ids =
            (1..=r.objects as u64).chain((0..r.static_objects as u64).map(|i| STATIC_ID_BASE + i));
        expect.extend(ids.map(|id| (c.ssrc(), id)));
        publishers.push(c);
    }
    let expect = Arc::new(expect);
    let mut subs = Vec::new();
    for n in 0..r.subscribers {
        let c = room.join(&format!("sub-{n}"), SUBSCRIBER).await?;
        let plan = SubPlan {
            expect: expect.clone(),
            liveness,
        };
        subs.push(SubHandle::spawn(c, plan));
    }
    let joined = Instant::now();
    let pubs: Vec<PubHandle> = publishers
        .into_iter()
        .enumerate()
        .map(|(n, c)| {
            let plan = PubPlan {
                live: scenario.live_objects(n),
                statics: scenario.static_objects(n),
                period: scenario.period(),
                static_refresh: Duration::from_secs_f64(scenario.static_refresh_s),
                liveness,
                quiet: QUIET,
            };
            PubHandle::spawn(c, plan)
        })
        .collect();
    let initial = all_full_since(&subs, joined).await?;

    let killed = Instant::now();
    relay.kill()?;
    tokio::time::sleep(Duration::from_millis(r.down_ms)).await;
    let relay = RelayProcess::start(&spec).await?;
    let ready = Instant::now();
    let full = all_full_since(&subs, killed).await?;
    let sessions_after = relay.metric("gsrelay_sessions").await?;
    let publisher_rejoins = pubs
        .iter()
        .map(|p| p.ctl.rejoins.load(Ordering::Relaxed))
        .sum();
    let subscriber_rejoins = subs
        .iter()
        .map(|s| s.ctl.rejoins.load(Ordering::Relaxed))
        .sum();
    let resumes = pubs
        .iter()
        .map(|p| p.ctl.resumes.load(Ordering::Relaxed))
        .chain(subs.iter().map(|s| s.ctl.resumes.load(Ordering::Relaxed)))
        .sum();
    let end = peers::finish(pubs, subs, SETTLE).await?;
    relay.kill()?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(RestartReport {
        restart: r.clone(),
        initial_full_ms: ms(initial - joined),
        down_ms: ms(ready - killed),
        restart_to_full_ms: ms(full.saturating_duration_since(ready)),
        kill_to_full_ms: ms(full - killed),
        objects: expect.len() as u64,
        publisher_rejoins,
        subscriber_rejoins,
        resumes,
        sessions_after,
        objects_compared: end.compared,
        objects_lost: end.lost,
    })
}

/// Waits until every subscriber has held every object since a moment after `since`;
/// returns the moment the last one came to.
pub(super) async fn all_full_since(subs: &[SubHandle], since: Instant) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + FULL_STATE_TIMEOUT;
    loop {
        let at: Option<Vec<Instant>> = subs
            .iter()
            .map(|s| s.ctl.complete_at().filter(|t| *t > since))
            .collect();
        if let Some(last) = at.and_then(|v| v.into_iter().max()) {
            return Ok(last);
        }
        if Instant::now() >= deadline {
            bail!("the subscribers did not all hold the whole room within {FULL_STATE_TIMEOUT:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}
