//! The cluster: this node's place among the relay's nodes, which share a room directory
//! in Redis (`RedisDirectory`) and hold each room's replicas joined by QUIC links.
//!
//! - **Links.** One QUIC connection per pair of nodes ([`node_link`]), dialled by the
//!   node whose name sorts first as soon as the directory shows the other, kept alive
//!   every 100 ms, and carrying the link protocol between the shards that hold a room on
//!   each side. The shards see another node's shards as `Peer`s reached through
//!   `link::RemoteNodes`; nothing else in the data path knows there is a cluster.
//! - **Failure.** A link that goes silent past [`node_link::IDLE_TIMEOUT`], that the
//!   peer closes, or whose node has been missing from the directory for
//!   [`EXPIRE_AFTER`] while Redis answered, is dropped: every shard closes its links to
//!   that node (`Frame::NodeLost`), which ends its streams with a BYE to every
//!   subscriber, and the node is taken out of the directory.
//! - **Placement.** [`Cluster::place`] picks the node a join is served on: one of the
//!   room's nodes under the spill threshold, so a room's sessions gather on as few nodes
//!   as their load allows; another node only when all of the room's are past it.
//!   Only nodes this one has a link to are candidates, so a node another cluster runs
//!   under the same prefix, or one that cannot be reached, is never chosen.

pub mod directory;
pub mod node_link;
pub mod redis_directory;
pub mod shards;
pub mod wire;

use crate::metrics::Metrics;
use crate::transport::command::RelayHandle;
use crate::transport::link::{Frame, LinkNet, Peer, RemoteNode, RemoteNodes};
use directory::DirectoryError;
use gsrelay_core::relay::SessionId;
use gsrelay_net::quic::udp_socket;
use node_link::{Ended, LinkKey, Me, OpenError, Opened, Running};
use redis_directory::{NodeRecord, RedisDirectory};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// How often a node reads the directory to dial new nodes and find vanished ones.
const MAINTAIN: Duration = Duration::from_millis(500);

/// How long a linked node may be missing from a directory that answers before it is
/// dropped: past its key's lifetime, so that a Redis restarted empty, which every node
/// fills again within a refresh, drops no one.
pub const EXPIRE_AFTER: Duration = Duration::from_secs(7);

/// How long a join waits for the link to a node its room is on.
const LINK_WAIT: Duration = Duration::from_secs(2);

/// How long a node that refused a link (another cluster's, say) is left alone.
const REFUSED_BACKOFF: Duration = Duration::from_secs(5);

/// How long a node that could not be reached is left alone.
const UNREACHABLE_BACKOFF: Duration = Duration::from_millis(500);

/// The largest datagram a link carries when the connection does not say: what QUIC's
/// smallest packet (1 200 bytes) leaves for one.
const MIN_DATAGRAM: usize = 1100;

/// How many directory reads apart the rooms this node holds are linked again to the
/// replicas the directory shows (every 2 s).
const RELINK_EVERY: u32 = 4;

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

/// Where a join is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this node.
    Here,
    /// On another node, whose HTTP API is at `http`.
    Node {
        /// Its name.
        name: String,
        /// Its HTTP API.
        http: SocketAddr,
    },
}

/// A link that is up.
#[derive(Debug)]
struct Live {
    id: u16,
    conn: quinn::Connection,
}

/// The links and what the last directory read showed.
#[derive(Debug, Default)]
struct Links {
    by_name: HashMap<Arc<str>, Live>,
    /// The last link number given.
    last_id: u16,
    dialing: HashSet<String>,
    /// Nodes whose link was refused, left alone until then.
    refused: HashMap<String, Instant>,
    /// Linked nodes missing from the directory, since when.
    absent: HashMap<Arc<str>, Instant>,
    /// Nodes whose link was lost, until when a join does not wait for them: a dead
    /// node's key outlives it, and a rejoin after its death must not wait for its link.
    lost: HashMap<Arc<str>, Instant>,
    /// The live nodes at the last directory read.
    view: Vec<(String, NodeRecord)>,
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
    links: Mutex<Links>,
    /// Signalled when a link comes up.
    linked: Notify,
    /// Signalled to read the directory at once (a join waits for a link).
    wake: Arc<Notify>,
    spill: usize,
    metrics: Metrics,
    /// This node's shards, told to link their rooms to replicas that appeared.
    shards: Vec<RelayHandle>,
    /// The other nodes' replicas each room was last linked to, and the reads since.
    relinked: tokio::sync::Mutex<Relinked>,
}

