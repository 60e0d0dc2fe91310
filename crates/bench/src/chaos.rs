//! `gsrelay bench chaos`: a cluster under faults drawn from a seed, checked from its
//! clients. The bench starts a `redis-server`, N `gsrelay serve` nodes and a Service in
//! front of them that probes each node's readiness (as a Kubernetes Service does), and
//! joins players through the Service into rooms: each player publishes one Head1 whose
//! `x` is the time it was sent and subscribes to its room. The nodes spill a room past a
//! share of the players each, so some rooms spread over nodes. Then, for the run's length,
//! faults come one after another at intervals drawn from the seed:
//!
//! - **kill**: a node killed (SIGKILL), then started again under the same name;
//! - **freeze**: a node stopped (SIGSTOP) for a few seconds, then continued;
//! - **redis**: Redis killed and started again, empty, on its port;
//! - with `--network-faults` (root and nftables): **partition**, a node's link port
//!   cut off for a few seconds (its clients still reach it), and **loss**, 5% of the
//!   datagrams to and from a node's RTP port dropped for a few seconds.
//!
//! What the clients see is checked all along: no player missing over 1 s of a room-mate's
//! updates (in the sender's send times: every update carries its number and send time)
//! unless one of them rejoined meanwhile (else a split);
//! after each fault, each client of a room the fault touched whole again (an update sent
//! after the fault from every other player of its room); no join refused while a node
//! could take it (a 503 other than the directory's while Redis is away); no object of
//! another room; each node's memory. The same seed gives the same schedule.

use super::cluster::{
    ClusterNode, ClusterSpec, RedisProcess, Service, by_label, scrape, wait_linked,
};
use super::failover::{Recovery, directory_whole};
use super::scenario::Security;
use anyhow::{Context, bail};
use gsrelay_client::{Client, ClientError, JoinOptions};
use gsrelay_core::wire::{Dialect, Head1, Loc2, Object};
use gsrelay_server::token::{Rights, Tokens};
use nix::sys::signal::Signal;
use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Updates one player sent over longer than this that a room-mate never received,
/// neither having rejoined meanwhile, are a split room. Counted in the sender's send
/// times, so that a bench process short of CPU (its players late to send or to read,
/// all alike) is not taken for a split, while a relay that drops or never forwards is.
const SPLIT: Duration = Duration::from_secs(1);

/// How often the Service probes each node's readiness, and how long a probe may take.
const PROBE_EVERY: Duration = Duration::from_millis(250);

/// How long the players get to see each other before the faults start.
const WARM_UP: Duration = Duration::from_secs(30);

/// No fault in the run's first and last seconds: the start settles, the end is checked.
const QUIET_EDGES: Duration = Duration::from_secs(5);

/// A fault's recovery not seen within this is counted not whole.
const RECOVERY_LIMIT: Duration = Duration::from_secs(10);

/// How often the nodes' memory is read.
const MEMORY_EVERY: Duration = Duration::from_secs(1);

/// What a chaos run does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chaos {
    /// Nodes.
    pub nodes: usize,
    /// Rooms.
    pub rooms: usize,
    /// Players, spread evenly over the rooms.
    pub players: usize,
    /// Updates per second per player.
    pub rate_hz: f64,
    /// How long faults come, seconds.
    pub duration_s: f64,
    /// The schedule's seed.
    pub seed: u64,
    /// Shortest and longest time between two faults, seconds.
    pub gap_s: (f64, f64),
    /// Silence from its node after which a client rejoins, ms.
    pub silence_ms: u64,
    /// A node's sessions from which a room's joins go to another node.
    pub spill: usize,
    /// SRTP or plain RTP.
    pub security: Security,
    /// Partitions and loss too (root and nftables).
    pub network: bool,
}

impl Default for Chaos {
    /// 5 nodes, 200 players in 20 rooms at 10 Hz, 10 minutes of faults every 6 to 12 s,
    /// clients rejoining after 300 ms of silence; a node takes 30 sessions before a
    /// room spills, so rooms spread.
    fn default() -> Self {
        Self {
            nodes: 5,
            rooms: 20,
            players: 200,
            rate_hz: 10.0,
            duration_s: 600.0,
            seed: 1,
            gap_s: (6.0, 12.0),
            silence_ms: 300,
            spill: 30,
            security: Security::Srtp,
            network: false,
        }
    }
}

impl Chaos {
    /// Refuses runs that make no sense.
    pub fn validate(&self) -> anyhow::Result<()> {
        if !(2..=10).contains(&self.nodes) {
            bail!("--nodes must be 2..=10");
        }
        if self.rooms == 0 || self.players < 2 * self.rooms || self.players > 2000 {
            bail!("each room needs at least 2 players, and at most 2000 players in all");
        }
        if !(self.rate_hz >= 2.0 && self.rate_hz <= 100.0) {
            bail!("--rate must be 2..=100 Hz: a split is a gap of 1 s");
        }
        let (lo, hi) = self.gap_s;
        if !(lo >= 3.0 && hi >= lo && hi <= 600.0) {
            bail!("the gap between faults must be 3..=600 s, shortest first");
        }
        if !(self.duration_s.is_finite() && (10.0..=86_400.0).contains(&self.duration_s)) {
            bail!("--duration must be 10..=86400 s");
        }
        if !(50..=5_000).contains(&self.silence_ms) || self.spill == 0 {
            bail!("silence must be 50..=5000 ms and the spill at least 1");
        }
        Ok(())
    }

