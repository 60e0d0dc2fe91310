//! The cluster: this node's place among the relay's nodes, which share a room directory
//! in Redis (`RedisDirectory`) and hold each room's replicas joined by QUIC links.
//!
//! The decisions are [`plane`]'s, a state machine that reads no clock and owns no
//! socket: which nodes to dial, which are alive, suspect or dead, where a join goes.
//! [`Cluster`] is its shell: it reads and writes the directory, opens and accepts the
//! QUIC links, and feeds the plane the time, the answers and the links' ends.
//!
//! - **Links.** One QUIC connection per pair of nodes ([`node_link`]), dialled by the
//!   node whose name sorts first, kept alive every 100 ms, and carrying the link
//!   protocol between the shards that hold a room on each side. The shards see another
//!   node's shards as `Peer`s reached through `link::RemoteNodes`; nothing else in the
//!   data path knows there is a cluster.
//! - **Failure.** A node is dead from whichever comes first: its link lost (silent past
//!   [`node_link::IDLE_TIMEOUT`], or closed), or its record missing from a directory that
//!   answers for [`plane::EXPIRE_AFTER`]; every shard then closes its links to that node
//!   (`Frame::NodeLost`), which ends its streams with a BYE to every subscriber, and the
//!   node is taken out of the directory. A request forwarded to it that fails makes it
//!   suspect at once ([`Cluster::forward_failed`]), and the join is placed again.
//! - **Placement.** [`Cluster::place`] asks the plane, with the room's replicas and the
//!   nodes' loads as the directory has them at the join ([`plane::choose`]).

pub mod directory;
pub mod node_link;
pub mod plane;
pub mod redis_directory;
pub mod shards;
pub mod wire;

use crate::metrics::Metrics;
use crate::metrics::labels::NODE_HEALTH;
use crate::transport::command::RelayHandle;
use crate::transport::link::{Frame, LinkNet, Peer, RemoteNode, RemoteNodes};
use directory::DirectoryError;
use gsrelay_core::relay::SessionId;
use gsrelay_net::quic::udp_socket;
use node_link::{Ended, LinkKey, Me, OpenError, Opened, Running};
pub use plane::Placement;
use plane::{Admit, LinkEnd, LinkWait, Output, Plane};
use redis_directory::RedisDirectory;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// How long a join waits for the link to a node its room is on.
const LINK_WAIT: Duration = Duration::from_secs(2);

/// The largest datagram a link carries when the connection does not say: what QUIC's
/// smallest packet (1 200 bytes) leaves for one.
const MIN_DATAGRAM: usize = 1100;

/// What the cluster is started with.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The cluster's token secret (the links' key derives from it).
    pub secret: Vec<u8>,
    /// The directory's key prefix.
    pub prefix: String,
    /// Where the QUIC endpoint for links binds.
    pub bind: SocketAddr,
    /// A node's load, in sessions, from which a room's new sessions go to another node.
    pub spill: usize,
}

/// Another node a request is handed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherNode {
    /// Its name.
    pub name: Arc<str>,
    /// Its HTTP API.
    pub http: SocketAddr,
}

/// The plane and the connections of the links it keeps.
#[derive(Debug)]
struct Shell {
    plane: Plane,
    conns: HashMap<u16, quinn::Connection>,
}

