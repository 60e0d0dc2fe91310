//! `gsrelay bench nodes`: one room across a cluster's nodes. The bench starts a
//! `redis-server` and N `gsrelay serve` child processes (or uses the nodes at the
//! `--relay` URLs), puts the publishers and some subscribers on the first node (A) and
//! the other ("remote") subscribers on the others, one node hop away, each joined through
//! the node it is to stay on. It reports what one node hop adds to the latency (remote
//! against local subscribers), the link bytes the nodes send each other against what the
//! remote subscribers receive, and, for each count of remote subscribers asked for, the
//! same again (one link carries a room once, however many subscribers are behind it).
//! Last, a late joiner on a remote node asks for a room of many objects: the time until
//! it holds them all, and whether any node but its own was asked.

use super::cluster::{ClusterNode, ClusterSpec, RedisProcess, sample, scrape, wait_linked};
use super::peers::{PUBLISHER, Room, SUBSCRIBER, SubHandle, SubPlan};
use super::report::Latency;
use super::run::{BENCH_TAG, Chunk, Clock, pack, stamp};
use super::scenario::{STATIC_ID_BASE, Scenario, Security};
use super::state::{ObjectKey, encode_update, fingerprints};
use anyhow::{Context, bail};
use gsrelay_client::Client;
use gsrelay_core::wire::{self, Dialect};
use gsrelay_net::udp::recv::RecvBatch;
use gsrelay_server::token::Tokens;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The first node's spill threshold: it keeps every join that reaches it, so that the
/// publishers and the local subscribers all stay there.
const HOME_SPILL: usize = 1_000_000;

/// The other nodes' spill threshold: past one session of the room, a node keeps the
/// joins that reach it when every other node of the room holds one too, so each remote
/// subscriber stays on the node it was sent to.
const REMOTE_SPILL: usize = 1;

/// Highest latency the histograms hold, ns.
const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// Subscribers send an RR this often so the relay does not time their session out.
const KEEPALIVE: Duration = Duration::from_secs(5);

/// How long subscribers keep receiving after the window, for packets in flight.
const DRAIN: Duration = Duration::from_millis(300);

/// Reads a subscriber takes per system call (each a datagram, or a train of them that
/// the kernel coalesced).
const RECV_BATCH: usize = 8;

/// Largest payload a publisher packs, bytes (the bench's default).
const PAYLOAD_BUDGET: usize = 1100;

/// How long the late room's placeholders get to hold every object through the links.
const REPLICA_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a late joiner waits for the whole room.
const LATE_TIMEOUT: Duration = Duration::from_secs(5);

/// A late joiner repeats its FIR this often while nothing arrives.
const FIR_RETRY: Duration = Duration::from_millis(250);

/// The late room's publisher sends its objects this many packets at a time, every
/// [`STATIC_PACE`]: a remote relay's per-session packet limit defaults to 2 000/s.
const STATIC_BURST: usize = 20;

/// See [`STATIC_BURST`].
const STATIC_PACE: Duration = Duration::from_millis(20);

/// Receive buffer of the late joiner, which takes the whole room at once.
const LATE_RECV_BUFFER: usize = 4 << 20;

/// The most objects one stream may hold at a relay's default limit.
const MAX_LATE_OBJECTS: usize = 10_000;

/// What a nodes run does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nodes {
    /// Nodes started (ignored with remote nodes: as many as their URLs).
    pub nodes: usize,
    /// Publishers, all on the first node.
    pub publishers: usize,
    /// Live objects per publisher (the bench's default mix), all sent at every update.
    pub objects: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// Subscribers on the first node, the publishers' own.
    pub local_subscribers: usize,
    /// Subscribers spread over the other nodes, one measurement per count.
    pub remote_subscribers: Vec<usize>,
    /// Publishing before each window, seconds.
    pub warmup_s: f64,
    /// Each measurement window, seconds.
    pub duration_s: f64,
    /// Objects of the late-join room (0: no late join).
    pub late_objects: usize,
    /// SRTP or plain RTP.
    pub security: Security,
}

impl Default for Nodes {
    /// Three nodes; the default scenario's room (4 publishers × 20 objects at 30 Hz),
    /// 8 subscribers on the publishers' node and 8 on the others; a 10 000-object room for
    /// the late joiner.
    fn default() -> Self {
        Self {
            nodes: 3,
            publishers: 4,
            objects: 20,
            rate_hz: 30.0,
            local_subscribers: 8,
            remote_subscribers: vec![8],
            warmup_s: 2.0,
            duration_s: 10.0,
            late_objects: MAX_LATE_OBJECTS,
            security: Security::Srtp,
        }
    }
}