    fn per_room(&self) -> usize {
        self.players / self.rooms
    }
}

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// SIGKILL node `node`, then start it again under the same name.
    Kill {
        /// The node's slot.
        node: usize,
    },
    /// SIGSTOP node `node` for `ms`, then SIGCONT.
    Freeze {
        /// The node's slot.
        node: usize,
        /// How long it stays frozen, ms.
        ms: u64,
    },
    /// Kill Redis and start it again, empty.
    Redis,
    /// Drop every datagram to and from node `node`'s link port for `ms`.
    Partition {
        /// The node's slot.
        node: usize,
        /// How long, ms.
        ms: u64,
    },
    /// Drop `percent` of the datagrams to and from node `node`'s RTP port for `ms`.
    Loss {
        /// The node's slot.
        node: usize,
        /// How long, ms.
        ms: u64,
        /// The share dropped, percent.
        percent: u8,
    },
}

impl Fault {
    fn kind(self) -> &'static str {
        match self {
            Self::Kill { .. } => "kill",
            Self::Freeze { .. } => "freeze",
            Self::Redis => "redis",
            Self::Partition { .. } => "partition",
            Self::Loss { .. } => "loss",
        }
    }

    /// The node it strikes, if one.
    fn node(self) -> Option<usize> {
        match self {
            Self::Kill { node }
            | Self::Freeze { node, .. }
            | Self::Partition { node, .. }
            | Self::Loss { node, .. } => Some(node),
            Self::Redis => None,
        }
    }
}

/// The kinds of fault, as the report lists them.
const KINDS: [&str; 5] = ["kill", "freeze", "redis", "partition", "loss"];

/// A fault at its time from the start of the faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Scheduled {
    /// When, ms after the faults start.
    pub at_ms: u64,
    /// What.
    pub fault: Fault,
}

/// The faults of `c`, drawn from its seed alone: the same seed, the same schedule.
pub fn schedule(c: &Chaos) -> Vec<Scheduled> {
    let mut rng = Pcg64::seed_from_u64(c.seed);
    let mut uniform =
        |lo: f64, hi: f64| lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let end = c.duration_s - QUIET_EDGES.as_secs_f64();
    let mut at = QUIET_EDGES.as_secs_f64();
    let mut out = Vec::new();
    loop {
        at += uniform(c.gap_s.0, c.gap_s.1);
        if at > end {
            return out;
        }
        let pick = uniform(0.0, 1.0);
        let node = (uniform(0.0, c.nodes as f64) as usize).min(c.nodes - 1);
        // Without network faults: 40% kills, 40% freezes, 20% Redis; with them, 30, 30,
        // 15, and 15% partitions, 10% loss. A length is drawn only for the faults that
        // last, so that a schedule without network faults stays what it was.
        let pick = if c.network { pick } else { pick * 0.75 };
        let mut lasting = || uniform(2_000.0, 5_000.0) as u64;
        let fault = match pick {
            p if p < 0.3 => Fault::Kill { node },
            p if p < 0.6 => Fault::Freeze {
                node,
                ms: lasting(),
            },
            p if p < 0.75 => Fault::Redis,
            p if p < 0.9 => Fault::Partition {
                node,
                ms: lasting(),
            },
            _ => Fault::Loss {
                node,
                ms: lasting(),
                percent: 5,
            },
        };
        out.push(Scheduled {
            at_ms: (at * 1e3) as u64,
            fault,
        });
    }
}

/// What one kind of fault did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindReport {
    /// The kind.
    pub kind: &'static str,
    /// How many ran.
    pub faults: usize,
    /// For every client of a room the fault touched: from the fault until it held an
    /// update sent after the fault from every other player of its room, ms.
    pub whole_again: Recovery,
}

/// One node's memory over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeMemory {
    /// The node's name.
    pub node: String,
    /// Its largest resident set, any incarnation, MB.
    pub max_rss_mb: f64,
    /// Its resident set at the end, MB.
    pub end_rss_mb: f64,
    /// What its last incarnation dropped by the end, by reason (none where it was not
    /// up at the end).
    pub dropped: BTreeMap<String, u64>,
}

/// Over 1 s of one player's updates that a room-mate never received, neither having
/// rejoined meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Split {
    /// The receiving player.
    pub receiver: usize,
    /// The player not received.
    pub sender: usize,
    /// The send time of the first update missed, and of the next one received (or of
    /// the sender's last), ms since the start.
    pub from_ms: u64,
    /// See `from_ms`.
    pub to_ms: u64,
    /// The last fault before its end, and when it came (ms since the start).
    pub after: Option<(u64, Fault)>,
    /// Where each of the two was served at the end (its node's RTP address).
    pub nodes: (Option<SocketAddr>, Option<SocketAddr>),
}

