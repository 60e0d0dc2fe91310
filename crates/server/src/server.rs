//! A whole relay in one process: metrics, the relay shards (each a thread running one
//! relay task: a core, its UDP socket and its sessions), and the HTTP API, started from a
//! [`ServeConfig`] and stopped with a graceful drain.
//!
//! Every address may use port 0; the bound addresses are on [`Server`], so tests run many
//! servers side by side.

use crate::cluster::directory::{EventSink, MemoryDirectory, event_channel};
use crate::cluster::redis_directory::{Advertised, RedisConfig, RedisDirectory};
use crate::cluster::shards::Shards;
use crate::cluster::{Cluster, ClusterConfig, wire};
use crate::config::ServeConfig;
use crate::control::conn::{self, ConnTimeouts};
use crate::control::http::{self, ApiState};
use crate::control::recordings::Recordings;
use crate::control::rooms::{Hooks, RoomService};
use crate::control::token::{self, Tokens};
use crate::control::webhooks::{WebhookTasks, Webhooks};
use crate::metrics::Metrics;
use crate::transport::command::RelayHandle;
use crate::transport::link::{self, LinkEnd, LinkNet, RemoteNodes};
use crate::transport::quic::{self, QuicConfig, QuicEndpoint, QuicInfo, QuicShard};
use crate::transport::shard::{self, ShardSetup, ShardThread};
use crate::transport::udp::UdpConfig;
use crate::transport::webrtc::{self, WebRtcConfig, WebRtcEndpoint, WebRtcShard};
use anyhow::Context;
use gsrelay_core::relay::{Relay, RelayConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often a drain checks whether the last session has left.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// How long in-flight HTTP requests, then the relay task, each get to finish once the
/// drain is over: a shutdown takes at most the drain grace plus twice this. The
/// webhooks' queues get what is left of those two.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a cluster node looks at which node records each room recorded
/// automatically: a recording is taken over within about this of its node's loss being
/// known.
const OWNER_WATCH_EVERY: Duration = Duration::from_secs(1);

/// How often the recordings' retention is applied.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// How often the event-loop lag of the relay task is probed.
const LAG_PROBE_EVERY: Duration = Duration::from_millis(250);

/// A running relay.
pub struct Server {
    /// Where the HTTP API listens (the real port when bound to port 0).
    pub http_addr: SocketAddr,
    /// Where shard 0's RTP/UDP socket is bound (the real port when bound to port 0).
    pub rtp_addr: SocketAddr,
    /// Where each shard's RTP/UDP socket is bound, shard `k` at index `k`.
    pub rtp_addrs: Vec<SocketAddr>,
    /// The QUIC endpoint: its bound address and certificate fingerprint.
    pub quic: QuicInfo,
    /// Where the WebRTC port is bound.
    pub webrtc_addr: SocketAddr,
    /// Routes control operations to the shards.
    pub handle: Shards,
    /// The relay's metrics.
    pub metrics: Metrics,
    /// The random token secret generated because none was configured; `None` when the
    /// configuration supplied one.
    pub dev_secret: Option<String>,
    /// Where the QUIC endpoint for links between nodes is bound, in a cluster.
    pub link_addr: Option<SocketAddr>,
    api: ApiState,
    grace: Duration,
    stop_http: oneshot::Sender<()>,
    http_task: JoinHandle<()>,
    shard_threads: Vec<std::thread::JoinHandle<()>>,
    lag_probes: Vec<AbortOnDrop>,
    /// Applies the recordings' retention now and then.
    _retention: AbortOnDrop,
    /// Follows which node records each room recorded automatically, in a cluster.
    _owners: Option<AbortOnDrop>,
    /// The webhooks' delivery tasks, when webhooks are configured.
    webhooks: Option<WebhookTasks>,
    /// This node's part in a cluster, when it is one.
    node: Option<ClusterNode>,
    /// Closed (every QUIC connection told "relay stopped") when the server is dropped.
    _quic_endpoint: QuicEndpoint,
    /// Stops the WebRTC port's reader when the server is dropped.
    _webrtc_endpoint: WebRtcEndpoint,
}

/// Aborts a background task when dropped: the lag probe holds a relay handle, and the
/// relay task only ends once every handle is gone.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Measures the relay task's event-loop lag: how long a no-op command (a lookup of
/// session 0, which is never allocated) waits before the task answers it. A busy or
/// blocked task shows here before it shows anywhere else.
async fn probe_lag(handle: RelayHandle, shard: usize, metrics: Metrics) {
    let lag = metrics
        .event_loop_lag
        .with_label_values(&[&shard.to_string()]);
    let mut every = tokio::time::interval(LAG_PROBE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let sent = Instant::now();
        if handle.session_owner(0).await.is_err() {
            return;
        }
        lag.observe(sent.elapsed().as_secs_f64());
    }
}

/// Starts a relay: binds the HTTP listener and the RTP socket, spawns the relay task and
/// the HTTP server, and returns once both accept traffic.
pub async fn start(cfg: ServeConfig) -> anyhow::Result<Server> {
    let (secret, dev_secret) = match &cfg.token_secret {
        Some(s) => (s.clone(), None),
        None => {
            let s = token::dev_secret()?;
            (s.clone(), Some(s))
        }
    };
    anyhow::ensure!(
        cfg.token_max_ttl_secs > 0,
        "token_max_ttl_secs must be at least 1"
    );
    let tokens = Tokens::new(secret.as_bytes())
        .context("token secret")?
        .with_max_ttl(cfg.token_max_ttl_secs);
    let webhook_cfg = cfg.webhooks(&secret)?;
    if cfg.insecure_plain_rtp {
        tracing::warn!(
            "INSECURE: --insecure-plain-rtp is on; sessions may send unencrypted RTP that \
             anyone on the path can read and forge. Use for lab interop only."
        );
    }

    let listener = tokio::net::TcpListener::bind(cfg.http_addr)
        .await
        .with_context(|| format!("binding the HTTP address {}", cfg.http_addr))?;
    let http_addr = listener.local_addr()?;

    let metrics = Metrics::new();
    let count = cfg.shard_count();
    let quic_cfg = QuicConfig {
        advertise: cfg.quic_advertise_addr,
        cert: cfg.quic_cert.clone().zip(cfg.quic_key.clone()),
        ..QuicConfig::new(cfg.quic_addr)
    };
    let (quic_endpoint, quic_parts) = quic::bind(quic_cfg, &metrics, count)
        .with_context(|| format!("binding the QUIC address {}", cfg.quic_addr))?;
    let webrtc_cfg = WebRtcConfig {
        advertise: cfg.webrtc_advertise_addr,
        max_message: cfg.relay.max_packet_bytes,
        ..WebRtcConfig::new(cfg.webrtc_addr)
    };
    let (webrtc_endpoint, webrtc_parts) = webrtc::bind(webrtc_cfg, &metrics, count)
        .with_context(|| format!("binding the WebRTC address {}", cfg.webrtc_addr))?;
    let local = MemoryDirectory::new(count, cfg.relay.max_rooms, cfg.relay.max_sessions)
        .with_spill(cfg.shard_spill_sessions)
        .with_room_cap(cfg.relay.max_sessions_per_room);
    let (events, shard_events) = event_channel();
    let (hooks, webhooks) = match webhook_cfg {
        Some(c) => {
            let (hooks, tasks) = Webhooks::start(c, &metrics).context("webhooks")?;
            (Some(Arc::new(hooks) as Arc<dyn Hooks>), Some(tasks))
        }
        None => (None, None),
    };
    let rooms = Arc::new(RoomService::new(
        hooks,
        cfg.node_name.clone(),
        Duration::from_secs(cfg.room_closed_secs),
        Duration::from_secs(cfg.token_max_ttl_secs),
    ));
    let relays = shard_cores(&cfg.relay, count)?;
    let ssrcs: Vec<u32> = relays.iter().map(Relay::relay_ssrc).collect();
    let relays: Vec<Relay> = relays
        .into_iter()
        .map(|r| r.with_peer_ssrcs(&ssrcs))
        .collect();
    let remotes = Arc::new(RemoteNodes::default());
    let (net, links) = link::net(ssrcs, remotes.clone());
    let mut started: Vec<ShardThread> = Vec::with_capacity(count);
    let parts = quic_parts.into_iter().zip(webrtc_parts).zip(links);
    for (k, (relay, ((quic, webrtc), link))) in relays.into_iter().zip(parts).enumerate() {
        let parts = ShardParts {
            quic,
            webrtc,
            link,
            events: events.for_shard(k),
            observer: rooms.clone(),
        };
        let shard = start_shard(k, &cfg, relay, parts, &metrics)
            .await
            .with_context(|| format!("starting shard {k} (RTP address {})", cfg.rtp_addr))?;
        started.push(shard);
    }
    let rtp_addrs: Vec<SocketAddr> = started.iter().map(|s| s.addr).collect();
    let handles: Vec<RelayHandle> = started.iter().map(|s| s.handle.clone()).collect();
    let mut router;
    let mut node = None;
    match &cfg.redis_url {
        None => {
            router = Shards::new(handles.clone(), Arc::new(local));
        }
        Some(url) => {
            let links = LinkParts {
                net,
                remotes,
                shards: handles.clone(),
            };
            let started = join_cluster(
                &cfg, url, local, links, &secret, http_addr, &rtp_addrs, &metrics,
            )
            .await?;
            router = Shards::new(handles.clone(), started.directory.clone())
                .with_cluster(started.cluster.clone());
            node = Some(started);
        }
    }
    router = router.with_events(shard_events);
    let quic = quic_endpoint.info.clone();

    let api = ApiState::new(
        router.clone(),
        tokens,
        metrics.clone(),
        cfg.srtp_profile,
        cfg.http.clone(),
        rooms.clone(),
    )
    .context("HTTP limits")?;
    let node_name = cfg
        .node_name
        .clone()
        .unwrap_or_else(|| http_addr.to_string());
    let recordings = Recordings::new(
        cfg.recording()?,
        node_name,
        router.clone(),
        rooms,
        metrics.clone(),
    );
    let retention = AbortOnDrop(recordings.spawn_retention(RETENTION_EVERY));
    // In a cluster, which node records a room changes as nodes come and go.
    let owners = node
        .is_some()
        .then(|| AbortOnDrop(recordings.spawn_owner_watch(OWNER_WATCH_EVERY)));
    api.set_recordings(recordings);
    let (stop_http, stopped) = oneshot::channel();
    let app = http::router(api.clone());
    let timeouts = ConnTimeouts {
        header: cfg.http.header_timeout,
        idle: cfg.http.idle_timeout,
    };
    let http_task = tokio::spawn(conn::serve(
        listener,
        app,
        timeouts,
        metrics.clone(),
        async {
            // A dropped sender stops the server too.
            let _ = stopped.await;
        },
    ));

    let lag_probes = handles
        .into_iter()
        .enumerate()
        .map(|(k, h)| AbortOnDrop(tokio::spawn(probe_lag(h, k, metrics.clone()))))
        .collect();

    tracing::info!(
        http = %http_addr,
        rtp = ?rtp_addrs,
        shards = count,
        rtp_advertised = ?cfg.rtp_advertise_addr,
        srtp_profile = %cfg.srtp_profile,
        "gsrelay listening"
    );
    tracing::info!(
        quic = %quic.local_addr,
        quic_advertised = ?cfg.quic_advertise_addr,
        cert_sha256 = %quic.cert_sha256,
        self_signed = quic.self_signed,
        "RTP over QUIC (ALPN roq) and WebTransport (ALPN h3) listening"
    );
    tracing::info!(
        webrtc = %webrtc_endpoint.local_addr,
        webrtc_advertised = ?cfg.webrtc_advertise_addr,
        "WebRTC data channels listening (ICE-lite)"
    );

    Ok(Server {
        http_addr,
        rtp_addr: rtp_addrs[0],
        rtp_addrs,
        quic,
        webrtc_addr: webrtc_endpoint.local_addr,
        handle: router,
        metrics,
        dev_secret,
        api,
        grace: cfg.drain_grace(),
        stop_http,
        http_task,
        shard_threads: started.into_iter().map(|s| s.thread).collect(),
        lag_probes,
        _retention: retention,
        _owners: owners,
        webhooks,
        link_addr: node.as_ref().map(|n| n.link_addr),
        node,
        _quic_endpoint: quic_endpoint,
        _webrtc_endpoint: webrtc_endpoint,
    })
}

/// Starts shard `k` of `count`: its core (the relay-wide caps are the directory's), and its
/// UDP socket on the configured port plus `k` (a free one for port 0), advertised likewise.
/// What a cluster node keeps running: its directory's refresh and its links.
struct ClusterNode {
    directory: Arc<RedisDirectory>,
    cluster: Arc<Cluster>,
    link_addr: SocketAddr,
    _refresh: AbortOnDrop,
}

/// The shards' link net, the other nodes' links it reaches, and the shards.
struct LinkParts {
    net: Arc<LinkNet>,
    remotes: Arc<RemoteNodes>,
    shards: Vec<RelayHandle>,
}

/// Joins the cluster whose directory is the Redis at `url`: registers this node (every
/// [`crate::cluster::redis_directory::REFRESH`]) and opens its QUIC endpoint for links.
#[allow(clippy::too_many_arguments)]
async fn join_cluster(
    cfg: &ServeConfig,
    url: &str,
    local: MemoryDirectory,
    links: LinkParts,
    secret: &str,
    http_addr: SocketAddr,
    rtp_addrs: &[SocketAddr],
    metrics: &Metrics,
) -> anyhow::Result<ClusterNode> {
    let node = match &cfg.node_name {
        Some(n) => n.clone(),
        None => format!("{}:{}", host_name(), http_addr.port()),
    };
    validate_node_name(&node)?;
    if cfg.token_secret.is_none() {
        tracing::warn!(
            "a cluster node with a generated token secret links to no other node: give every \
             node the same --token-secret"
        );
    }
    let redis = RedisConfig {
        url: url.to_owned(),
        prefix: cfg.redis_prefix.clone(),
        node,
    };
    let directory = Arc::new(RedisDirectory::connect(local, redis).await?);
    let cluster_cfg = ClusterConfig {
        secret: secret.as_bytes().to_vec(),
        prefix: cfg.redis_prefix.clone(),
        bind: cfg.link_addr,
        spill: cfg.node_spill_sessions,
    };
    let cluster = Cluster::start(
        &cluster_cfg,
        directory.clone(),
        links.net,
        links.remotes,
        links.shards,
        metrics,
    )
    .with_context(|| format!("binding the link address {}", cfg.link_addr))?;
    let link_addr = cluster.local_addr()?;
    let advertised = Advertised {
        http: cfg
            .http_advertise_addr
            .unwrap_or_else(|| reachable(http_addr)),
        rtp: rtp_addrs.to_vec(),
        link: Some(
            cfg.link_advertise_addr
                .unwrap_or_else(|| reachable(link_addr)),
        ),
    };
    tracing::info!(node = %directory.node(), link = %link_addr, http = %advertised.http, "cluster node");
    let refresh = AbortOnDrop(directory.spawn_refresh(advertised));
    Ok(ClusterNode {
        directory,
        cluster,
        link_addr,
        _refresh: refresh,
    })
}

/// `addr`, or loopback at its port when it is the unspecified address: what another node
/// on this machine reaches (a node elsewhere needs an advertised address).
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip().is_unspecified() {
        true => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port()),
        false => addr,
    }
}

