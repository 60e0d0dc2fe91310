//! `gsrelay bench failover`: a room over a cluster's nodes behind a Service, one node
//! killed (SIGKILL) after another. The bench starts a `redis-server`, N `gsrelay serve`
//! child processes that spill a room past one session each (so a join stays on the node
//! the Service sent it to, and the room spreads over them all), and a Service in front;
//! every client joins and rejoins through the Service. Clients take their node for gone
//! after a short silence (or a socket error) and rejoin as the restart run's do
//! ([`Liveness`]); the Service sends them to a live node, where they ask for the whole
//! room. For each kill the run measures, for every subscriber of the killed node, the
//! time from the kill until it holds every object of every publisher again; then it
//! starts a replacement node in the Service's slot and waits until every node is linked
//! to it. At the end every subscriber's view is compared with the publishers' last state.

use super::cluster::{
    ClusterNode, ClusterSpec, LINKS_METRIC, RedisProcess, Service, sample, scrape, wait_linked,
};
use super::peers::{
    self, Liveness, PLAYER, PubHandle, PubPlan, Room, SUBSCRIBER, SubHandle, SubPlan,
};
use super::restart::all_full_since;
use super::scenario::{ChurnRoom, STATIC_ID_BASE, Scenario, Security};
use super::soak::SETTLE;
use anyhow::{Context, bail};
use gsrelay_server::token::Tokens;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a killed node's subscribers get to hold the whole room again.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the run looks at the subscribers.
const POLL: Duration = Duration::from_millis(2);

/// Pause between the publishers' last update and their final one.
const QUIET: Duration = Duration::from_millis(100);

/// A room spills past this many sessions on a node: each join stays on the node the
/// Service sent it to once every node of the room holds one.
const SPILL: usize = 1;

/// What a failover run does (one room).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failover {
    /// Nodes running at any time.
    pub nodes: usize,
    /// Publishers; they also subscribe, as players do, so that each hears the room and
    /// notices when its node goes silent (at least 2).
    pub publishers: usize,
    /// Subscribers.
    pub subscribers: usize,
    /// Live objects per publisher (the bench's default mix).
    pub objects: usize,
    /// Static objects per publisher, sent at start, every 10 s and after a rejoin.
    pub static_objects: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// Silence from the node after which a client rejoins, ms.
    pub silence_ms: u64,
    /// Nodes killed, one after another (0: only the end's check, a baseline).
    pub kills: usize,
    /// SRTP or plain RTP.
    pub security: Security,
    /// After the kills, Redis is killed for this long, seconds (0: not at all).
    pub redis_kill_s: f64,
}

impl Default for Failover {
    /// Three nodes; the restart run's room, 4 players × (20 live objects at 30 Hz + 100
    /// static ones), and 9 subscribers, three per node at the start; clients rejoin after
    /// 300 ms of silence; 20 kills.
    fn default() -> Self {
        Self {
            nodes: 3,
            publishers: 4,
            subscribers: 9,
            objects: 20,
            static_objects: 100,
            rate_hz: 30.0,
            silence_ms: 300,
            kills: 20,
            security: Security::Srtp,
            redis_kill_s: 0.0,
        }
    }
}

impl Failover {
    fn scenario(&self) -> anyhow::Result<Scenario> {
        ChurnRoom {
            name: "failover",
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
        if !(2..=10).contains(&self.nodes) {
            bail!("--nodes must be 2..=10");
        }
        if self.publishers < 2 || self.subscribers == 0 {
            bail!(
                "a failover run needs at least 2 publishers (each notices silence by hearing \
                 the others) and a subscriber"
            );
        }
        if !(50..=60_000).contains(&self.silence_ms) || self.kills > 1000 {
            bail!("silence must be 50..=60000 ms and kills at most 1000");
        }
        if !(self.redis_kill_s.is_finite() && (0.0..=600.0).contains(&self.redis_kill_s)) {
            bail!("Redis may be killed for at most 600 s");
        }
        Ok(())
    }
}

/// Percentiles of recovery times, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Recovery {
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Subscribers measured (whole again in time).
    pub samples: usize,
}

