//! Clients of the soak and restart runs: a publisher whose objects change at every update
//! and a subscriber that keeps a [`View`] of the room, each in its own task, against a
//! relay whose token secret the bench knows. Both may rejoin when the relay goes silent
//! (see [`Liveness`]).

use super::state::{ObjectKey, Update, View, encode_update, set_time};
use anyhow::Context;
use gsrelay_client::{Client, ClientError, JoinOptions};
use gsrelay_core::wire::{Dialect, Object};
use gsrelay_net::udp::recv::RecvBatch;
use gsrelay_server::token::{Rights, Tokens};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinHandle;

/// Reads a subscriber takes per wake-up (each up to a GSO train of datagrams).
const SUB_READS: usize = 4;

/// Subscribers send an RR this often so the relay does not time their session out.
const KEEPALIVE: Duration = Duration::from_secs(5);

/// A subscriber waiting for the whole room repeats its FIR this often (the FIR or a
/// snapshot packet may be lost, or the relay may not hold the state yet).
const FIR_RETRY: Duration = Duration::from_millis(250);

/// The shortest wait for a packet, so that a loop at the silence's edge does not spin.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// How long a rejoin waits before trying again when the relay refuses or is down.
const REJOIN_RETRY: Duration = Duration::from_millis(50);

/// Largest payload a publisher packs, bytes (as the bench's default scenario).
const PAYLOAD_BUDGET: usize = 1100;

/// Rights of a session that only receives.
pub const SUBSCRIBER: Rights = Rights {
    publish: false,
    subscribe: true,
    admin: false,
};

/// Rights of a session that only sends.
pub const PUBLISHER: Rights = Rights {
    publish: true,
    subscribe: false,
    admin: false,
};

/// Rights of a session that sends and receives, as a player's.
pub const PLAYER: Rights = Rights {
    publish: true,
    subscribe: true,
    admin: false,
};

/// Where the clients join, with tokens the bench issues itself.
pub struct Room {
    /// HTTP base URL of the relay.
    pub http: String,
    /// Signs the tokens.
    pub tokens: Tokens,
    /// Room name.
    pub name: String,
    /// Plain RTP instead of SRTP.
    pub plain_rtp: bool,
    /// Token lifetime, seconds.
    pub ttl_s: u64,
}

impl Room {
    /// Joins as `identity`. Subscribers send RRs at once so that the relay latches their
    /// address.
    pub async fn join(&self, identity: &str, rights: Rights) -> anyhow::Result<Client> {
        self.join_at(&self.http, identity, rights).await
    }

    /// Joins as `identity` through the HTTP API at `http` rather than the room's own (a
    /// cluster's node of the caller's choosing), as [`join`](Self::join) does.
    pub async fn join_at(
        &self,
        http: &str,
        identity: &str,
        rights: Rights,
    ) -> anyhow::Result<Client> {
        self.join_with(http, identity, rights, false).await
    }

    /// Joins as `identity` through `http`; with `keep_ssrc`, a rejoin fails rather than
    /// take another SSRC while the old one is still in use (in a cluster, until the
    /// surviving nodes have dropped a dead node's streams), so that a publisher's objects
    /// keep their keys.
    pub async fn join_with(
        &self,
        http: &str,
        identity: &str,
        rights: Rights,
        keep_ssrc: bool,
    ) -> anyhow::Result<Client> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let token = self
            .tokens
            .issue(&self.name, identity, rights, self.ttl_s, now)?;
        let opts = JoinOptions {
            dialect: Dialect::Draft01,
            plain_rtp: self.plain_rtp,
            require_ssrc: keep_ssrc,
            ..JoinOptions::default()
        };
        let mut c = Client::join(http, &token, &self.name, opts)
            .await
            .with_context(|| format!("joining room {} as {identity} at {http}", self.name))?;
        if rights.subscribe {
            for _ in 0..3 {
                c.send_rr().await?;
            }
        }
        Ok(c)
    }
}