/// A node name: 1 to 63 characters of letters, digits, `.`, `_`, `-` and `:` (the
/// directory's fields put `#` after it).
fn validate_node_name(name: &str) -> anyhow::Result<()> {
    let ok = (1..=wire::MAX_NODE_NAME).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    anyhow::ensure!(
        ok,
        "node name {name:?}: 1 to {} letters, digits, '.', '_', '-' or ':'",
        wire::MAX_NODE_NAME
    );
    Ok(())
}

/// The machine's host name (a pod's name in Kubernetes), `gsrelay` when unknown.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "gsrelay".into())
}

/// One core per shard, each with its own seed and share of the session ids, and each
/// sending from its own SSRC (a shard's links are joined with their peer's).
fn shard_cores(cfg: &RelayConfig, count: usize) -> anyhow::Result<Vec<Relay>> {
    let mut relays: Vec<Relay> = Vec::with_capacity(count);
    while relays.len() < count {
        let seed = getrandom::u64().context("seeding the relay")?;
        let relay = Relay::new(cfg.clone(), seed).in_shard(relays.len() as u64, count as u64);
        if relays.iter().all(|r| r.relay_ssrc() != relay.relay_ssrc()) {
            relays.push(relay);
        }
    }
    Ok(relays)
}

/// What a shard is started with beside its core: its shares of the QUIC and WebRTC
/// ports, its end of the links, and where it reports its sessions.
struct ShardParts {
    quic: QuicShard,
    webrtc: WebRtcShard,
    link: LinkEnd,
    events: EventSink,
    observer: Arc<RoomService>,
}