impl Recovery {
    /// The percentiles of `ms`.
    pub fn of(mut ms: Vec<f64>) -> Self {
        ms.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let i = ((ms.len() as f64 * p).ceil() as usize).saturating_sub(1);
            ms.get(i).copied().unwrap_or(0.0)
        };
        Self {
            p50: q(0.5),
            p99: q(0.99),
            max: ms.last().copied().unwrap_or(0.0),
            samples: ms.len(),
        }
    }
}

/// One kill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kill {
    /// The node killed.
    pub node: String,
    /// Its subscribers, whose recovery was measured.
    pub subscribers: usize,
    /// Its publishers (they rejoin too; their objects are part of the whole room).
    pub publishers: usize,
    /// For each of its subscribers that was whole again in time: from the kill, ms.
    pub recovery_ms: Vec<f64>,
    /// Its subscribers not whole again within 30 s.
    pub not_whole: usize,
    /// From starting the replacement to every node linked to it, ms.
    pub replacement_linked_ms: f64,
    /// Packets the killed node had dropped, over its life, because SRTP refused their
    /// index (see [`FailoverReport::index_reuse_drops`]).
    pub index_reuse_drops: f64,
}

/// What killing Redis did, the room flowing meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedisOutage {
    /// How long Redis was down, seconds.
    pub down_s: f64,
    /// Rejoins (publishers and subscribers) from the kill until the directory was whole
    /// again. A client rejoins after the silence it allows, so 0 means none went that
    /// long without its node's traffic.
    pub rejoins: u64,
    /// From the restarted Redis answering to every node's record and the room's field of
    /// every node serving its clients being back, ms; `None` if not within 30 s.
    pub directory_whole_ms: Option<f64>,
    /// Each node's links once the directory was whole (the others: none was dropped).
    pub links_after: Vec<f64>,
}

/// What a failover run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailoverReport {
    /// What ran.
    pub failover: Failover,
    /// From the last subscriber's join to every subscriber holding every object, ms.
    pub initial_full_ms: f64,
    /// Objects each subscriber waited for.
    pub objects: u64,
    /// Each kill, in order.
    pub kills: Vec<Kill>,
    /// Every killed node's subscribers together: from the kill to whole again.
    pub recovery_ms: Recovery,
    /// Killed nodes' subscribers not whole again within 30 s.
    pub not_whole: usize,
    /// Rejoins by publishers.
    pub publisher_rejoins: u64,
    /// Rejoins by subscribers (a subscriber of a surviving node rejoins too when its node
    /// goes silent, as it does while the room's only publishers are rejoining).
    pub subscriber_rejoins: u64,
    /// (subscriber, object) pairs compared at the end.
    pub objects_compared: u64,
    /// Pairs where the subscriber lacked the object or held another copy than the last.
    pub objects_lost: u64,
    /// Packets every node that ran dropped because SRTP refused their index
    /// (`gsrelay_dropped_packets_total{reason="index_reuse"}`): a sign that a stream
    /// published again under its SSRC reached a subscriber that kept its session.
    pub index_reuse_drops: f64,
    /// Redis killed and restarted, when asked for.
    pub redis_outage: Option<RedisOutage>,
}

impl FailoverReport {
    /// The report as a text table.
    pub fn table(&self) -> String {
        let r = &self.recovery_ms;
        let measured: usize = self.kills.iter().map(|k| k.subscribers).sum();
        let linked: Vec<f64> = self.kills.iter().map(|k| k.replacement_linked_ms).collect();
        let rows = [
            ("objects per subscriber", self.objects.to_string()),
            (
                "initial join → whole room ms",
                format!("{:.1}", self.initial_full_ms),
            ),
            ("nodes killed", self.kills.len().to_string()),
            (
                "killed nodes' subscribers measured",
                format!("{measured} ({} not whole within 30 s)", self.not_whole),
            ),
            (
                "kill → whole again p50 / p99 / max ms",
                format!("{:.1} / {:.1} / {:.1}", r.p50, r.p99, r.max),
            ),
            (
                "replacement → linked, median ms",
                format!("{:.1}", Recovery::of(linked).p50),
            ),
            (
                "rejoins publishers / subscribers",
                format!("{} / {}", self.publisher_rejoins, self.subscriber_rejoins),
            ),
            (
                "objects lost / compared",
                format!("{} / {}", self.objects_lost, self.objects_compared),
            ),
            (
                "packets dropped for SRTP index reuse",
                format!("{}", self.index_reuse_drops),
            ),
        ];
        let mut out: String = rows.iter().map(|(k, v)| format!("{k:<40} {v}\n")).collect();
        if let Some(o) = &self.redis_outage {
            out += &outage_table(o);
        }
        out
    }
}