/// An update older than one already received from the same player.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Regression {
    /// When it came, ms since the start.
    pub at_ms: u64,
    /// The receiving player.
    pub receiver: usize,
    /// The player whose update it was.
    pub sender: usize,
    /// How much older than the newest already received, ms.
    pub older_ms: u64,
    /// The last fault before it, and when it came (ms since the start).
    pub after: Option<(u64, Fault)>,
}

/// What a chaos run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChaosReport {
    /// What ran.
    pub chaos: Chaos,
    /// The faults, in order.
    pub schedule: Vec<Scheduled>,
    /// Per kind of fault.
    pub kinds: Vec<KindReport>,
    /// Runs of over 1 s of a player's updates a room-mate missed, neither having rejoined.
    pub splits: u64,
    /// The longest of them, ms.
    pub longest_split_ms: f64,
    /// The first 20 of them, to look into.
    pub split_samples: Vec<Split>,
    /// The 10 slowest clients to be whole again: (fault index, player, ms).
    pub slowest: Vec<(usize, usize, u64)>,
    /// Clients not whole again at the end: who, the room-mates they missed, and whether
    /// the relay had ended their session.
    pub unrecovered: Vec<(usize, Vec<usize>, bool)>,
    /// Clients of a touched room not whole again within 10 s of a fault.
    pub not_whole: u64,
    /// Joins answered 503 while a node could take them (any 503 but the directory's
    /// while Redis was away).
    pub refused: u64,
    /// Joins answered 503 `directory_unavailable` while Redis was away.
    pub refused_no_directory: u64,
    /// Joins that failed otherwise (no answer in time, connection reset).
    pub join_errors: u64,
    /// Objects of another room delivered.
    pub cross_room: u64,
    /// Updates older than one already received from the same player.
    pub regressions: u64,
    /// The first 20 regressions.
    pub regression_samples: Vec<Regression>,
    /// Rejoins, all clients together.
    pub rejoins: u64,
    /// From a restarted Redis answering to every node's record and every room's fields
    /// back, ms, per Redis fault (`None`: not within 30 s).
    pub directory_whole_ms: Vec<Option<f64>>,
    /// Each node's memory.
    pub memory: Vec<NodeMemory>,
}

impl ChaosReport {
    /// Invariants broken: splits, clients not whole again, joins refused while a node
    /// could take them, deliveries across rooms, a directory not whole again.
    pub fn violations(&self) -> u64 {
        let directory = self
            .directory_whole_ms
            .iter()
            .filter(|d| d.is_none())
            .count() as u64;
        self.splits + self.not_whole + self.refused + self.cross_room + directory
    }

    /// The report as a table.
    pub fn table(&self) -> String {
        let c = &self.chaos;
        let mut t = format!(
            "chaos: {} nodes, {} players in {} rooms at {} Hz, {:.0} s, seed {}, {} faults\n",
            c.nodes,
            c.players,
            c.rooms,
            c.rate_hz,
            c.duration_s,
            c.seed,
            self.schedule.len()
        );
        t += "fault   count  whole again p50 / p99 / max ms (clients)\n";
        for k in &self.kinds {
            let r = &k.whole_again;
            t += &format!(
                "{:<7} {:>5}  {:.0} / {:.0} / {:.0} ({})\n",
                k.kind, k.faults, r.p50, r.p99, r.max, r.samples
            );
        }
        t += &format!(
            "splits over 1 s: {} (longest {:.0} ms); not whole in 10 s: {}; joins refused \
             while a node could take them: {} (directory away: {}; other errors: {}); \
             deliveries across rooms: {}; regressions: {}; rejoins: {}\n",
            self.splits,
            self.longest_split_ms,
            self.not_whole,
            self.refused,
            self.refused_no_directory,
            self.join_errors,
            self.cross_room,
            self.regressions,
            self.rejoins
        );
        let whole: Vec<String> = self
            .directory_whole_ms
            .iter()
            .map(|d| d.map_or("never".into(), |ms| format!("{ms:.0}")))
            .collect();
        t += &format!(
            "directory whole after Redis restarts, ms: [{}]\n",
            whole.join(", ")
        );
        for m in &self.memory {
            let dropped: Vec<String> = m.dropped.iter().map(|(r, n)| format!("{r} {n}")).collect();
            t += &format!(
                "{}: RSS max {:.1} MB, end {:.1} MB; dropped: {}\n",
                m.node,
                m.max_rss_mb,
                m.end_rss_mb,
                if dropped.is_empty() {
                    "none".to_owned()
                } else {
                    dropped.join(", ")
                }
            );
        }
        t += &format!("invariant violations: {}\n", self.violations());
        t
    }
}