async fn start_shard(
    k: usize,
    cfg: &ServeConfig,
    relay: Relay,
    parts: ShardParts,
    metrics: &Metrics,
) -> anyhow::Result<ShardThread> {
    let udp = UdpConfig {
        bind: port_plus(cfg.rtp_addr, k)?,
        advertise: cfg
            .rtp_advertise_addr
            .map(|a| port_plus(a, k))
            .transpose()?,
        insecure_plain_rtp: cfg.insecure_plain_rtp,
        default_profile: cfg.srtp_profile,
        recv_buffer: (cfg.udp_recv_buffer_bytes > 0).then_some(cfg.udp_recv_buffer_bytes),
        send_buffer: (cfg.udp_send_buffer_bytes > 0).then_some(cfg.udp_send_buffer_bytes),
        max_queue_delay: (cfg.udp_max_queue_delay_ms > 0)
            .then(|| Duration::from_millis(cfg.udp_max_queue_delay_ms)),
    };
    let setup = ShardSetup {
        shard: k,
        udp,
        quic: Some(parts.quic),
        webrtc: Some(parts.webrtc),
        link: Some(parts.link),
        events: Some(parts.events),
        observer: Some(parts.observer),
    };
    shard::start(k, setup, relay, metrics).await
}

/// `addr` with its port moved up by `k` (port 0 stays 0: each shard gets a free port).
fn port_plus(addr: SocketAddr, k: usize) -> anyhow::Result<SocketAddr> {
    if addr.port() == 0 {
        return Ok(addr);
    }
    let port = u16::try_from(usize::from(addr.port()) + k)
        .ok()
        .context("the shards' RTP ports run past 65535")?;
    Ok(SocketAddr::new(addr.ip(), port))
}