fn outage_table(o: &RedisOutage) -> String {
    let whole = o
        .directory_whole_ms
        .map_or_else(|| "not within 30 s".to_owned(), |ms| format!("{ms:.1} ms"));
    let rows = [
        ("Redis killed for s", format!("{}", o.down_s)),
        ("rejoins meanwhile", o.rejoins.to_string()),
        ("Redis back → directory whole", whole),
        ("links per node after", format!("{:?}", o.links_after)),
    ];
    rows.iter().map(|(k, v)| format!("{k:<40} {v}\n")).collect()
}

/// Runs a failover with nodes started from `exe`.
pub fn run(f: &Failover, exe: PathBuf) -> anyhow::Result<FailoverReport> {
    f.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("gsr-failover")
        .enable_all()
        .build()
        .context("starting the failover runtime")?;
    rt.block_on(drive(f, exe))
}

/// The cluster: a slot per node, the Service's backend of the same index. The nodes
/// are killed before Redis when dropped (fields drop in order).
struct Cluster {
    spec: ClusterSpec,
    /// `None` between a kill and the replacement.
    nodes: Vec<Option<ClusterNode>>,
    service: Service,
    /// Nodes started so far, for the next one's name.
    started: usize,
    http: reqwest::Client,
    /// `None` while it is killed.
    redis: Option<RedisProcess>,
}

impl Cluster {
    /// Starts Redis, the nodes and the Service, and waits until the nodes are linked.
    async fn up(f: &Failover, exe: PathBuf) -> anyhow::Result<Self> {
        let redis = RedisProcess::start().await?;
        let spec = ClusterSpec {
            exe,
            secret: gsrelay_server::token::dev_secret()?,
            redis_url: redis.url(),
            security: f.security,
        };
        let mut nodes = Vec::new();
        for k in 0..f.nodes {
            nodes.push(ClusterNode::start(&spec, &format!("node-{k}"), SPILL).await?);
        }
        let https: Vec<String> = nodes.iter().map(|n| n.http().to_owned()).collect();
        wait_linked(&https).await?;
        let service = Service::start(nodes.iter().map(|n| n.http_addr).collect()).await?;
        Ok(Self {
            spec,
            started: nodes.len(),
            nodes: nodes.into_iter().map(Some).collect(),
            service,
            http: reqwest::Client::new(),
            redis: Some(redis),
        })
    }

    /// The RTP address of each slot's node.
    fn rtp_addrs(&self) -> Vec<Option<SocketAddr>> {
        self.nodes
            .iter()
            .map(|n| n.as_ref().map(|n| n.rtp_addr))
            .collect()
    }

    /// Packets the node in `slot` dropped because SRTP refused their index; 0 when it
    /// cannot tell.
    async fn index_reuse(&self, slot: usize) -> f64 {
        let Some(node) = self.nodes.get(slot).and_then(Option::as_ref) else {
            return 0.0;
        };
        let reason = [("reason", "index_reuse")];
        scrape(&self.http, node.http())
            .await
            .ok()
            .and_then(|text| sample(&text, "gsrelay_dropped_packets_total", &reason))
            .unwrap_or(0.0)
    }

    /// The same, summed over the nodes running.
    async fn index_reuse_all(&self) -> f64 {
        let mut sum = 0.0;
        for slot in 0..self.nodes.len() {
            sum += self.index_reuse(slot).await;
        }
        sum
    }