impl Nodes {
    /// Refuses runs that make no sense or exceed the bench's bounds.
    pub fn validate(&self) -> anyhow::Result<()> {
        if !(2..=26).contains(&self.nodes) {
            bail!("--nodes must be 2..=26");
        }
        if !(1..=100).contains(&self.publishers) || !(1..=1000).contains(&self.objects) {
            bail!("publishers must be 1..=100 and objects 1..=1000");
        }
        if !(self.rate_hz.is_finite() && (1.0..=1000.0).contains(&self.rate_hz)) {
            bail!("rate must be 1..=1000 Hz");
        }
        let counts = std::iter::once(&self.local_subscribers).chain(&self.remote_subscribers);
        if self.remote_subscribers.is_empty() || counts.clone().any(|n| !(1..=1000).contains(n)) {
            bail!("local and remote subscribers must be 1..=1000 (at least one count of remote)");
        }
        let secs = |s: f64| s.is_finite() && s > 0.0 && s <= 3600.0;
        if !secs(self.warmup_s) || !secs(self.duration_s) {
            bail!("warm-up and duration must be in (0, 3600] seconds");
        }
        if self.late_objects > MAX_LATE_OBJECTS {
            bail!("late objects must be at most {MAX_LATE_OBJECTS} (one stream's default limit)");
        }
        Ok(())
    }
}

/// Which nodes a run measures.
#[derive(Debug, Clone)]
pub enum NodesTarget {
    /// Nodes started by the bench from this binary, with their own `redis-server`.
    Children {
        /// The `gsrelay` binary.
        exe: PathBuf,
    },
    /// Nodes already running, linked, sharing `token_secret`; the first takes the
    /// publishers. They must place joins as the bench's own do (see `docs/benchmarks.md`).
    Remote {
        /// HTTP base URLs, the first node first.
        https: Vec<String>,
        /// The cluster's token secret (the bench issues its own tokens).
        token_secret: String,
    },
}

/// What one count of remote subscribers measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodesRun {
    /// Subscribers on the other nodes.
    pub remote_subscribers: usize,
    /// Nodes holding remote subscribers (each one link from the first node).
    pub remote_nodes: usize,
    /// Publisher packets sent in the window, per second.
    pub sent_pps: f64,
    /// Latency to the subscribers on the publishers' node, µs.
    pub local_latency_us: Latency,
    /// Latency to the subscribers on the other nodes, µs.
    pub remote_latency_us: Latency,
    /// What one node hop adds at the median: remote p50 minus local p50, µs.
    pub hop_p50_us: f64,
    /// What one node hop adds at p99: remote p99 minus local p99, µs.
    pub hop_p99_us: f64,
    /// Share of the window's packets the local subscribers did not get.
    pub local_loss_ratio: f64,
    /// Share of the window's packets the remote subscribers did not get.
    pub remote_loss_ratio: f64,
    /// Bytes every node sent over its links, together, per second.
    pub link_bytes_per_s: f64,
    /// Of those, the first node's.
    pub home_link_bytes_per_s: f64,
    /// `link_bytes_per_s` over `remote_nodes`: what carrying the room to one node costs.
    pub link_bytes_per_s_per_remote_node: f64,
    /// RTP payload bytes the remote subscribers received, together, per second.
    pub remote_received_bytes_per_s: f64,
    /// `link_bytes_per_s` over `remote_received_bytes_per_s`.
    pub link_per_remote_received: f64,
}

/// What the late joiner measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LateJoinReport {
    /// Objects in the room.
    pub objects: usize,
    /// The node it joined through and stayed on (a remote one).
    pub node: String,
    /// From its FIR to holding every object, ms; `None` if it did not within 5 s.
    pub whole_ms: Option<f64>,
    /// RTP payload bytes it received meanwhile.
    pub bytes: u64,
    /// Snapshots the first node (the publisher's) answered meanwhile.
    pub home_snapshots: f64,
    /// FIRs the first node passed on to the publisher meanwhile.
    pub home_firs_forwarded: f64,
    /// Snapshots the late joiner's node answered meanwhile.
    pub node_snapshots: f64,
    /// FIRs the late joiner's node passed on meanwhile (to a sender, or over a link).
    pub node_firs_forwarded: f64,
    /// Packets the late joiner's node sent over its links meanwhile (keep-alives and
    /// reports go on whatever happens).
    pub node_link_packets_out: f64,
}