/// Runs `c` against nodes started from `exe`.
pub fn run(c: &Chaos, exe: PathBuf) -> anyhow::Result<ChaosReport> {
    c.validate()?;
    if c.network {
        crate::nft::available()?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("gsr-chaos")
        .enable_all()
        .build()
        .context("starting the chaos runtime")?;
    rt.block_on(drive(c, exe))
}

/// The directory's key prefix (the nodes run with the default).
const PREFIX: &str = "gsrelay";

/// What every player task and the driver share.
struct Board {
    start: Instant,
    per_room: usize,
    rooms: usize,
    stop: AtomicBool,
    redis_down: AtomicBool,
    /// Each player's node, as its RTP address.
    nodes: Vec<Mutex<Option<SocketAddr>>>,
    /// Each player's rejoins, ms since the start.
    rejoined: Vec<Mutex<Vec<u64>>>,
    /// The faults so far.
    faults: Mutex<Vec<Happened>>,
    /// (fault index, player, ms to whole again) as the players saw them.
    recoveries: Mutex<Vec<(usize, usize, u64)>>,
    /// The send time (ms) of each player's updates, by number.
    sent: Vec<Mutex<Vec<u64>>>,
    /// Runs of updates a receiver missed.
    misses: Mutex<Vec<Miss>>,
    /// Players still waiting to be whole at the end: who, the room-mates they missed,
    /// and whether the relay had ended their session.
    unrecovered: Mutex<Vec<(usize, Vec<usize>, bool)>>,
    refused: AtomicU64,
    refused_no_directory: AtomicU64,
    join_errors: AtomicU64,
    cross_room: AtomicU64,
    regressions: AtomicU64,
    /// When each regression came (ms), to whom, from whom, and how much older it was (ms).
    regressed_at: Mutex<Vec<(u64, usize, usize, u64)>>,
}

impl Board {
    fn ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn missed(&self, miss: Miss) {
        self.misses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(miss);
    }

    fn room_of(&self, player: usize) -> usize {
        player / self.per_room
    }

    /// Counts a failed join.
    fn join_failed(&self, e: &ClientError) {
        match e {
            ClientError::Status { status: 503, body } => {
                let away = self.redis_down.load(Ordering::Relaxed);
                if away && body.contains("directory_unavailable") {
                    self.refused_no_directory.fetch_add(1, Ordering::Relaxed);
                } else {
                    tracing::warn!(%body, "a join was refused");
                    self.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                self.join_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A run of updates a receiver missed from a room-mate.
#[derive(Debug, Clone, Copy)]
struct Miss {
    receiver: usize,
    sender: usize,
    /// The number of the first update missed.
    first: usize,
    /// The send time of the next update received, or of the sender's last, ms.
    to_ms: u64,
    /// When that update was received, or the run ended, ms.
    seen_ms: u64,
}

/// A fault that happened: when (ms since the start), what, and which players it touched.
type Happened = (u64, Fault, Arc<HashSet<usize>>);

/// The object id of `player`: its room in the thousands, so a receiver knows its room.
fn object_id(per_room: usize, player: usize) -> u64 {
    (player / per_room) as u64 * 1000 + (player % per_room) as u64 + 1
}

/// What one player knows of its room-mates.
struct Seen {
    /// The number of the newest update received from each.
    last_n: Vec<Option<usize>>,
    /// The newest send time received from each, ms.
    newest: Vec<u64>,
    /// Faults this player waits to be whole again after: (index, at ms).
    pending: Vec<(usize, u64)>,
    /// Faults looked at so far.
    faults_seen: usize,
}

/// Player `me`: joins through the Service at `base`, sends every `period`, takes in what
/// it receives, and rejoins when its node falls silent, until the run stops.
async fn player(
    board: Arc<Board>,
    me: usize,
    (base, token): (String, String),
    opts: JoinOptions,
    period: Duration,
) {
    let room = board.room_of(me);
    let room_name = format!("chaos-{room}");
    let mut client = loop {
        match Client::join(&base, &token, &room_name, opts.clone()).await {
            Ok(c) => break c,
            Err(e) => {
                board.join_failed(&e);
                if board.stop.load(Ordering::Relaxed) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    *board.nodes[me]
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = client.relay_addr().ok();
    // Latches the session's address, so the relay sends to it at once.
    let _ = client.send_rr().await;
    let per_room = board.per_room;
    let mut seen = Seen {
        last_n: vec![None; per_room],
        newest: vec![0; per_room],
        pending: Vec::new(),
        faults_seen: 0,
    };
    let mut next_send = tokio::time::Instant::now();
    let id = object_id(per_room, me);
    while !board.stop.load(Ordering::Relaxed) {
        let now = tokio::time::Instant::now();
        if now >= next_send {
            let sent = board.ms();
            let n = {
                let mut mine = board.sent[me]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                mine.push(sent);
                mine.len() - 1
            };
            let head = Object::Head1(Head1 {
                id,
                time: 1,
                location: Loc2 {
                    x: sent as f32,
                    y: room as f32,
                    z: n as f32,
                    ..Loc2::default()
                },
                ..Head1::default()
            });
            // A send that fails is a node gone: the rejoin below handles it.
            let _ = client.send_objects(&[head]).await;
            next_send = (next_send + period).max(now);
        }
        let wait = next_send
            .saturating_duration_since(tokio::time::Instant::now())
            .min(Duration::from_millis(20));
        if let Ok(Some((_, objects))) = client.recv_objects(wait).await {
            note(&board, me, &mut seen, &objects);
        }
        look_at_faults(&board, me, &mut seen);
        match client.rejoin_if_silent().await {
            Ok(true) => {
                let at = board.ms();
                board.rejoined[me]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(at);
                *board.nodes[me]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = client.relay_addr().ok();
            }
            Ok(false) => {}
            Err(e) => board.join_failed(&e),
        }
    }
    if !seen.pending.is_empty() {
        let behind: Vec<usize> = (0..per_room)
            .filter(|&k| k != me % per_room)
            .filter(|&k| seen.pending.iter().any(|&(_, at)| seen.newest[k] < at))
            .map(|k| room * per_room + k)
            .collect();
        board
            .unrecovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((me, behind, client.ended_by_relay()));
    }
    // What each room-mate sent after the last update received from it.
    for (k, last) in seen.last_n.iter().enumerate() {
        let from = room * per_room + k;
        let Some(last) = last.filter(|_| from != me) else {
            continue;
        };
        let sent = board.sent[from]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(&final_ms) = sent.last().filter(|_| sent.len() > last + 1) {
            drop(sent);
            board.missed(Miss {
                receiver: me,
                sender: from,
                first: last + 1,
                to_ms: final_ms,
                seen_ms: board.ms(),
            });
        }
    }
}

/// Takes in what a player received.
fn note(board: &Board, me: usize, seen: &mut Seen, objects: &[Object]) {
    let now = board.ms();
    let room = board.room_of(me);
    let per_room = board.per_room;
    for o in objects {
        let Object::Head1(h) = o else {
            continue;
        };
        let (their_room, k) = (
            (h.id.saturating_sub(1) / 1000) as usize,
            ((h.id.saturating_sub(1)) % 1000) as usize,
        );
        if their_room != room || k >= per_room {
            board.cross_room.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if room * per_room + k == me {
            continue;
        }
        let sent = h.location.x as u64;
        let n = h.location.z as usize;
        if let Some(last) = seen.last_n[k]
            && n > last + 1
        {
            board.missed(Miss {
                receiver: me,
                sender: room * per_room + k,
                first: last + 1,
                to_ms: sent,
                seen_ms: now,
            });
        }
        if seen.last_n[k].is_none_or(|last| n > last) {
            seen.last_n[k] = Some(n);
        }
        if sent < seen.newest[k] {
            board.regressions.fetch_add(1, Ordering::Relaxed);
            board
                .regressed_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((now, me, room * per_room + k, seen.newest[k] - sent));
        }
        seen.newest[k] = seen.newest[k].max(sent);
    }
    let mine = me % per_room;
    seen.pending.retain(|&(fault, at)| {
        let whole = seen
            .newest
            .iter()
            .enumerate()
            .all(|(k, &n)| k == mine || n >= at);
        if whole {
            board
                .recoveries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((fault, me, now - at));
        }
        !whole
    });
}

/// Starts waiting to be whole again after each new fault that touched this player.
fn look_at_faults(board: &Board, me: usize, seen: &mut Seen) {
    let faults = board.faults.lock().unwrap_or_else(PoisonError::into_inner);
    for (i, (at, _, touched)) in faults.iter().enumerate().skip(seen.faults_seen) {
        if touched.contains(&me) {
            seen.pending.push((i, *at));
        }
    }
    seen.faults_seen = faults.len();
}

/// The cluster: a slot per node, the Service's backend of the same index.
struct Nodes {
    spec: ClusterSpec,
    slots: Vec<Option<ClusterNode>>,
    names: Vec<String>,
    service: Service,
    redis: Option<RedisProcess>,
    memory: Vec<(f64, f64)>,
}

impl Nodes {
    async fn up(c: &Chaos, exe: PathBuf) -> anyhow::Result<Self> {
        let redis = RedisProcess::start().await?;
        let spec = ClusterSpec {
            exe,
            secret: gsrelay_server::token::dev_secret()?,
            redis_url: redis.url(),
            security: c.security,
        };
        let names: Vec<String> = (0..c.nodes).map(|k| format!("node-{k}")).collect();
        let mut slots = Vec::new();
        for name in &names {
            slots.push(Some(ClusterNode::start(&spec, name, c.spill).await?));
        }
        let https: Vec<String> = slots
            .iter()
            .flatten()
            .map(|n| n.http().to_owned())
            .collect();
        wait_linked(&https).await?;
        let backends = slots.iter().flatten().map(|n| n.http_addr).collect();
        let service = Service::start(backends).await?.with_probes(PROBE_EVERY);
        Ok(Self {
            spec,
            memory: vec![(0.0, 0.0); slots.len()],
            slots,
            names,
            service,
            redis: Some(redis),
        })
    }

    fn rtp_of(&self, slot: usize) -> Option<SocketAddr> {
        self.slots.get(slot)?.as_ref().map(|n| n.rtp_addr)
    }

    fn node(&self, slot: usize) -> anyhow::Result<&ClusterNode> {
        self.slots
            .get(slot)
            .and_then(Option::as_ref)
            .context("no node in that slot")
    }

    /// Kills the node in `slot` and starts it again under its name.
    async fn kill(&mut self, slot: usize, spill: usize) -> anyhow::Result<()> {
        let node = self
            .slots
            .get_mut(slot)
            .and_then(Option::take)
            .context("no node in that slot")?;
        node.kill()?;
        let node = ClusterNode::start(&self.spec, &self.names[slot], spill).await?;
        self.service.replace(slot, node.http_addr);
        self.slots[slot] = Some(node);
        Ok(())
    }

    /// The port of the node's QUIC endpoint for links, from its record in the directory.
    async fn link_port(&self, slot: usize) -> anyhow::Result<u16> {
        let redis = self.redis.as_ref().context("Redis is not running")?;
        let key = format!("{PREFIX}:node:{}", self.names[slot]);
        // Asked again when a loaded machine's Redis answers past the client's timeout.
        let mut tries = 0;
        let record: Option<String> = loop {
            let got = match redis.connection().await {
                Ok(mut c) => redis::cmd("GET").arg(&key).query_async(&mut c).await,
                Err(e) => Err(e),
            };
            match got {
                Ok(record) => break record,
                Err(e) if tries >= 10 => return Err(e).context("reading the node's record"),
                Err(_) => tries += 1,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let record: serde_json::Value =
            serde_json::from_str(&record.context("the node's record is missing")?)?;
        let link: SocketAddr = record["link"]
            .as_str()
            .context("the node's record has no link address")?
            .parse()?;
        Ok(link.port())
    }

    /// Each node's dropped packets by reason, as it counts them now.
    async fn dropped(&self) -> Vec<BTreeMap<String, u64>> {
        let client = reqwest::Client::new();
        let mut all = Vec::new();
        for node in &self.slots {
            let text = match node {
                Some(n) => scrape(&client, n.http()).await.unwrap_or_default(),
                None => String::new(),
            };
            let by_reason = by_label(&text, "gsrelay_dropped_packets_total", "reason");
            all.push(
                by_reason
                    .into_iter()
                    .filter(|(_, n)| *n > 0.0)
                    .map(|(r, n)| (r, n as u64))
                    .collect(),
            );
        }
        all
    }

    fn sample_memory(&mut self) {
        for (slot, node) in self.slots.iter().enumerate() {
            if let Some(rss) = node.as_ref().and_then(ClusterNode::rss_bytes) {
                let mb = rss as f64 / 1e6;
                let m = &mut self.memory[slot];
                *m = (m.0.max(mb), mb);
            }
        }
    }
}

/// The players touched by a fault of the node at `rtp`: every player of a room one of
/// its clients is in.
fn touched(board: &Board, rtp: Option<SocketAddr>) -> HashSet<usize> {
    let players = board.nodes.len();
    let rooms: HashSet<usize> = (0..players)
        .filter(|&p| {
            rtp.is_none()
                || *board.nodes[p]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    == rtp
        })
        .map(|p| board.room_of(p))
        .collect();
    (0..players)
        .filter(|p| rooms.contains(&board.room_of(*p)))
        .collect()
}

async fn drive(c: &Chaos, exe: PathBuf) -> anyhow::Result<ChaosReport> {
    let plan = schedule(c);
    let mut nodes = Nodes::up(c, exe).await?;
    let tokens = Tokens::new(nodes.spec.secret.as_bytes())?;
    let players = c.per_room() * c.rooms;
    let board = Arc::new(Board {
        start: Instant::now(),
        per_room: c.per_room(),
        rooms: c.rooms,
        stop: AtomicBool::new(false),
        redis_down: AtomicBool::new(false),
        nodes: (0..players).map(|_| Mutex::new(None)).collect(),
        rejoined: (0..players).map(|_| Mutex::new(Vec::new())).collect(),
        faults: Mutex::new(Vec::new()),
        recoveries: Mutex::new(Vec::new()),
        sent: (0..players).map(|_| Mutex::new(Vec::new())).collect(),
        misses: Mutex::new(Vec::new()),
        unrecovered: Mutex::new(Vec::new()),
        refused: AtomicU64::new(0),
        refused_no_directory: AtomicU64::new(0),
        join_errors: AtomicU64::new(0),
        cross_room: AtomicU64::new(0),
        regressions: AtomicU64::new(0),
        regressed_at: Mutex::new(Vec::new()),
    });
    let now_s = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let opts = JoinOptions {
        dialect: Dialect::Draft01,
        plain_rtp: c.security == Security::Plain,
        silence: Some(Duration::from_millis(c.silence_ms)),
        ..JoinOptions::default()
    };
    let mut tasks = Vec::new();
    for p in 0..players {
        let room = format!("chaos-{}", board.room_of(p));
        let rights = Rights {
            publish: true,
            subscribe: true,
            admin: false,
        };
        let ttl = c.duration_s as u64 + 3600;
        let token = tokens.issue(&room, &format!("player-{p}"), rights, ttl, now_s)?;
        tasks.push(tokio::spawn(player(
            board.clone(),
            p,
            (nodes.service.base(), token),
            opts.clone(),
            Duration::from_secs_f64(1.0 / c.rate_hz),
        )));
    }
    warm_up(&board, players).await?;

    let faults_start = Instant::now();
    let mut directory_whole_ms = Vec::new();
    for s in &plan {
        let at = faults_start + Duration::from_millis(s.at_ms);
        while Instant::now() < at {
            nodes.sample_memory();
            tokio::time::sleep(MEMORY_EVERY.min(at.saturating_duration_since(Instant::now())))
                .await;
        }
        let rtp = s.fault.node().and_then(|node| nodes.rtp_of(node));
        let touched = Arc::new(touched(&board, rtp));
        let at_ms = board.ms();
        board
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((at_ms, s.fault, touched));
        tracing::info!(fault = ?s.fault, "chaos");
        match s.fault {
            Fault::Kill { node } => nodes.kill(node, c.spill).await?,
            Fault::Freeze { node, ms } => {
                nodes.node(node)?.signal(Signal::SIGSTOP)?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                nodes.node(node)?.signal(Signal::SIGCONT)?;
            }
            Fault::Redis => directory_whole_ms.push(redis_restart(&mut nodes, &board).await?),
            Fault::Partition { node, ms } => {
                let port = nodes.link_port(node).await?;
                let cut = crate::nft::PortFault::drop_udp(port, 100, "partition")?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                drop(cut);
            }
            Fault::Loss { node, ms, percent } => {
                let port = nodes.rtp_of(node).context("no node in that slot")?.port();
                let lossy = crate::nft::PortFault::drop_udp(port, percent, "loss")?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                drop(lossy);
            }
        }
    }
    let end = faults_start + Duration::from_secs_f64(c.duration_s);
    while Instant::now() < end {
        nodes.sample_memory();
        tokio::time::sleep(MEMORY_EVERY).await;
    }
    nodes.sample_memory();
    let dropped = nodes.dropped().await;
    board.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.context("a player's task failed")?;
    }
    Ok(report(
        c,
        plan,
        &board,
        &nodes,
        (directory_whole_ms, dropped),
    ))
}

/// Waits until every player has received every other player of its room.
async fn warm_up(board: &Board, players: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + WARM_UP;
    loop {
        let joined = board
            .nodes
            .iter()
            .filter(|n| n.lock().unwrap_or_else(PoisonError::into_inner).is_some())
            .count();
        if joined == players {
            // One more round of updates reaches everyone well within a second.
            tokio::time::sleep(Duration::from_secs(2)).await;
            board
                .misses
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{joined} of {players} players joined within {WARM_UP:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Kills Redis, starts it again empty on its port, and times the directory until it
/// holds every node's record and every room's fields again.
async fn redis_restart(nodes: &mut Nodes, board: &Board) -> anyhow::Result<Option<f64>> {
    let redis = nodes.redis.take().context("Redis is not running")?;
    let port = redis.port();
    board.redis_down.store(true, Ordering::Relaxed);
    redis.kill()?;
    let redis = RedisProcess::start_on(port).await?;
    let back = Instant::now();
    let records: Vec<String> = nodes
        .names
        .iter()
        .map(|n| format!("{PREFIX}:node:{n}"))
        .collect();
    let rooms: Vec<(String, Vec<String>)> = (0..board.rooms)
        .map(|room| {
            let serving: HashSet<String> = (0..board.nodes.len())
                .filter(|&p| board.room_of(p) == room)
                .filter_map(|p| {
                    *board.nodes[p]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                })
                .filter_map(|rtp| (0..nodes.slots.len()).find(|&s| nodes.rtp_of(s) == Some(rtp)))
                .map(|slot| format!("{}#0", nodes.names[slot]))
                .collect();
            (
                format!("{PREFIX}:room:chaos-{room}"),
                serving.into_iter().collect(),
            )
        })
        .collect();
    let whole = directory_whole(&redis, &records, &rooms).await?;
    board.redis_down.store(false, Ordering::Relaxed);
    nodes.redis = Some(redis);
    Ok(whole.then(|| back.elapsed().as_secs_f64() * 1e3))
}

/// The last fault at or before `at_ms`, and when it came.
fn fault_before(faults: &[Happened], at_ms: u64) -> Option<(u64, Fault)> {
    faults
        .iter()
        .rev()
        .find(|f| f.0 <= at_ms)
        .map(|f| (f.0, f.1))
}

fn report(
    c: &Chaos,
    plan: Vec<Scheduled>,
    board: &Board,
    nodes: &Nodes,
    (directory_whole_ms, mut dropped): (Vec<Option<f64>>, Vec<BTreeMap<String, u64>>),
) -> ChaosReport {
    let faults = board.faults.lock().unwrap_or_else(PoisonError::into_inner);
    let recoveries = board
        .recoveries
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let limit = RECOVERY_LIMIT.as_millis() as u64;
    let expected: usize = faults.iter().map(|(_, _, t)| t.len()).sum();
    let in_time = recoveries.iter().filter(|(_, _, ms)| *ms <= limit).count();
    let kinds = KINDS
        .into_iter()
        .filter(|kind| c.network || !matches!(*kind, "partition" | "loss"))
        .map(|kind| {
            let of_kind = |i: &usize| faults.get(*i).is_some_and(|f| f.1.kind() == kind);
            KindReport {
                kind,
                faults: faults.iter().filter(|f| f.1.kind() == kind).count(),
                whole_again: Recovery::of(
                    recoveries
                        .iter()
                        .filter(|(i, _, _)| of_kind(i))
                        .map(|(_, _, ms)| *ms as f64)
                        .collect(),
                ),
            }
        })
        .collect();
    let rejoined = |p: usize, from: u64, to: u64| {
        board.rejoined[p]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|&r| r >= from && r <= to)
    };
    let misses = board.misses.lock().unwrap_or_else(PoisonError::into_inner);
    // Each run of missed updates from its first one's send time.
    let gaps = misses.iter().filter_map(|m| {
        let sent = board.sent[m.sender]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let from_ms = *sent.get(m.first)?;
        (m.to_ms.saturating_sub(from_ms) > SPLIT.as_millis() as u64)
            .then_some((m.receiver, m.sender, from_ms, m.to_ms, m.seen_ms))
    });
    let node_of = |p: usize| {
        *board.nodes[p]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    };
    let split_list: Vec<Split> = gaps
        // A rejoin up to the receipt that ended the run excuses it: a rejoiner's
        // snapshot carries updates sent before it rejoined.
        .filter(|&(rx, from, a, _, seen)| !rejoined(rx, a, seen) && !rejoined(from, a, seen))
        .map(|(receiver, sender, from_ms, to_ms, _)| Split {
            receiver,
            sender,
            from_ms,
            to_ms,
            after: fault_before(&faults, to_ms),
            nodes: (node_of(receiver), node_of(sender)),
        })
        .collect();
    let splits: Vec<u64> = split_list.iter().map(|s| s.to_ms - s.from_ms).collect();
    let rejoins = board
        .rejoined
        .iter()
        .map(|r| r.lock().unwrap_or_else(PoisonError::into_inner).len() as u64)
        .sum();
    ChaosReport {
        chaos: c.clone(),
        schedule: plan,
        kinds,
        splits: splits.len() as u64,
        longest_split_ms: splits.iter().copied().max().unwrap_or(0) as f64,
        split_samples: split_list.into_iter().take(20).collect(),
        unrecovered: board
            .unrecovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
        slowest: {
            let mut all = recoveries.clone();
            all.sort_by_key(|r| std::cmp::Reverse(r.2));
            all.truncate(10);
            all
        },
        not_whole: expected.saturating_sub(in_time) as u64,
        refused: board.refused.load(Ordering::Relaxed),
        refused_no_directory: board.refused_no_directory.load(Ordering::Relaxed),
        join_errors: board.join_errors.load(Ordering::Relaxed),
        cross_room: board.cross_room.load(Ordering::Relaxed),
        regressions: board.regressions.load(Ordering::Relaxed),
        regression_samples: board
            .regressed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .take(20)
            .map(|&(at_ms, receiver, sender, older_ms)| Regression {
                at_ms,
                receiver,
                sender,
                older_ms,
                after: fault_before(&faults, at_ms),
            })
            .collect(),
        rejoins,
        directory_whole_ms,
        memory: nodes
            .names
            .iter()
            .zip(&nodes.memory)
            .enumerate()
            .map(|(slot, (n, (max, end)))| NodeMemory {
                node: n.clone(),
                max_rss_mb: *max,
                end_rss_mb: *end,
                dropped: dropped
                    .get_mut(slot)
                    .map(std::mem::take)
                    .unwrap_or_default(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let c = Chaos::default();
        let a = schedule(&c);
        assert_eq!(a, schedule(&c));
        assert!(
            a.len() >= 40,
            "10 minutes of faults every 6 to 12 s: {}",
            a.len()
        );
        for kind in ["kill", "freeze", "redis"] {
            assert!(a.iter().any(|s| s.fault.kind() == kind), "some {kind}");
        }
        let other = schedule(&Chaos {
            seed: 2,
            ..c.clone()
        });
        assert_ne!(a, other, "another seed, another schedule");
        let gaps_ok = a.windows(2).all(|w| {
            let gap = w[1].at_ms - w[0].at_ms;
            (6_000..=12_000).contains(&gap)
        });
        assert!(gaps_ok, "faults 6 to 12 s apart");
    }

    #[test]
    fn a_players_object_id_names_its_room() {
        assert_eq!(object_id(10, 0), 1);
        assert_eq!(object_id(10, 13), 1004);
        assert_eq!((object_id(10, 13) - 1) / 1000, 1);
    }

    #[test]
    fn the_defaults_are_valid_and_bad_runs_are_refused() {
        Chaos::default().validate().unwrap();
        let bad = [
            Chaos {
                nodes: 1,
                ..Chaos::default()
            },
            Chaos {
                players: 10,
                ..Chaos::default()
            },
            Chaos {
                gap_s: (2.0, 1.0),
                ..Chaos::default()
            },
            Chaos {
                rate_hz: f64::NAN,
                ..Chaos::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