    /// The directory entries that say the room is whole: each running node's record key,
    /// and the room's field of each node serving one of `clients` (one shard each).
    fn directory_entries(&self, clients: &Clients) -> (Vec<String>, Vec<String>) {
        let running = self.nodes.iter().flatten();
        let records = running.clone().map(|n| format!("{PREFIX}:node:{}", n.name));
        let serving = running.filter(|n| {
            let addr = Some(n.rtp_addr);
            clients.subs.iter().any(|s| s.ctl.relay.get() == addr)
                || clients.pubs.iter().any(|p| p.ctl.relay.get() == addr)
        });
        let fields = serving.map(|n| format!("{}#0", n.name));
        (records.collect(), fields.collect())
    }

    /// Each running node's links.
    async fn links(&self) -> Vec<f64> {
        let mut out = Vec::new();
        for n in self.nodes.iter().flatten() {
            let text = scrape(&self.http, n.http()).await.ok();
            out.push(
                text.and_then(|t| sample(&t, LINKS_METRIC, &[]))
                    .unwrap_or(0.0),
            );
        }
        out
    }

    /// Kills the node in `slot` at once; returns its name.
    fn kill(&mut self, slot: usize) -> anyhow::Result<String> {
        let node = self
            .nodes
            .get_mut(slot)
            .and_then(Option::take)
            .context("no node in that slot")?;
        let name = node.name.clone();
        node.kill()?;
        Ok(name)
    }

    /// Starts a new node in `slot`, puts it behind the Service, and waits until every
    /// node is linked to every other (so the killed one is dropped everywhere).
    async fn replace(&mut self, slot: usize) -> anyhow::Result<()> {
        let name = format!("node-{}", self.started);
        self.started += 1;
        let node = ClusterNode::start(&self.spec, &name, SPILL).await?;
        self.service.replace(slot, node.http_addr);
        if let Some(s) = self.nodes.get_mut(slot) {
            *s = Some(node);
        }
        let https: Vec<String> = self
            .nodes
            .iter()
            .flatten()
            .map(|n| n.http().to_owned())
            .collect();
        wait_linked(&https).await
    }
}

/// The directory's key prefix (the nodes run with the default).
const PREFIX: &str = "gsrelay";

/// The room's name.
const ROOM: &str = "failover";

/// How long a restarted Redis gets to be whole again.
const DIRECTORY_TIMEOUT: Duration = Duration::from_secs(30);

/// Kills Redis for `down` while the room flows, starts it again on its port, and times
/// the directory until it is whole again.
async fn redis_outage(
    cluster: &mut Cluster,
    clients: &Clients,
    down: Duration,
) -> anyhow::Result<RedisOutage> {
    let rejoins = clients.rejoins();
    let redis = cluster.redis.take().context("Redis is not running")?;
    let port = redis.port();
    redis.kill()?;
    tokio::time::sleep(down).await;
    let redis = RedisProcess::start_on(port).await?;
    let back = Instant::now();
    let (records, fields) = cluster.directory_entries(clients);
    let room = (format!("{PREFIX}:room:{ROOM}"), fields);
    let whole = directory_whole(&redis, &records, &[room]).await?;
    let directory_whole_ms = whole.then(|| back.elapsed().as_secs_f64() * 1e3);
    cluster.redis = Some(redis);
    Ok(RedisOutage {
        down_s: down.as_secs_f64(),
        rejoins: clients.rejoins() - rejoins,
        directory_whole_ms,
        links_after: cluster.links().await,
    })
}

/// Waits until Redis holds every key of `records` and, for each `(key, fields)` of
/// `rooms`, every field of that room's hash; false if it does not within 30 s.
pub async fn directory_whole(
    redis: &RedisProcess,
    records: &[String],
    rooms: &[(String, Vec<String>)],
) -> anyhow::Result<bool> {
    let deadline = Instant::now() + DIRECTORY_TIMEOUT;
    let mut c = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if c.is_none() {
            c = redis.connection().await.ok();
        }
        let Some(conn) = c.as_mut() else {
            continue;
        };
        // A query that failed (a loaded machine's Redis answering past the client's
        // timeout) is asked again: only the deadline decides.
        match holds_all(conn, records, rooms).await {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(_) => c = None,
        }
    }
    Ok(false)
}