/// This node's part in the cluster.
pub struct Cluster {
    directory: Arc<RedisDirectory>,
    endpoint: quinn::Endpoint,
    client: quinn::ClientConfig,
    key: LinkKey,
    me: Me,
    net: Arc<LinkNet>,
    remotes: Arc<RemoteNodes>,
    shell: Mutex<Shell>,
    /// Signalled when a link comes up.
    linked: Notify,
    /// Signalled when a node dies or becomes suspect.
    fell: Notify,
    /// Signalled when the plane has output or must be woken sooner.
    wake: Arc<Notify>,
    metrics: Metrics,
    /// This node's shards, told to link their rooms to replicas that appeared.
    shards: Vec<RelayHandle>,
    /// Held while the rooms are linked again, so that two relinks never overlap.
    relinking: tokio::sync::Mutex<()>,
    /// Whether this node is cut off from the cluster's majority.
    isolated: std::sync::atomic::AtomicBool,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The link tasks and the accept loop hold the endpoint: without this, a dropped
        // node would go on answering its peers' keep-alives.
        self.close();
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.me.node)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Binds the links' QUIC endpoint and starts linking to the directory's nodes.
    pub fn start(
        cfg: &ClusterConfig,
        directory: Arc<RedisDirectory>,
        net: Arc<LinkNet>,
        remotes: Arc<RemoteNodes>,
        shards: Vec<RelayHandle>,
        metrics: &Metrics,
    ) -> std::io::Result<Arc<Self>> {
        let (endpoint, client) = endpoint(cfg.bind)?;
        let me = Me {
            node: directory.node().to_owned(),
            ssrcs: net.relay_ssrcs().to_vec(),
        };
        let plane = Plane::new(&me.node, cfg.spill, Instant::now());
        let cluster = Arc::new(Self {
            key: LinkKey::new(cfg.secret.as_slice(), &cfg.prefix),
            directory,
            endpoint,
            client,
            me,
            net,
            remotes,
            shell: Mutex::new(Shell {
                plane,
                conns: HashMap::new(),
            }),
            linked: Notify::new(),
            fell: Notify::new(),
            wake: Arc::default(),
            metrics: metrics.clone(),
            shards,
            relinking: tokio::sync::Mutex::default(),
            isolated: std::sync::atomic::AtomicBool::new(false),
        });
        tokio::spawn(accept_loop(Arc::downgrade(&cluster)));
        tokio::spawn(drive_loop(Arc::downgrade(&cluster)));
        Ok(cluster)
    }

    /// Where the links' endpoint is bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.me.node
    }

    fn with<T>(&self, f: impl FnOnce(&mut Shell) -> T) -> T {
        // Every step leaves the plane consistent: a panic cannot break it.
        f(&mut self.shell.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Marks this node draining: the other nodes place no join on it any more, and it
    /// keeps its links while its sessions remain.
    pub async fn set_draining(&self) {
        self.directory.set_draining().await;
    }

    /// Closes every link (this node stops): the peers end its streams at once.
    pub fn close(&self) {
        self.endpoint
            .close(node_link::code::SHUTDOWN.into(), b"shutdown");
    }

    /// Takes an authenticated link into service, unless it links this node to itself or
    /// duplicates a link this node dialled.
    fn established(self: &Arc<Self>, opened: Opened, dialled: bool) {
        let name: Arc<str> = Arc::from(opened.peer.node.as_str());
        let now = Instant::now();
        let admitted = self.with(|s| {
            let admit = s.plane.link_up(now, &name, dialled);
            if let Admit::Keep { id, replaced } = admit {
                if let Some(old) = replaced.and_then(|old| s.conns.remove(&old)) {
                    old.close(node_link::code::REPLACED.into(), b"replaced");
                }
                s.conns.insert(id, opened.conn.clone());
            }
            admit
        });
        self.wake.notify_one();
        let Admit::Keep { id, .. } = admitted else {
            let (code, why): (_, &[u8]) = if *name == *self.me.node {
                (node_link::code::PROTOCOL, b"self")
            } else {
                (node_link::code::REPLACED, b"duplicate")
            };
            opened.conn.close(code.into(), why);
            return;
        };
        let (tx, rx) = mpsc::channel(node_link::OUTBOUND_DEPTH);
        let max_packet = opened
            .conn
            .max_datagram_size()
            .unwrap_or(MIN_DATAGRAM)
            .saturating_sub(wire::DATAGRAM_HEADER);
        self.remotes.insert(
            id,
            RemoteNode {
                name: name.clone(),
                ssrcs: Arc::from(opened.peer.ssrcs.as_slice()),
                max_packet,
                tx,
            },
        );
        self.metrics.cluster_links.inc();
        tracing::info!(node = %name, link = id, "linked to node");
        self.linked.notify_waiters();
        let running = Running {
            id,
            net: self.net.clone(),
            dropped: self.metrics.dropped.clone(),
        };
        let cluster = Arc::downgrade(self);
        tokio::spawn(async move {
            let ended = node_link::run(opened, running, rx).await;
            if let Some(cluster) = cluster.upgrade() {
                cluster.lost(id, &name, ended).await;
            }
        });
    }

    /// A link ended: its node's replicas are dropped by every shard, and the plane
    /// decides whether the node died.
    async fn lost(&self, id: u16, name: &Arc<str>, ended: Ended) {
        let end = match ended {
            Ended::Silent => LinkEnd::Silent,
            Ended::Closed => LinkEnd::Closed,
            Ended::Protocol(_) => LinkEnd::Protocol,
            Ended::Local => LinkEnd::Local,
        };
        let now = Instant::now();
        self.with(|s| {
            s.conns.remove(&id);
            s.plane.link_lost(now, name, id, end)
        });
        self.wake.notify_one();
        self.fell.notify_waiters();
        self.remotes.remove(id);
        self.metrics.cluster_links.dec();
        for inbox in self.net.inboxes() {
            // A shard that stopped has no links to close.
            let _ = inbox.send(Frame::NodeLost(id)).await;
        }
        tracing::warn!(node = %name, link = id, ?ended, "link to node lost");
        let reason = match end {
            LinkEnd::Silent => "silent",
            LinkEnd::Closed => "closed",
            LinkEnd::Protocol => {
                self.metrics
                    .cluster_links_refused
                    .with_label_values(&["protocol"])
                    .inc();
                return;
            }
            // Counted where it was decided (expired), or not a loss (replaced, stopping).
            LinkEnd::Local => return,
        };
        self.metrics
            .cluster_link_losses
            .with_label_values(&[reason])
            .inc();
    }

    /// Counts a link that did not open, and leaves its node alone for a while.
    fn refused(&self, node: Option<(&str, SocketAddr)>, e: &OpenError) {
        tracing::warn!(node = ?node, error = %e, "link to node not opened");
        if let Some(reason) = e.reason() {
            self.metrics
                .cluster_links_refused
                .with_label_values(&[reason])
                .inc();
        }
        if let Some(node) = node {
            let now = Instant::now();
            self.with(|s| s.plane.dial_failed(now, node, e.reason().is_some()));
            self.wake.notify_one();
        }
    }

    /// Carries out what the plane asked, until it asks nothing more.
    async fn step(self: &Arc<Self>) {
        loop {
            let outputs: Vec<Output> = self.with(|s| {
                s.plane.handle_timeout(Instant::now());
                std::iter::from_fn(|| s.plane.poll_output()).collect()
            });
            if outputs.is_empty() {
                break;
            }
            for output in outputs {
                self.carry_out(output).await;
            }
        }
        let now = Instant::now();
        let counts = self.with(|s| s.plane.counts(now));
        for (state, n) in NODE_HEALTH
            .iter()
            .zip([counts.alive, counts.suspect, counts.dead])
        {
            self.metrics
                .cluster_node_health
                .with_label_values(&[state])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    async fn carry_out(self: &Arc<Self>, output: Output) {
        match output {
            Output::ReadDirectory => {
                let nodes = self.directory.nodes().await.ok();
                if let Some(nodes) = &nodes {
                    self.metrics
                        .cluster_nodes
                        .set(i64::try_from(nodes.len()).unwrap_or(i64::MAX));
                }
                self.with(|s| s.plane.directory_read(Instant::now(), nodes));
            }
            Output::Dial { node, addr } => {
                let cluster = self.clone();
                tokio::spawn(async move { cluster.dial(node, addr).await });
            }
            Output::Close { node, id } => {
                tracing::warn!(%node, "node left the directory; its link closes");
                self.metrics
                    .cluster_link_losses
                    .with_label_values(&["expired"])
                    .inc();
                if let Some(conn) = self.with(|s| s.conns.get(&id).cloned()) {
                    conn.close(node_link::code::EXPIRED.into(), b"expired");
                }
                self.fell.notify_waiters();
            }
            Output::Forget { node } => {
                if let Err(e) = self.directory.forget_node(&node).await {
                    tracing::warn!(%node, error = %e, "could not take a dead node out of the directory");
                }
            }
            Output::Relink => self.relink().await,
            Output::Fence => self.fence().await,
            Output::Isolated(isolated) => self.isolate(isolated).await,
            Output::Register => {
                if let Err(e) = self.directory.refresh_now().await {
                    tracing::warn!(error = %e, "could not register this node again");
                }
            }
        }
    }

    /// Ends this node's sessions that another node has resumed since: their clients
    /// went elsewhere while this node was frozen or cut off, and their state here is
    /// older than there.
    async fn fence(&self) {
        let Ok(moved) = self.directory.moved().await else {
            return;
        };
        for session in moved {
            tracing::warn!(
                session = %gsrelay_core::relay::format_session_id(session),
                "session resumed on another node; ending it here"
            );
            if self.leave_here(session).await {
                self.metrics.cluster_sessions_superseded.inc();
            }
        }
    }

    /// Ends `session` on the shard of this node that serves it; whether it did.
    async fn leave_here(&self, session: SessionId) -> bool {
        let shard = self.directory.local_session_shard(session);
        match shard.and_then(|k| self.shards.get(k)) {
            Some(handle) => handle.leave(session).await.is_ok(),
            None => false,
        }
    }

    /// Cut off from the cluster's majority: this node is no longer ready, and sheds its
    /// sessions (without a word to their clients, which go silent and resume through the
    /// Service on the majority); linked to it again: ready.
    async fn isolate(&self, isolated: bool) {
        self.isolated
            .store(isolated, std::sync::atomic::Ordering::Relaxed);
        if !isolated {
            tracing::warn!("linked to the cluster's majority again");
            return;
        }
        let sessions = self.directory.local_sessions();
        tracing::warn!(
            sessions = sessions.len(),
            "cut off from the cluster's majority: shedding sessions"
        );
        for session in sessions {
            self.leave_here(session).await;
        }
        self.metrics.cluster_isolations.inc();
    }

    /// Whether this node is cut off from the cluster's majority (`Plane::isolated`).
    pub fn isolated(&self) -> bool {
        self.isolated.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Marks `session`, another node's, as resumed here: that node ends its copy if it
    /// comes back.
    pub async fn mark_moved(&self, session: SessionId) {
        if let Err(e) = self.directory.mark_moved(session).await {
            tracing::warn!(error = %e, "could not mark a resumed session as moved");
        }
    }

    /// Links each room this node holds to the replicas the directory shows on linked
    /// nodes: a room split by a link that was lost and came back, by a join that could
    /// not wait for a link, or by a link its core removed, is whole again within a
    /// relink (2 s). The shards skip the links they already have, so asking again costs
    /// one command per room.
    async fn relink(&self) {
        let _one_at_a_time = self.relinking.lock().await;
        let rooms = self.directory.local_rooms();
        let names: Vec<Arc<str>> = rooms.iter().map(|(r, _)| r.clone()).collect();
        let Ok(replicas) = self.directory.replicas_of(&names).await else {
            return;
        };
        for ((room, placed), replicas) in rooms.iter().zip(replicas) {
            let peers = self.with(|s| s.plane.peers_of(&replicas));
            if peers.is_empty() {
                continue;
            }
            for p in placed {
                if let Some(shard) = self.shards.get(p.shard) {
                    // A shard that stopped has no room to link.
                    let _ = shard.link(room.to_string(), peers.clone()).await;
                }
            }
        }
    }

    async fn dial(self: Arc<Self>, name: Arc<str>, addr: SocketAddr) {
        let opened = node_link::dial(
            &self.endpoint,
            self.client.clone(),
            addr,
            &self.me,
            &self.key,
        )
        .await;
        match opened {
            Ok(o) if *o.peer.node == *name => self.established(o, true),
            Ok(o) => {
                o.conn.close(node_link::code::PROTOCOL.into(), b"name");
                let protocol = OpenError::Protocol("another node's name");
                self.refused(Some((&name, addr)), &protocol);
            }
            Err(e) => self.refused(Some((&name, addr)), &e),
        }
    }

    /// The link number of node `name`, waiting up to [`LINK_WAIT`] for a link to a node
    /// the directory shows alive; `None` for one that is dead or unknown, or not linked
    /// in time.
    async fn link_to(&self, name: &str) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + LINK_WAIT;
        loop {
            let linked = self.linked.notified();
            let wait = self.with(|s| {
                let wait = s.plane.link_wait(name);
                if wait == LinkWait::Pending {
                    s.plane.read_soon();
                }
                wait
            });
            match wait {
                LinkWait::Up(id) => return Some(id),
                LinkWait::Never => return None,
                LinkWait::Pending => self.wake.notify_one(),
            }
            if tokio::time::timeout_at(deadline, linked).await.is_err() {
                tracing::warn!(node = name, "no link to a node of the room in time");
                return None;
            }
        }
    }

    /// The replicas `room` has on other nodes, as this node's shards reach them.
    pub async fn remote_peers(&self, room: &str) -> Result<Vec<Peer>, DirectoryError> {
        let replicas = self.directory.replicas(room).await?;
        let mut peers = Vec::new();
        for r in replicas.iter().filter(|r| r.node != self.me.node) {
            if let Some(node) = self.link_to(&r.node).await {
                peers.push(Peer {
                    node,
                    shard: r.shard,
                });
            }
        }
        Ok(peers)
    }

    /// Where a join of `room` is served (`docs/relay.md`, "Placement across nodes").
    pub async fn place(&self, room: &str) -> Result<Placement, DirectoryError> {
        let (replicas, loads) = self.directory.placement_view(room).await?;
        let own = (
            self.directory.local_load().iter().sum(),
            self.directory.draining(),
        );
        let now = Instant::now();
        Ok(self.with(|s| s.plane.place(now, &replicas, &loads, own)))
    }

    /// A request forwarded to `node` failed: the node is suspect at once, and a join
    /// placed again goes elsewhere.
    pub fn forward_failed(&self, node: &str) {
        let now = Instant::now();
        self.with(|s| s.plane.forward_failed(now, node));
        self.fell.notify_waiters();
        self.wake.notify_one();
    }

    /// Resolves once `node` is no longer alive (suspect, dead or gone): a request
    /// forwarded to it is given up then, rather than waiting out its timeout.
    pub async fn fallen(&self, node: &str) {
        loop {
            let fell = self.fell.notified();
            let now = Instant::now();
            let alive = self.with(|s| s.plane.http_of(now, node).is_some());
            if !alive {
                return;
            }
            fell.await;
        }
    }

    /// The node serving `session`, with its HTTP API, when another node of the cluster
    /// does and is alive.
    pub async fn session_node(
        &self,
        session: SessionId,
    ) -> Result<Option<OtherNode>, DirectoryError> {
        let Some(node) = self.directory.session_node(session).await? else {
            return Ok(None);
        };
        let now = Instant::now();
        let http = self.with(|s| s.plane.http_of(now, &node));
        Ok(http.map(|http| OtherNode {
            name: Arc::from(node.as_str()),
            http,
        }))
    }

    /// The HTTP APIs of the other nodes `room` is on that are linked and alive.
    pub async fn room_nodes(&self, room: &str) -> Result<Vec<SocketAddr>, DirectoryError> {
        let replicas = self.directory.replicas(room).await?;
        let mut names: Vec<&str> = replicas.iter().map(|r| r.node.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let now = Instant::now();
        Ok(self.with(|s| {
            names
                .into_iter()
                .filter_map(|n| s.plane.http_of(now, n))
                .collect()
        }))
    }

    /// The node that records `room` (`docs/recording.md`, "In a cluster"): of the nodes
    /// that hold a replica of it, this one and those linked and healthy, the one whose
    /// name sorts first. Every node answers the same while they see the same nodes
    /// alive; when that node dies, the next takes over.
    pub async fn recording_node(&self, room: &str) -> Result<Option<String>, DirectoryError> {
        let replicas = self.directory.replicas(room).await?;
        let mut names: Vec<&str> = replicas.iter().map(|r| r.node.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let now = Instant::now();
        let me = &*self.me.node;
        Ok(self.with(|s| {
            names
                .into_iter()
                .find(|n| *n == me || s.plane.http_of(now, n).is_some())
                .map(str::to_owned)
        }))
    }

    /// This node's name.
    pub fn node_name(&self) -> &str {
        &self.me.node
    }

    /// Whether this node has settled in the cluster (`Plane::settled`): ready for joins.
    pub fn settled(&self) -> bool {
        self.with(|s| s.plane.settled())
    }

    /// The HTTP APIs of every other node linked and alive.
    pub fn other_nodes(&self) -> Vec<SocketAddr> {
        let now = Instant::now();
        self.with(|s| s.plane.others(now))
    }
}

/// Accepts other nodes' links until the cluster is dropped.
async fn accept_loop(cluster: Weak<Cluster>) {
    loop {
        let Some(endpoint) = cluster.upgrade().map(|c| c.endpoint.clone()) else {
            return;
        };
        let Some(incoming) = endpoint.accept().await else {
            return;
        };
        let Some(c) = cluster.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            match node_link::accept(incoming, &c.me, &c.key).await {
                Ok(opened) => c.established(opened, false),
                Err(e) => c.refused(None, &e),
            }
        });
    }
}

/// Runs the plane: carries out its outputs, then sleeps until its next timeout or until
/// woken, until the cluster is dropped.
async fn drive_loop(cluster: Weak<Cluster>) {
    loop {
        let Some(c) = cluster.upgrade() else {
            return;
        };
        c.step().await;
        let wake = c.wake.clone();
        let next = c.with(|s| s.plane.poll_timeout());
        // Not held while waiting: the cluster goes when its owner drops it.
        drop(c);
        let woken = wake.notified();
        match next {
            Some(at) => {
                let _ = tokio::time::timeout_at(at.into(), woken).await;
            }
            None => woken.await,
        }
    }
}

/// The links' QUIC endpoint on `bind`, and the configuration it dials with: a
/// self-signed certificate that no one checks (each side proves the cluster's secret
/// over the TLS session instead, [`node_link`]), datagrams on, keep-alives every
/// [`node_link::KEEP_ALIVE`].
pub fn endpoint(bind: SocketAddr) -> std::io::Result<(quinn::Endpoint, quinn::ClientConfig)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (chain, key) = crate::transport::quic::self_signed()?;
    let mut server_tls = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(std::io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(std::io::Error::other)?;
    server_tls.alpn_protocols = vec![wire::ALPN.to_vec()];
    let mut client_tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(std::io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    client_tls.alpn_protocols = vec![wire::ALPN.to_vec()];
    let transport = Arc::new(transport_config());
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(server_tls)
        .map_err(std::io::Error::other)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(transport.clone());
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls)
        .map_err(std::io::Error::other)?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    client.transport_config(transport);
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        udp_socket(bind)?,
        Arc::new(quinn::TokioRuntime),
    )?;
    Ok((endpoint, client))
}

fn transport_config() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(node_link::IDLE_TIMEOUT)
        .unwrap_or_else(|_| quinn::VarInt::from_u32(600).into());
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(1))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0))
        .keep_alive_interval(Some(node_link::KEEP_ALIVE))
        .max_idle_timeout(Some(idle))
        .datagram_receive_buffer_size(Some(4 << 20))
        .datagram_send_buffer_size(4 << 20);
    t
}

/// Accepts any server certificate, checking only its signatures: a link is
/// authenticated by the proofs of [`node_link`], bound to this TLS session, not by its
/// certificate.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