impl LateJoinReport {
    /// Whether the room came from the joiner's own node alone: no snapshot or FIR
    /// anywhere else, and no FIR passed on by its node.
    pub fn local_only(&self) -> bool {
        self.home_snapshots == 0.0
            && self.home_firs_forwarded == 0.0
            && self.node_firs_forwarded == 0.0
            && self.node_snapshots >= 1.0
    }
}

/// What a nodes run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodesReport {
    /// What ran.
    pub nodes: Nodes,
    /// Nodes measured.
    pub node_count: usize,
    /// `children` or `remote`.
    pub target: String,
    /// One per count of remote subscribers, in order.
    pub runs: Vec<NodesRun>,
    /// The late joiner, when asked for.
    pub late_join: Option<LateJoinReport>,
}

impl NodesReport {
    /// The report as a text table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} nodes ({}), {} publishers × {} objects at {} Hz on the first, {} local subscribers\n",
            self.node_count,
            self.target,
            self.nodes.publishers,
            self.nodes.objects,
            self.nodes.rate_hz,
            self.nodes.local_subscribers
        );
        for r in &self.runs {
            out += &run_table(r);
        }
        if let Some(first) = self.runs.first() {
            for r in self.runs.iter().skip(1) {
                out += &format!(
                    "link bytes per remote node, {} against {} remote subscribers: {:+.2}%\n",
                    r.remote_subscribers,
                    first.remote_subscribers,
                    percent_change(
                        first.link_bytes_per_s_per_remote_node,
                        r.link_bytes_per_s_per_remote_node
                    )
                );
            }
        }
        if let Some(l) = &self.late_join {
            out += &late_table(l);
        }
        out
    }
}

/// `to` against `from`, percent.
fn percent_change(from: f64, to: f64) -> f64 {
    if from > 0.0 {
        (to / from - 1.0) * 100.0
    } else {
        0.0
    }
}

fn run_table(r: &NodesRun) -> String {
    let lat = |l: &Latency| format!("{:.0} / {:.0} / {:.0}", l.p50, l.p99, l.max);
    let rows = [
        (
            "remote subscribers (nodes)",
            format!("{} ({})", r.remote_subscribers, r.remote_nodes),
        ),
        ("sent pps", format!("{:.0}", r.sent_pps)),
        ("local p50 / p99 / max µs", lat(&r.local_latency_us)),
        ("remote p50 / p99 / max µs", lat(&r.remote_latency_us)),
        (
            "node hop p50 / p99 µs",
            format!("{:.0} / {:.0}", r.hop_p50_us, r.hop_p99_us),
        ),
        (
            "loss local / remote",
            format!(
                "{:.3}% / {:.3}%",
                r.local_loss_ratio * 100.0,
                r.remote_loss_ratio * 100.0
            ),
        ),
        (
            "link B/s (first node's)",
            format!("{:.0} ({:.0})", r.link_bytes_per_s, r.home_link_bytes_per_s),
        ),
        (
            "link B/s per remote node",
            format!("{:.0}", r.link_bytes_per_s_per_remote_node),
        ),
        (
            "remote subscribers received B/s",
            format!("{:.0}", r.remote_received_bytes_per_s),
        ),
        (
            "link / remote received",
            format!("{:.4}", r.link_per_remote_received),
        ),
    ];
    rows.iter()
        .map(|(k, v)| format!("{k:<36} {v}\n"))
        .collect::<String>()
        + "\n"
}

fn late_table(l: &LateJoinReport) -> String {
    let whole = l
        .whole_ms
        .map_or_else(|| "not within 5 s".to_owned(), |ms| format!("{ms:.1} ms"));
    let rows = [
        (
            "late joiner: room of",
            format!("{} objects on {}", l.objects, l.node),
        ),
        ("late joiner: FIR → whole room", whole),
        ("late joiner: payload bytes received", l.bytes.to_string()),
        (
            "snapshots: first node / joiner's",
            format!("{} / {}", l.home_snapshots, l.node_snapshots),
        ),
        (
            "FIRs passed on: first node / joiner's",
            format!("{} / {}", l.home_firs_forwarded, l.node_firs_forwarded),
        ),
        (
            "joiner's node link packets out",
            format!("{}", l.node_link_packets_out),
        ),
        (
            "served by its own node alone",
            if l.local_only() { "yes" } else { "no" }.to_owned(),
        ),
    ];
    rows.iter().map(|(k, v)| format!("{k:<40} {v}\n")).collect()
}