/// When a client decides that the relay has forgotten it: traffic heard since its latest
/// join has stopped for `silence`, or a socket error (an ICMP port unreachable from a
/// relay that is down). Silence right after a join is no sign: the others may not be back
/// yet, and rejoining then would only churn the room. A session that only publishes hears
/// nothing from the relay, so it cannot tell; the restart run's publishers therefore also
/// subscribe, as players do.
#[derive(Debug, Clone, Copy)]
pub struct Liveness {
    /// Silence that triggers a rejoin.
    pub silence: Duration,
}

impl Liveness {
    /// Whether traffic last `heard` has been silent for too long.
    fn silent(&self, heard: Option<Instant>) -> bool {
        heard.is_some_and(|t| t.elapsed() >= self.silence)
    }
}

/// Takes the session back with its resume credential (`docs/api.md`, "Resume"), or, once
/// the relay refuses that credential, rejoins; either until the relay accepts (or the run
/// stops). Then latches the new address and asks for the room's state. Whether it came
/// back by resuming.
async fn rejoin(c: &mut Client, stop: &AtomicBool) -> anyhow::Result<bool> {
    let mut resume = c.resume_credential().is_some();
    loop {
        let back = if resume {
            c.resume().await
        } else {
            c.rejoin().await
        };
        match back {
            Ok(()) => break,
            Err(ClientError::Status {
                status: 403 | 409,
                body,
            }) if resume && body.contains("\"resume_") => {
                resume = false;
            }
            // Down, still starting, or rate-limiting the retries: try again shortly.
            Err(ClientError::Http(_) | ClientError::Status { .. } | ClientError::Io(_))
                if !stop.load(Ordering::Relaxed) =>
            {
                tokio::time::sleep(REJOIN_RETRY).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    for _ in 0..3 {
        c.send_rr().await?;
    }
    let relay = c.relay_ssrc();
    c.send_fir(relay).await?;
    Ok(resume)
}

/// Shared switches and counters of one publisher.
#[derive(Debug, Default)]
pub struct PubControl {
    /// Stop the updates, send the final one and return.
    pub stop: AtomicBool,
    /// Packets sent.
    pub packets: AtomicU64,
    /// Rejoins done.
    pub rejoins: AtomicU64,
    /// Of them, those that resumed the session.
    pub resumes: AtomicU64,
    /// The relay address of its current session.
    pub relay: RelayAddr,
}

/// What a publisher sends.
pub struct PubPlan {
    /// Objects sent, with a new `time`, at every update.
    pub live: Vec<Object>,
    /// Objects sent at start, every `static_refresh` and after a rejoin.
    pub statics: Vec<Object>,
    /// Between two updates.
    pub period: Duration,
    /// Between two sends of the static objects.
    pub static_refresh: Duration,
    /// Rejoin when the relay goes silent (the session must also subscribe).
    pub liveness: Option<Liveness>,
    /// Pause between the last update and the final one, so the final one goes out on a
    /// quiet path.
    pub quiet: Duration,
}

/// What a publisher leaves behind.
pub struct PubDone {
    /// Still joined.
    pub client: Client,
    /// The fingerprint of every object as last sent, by (SSRC, objectID).
    pub truth: HashMap<ObjectKey, u64>,
}

/// Sends an update of every live object at each period until stopped, then one final
/// update after a quiet pause.
pub async fn publish(
    mut c: Client,
    mut plan: PubPlan,
    ctl: Arc<PubControl>,
) -> anyhow::Result<PubDone> {
    let statics = encode_update(&plan.statics, PAYLOAD_BUDGET)?;
    ctl.relay.set_from(&c);
    let mut tick = tokio::time::interval(plan.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut version = 0u16;
    let mut next_static = Instant::now();
    let mut heard = None;
    let mut failed = false;
    while !ctl.stop.load(Ordering::Relaxed) {
        tick.tick().await;
        if let Some(l) = plan.liveness {
            match drain(&mut c).await {
                Ok(true) => heard = Some(Instant::now()),
                Ok(false) => {}
                Err(_) => failed = true,
            }
            if failed || l.silent(heard) {
                let ssrc = c.ssrc();
                let resumed = rejoin(&mut c, &ctl.stop).await?;
                anyhow::ensure!(
                    c.ssrc() == ssrc,
                    "the relay gave a rejoining publisher another SSRC"
                );
                ctl.rejoins.fetch_add(1, Ordering::Relaxed);
                ctl.resumes.fetch_add(u64::from(resumed), Ordering::Relaxed);
                ctl.relay.set_from(&c);
                (heard, failed, next_static) = (None, false, Instant::now());
            }
        }
        version = version.wrapping_add(1);
        let mut sent = send(&mut c, &versioned(&mut plan.live, version)?).await;
        if Instant::now() >= next_static {
            sent = match sent {
                Ok(n) => send(&mut c, &statics).await.map(|m| n + m),
                failed => failed,
            };
            next_static += plan.static_refresh;
        }
        match sent {
            Ok(n) => {
                ctl.packets.fetch_add(n, Ordering::Relaxed);
            }
            // A relay that is down answers with port unreachable: rejoin at the next tick.
            Err(_) if plan.liveness.is_some() => failed = true,
            Err(e) => return Err(e.into()),
        }
    }
    tokio::time::sleep(plan.quiet).await;
    let update = versioned(&mut plan.live, version.wrapping_add(1))?;
    ctl.packets
        .fetch_add(send(&mut c, &update).await?, Ordering::Relaxed);
    let ssrc = c.ssrc();
    let truth = update
        .fingerprints
        .iter()
        .chain(&statics.fingerprints)
        .map(|(id, fp)| ((ssrc, *id), *fp))
        .collect();
    Ok(PubDone { client: c, truth })
}

/// The live objects with `version` as their time, encoded.
fn versioned(live: &mut [Object], version: u16) -> anyhow::Result<Update> {
    for o in live.iter_mut() {
        set_time(o, version);
    }
    encode_update(live, PAYLOAD_BUDGET)
}

/// Sends every payload of `update`; returns how many.
async fn send(c: &mut Client, update: &Update) -> Result<u64, ClientError> {
    for p in &update.payloads {
        c.send_payload(p).await?;
    }
    Ok(update.payloads.len() as u64)
}

/// Reads whatever has arrived without waiting; true if anything did.
async fn drain(c: &mut Client) -> Result<bool, ClientError> {
    let mut any = false;
    while c.recv(Duration::ZERO).await?.is_some() {
        any = true;
    }
    Ok(any)
}

/// Shared switches and readings of one subscriber.
#[derive(Debug, Default)]
pub struct SubControl {
    /// Leave the loop and return.
    pub stop: AtomicBool,
    /// RTP packets received.
    pub packets: AtomicU64,
    /// Rejoins done.
    pub rejoins: AtomicU64,
    /// Of them, those that resumed the session.
    pub resumes: AtomicU64,
    /// The publishers are stopping: silence from now on is no reason to rejoin.
    pub silence_expected: AtomicBool,
    /// Since when the subscriber has held every expected object (counted from its latest
    /// join); `None` while it does not.
    pub complete_at: Mutex<Option<Instant>>,
    /// The relay address of its current session.
    pub relay: RelayAddr,
}

/// The relay address (RTP) a client's current session talks to, updated at each
/// (re)join: a cluster run tells by it which node serves the client.
#[derive(Debug, Default)]
pub struct RelayAddr(Mutex<Option<SocketAddr>>);

impl RelayAddr {
    /// The address, once the client has told it.
    pub fn get(&self) -> Option<SocketAddr> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the address of `c`'s session (none over a transport without one).
    fn set_from(&self, c: &Client) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = c.relay_addr().ok();
    }
}

impl SubControl {
    /// See [`complete_at`](Self::complete_at).
    pub fn complete_at(&self) -> Option<Instant> {
        *self
            .complete_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_complete_at(&self, at: Option<Instant>) {
        *self
            .complete_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = at;
    }
}

/// What a subscriber waits for.
#[derive(Debug, Clone, Default)]
pub struct SubPlan {
    /// Objects it wants after each join (empty: none). Until it holds them all it sends
    /// a FIR for every stream every `FIR_RETRY`.
    pub expect: Arc<Vec<ObjectKey>>,
    /// Rejoin when the relay goes silent.
    pub liveness: Option<Liveness>,
}

/// What a subscriber leaves behind.
pub struct SubDone {
    /// Still joined.
    pub client: Client,
    /// What it held at the end.
    pub view: View,
    /// From its first join to holding every expected object; `None` if it never did.
    pub completed_after: Option<Duration>,
    /// RTP packets received.
    pub packets: u64,
}

/// Receives until stopped, keeping a view of the room and the relay's session alive.
pub async fn subscribe(
    mut c: Client,
    plan: SubPlan,
    ctl: Arc<SubControl>,
) -> anyhow::Result<SubDone> {
    let joined = Instant::now();
    let mut s = SubState {
        view: View::default(),
        complete: plan.expect.is_empty(),
        heard: None,
        last_fir: joined,
        last_rr: joined,
        completed_after: None,
        batch: RecvBatch::coalescing(SUB_READS),
    };
    ctl.relay.set_from(&c);
    if !s.complete {
        let relay = c.relay_ssrc();
        c.send_fir(relay).await?;
    }
    while !ctl.stop.load(Ordering::Relaxed) {
        let gone = match s.step(&mut c, &plan, &ctl).await {
            Ok(silent) => silent,
            Err(_) if plan.liveness.is_some() => true,
            Err(e) => return Err(e.into()),
        };
        if gone {
            let ssrc = c.ssrc();
            let resumed = rejoin(&mut c, &ctl.stop).await?;
            anyhow::ensure!(
                c.ssrc() == ssrc,
                "the relay gave a rejoining subscriber another SSRC"
            );
            ctl.rejoins.fetch_add(1, Ordering::Relaxed);
            ctl.resumes.fetch_add(u64::from(resumed), Ordering::Relaxed);
            ctl.relay.set_from(&c);
            ctl.set_complete_at(None);
            s.view.clear();
            s.complete = plan.expect.is_empty();
            (s.heard, s.last_fir) = (None, Instant::now());
        }
        if !s.complete && s.view.holds_all(plan.expect.iter()) {
            let at = Instant::now();
            s.complete = true;
            ctl.set_complete_at(Some(at));
            s.completed_after.get_or_insert(at - joined);
        }
    }
    Ok(SubDone {
        client: c,
        view: s.view,
        completed_after: s.completed_after,
        packets: ctl.packets.load(Ordering::Relaxed),
    })
}

/// A subscriber's loop state.
struct SubState {
    view: View,
    complete: bool,
    /// When the relay last sent something since the latest join.
    heard: Option<Instant>,
    last_fir: Instant,
    last_rr: Instant,
    completed_after: Option<Duration>,
    /// Its reads: a batch of datagrams per wake-up, each read possibly a train of them.
    batch: RecvBatch,
}

impl SubState {
    /// How long to wait for a packet: [`FIR_RETRY`], or less when the silence allowed
    /// ends sooner, so that a relay gone is noticed when the silence is up and not at the
    /// next retry.
    fn wait(&self, plan: &SubPlan) -> Duration {
        let until_silent = plan
            .liveness
            .zip(self.heard)
            .map(|(l, heard)| l.silence.saturating_sub(heard.elapsed()));
        until_silent
            .map_or(FIR_RETRY, |d| d.min(FIR_RETRY))
            .max(MIN_WAIT)
    }

    /// Receives one packet (or waits up to [`FIR_RETRY`], or until the silence would be
    /// too long) and does what is due; true when the relay has been silent for longer
    /// than the plan allows.
    async fn step(
        &mut self,
        c: &mut Client,
        plan: &SubPlan,
        ctl: &SubControl,
    ) -> Result<bool, ClientError> {
        let asked = Instant::now();
        let wait = self.wait(plan);
        let view = &mut self.view;
        let got = c
            .recv_batch(&mut self.batch, wait, |ssrc, _, payload| {
                view.apply(ssrc, payload);
            })
            .await?;
        ctl.packets.fetch_add(got as u64, Ordering::Relaxed);
        // RTCP alone (reports) counts as heard too: the client took it.
        if c.last_heard() >= asked {
            self.heard = Some(c.last_heard());
        }
        if !self.complete && self.last_fir.elapsed() >= FIR_RETRY {
            let relay = c.relay_ssrc();
            c.send_fir(relay).await?;
            self.last_fir = Instant::now();
        }
        if self.last_rr.elapsed() >= KEEPALIVE {
            c.send_rr().await?;
            self.last_rr = Instant::now();
        }
        let expected = ctl.silence_expected.load(Ordering::Relaxed);
        Ok(!expected && plan.liveness.is_some_and(|l| l.silent(self.heard)))
    }
}

/// A publisher's task.
pub struct PubHandle {
    /// Its switches and counters.
    pub ctl: Arc<PubControl>,
    task: JoinHandle<anyhow::Result<PubDone>>,
}

impl PubHandle {
    /// Starts [`publish`] in a task.
    pub fn spawn(c: Client, plan: PubPlan) -> Self {
        let ctl = Arc::new(PubControl::default());
        Self {
            ctl: ctl.clone(),
            task: tokio::spawn(publish(c, plan, ctl)),
        }
    }

    /// Stops the updates and waits for the final one.
    pub async fn finish(self) -> anyhow::Result<PubDone> {
        self.ctl.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

/// A subscriber's task.
pub struct SubHandle {
    /// Its switches and readings.
    pub ctl: Arc<SubControl>,
    /// It waited for every object after joining.
    pub waits: bool,
    task: JoinHandle<anyhow::Result<SubDone>>,
}

impl SubHandle {
    /// Starts [`subscribe`] in a task.
    pub fn spawn(c: Client, plan: SubPlan) -> Self {
        let ctl = Arc::new(SubControl::default());
        Self {
            ctl: ctl.clone(),
            waits: !plan.expect.is_empty(),
            task: tokio::spawn(subscribe(c, plan, ctl)),
        }
    }

    /// Stops the task and takes what it leaves.
    pub async fn stop(self) -> anyhow::Result<SubDone> {
        self.ctl.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

/// The end of a run: what the subscribers held against what the publishers sent last.
#[derive(Debug, Default)]
pub struct Ending {
    /// Publisher packets sent, final updates included.
    pub sent: u64,
    /// RTP packets the subscribers received.
    pub received: u64,
    /// (subscriber, object) pairs compared.
    pub compared: u64,
    /// Pairs where the subscriber lacked the object or held another copy.
    pub lost: u64,
    /// For each subscriber that waited for every object: from join to holding them all.
    pub completed_after: Vec<Option<Duration>>,
}

/// Stops the publishers (each sends its final update on a quiet path), gives the final
/// updates `settle` to arrive, compares every subscriber's view with them, and leaves.
pub async fn finish(
    pubs: Vec<PubHandle>,
    subs: Vec<SubHandle>,
    settle: Duration,
) -> anyhow::Result<Ending> {
    let mut end = Ending::default();
    for s in &subs {
        s.ctl.silence_expected.store(true, Ordering::Relaxed);
    }
    for p in &pubs {
        p.ctl.stop.store(true, Ordering::Relaxed);
    }
    let mut truth: HashMap<ObjectKey, u64> = HashMap::new();
    let mut leaving = Vec::new();
    for p in pubs {
        let ctl = p.ctl.clone();
        let done = p.finish().await?;
        end.sent += ctl.packets.load(Ordering::Relaxed);
        truth.extend(done.truth);
        leaving.push(done.client);
    }
    tokio::time::sleep(settle).await;
    for s in subs {
        let waits = s.waits;
        let done = s.stop().await?;
        end.received += done.packets;
        end.compared += truth.len() as u64;
        end.lost += done.view.differences(&truth) as u64;
        if waits {
            end.completed_after.push(done.completed_after);
        }
        leaving.push(done.client);
    }
    for c in leaving {
        c.leave().await.context("leaving")?;
    }
    Ok(end)
}