impl Server {
    /// Starts a graceful drain: readiness goes false and new joins are refused (503),
    /// while existing sessions keep flowing. Returns the sessions still joined.
    pub async fn begin_drain(&self) -> anyhow::Result<usize> {
        self.api.start_draining();
        Ok(self.handle.drain().await?)
    }

    /// Drains, waits until every session has left or the grace period has passed, then
    /// stops the HTTP server and the relay task.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.grace;
        // A relay task that has already stopped holds no sessions: go on stopping HTTP.
        let mut left = self.begin_drain().await.unwrap_or(0);
        tracing::info!(sessions = left, grace = ?self.grace, "draining");
        while left > 0 && Instant::now() < deadline {
            tokio::time::sleep(DRAIN_POLL.min(deadline - Instant::now())).await;
            left = self.handle.drain().await.unwrap_or(0);
        }
        if left > 0 {
            tracing::warn!(sessions = left, "drain grace period over; stopping anyway");
        }

        if let Some(node) = &self.node {
            // The other nodes end this node's streams now rather than at the link's timeout.
            node.cluster.close();
        }
        if let Some(recordings) = self.api.recordings() {
            // Their files closed, each with its reason, before the process ends.
            recordings.stop_all().await;
        }
        // Presence streams never end by themselves; the HTTP server waits for them.
        self.api.stop_streams();
        let _ = self.stop_http.send(());
        let stop_by = Instant::now() + 2 * STOP_TIMEOUT;
        let mut http_task = self.http_task;
        match tokio::time::timeout(STOP_TIMEOUT, &mut http_task).await {
            Ok(joined) => joined.context("HTTP server task")?,
            Err(_) => {
                tracing::warn!("HTTP requests still in flight; aborting them");
                http_task.abort();
            }
        }

        // Each shard ends once every handle on it is gone; the router's went with it.
        drop(self.lag_probes);
        drop(self.handle);
        drop(self.api);
        let threads = self.shard_threads;
        let joined = tokio::task::spawn_blocking(move || {
            threads.into_iter().filter_map(|t| t.join().err()).count()
        });
        match tokio::time::timeout(STOP_TIMEOUT, joined).await {
            Ok(Ok(0)) => {}
            Ok(_) => anyhow::bail!("a relay shard thread panicked"),
            // A thread cannot be aborted; the process exit takes it.
            Err(_) => tracing::warn!("relay shards still have handles; leaving them"),
        }
        // The room service, and with it the webhooks' queues, went with the shards and
        // the API: the tasks deliver what the drain queued (participants leaving, rooms
        // finishing) and end, within the stop budget.
        if let Some(webhooks) = self.webhooks {
            webhooks
                .finish(stop_by.saturating_duration_since(Instant::now()))
                .await;
        }
        tracing::info!("stopped");
        Ok(())
    }
}