/// Runs the nodes bench against `target`.
pub fn run(n: &Nodes, target: NodesTarget) -> anyhow::Result<NodesReport> {
    n.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("gsr-nodes")
        .enable_all()
        .build()
        .context("starting the nodes runtime")?;
    rt.block_on(drive(n, target))
}

async fn drive(n: &Nodes, target: NodesTarget) -> anyhow::Result<NodesReport> {
    let kind = match target {
        NodesTarget::Children { .. } => "children",
        NodesTarget::Remote { .. } => "remote",
    };
    let cluster = Cluster::up(n, target).await?;
    let mut runs = Vec::new();
    for (i, remote) in n.remote_subscribers.iter().enumerate() {
        runs.push(measure(n, &cluster, *remote, &format!("nodes-{i}")).await?);
    }
    let late_join = match n.late_objects {
        0 => None,
        objects => Some(late_join(&cluster, objects).await?),
    };
    Ok(NodesReport {
        nodes: n.clone(),
        node_count: cluster.https.len(),
        target: kind.to_owned(),
        runs,
        late_join,
    })
}

/// The nodes under test; those the bench started are killed when it is dropped (the
/// nodes before their Redis: fields drop in order).
struct Cluster {
    /// HTTP base URLs, the first node first.
    https: Vec<String>,
    secret: String,
    plain_rtp: bool,
    /// Each node's RTP address, when the bench started the nodes (empty otherwise).
    rtp_addrs: Vec<SocketAddr>,
    http: reqwest::Client,
    _nodes: Vec<ClusterNode>,
    _redis: Option<RedisProcess>,
}

impl Cluster {
    /// Starts Redis and the nodes, or takes the remote ones, and waits until they are
    /// all linked.
    async fn up(n: &Nodes, target: NodesTarget) -> anyhow::Result<Self> {
        let plain_rtp = n.security == Security::Plain;
        let (https, secret, nodes, redis): (Vec<String>, _, Vec<ClusterNode>, _) = match target {
            NodesTarget::Remote {
                https,
                token_secret,
            } => {
                if https.len() < 2 {
                    bail!("a nodes run needs at least two --relay URLs");
                }
                let https = https
                    .iter()
                    .map(|h| h.trim_end_matches('/').to_owned())
                    .collect();
                (https, token_secret, Vec::new(), None)
            }
            NodesTarget::Children { exe } => {
                let redis = RedisProcess::start().await?;
                let spec = ClusterSpec {
                    exe,
                    secret: gsrelay_server::token::dev_secret()?,
                    redis_url: redis.url(),
                    security: n.security,
                };
                let mut nodes = Vec::new();
                for k in 0..n.nodes {
                    let spill = if k == 0 { HOME_SPILL } else { REMOTE_SPILL };
                    nodes.push(ClusterNode::start(&spec, &node_name(k), spill).await?);
                }
                let https = nodes.iter().map(|x| x.http().to_owned()).collect();
                (https, spec.secret, nodes, Some(redis))
            }
        };
        wait_linked(&https).await?;
        Ok(Self {
            https,
            secret,
            plain_rtp,
            rtp_addrs: nodes.iter().map(|x| x.rtp_addr).collect(),
            http: reqwest::Client::new(),
            _nodes: nodes,
            _redis: redis,
        })
    }

    /// Room `name`, joined through the first node unless said otherwise.
    fn room(&self, name: &str) -> anyhow::Result<Room> {
        Ok(Room {
            http: self.https[0].clone(),
            tokens: Tokens::new(self.secret.as_bytes()).context("the token secret")?,
            name: name.to_owned(),
            plain_rtp: self.plain_rtp,
            ttl_s: 3600,
        })
    }