/// Whether the directory holds every record of `records` and every field of `rooms`.
async fn holds_all(
    c: &mut redis::aio::MultiplexedConnection,
    records: &[String],
    rooms: &[(String, Vec<String>)],
) -> redis::RedisResult<bool> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{PREFIX}:node:*"))
        .query_async(c)
        .await?;
    if !records.iter().all(|r| keys.contains(r)) {
        return Ok(false);
    }
    for (room, fields) in rooms {
        let held: Vec<String> = redis::cmd("HKEYS").arg(room).query_async(c).await?;
        if !fields.iter().all(|f| held.contains(f)) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The clients of the room, in their tasks.
struct Clients {
    pubs: Vec<PubHandle>,
    subs: Vec<SubHandle>,
    /// Objects each subscriber waits for.
    objects: u64,
    /// The last join, before any publisher sent.
    joined: Instant,
}

impl Clients {
    /// Rejoins so far, publishers' and subscribers' together.
    fn rejoins(&self) -> u64 {
        let pubs = self
            .pubs
            .iter()
            .map(|p| p.ctl.rejoins.load(Ordering::Relaxed));
        let subs = self
            .subs
            .iter()
            .map(|s| s.ctl.rejoins.load(Ordering::Relaxed));
        pubs.chain(subs).sum()
    }
}

/// Joins the publishers, then the subscribers, each through the Service sent to the next
/// node in turn, and starts their tasks.
async fn join(f: &Failover, cluster: &Cluster) -> anyhow::Result<Clients> {
    let scenario = f.scenario()?;
    let room = Room {
        http: cluster.service.base(),
        tokens: Tokens::new(cluster.spec.secret.as_bytes())?,
        name: ROOM.into(),
        plain_rtp: f.security == Security::Plain,
        ttl_s: 3600,
    };
    let liveness = Some(Liveness {
        silence: Duration::from_millis(f.silence_ms),
    });
    let mut turn = (0..).map(|i| i % f.nodes);
    let mut players = Vec::new();
    let mut expect = Vec::new();
    for n in 0..f.publishers {
        cluster.service.next_to(turn.next().unwrap_or(0));
        // A player keeps its SSRC across rejoins: its objects are the room's by it.
        let c = room
            .join_with(&room.http, &format!("pub-{n}"), PLAYER, true)
            .await?;
        let ids =
            (1..=f.objects as u64).chain((0..f.static_objects as u64).map(|i| STATIC_ID_BASE + i));
        expect.extend(ids.map(|id| (c.ssrc(), id)));
        players.push(c);
    }
    let expect = Arc::new(expect);
    let mut subs = Vec::new();
    for n in 0..f.subscribers {
        cluster.service.next_to(turn.next().unwrap_or(0));
        let c = room.join(&format!("sub-{n}"), SUBSCRIBER).await?;
        let plan = SubPlan {
            expect: expect.clone(),
            liveness,
        };
        subs.push(SubHandle::spawn(c, plan));
    }
    let joined = Instant::now();
    let pubs = players
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
    Ok(Clients {
        pubs,
        subs,
        objects: expect.len() as u64,
        joined,
    })
}

/// The slot whose node serves the most subscribers (then publishers): the kill that
/// tells the most.
fn busiest(addrs: &[Option<SocketAddr>], clients: &Clients) -> usize {
    let count = |addr: SocketAddr| {
        let subs = clients
            .subs
            .iter()
            .filter(|s| s.ctl.relay.get() == Some(addr));
        let pubs = clients
            .pubs
            .iter()
            .filter(|p| p.ctl.relay.get() == Some(addr));
        (subs.count(), pubs.count())
    };
    let mut best = (0, (0, 0));
    for (k, addr) in addrs.iter().enumerate() {
        if let Some(a) = addr {
            let c = count(*a);
            if c > best.1 {
                best = (k, c);
            }
        }
    }
    best.0
}

/// Kills the busiest node, times its subscribers until each holds the whole room again,
/// then starts its replacement.
async fn kill_one(cluster: &mut Cluster, clients: &Clients) -> anyhow::Result<Kill> {
    let addrs = cluster.rtp_addrs();
    let slot = busiest(&addrs, clients);
    let victim = addrs.get(slot).copied().flatten();
    let on_victim: Vec<&SubHandle> = clients
        .subs
        .iter()
        .filter(|s| victim.is_some() && s.ctl.relay.get() == victim)
        .collect();
    let publishers = clients
        .pubs
        .iter()
        .filter(|p| victim.is_some() && p.ctl.relay.get() == victim)
        .count();
    let index_reuse_drops = cluster.index_reuse(slot).await;
    let killed = Instant::now();
    let node = cluster.kill(slot)?;
    let whole = whole_again(&on_victim, killed).await;
    let started = Instant::now();
    cluster.replace(slot).await?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(Kill {
        node,
        subscribers: on_victim.len(),
        publishers,
        recovery_ms: whole.iter().flatten().map(|d| ms(*d)).collect(),
        not_whole: whole.iter().filter(|d| d.is_none()).count(),
        replacement_linked_ms: ms(started.elapsed()),
        index_reuse_drops,
    })
}

/// For each of `subs`: from `since` until it holds the whole room again (counted from a
/// join after `since`), or `None` if not within [`RECOVERY_TIMEOUT`].
async fn whole_again(subs: &[&SubHandle], since: Instant) -> Vec<Option<Duration>> {
    let deadline = since + RECOVERY_TIMEOUT;
    let mut at: Vec<Option<Instant>> = vec![None; subs.len()];
    while at.iter().any(Option::is_none) && Instant::now() < deadline {
        for (slot, s) in at.iter_mut().zip(subs) {
            if slot.is_none() {
                *slot = s.ctl.complete_at().filter(|t| *t > since);
            }
        }
        tokio::time::sleep(POLL).await;
    }
    at.into_iter().map(|t| t.map(|t| t - since)).collect()
}

async fn drive(f: &Failover, exe: PathBuf) -> anyhow::Result<FailoverReport> {
    let mut cluster = Cluster::up(f, exe).await?;
    let clients = join(f, &cluster).await?;
    let joined = clients.joined;
    let initial = all_full_since(&clients.subs, joined).await?;
    let mut kills = Vec::new();
    for _ in 0..f.kills {
        kills.push(kill_one(&mut cluster, &clients).await?);
    }
    let redis_outage = if f.redis_kill_s > 0.0 {
        let down = Duration::from_secs_f64(f.redis_kill_s);
        Some(redis_outage(&mut cluster, &clients, down).await?)
    } else {
        None
    };
    let publisher_rejoins = clients
        .pubs
        .iter()
        .map(|p| p.ctl.rejoins.load(Ordering::Relaxed))
        .sum();
    let subscriber_rejoins = clients
        .subs
        .iter()
        .map(|s| s.ctl.rejoins.load(Ordering::Relaxed))
        .sum();
    let objects = clients.objects;
    let end = peers::finish(clients.pubs, clients.subs, SETTLE).await?;
    let index_reuse_drops =
        cluster.index_reuse_all().await + kills.iter().map(|k| k.index_reuse_drops).sum::<f64>();
    drop(cluster);
    let all: Vec<f64> = kills.iter().flat_map(|k| k.recovery_ms.clone()).collect();
    Ok(FailoverReport {
        failover: f.clone(),
        initial_full_ms: (initial - joined).as_secs_f64() * 1e3,
        objects,
        recovery_ms: Recovery::of(all),
        not_whole: kills.iter().map(|k| k.not_whole).sum(),
        kills,
        publisher_rejoins,
        subscriber_rejoins,
        objects_compared: end.compared,
        objects_lost: end.lost,
        index_reuse_drops,
        redis_outage,
    })
}

#[cfg(test)]
mod tests {
    use super::{Failover, Recovery};

    #[test]
    fn percentiles_are_nearest_rank() {
        let r = Recovery::of((1..=200).map(f64::from).rev().collect());
        assert_eq!((r.p50, r.p99, r.max, r.samples), (100.0, 198.0, 200.0, 200));
        assert_eq!(Recovery::of(Vec::new()).samples, 0);
    }

    #[test]
    fn the_defaults_are_valid_and_one_publisher_is_refused() {
        Failover::default().validate().unwrap();
        let one = Failover {
            publishers: 1,
            ..Failover::default()
        };
        assert!(one.validate().is_err());
    }
}