/// What [`Cluster::relink`] last did.
#[derive(Debug, Default)]
struct Relinked {
    peers: HashMap<Arc<str>, Vec<Peer>>,
    reads: u32,
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
        let cluster = Arc::new(Self {
            key: LinkKey::new(cfg.secret.as_slice(), &cfg.prefix),
            directory,
            endpoint,
            client,
            me,
            net,
            remotes,
            links: Mutex::new(Links::default()),
            linked: Notify::new(),
            wake: Arc::default(),
            spill: cfg.spill.max(1),
            metrics: metrics.clone(),
            shards,
            relinked: tokio::sync::Mutex::default(),
        });
        tokio::spawn(accept_loop(Arc::downgrade(&cluster)));
        tokio::spawn(maintain_loop(Arc::downgrade(&cluster)));
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

    fn with<T>(&self, f: impl FnOnce(&mut Links) -> T) -> T {
        // Every step leaves the tables consistent: a panic cannot break them.
        f(&mut self.links.lock().unwrap_or_else(PoisonError::into_inner))
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
        if *name == *self.me.node {
            opened.conn.close(node_link::code::PROTOCOL.into(), b"self");
            return;
        }
        let (tx, rx) = mpsc::channel(node_link::OUTBOUND_DEPTH);
        let max_packet = opened
            .conn
            .max_datagram_size()
            .unwrap_or(MIN_DATAGRAM)
            .saturating_sub(wire::DATAGRAM_HEADER);
        let remote = RemoteNode {
            name: name.clone(),
            ssrcs: Arc::from(opened.peer.ssrcs.as_slice()),
            max_packet,
            tx,
        };
        let id = self.with(|links| {
            if let Some(old) = links.by_name.get(&name) {
                if dialled {
                    // The peer dialled first: keep its link.
                    return None;
                }
                // A peer dialling again lost its old link, which is dead on its side.
                old.conn
                    .close(node_link::code::REPLACED.into(), b"replaced");
            }
            let id = next_id(links);
            links.absent.remove(&name);
            links.lost.remove(&name);
            let live = Live {
                id,
                conn: opened.conn.clone(),
            };
            links.by_name.insert(name.clone(), live);
            Some(id)
        });
        let Some(id) = id else {
            opened
                .conn
                .close(node_link::code::REPLACED.into(), b"duplicate");
            return;
        };
        self.remotes.insert(id, remote);
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

    /// A link ended: its node's replicas are dropped by every shard, and a node that went
    /// silent or closed it is taken out of the directory.
    async fn lost(&self, id: u16, name: &Arc<str>, ended: Ended) {
        self.with(|links| {
            if links.by_name.get(name).is_some_and(|l| l.id == id) {
                links.by_name.remove(name);
                links.absent.remove(name);
                links
                    .lost
                    .insert(name.clone(), Instant::now() + EXPIRE_AFTER);
            }
        });
        self.remotes.remove(id);
        self.metrics.cluster_links.dec();
        for inbox in self.net.inboxes() {
            // A shard that stopped has no links to close.
            let _ = inbox.send(Frame::NodeLost(id)).await;
        }
        tracing::warn!(node = %name, link = id, ?ended, "link to node lost");
        let reason = match ended {
            Ended::Silent => "silent",
            Ended::Closed => "closed",
            Ended::Protocol(_) => {
                self.metrics
                    .cluster_links_refused
                    .with_label_values(&["protocol"])
                    .inc();
                return;
            }
            // Counted where it was decided (expired), or not a loss (replaced, stopping).
            Ended::Local => return,
        };
        self.metrics
            .cluster_link_losses
            .with_label_values(&[reason])
            .inc();
        let relinked = self.with(|links| links.by_name.contains_key(name));
        if !relinked && let Err(e) = self.directory.forget_node(name).await {
            tracing::warn!(node = %name, error = %e, "could not take a lost node out of the directory");
        }
    }

    /// Counts a link that did not open.
    fn refused(&self, node: Option<&str>, e: &OpenError) {
        tracing::warn!(node = ?node, error = %e, "link to node not opened");
        if let Some(reason) = e.reason() {
            self.metrics
                .cluster_links_refused
                .with_label_values(&[reason])
                .inc();
        }
        if let Some(node) = node {
            let backoff = match e.reason() {
                Some(_) => REFUSED_BACKOFF,
                None => UNREACHABLE_BACKOFF,
            };
            self.with(|links| {
                links
                    .refused
                    .insert(node.to_owned(), Instant::now() + backoff)
            });
        }
    }

    /// Reads the directory: dials the nodes this one should and has no link to, and
    /// drops the linked ones that have been missing too long.
    async fn maintain(self: &Arc<Self>) {
        let Ok(nodes) = self.directory.nodes().await else {
            // Redis is away: the links stand as they are.
            return;
        };
        self.metrics
            .cluster_nodes
            .set(i64::try_from(nodes.len()).unwrap_or(i64::MAX));
        let now = Instant::now();
        let (dial, expired) = self.with(|links| {
            links.refused.retain(|_, until| *until > now);
            links.lost.retain(|_, until| *until > now);
            let dial: Vec<(String, SocketAddr)> = nodes
                .iter()
                .filter(|(name, _)| *name > self.me.node)
                .filter(|(name, _)| !links.by_name.contains_key(name.as_str()))
                .filter(|(name, _)| !links.dialing.contains(name))
                .filter(|(name, _)| !links.refused.contains_key(name))
                .filter_map(|(name, r)| Some((name.clone(), r.link?)))
                .collect();
            for (name, _) in &dial {
                links.dialing.insert(name.clone());
            }
            let present: HashSet<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
            let names: Vec<Arc<str>> = links.by_name.keys().cloned().collect();
            let mut expired = Vec::new();
            for name in names {
                if present.contains(&*name) {
                    links.absent.remove(&name);
                    continue;
                }
                let since = *links.absent.entry(name.clone()).or_insert(now);
                if now.duration_since(since) >= EXPIRE_AFTER {
                    links.absent.remove(&name);
                    if let Some(live) = links.by_name.get(&name) {
                        live.conn.close(node_link::code::EXPIRED.into(), b"expired");
                    }
                    expired.push(name);
                }
            }
            links.view = nodes;
            (dial, expired)
        });
        for name in expired {
            tracing::warn!(node = %name, "node left the directory; its links close");
            self.metrics
                .cluster_link_losses
                .with_label_values(&["expired"])
                .inc();
            let _ = self.directory.forget_node(&name).await;
        }
        for (name, addr) in dial {
            let cluster = self.clone();
            tokio::spawn(async move { cluster.dial(name, addr).await });
        }
        self.relink().await;
    }

    /// Every [`RELINK_EVERY`] reads, links each room this node holds to the replicas
    /// the directory shows on linked nodes, where the set changed since last time: a
    /// room split by a link that was lost and came back, or by a join that could not
    /// wait for a link, is whole again within a few seconds. The shards skip the links
    /// they already have.
    async fn relink(&self) {
        let mut relinked = self.relinked.lock().await;
        relinked.reads += 1;
        if relinked.reads < RELINK_EVERY {
            return;
        }
        relinked.reads = 0;
        let rooms = self.directory.local_rooms();
        let names: Vec<Arc<str>> = rooms.iter().map(|(r, _)| r.clone()).collect();
        let Ok(replicas) = self.directory.replicas_of(&names).await else {
            return;
        };
        relinked.peers.retain(|room, _| names.contains(room));
        for ((room, placed), replicas) in rooms.iter().zip(replicas) {
            let peers: Vec<Peer> = self.with(|links| {
                replicas
                    .iter()
                    .filter(|r| r.node != self.me.node)
                    .filter_map(|r| {
                        let node = links.by_name.get(r.node.as_str())?.id;
                        Some(Peer {
                            node,
                            shard: r.shard,
                        })
                    })
                    .collect()
            });
            if peers.is_empty() || relinked.peers.get(room) == Some(&peers) {
                continue;
            }
            for p in placed {
                if let Some(shard) = self.shards.get(p.shard) {
                    // A shard that stopped has no room to link.
                    let _ = shard.link(room.to_string(), peers.clone()).await;
                }
            }
            relinked.peers.insert(room.clone(), peers);
        }
    }

    async fn dial(self: Arc<Self>, name: String, addr: SocketAddr) {
        let opened = node_link::dial(
            &self.endpoint,
            self.client.clone(),
            addr,
            &self.me,
            &self.key,
        )
        .await;
        match opened {
            Ok(o) if o.peer.node == name => self.established(o, true),
            Ok(o) => {
                o.conn.close(node_link::code::PROTOCOL.into(), b"name");
                self.refused(Some(&name), &OpenError::Protocol("another node's name"));
            }
            Err(e) => self.refused(Some(&name), &e),
        }
        self.with(|links| links.dialing.remove(&name));
    }

    /// The link number of node `name`, waiting up to [`LINK_WAIT`] for a link to a node
    /// the directory shows alive and whose link was not just lost; `None` for one that
    /// is not, or not linked in time.
    async fn link_to(&self, name: &str) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + LINK_WAIT;
        loop {
            let linked = self.linked.notified();
            let (id, alive) = self.with(|links| {
                let id = links.by_name.get(name).map(|l| l.id);
                let lost = links.lost.contains_key(name);
                (id, !lost && links.view.iter().any(|(n, _)| n == name))
            });
            if id.is_some() || !alive {
                return id;
            }
            self.wake.notify_one();
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

    /// Where a join of `room` is served: on one of the room's nodes under the spill
    /// threshold (this one first, then the least loaded); when none is, on the least
    /// loaded other node under it; when none is, on the room's least loaded node. A new
    /// room stays here unless this node is past the threshold or draining.
    pub async fn place(&self, room: &str) -> Result<Placement, DirectoryError> {
        let (replicas, loads) = self.directory.placement_view(room).await?;
        let own_load: usize = self.directory.local_load().iter().sum();
        let own_draining = self.directory.draining();
        let candidates: Vec<Candidate> = self.with(|links| {
            links
                .view
                .iter()
                .filter(|(n, _)| links.by_name.contains_key(n.as_str()))
                .map(|(n, r)| Candidate {
                    name: n.clone(),
                    http: Some(r.http),
                    load: loads.get(n).copied().unwrap_or_else(|| r.sessions()),
                    draining: r.draining,
                    in_room: replicas.iter().any(|x| x.node == *n && x.sessions > 0),
                })
                .chain(std::iter::once(Candidate {
                    name: self.me.node.clone(),
                    http: None,
                    load: own_load,
                    draining: own_draining,
                    in_room: replicas
                        .iter()
                        .any(|x| x.node == self.me.node && x.sessions > 0),
                }))
                .collect()
        });
        Ok(choose(&candidates, self.spill))
    }

    /// The HTTP API of the node serving `session`, when another node of the cluster
    /// does.
    pub async fn session_node(
        &self,
        session: SessionId,
    ) -> Result<Option<SocketAddr>, DirectoryError> {
        let Some(node) = self.directory.session_node(session).await? else {
            return Ok(None);
        };
        Ok(self.http_of(&node))
    }

    /// The HTTP APIs of the other nodes `room` is on, that this node is linked to.
    pub async fn room_nodes(&self, room: &str) -> Result<Vec<SocketAddr>, DirectoryError> {
        let replicas = self.directory.replicas(room).await?;
        let mut names: Vec<&str> = replicas.iter().map(|r| r.node.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        Ok(names.into_iter().filter_map(|n| self.http_of(n)).collect())
    }

    /// The HTTP APIs of every other node this node is linked to.
    pub fn other_nodes(&self) -> Vec<SocketAddr> {
        self.with(|links| {
            links
                .view
                .iter()
                .filter(|(n, _)| *n != self.me.node && links.by_name.contains_key(n.as_str()))
                .map(|(_, r)| r.http)
                .collect()
        })
    }

    /// The HTTP API of linked node `name`; `None` for this node or one not linked.
    fn http_of(&self, name: &str) -> Option<SocketAddr> {
        if name == self.me.node {
            return None;
        }
        self.with(|links| {
            links.by_name.contains_key(name).then_some(())?;
            links
                .view
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, r)| r.http)
        })
    }
}

/// A node a join may be served on.
#[derive(Debug, Clone)]
struct Candidate {
    name: String,
    /// `None` for this node.
    http: Option<SocketAddr>,
    load: usize,
    draining: bool,
    in_room: bool,
}

/// The placement rule of [`Cluster::place`] over `nodes` (this node's `http` is `None`).
fn choose(nodes: &[Candidate], spill: usize) -> Placement {
    let open = |c: &&Candidate| !c.draining;
    let under = |c: &&Candidate| c.load < spill;
    let least = |it: &mut dyn Iterator<Item = &Candidate>| {
        it.min_by_key(|c| (c.http.is_some(), c.load, c.name.clone()))
            .cloned()
    };
    let pick = least(
        &mut nodes
            .iter()
            .filter(open)
            .filter(|c| c.in_room)
            .filter(under),
    )
    .or_else(|| {
        least(
            &mut nodes
                .iter()
                .filter(open)
                .filter(|c| !c.in_room)
                .filter(under),
        )
    })
    .or_else(|| least(&mut nodes.iter().filter(open).filter(|c| c.in_room)));
    match pick {
        Some(Candidate {
            name,
            http: Some(http),
            ..
        }) => Placement::Node { name, http },
        _ => Placement::Here,
    }
}

/// The next free link number (never [`Peer::THIS_NODE`]).
fn next_id(links: &mut Links) -> u16 {
    let used: HashSet<u16> = links.by_name.values().map(|l| l.id).collect();
    loop {
        links.last_id = links.last_id.wrapping_add(1);
        if links.last_id != Peer::THIS_NODE && !used.contains(&links.last_id) {
            return links.last_id;
        }
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

/// Reads the directory every [`MAINTAIN`], or at once when woken, until the cluster is
/// dropped.
async fn maintain_loop(cluster: Weak<Cluster>) {
    loop {
        let Some(c) = cluster.upgrade() else {
            return;
        };
        c.maintain().await;
        let wake = c.wake.clone();
        // Not held while waiting: the cluster goes when its owner drops it.
        drop(c);
        let _ = tokio::time::timeout(MAINTAIN, wake.notified()).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, remote: bool, load: usize, in_room: bool) -> Candidate {
        Candidate {
            name: name.into(),
            http: remote.then(|| SocketAddr::from(([127, 0, 0, 1], 1))),
            load,
            draining: false,
            in_room,
        }
    }

    fn named(p: Placement) -> String {
        match p {
            Placement::Here => "here".into(),
            Placement::Node { name, .. } => name,
        }
    }

    #[test]
    fn a_join_goes_to_a_node_of_the_room_under_the_threshold() {
        let nodes = [node("me", false, 0, false), node("b", true, 5, true)];
        assert_eq!(
            named(choose(&nodes, 10)),
            "b",
            "the room's node, not a new one"
        );
        let nodes = [node("me", false, 9, true), node("b", true, 1, true)];
        assert_eq!(
            named(choose(&nodes, 10)),
            "here",
            "this node first among the room's"
        );
    }

    #[test]
    fn a_room_spills_only_when_its_nodes_pass_the_threshold() {
        let nodes = [
            node("me", false, 10, true),
            node("b", true, 3, false),
            node("c", true, 1, false),
        ];
        assert_eq!(
            named(choose(&nodes, 10)),
            "c",
            "the least loaded other node"
        );
        let full = [node("me", false, 10, false), node("b", true, 12, true)];
        assert_eq!(
            named(choose(&full, 10)),
            "b",
            "all past it: the room's node"
        );
    }

    #[test]
    fn a_new_room_stays_here_unless_this_node_is_full_or_draining() {
        let nodes = [node("me", false, 3, false), node("b", true, 0, false)];
        assert_eq!(named(choose(&nodes, 10)), "here");
        let mut draining = nodes.clone();
        draining[0].draining = true;
        assert_eq!(named(choose(&draining, 10)), "b");
    }
}