    /// The sum of the series of `name` matching `labels`, on every node (0 where none).
    async fn read(&self, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<Vec<f64>> {
        let mut out = Vec::with_capacity(self.https.len());
        for http in &self.https {
            let text = scrape(&self.http, http).await?;
            out.push(sample(&text, name, labels).unwrap_or(0.0));
        }
        Ok(out)
    }

    /// Bytes each node has sent over its links.
    async fn link_bytes_out(&self) -> anyhow::Result<Vec<f64>> {
        self.read(
            "gsrelay_bytes_total",
            &[("transport", "link"), ("direction", "out")],
        )
        .await
    }
}

/// Node `k`'s name: node-a, node-b, ...
fn node_name(k: usize) -> String {
    let letter = (b'a' + (k % 26) as u8) as char;
    format!("node-{letter}")
}

/// Which node remote subscriber `j` joins: the others in turn, so that each holds one
/// before any holds two (a node keeps a second join only when every node of the room
/// holds one).
fn remote_node(j: usize, nodes: usize) -> usize {
    1 + j % (nodes - 1)
}

/// The clients of one measurement.
struct Joined {
    pubs: Vec<Client>,
    /// (node, client).
    subs: Vec<(usize, Client)>,
}

/// Joins the publishers and local subscribers at the first node and the remote
/// subscribers at theirs, then checks that each stayed on the node it was sent to.
async fn join_all(
    n: &Nodes,
    cluster: &Cluster,
    room: &Room,
    remote: usize,
) -> anyhow::Result<Joined> {
    let nodes = cluster.https.len();
    let mut j = Joined {
        pubs: Vec::new(),
        subs: Vec::new(),
    };
    for p in 0..n.publishers {
        j.pubs
            .push(room.join(&format!("pub-{p}"), PUBLISHER).await?);
    }
    for s in 0..n.local_subscribers {
        j.subs
            .push((0, room.join(&format!("local-{s}"), SUBSCRIBER).await?));
    }
    for s in 0..remote {
        let k = remote_node(s, nodes);
        let c = room
            .join_at(&cluster.https[k], &format!("remote-{s}"), SUBSCRIBER)
            .await?;
        j.subs.push((k, c));
    }
    let placed = j.pubs.iter().map(|c| (0, c));
    let placed = placed.chain(j.subs.iter().map(|(k, c)| (*k, c)));
    check_placement(placed, &cluster.rtp_addrs)?;
    Ok(j)
}

/// Checks that every client is served by the node it was sent to: by that node's RTP
/// address when the bench knows it (its own nodes), else by no relay address serving
/// clients sent to two nodes.
fn check_placement<'a>(
    placed: impl Iterator<Item = (usize, &'a Client)>,
    rtp_addrs: &[SocketAddr],
) -> anyhow::Result<()> {
    let mut node_of: HashMap<SocketAddr, usize> = HashMap::new();
    for (k, c) in placed {
        let addr = c.relay_addr().context("a session's relay address")?;
        let first = *node_of.entry(addr).or_insert(k);
        let known = rtp_addrs.get(k).is_none_or(|a| *a == addr);
        if first != k || !known {
            bail!(
                "a client sent to node {k} is served at {addr}, not by that node: the first \
                 node must keep every join it gets (a large --node-spill-sessions) and the \
                 others spill past one session (--node-spill-sessions 1), on an otherwise \
                 idle cluster"
            );
        }
    }
    Ok(())
}

/// What one subscriber heard in the window.
struct Heard {
    node: usize,
    latency: Histogram<u64>,
    /// Bench objects sent in the window and received.
    stamps: u64,
    /// RTP payload bytes that arrived in the window.
    bytes: u64,
}

impl Heard {
    fn new(node: usize) -> anyhow::Result<Self> {
        Ok(Self {
            node,
            latency: Histogram::new_with_max(MAX_LATENCY_NS, 3)?,
            stamps: 0,
            bytes: 0,
        })
    }

    /// Takes one packet's payload, arrived now.
    fn take(&mut self, clock: &Clock, payload: &[u8]) {
        let arrived = clock.now_ns();
        if clock.in_window(arrived) {
            self.bytes += payload.len() as u64;
        }
        let Some(sent) = send_time(payload).filter(|t| clock.in_window(*t)) else {
            return;
        };
        self.stamps += 1;
        self.latency.saturating_record(arrived.saturating_sub(sent));
    }
}

/// The send time in a publisher's packet: the last 8 bytes of its bench object.
fn send_time(payload: &[u8]) -> Option<u64> {
    let o = wire::objects(payload, Dialect::Draft01)
        .flatten()
        .find(|o| o.tag == BENCH_TAG)?;
    let b = o.bytes(payload);
    let ts = b.get(b.len().checked_sub(8)?..)?;
    Some(u64::from_be_bytes(ts.try_into().ok()?))
}

/// Receives until `stop_at`, timing every publisher packet sent in the window.
async fn listen(
    mut c: Client,
    mut heard: Heard,
    clock: Clock,
    stop_at: Instant,
) -> anyhow::Result<(Client, Heard)> {
    let mut batch = RecvBatch::coalescing(RECV_BATCH);
    let mut last_rr = Instant::now();
    loop {
        let now = Instant::now();
        if now >= stop_at {
            return Ok((c, heard));
        }
        if now - last_rr >= KEEPALIVE {
            c.send_rr().await?;
            last_rr = now;
        }
        let wait = (stop_at - now).min(KEEPALIVE);
        c.recv_batch(&mut batch, wait, |_, _, payload| {
            heard.take(&clock, payload)
        })
        .await?;
    }
}

/// Sends every live object, each packet stamped, at every period until the window
/// ends; returns the client and the packets sent in the window.
async fn publish(
    mut c: Client,
    live: Vec<Chunk>,
    period: Duration,
    clock: Clock,
) -> anyhow::Result<(Client, u64)> {
    let mut tick = tokio::time::interval_at(clock.start.into(), period);
    // A late tick still sends and the next keep their instants, as a game's loop does.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (mut buf, mut scratch) = (Vec::with_capacity(1500), Vec::new());
    let (mut counter, mut sent) = (0u64, 0u64);
    loop {
        tick.tick().await;
        if clock.now_ns() >= clock.w1 {
            return Ok((c, sent));
        }
        for chunk in &live {
            let ts = clock.now_ns();
            counter += 1;
            stamp(&mut buf, &mut scratch, (counter, ts, false), &chunk.bytes)?;
            c.send_payload(&buf).await?;
            sent += u64::from(clock.in_window(ts));
        }
    }
}

/// Link bytes on every node at one instant.
struct LinkReading {
    at: Instant,
    out: Vec<f64>,
}

/// One measurement: joins, publishes through the warm-up and the window, reads the
/// nodes' link counters at both ends of the window, and leaves.
async fn measure(
    n: &Nodes,
    cluster: &Cluster,
    remote: usize,
    name: &str,
) -> anyhow::Result<NodesRun> {
    let room = cluster.room(name)?;
    let joined = join_all(n, cluster, &room, remote).await?;
    // Let the latching RRs land.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let clock = clock(n);
    let stop_at = clock.at(clock.w1) + DRAIN;
    let scenario = Scenario {
        objects: n.objects,
        payload_budget: PAYLOAD_BUDGET,
        ..Scenario::default()
    };
    let period = Duration::from_secs_f64(1.0 / n.rate_hz);
    let mut pubs = JoinSet::new();
    for (p, c) in joined.pubs.into_iter().enumerate() {
        let live = pack(&scenario.live_objects(p), PAYLOAD_BUDGET)?;
        pubs.spawn(publish(c, live, period, clock));
    }
    let mut subs = JoinSet::new();
    for (node, c) in joined.subs {
        subs.spawn(listen(c, Heard::new(node)?, clock, stop_at));
    }
    tokio::time::sleep_until(clock.at(clock.w0).into()).await;
    let start = read_links(cluster).await?;
    tokio::time::sleep_until(clock.at(clock.w1).into()).await;
    let end = read_links(cluster).await?;
    let mut leaving = Vec::new();
    let mut sent = 0;
    while let Some(r) = pubs.join_next().await {
        let (c, n) = r??;
        sent += n;
        leaving.push(c);
    }
    let mut heard = Vec::new();
    while let Some(r) = subs.join_next().await {
        let (c, h) = r??;
        heard.push(h);
        leaving.push(c);
    }
    for c in leaving {
        c.leave().await.context("leaving")?;
    }
    let figures = Figures {
        remote,
        nodes: cluster.https.len(),
        window_s: n.duration_s,
        sent,
    };
    Ok(figures.run(&heard, &start, &end))
}

/// The run's time points: publishing starts shortly, the window follows the warm-up.
fn clock(n: &Nodes) -> Clock {
    let epoch = Instant::now();
    let start = epoch + Duration::from_millis(50);
    let ns = |s: f64| (Duration::from_millis(50) + Duration::from_secs_f64(s)).as_nanos() as u64;
    Clock {
        epoch,
        start,
        w0: ns(n.warmup_s),
        w1: ns(n.warmup_s + n.duration_s),
    }
}

async fn read_links(cluster: &Cluster) -> anyhow::Result<LinkReading> {
    let out = cluster.link_bytes_out().await?;
    Ok(LinkReading {
        at: Instant::now(),
        out,
    })
}

/// What a measurement's figures are computed from, beside what was heard.
struct Figures {
    remote: usize,
    nodes: usize,
    window_s: f64,
    /// Publisher packets sent in the window.
    sent: u64,
}

impl Figures {
    fn run(&self, heard: &[Heard], start: &LinkReading, end: &LinkReading) -> NodesRun {
        let (local, remote): (Vec<&Heard>, Vec<&Heard>) = heard.iter().partition(|h| h.node == 0);
        let (local_latency_us, remote_latency_us) = (latency(&local), latency(&remote));
        let link_s = (end.at - start.at).as_secs_f64().max(1e-3);
        let delta = |k: usize| end.out[k] - start.out[k];
        let link_bytes_per_s = (0..end.out.len()).map(delta).sum::<f64>() / link_s;
        let remote_nodes = self.remote.min(self.nodes - 1);
        let remote_received_bytes_per_s =
            remote.iter().map(|h| h.bytes).sum::<u64>() as f64 / self.window_s;
        NodesRun {
            remote_subscribers: self.remote,
            remote_nodes,
            sent_pps: self.sent as f64 / self.window_s,
            hop_p50_us: remote_latency_us.p50 - local_latency_us.p50,
            hop_p99_us: remote_latency_us.p99 - local_latency_us.p99,
            local_latency_us,
            remote_latency_us,
            local_loss_ratio: self.loss(&local),
            remote_loss_ratio: self.loss(&remote),
            link_bytes_per_s,
            home_link_bytes_per_s: delta(0) / link_s,
            link_bytes_per_s_per_remote_node: link_bytes_per_s / remote_nodes.max(1) as f64,
            remote_received_bytes_per_s,
            link_per_remote_received: link_bytes_per_s
                / remote_received_bytes_per_s.max(f64::MIN_POSITIVE),
        }
    }

    /// Share of the window's packets that `subs` did not receive.
    fn loss(&self, subs: &[&Heard]) -> f64 {
        let expected = self.sent * subs.len() as u64;
        let got: u64 = subs.iter().map(|h| h.stamps).sum();
        if expected == 0 {
            0.0
        } else {
            (1.0 - got as f64 / expected as f64).clamp(0.0, 1.0)
        }
    }
}

/// The latencies of `subs` together, µs.
fn latency(subs: &[&Heard]) -> Latency {
    let mut all = Histogram::<u64>::new_with_max(MAX_LATENCY_NS, 3).ok();
    if let Some(h) = &mut all {
        for s in subs {
            let _ = h.add(&s.latency);
        }
    }
    all.as_ref().map(Latency::from_ns).unwrap_or_default()
}

/// The late join: a publisher of `objects` static objects on the first node, one
/// placeholder subscriber on every other node so that each holds a replica (and, holding
/// one session each, keeps the next join it gets), then a late joiner on the last node
/// asks for the whole room.
async fn late_join(cluster: &Cluster, objects: usize) -> anyhow::Result<LateJoinReport> {
    let room = cluster.room("nodes-late")?;
    let last = cluster.https.len() - 1;
    let mut publisher = room.join("late-pub", PUBLISHER).await?;
    let keys: Arc<Vec<ObjectKey>> = Arc::new(
        (0..objects as u64)
            .map(|i| (publisher.ssrc(), STATIC_ID_BASE + i))
            .collect(),
    );
    let mut placeholders = Vec::new();
    for (k, http) in cluster.https.iter().enumerate().skip(1) {
        let c = room
            .join_at(http, &format!("replica-{k}"), SUBSCRIBER)
            .await?;
        let plan = SubPlan {
            expect: keys.clone(),
            liveness: None,
        };
        placeholders.push(SubHandle::spawn(c, plan));
    }
    send_statics(&mut publisher, objects).await?;
    wait_whole(&placeholders).await?;
    let report = time_late_joiner(cluster, &room, last, &keys).await?;
    for p in placeholders {
        p.stop().await?.client.leave().await?;
    }
    publisher.leave().await?;
    Ok(report)
}

/// Sends `objects` static objects, paced.
async fn send_statics(c: &mut Client, objects: usize) -> anyhow::Result<()> {
    let scenario = Scenario {
        static_objects: objects,
        ..Scenario::default()
    };
    let update = encode_update(&scenario.static_objects(0), PAYLOAD_BUDGET)?;
    for burst in update.payloads.chunks(STATIC_BURST) {
        for p in burst {
            c.send_payload(p).await?;
        }
        tokio::time::sleep(STATIC_PACE).await;
    }
    Ok(())
}

/// Waits until every placeholder holds every object.
async fn wait_whole(subs: &[SubHandle]) -> anyhow::Result<()> {
    let deadline = Instant::now() + REPLICA_TIMEOUT;
    while subs.iter().any(|s| s.ctl.complete_at().is_none()) {
        if Instant::now() >= deadline {
            bail!("the remote nodes did not all hold the late room within {REPLICA_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Joins at node `k`, asks for the room and times it whole; reads the counters around.
async fn time_late_joiner(
    cluster: &Cluster,
    room: &Room,
    k: usize,
    keys: &[ObjectKey],
) -> anyhow::Result<LateJoinReport> {
    let mut c = room
        .join_at(&cluster.https[k], "late-joiner", SUBSCRIBER)
        .await?;
    c.set_recv_buffer(LATE_RECV_BUFFER)?;
    let before = late_counters(cluster, k).await?;
    let (whole, bytes) = receive_whole(&mut c, keys).await?;
    let after = late_counters(cluster, k).await?;
    c.leave().await?;
    let d = |i: usize| after[i] - before[i];
    Ok(LateJoinReport {
        objects: keys.len(),
        node: cluster.https[k].clone(),
        whole_ms: whole.map(|d| d.as_secs_f64() * 1e3),
        bytes,
        home_snapshots: d(0),
        home_firs_forwarded: d(1),
        node_snapshots: d(2),
        node_firs_forwarded: d(3),
        node_link_packets_out: d(4),
    })
}

/// The first node's snapshots and FIRs passed on, then node `k`'s, then `k`'s link
/// packets out.
async fn late_counters(cluster: &Cluster, k: usize) -> anyhow::Result<[f64; 5]> {
    let snapshots = cluster.read("gsrelay_snapshots_total", &[]).await?;
    let firs = cluster.read("gsrelay_firs_forwarded_total", &[]).await?;
    let link = cluster
        .read(
            "gsrelay_packets_total",
            &[("transport", "link"), ("direction", "out")],
        )
        .await?;
    Ok([snapshots[0], firs[0], snapshots[k], firs[k], link[k]])
}

/// Sends a FIR for the room and receives until every one of `keys` came, repeating the
/// FIR while nothing arrives; the time from the first FIR (`None` after 5 s) and the
/// payload bytes received.
async fn receive_whole(
    c: &mut Client,
    keys: &[ObjectKey],
) -> anyhow::Result<(Option<Duration>, u64)> {
    let want: HashSet<ObjectKey> = keys.iter().copied().collect();
    let mut seen: HashSet<ObjectKey> = HashSet::with_capacity(want.len());
    let mut batch = RecvBatch::coalescing(RECV_BATCH);
    let relay = c.relay_ssrc();
    let t0 = Instant::now();
    c.send_fir(relay).await?;
    let mut last_fir = t0;
    let mut bytes = 0u64;
    while seen.len() < want.len() {
        if t0.elapsed() > LATE_TIMEOUT {
            return Ok((None, bytes));
        }
        let got = c
            .recv_batch(&mut batch, FIR_RETRY, |ssrc, _, payload| {
                bytes += payload.len() as u64;
                let ids = fingerprints(payload).map(|(id, _)| (ssrc, id));
                seen.extend(ids.filter(|k| want.contains(k)));
            })
            .await?;
        if got == 0 && last_fir.elapsed() >= FIR_RETRY {
            c.send_fir(relay).await?;
            last_fir = Instant::now();
        }
    }
    Ok((Some(t0.elapsed()), bytes))
}

#[cfg(test)]
mod tests {
    use super::{Nodes, node_name, remote_node};

    #[test]
    fn remote_subscribers_fill_every_other_node_before_any_gets_two() {
        let nodes: Vec<usize> = (0..5).map(|j| remote_node(j, 3)).collect();
        assert_eq!(nodes, [1, 2, 1, 2, 1]);
        assert_eq!(node_name(0), "node-a");
        assert_eq!(node_name(2), "node-c");
    }

    #[test]
    fn the_defaults_are_valid_and_bad_counts_are_refused() {
        Nodes::default().validate().unwrap();
        let none = Nodes {
            remote_subscribers: vec![],
            ..Nodes::default()
        };
        assert!(none.validate().is_err());
        let one_node = Nodes {
            nodes: 1,
            ..Nodes::default()
        };
        assert!(one_node.validate().is_err());
    }
}
