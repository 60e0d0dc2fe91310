//! The room directory in Redis (`serve --redis-url`): the relay's nodes register there,
//! and each room records the nodes and shards it is on with its sessions on each. Behind
//! the same [`Directory`] trait as the in-process directory, which it wraps: this node's
//! own shards are still placed, capped and routed in process ([`MemoryDirectory`]);
//! Redis holds what the other nodes need to see. Shards never call it, so the data path
//! never waits for Redis.
//!
//! Keys, under a prefix shared by a cluster's nodes (`redis_prefix`, `gsrelay`):
//!
//! | key | type | what | written |
//! |---|---|---|---|
//! | `{prefix}:node:{node}` | string (JSON: [`NodeRecord`]) | a node, alive while the key exists | every [`REFRESH`], expiring after [`NODE_TTL`] |
//! | `{prefix}:room:{room}` | hash: `{node}#{shard}` → sessions | the replicas of a room | at each join and end (the node's counts as they are then), and every [`REFRESH`] |
//! | `{prefix}:load` | hash: node → sessions | each node's sessions over all its rooms, for placement | at each join and end, and every [`REFRESH`] |
//! | `{prefix}:session:{id}` | string: node | the node serving a session, for requests that reach another node | at each join and end, and every [`REFRESH`], expiring after [`NODE_TTL`] |
//!
//! Everything in Redis is rebuilt by the nodes: each rewrites its own record, its rooms'
//! fields and its sessions every [`REFRESH`], so a Redis restarted empty is whole again
//! within that. A join needs Redis (its room's record is updated before it is answered);
//! when Redis cannot be reached the join is refused as [`DirectoryError::Unavailable`]
//! (HTTP 503 `directory_unavailable` with `Retry-After`), while the rooms already open
//! keep flowing. A session's end is applied in process at once and written to Redis
//! when it can be; the next refresh repairs a write that failed.

use super::directory::{
    Directory, DirectoryError, MemoryDirectory, Pending, RoomPlacement, ShardEvent,
};
use gsrelay_core::relay::{SessionId, format_session_id};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;

/// How often a node rewrites its record, its rooms' fields and its sessions.
pub const REFRESH: Duration = Duration::from_secs(2);

/// How long a node's record and its sessions outlive its last refresh: three refreshes
/// missed.
pub const NODE_TTL: Duration = Duration::from_secs(6);

/// How long the mark of a session resumed on another node lasts: longer than a node
/// can be frozen and still find the session's clients (a session silent for the default
/// `session_timeout`, 60 s, ends by itself).
pub const MOVED_TTL: Duration = Duration::from_secs(60);

/// How long one Redis command may take before the directory counts Redis unavailable.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);

/// Keys a `SCAN` step asks for.
const SCAN_COUNT: usize = 200;

/// What a node says of itself in its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Its HTTP API, as the other nodes reach it.
    pub http: SocketAddr,
    /// Its shards' RTP addresses, as join answers give them.
    pub rtp: Vec<SocketAddr>,
    /// Sessions on each of its shards.
    pub load: Vec<usize>,
    /// Its QUIC endpoint for links between nodes.
    #[serde(default)]
    pub link: Option<SocketAddr>,
    /// Whether it is draining (it takes no new sessions).
    #[serde(default)]
    pub draining: bool,
}

impl NodeRecord {
    /// Its sessions over all its shards.
    pub fn sessions(&self) -> usize {
        self.load.iter().sum()
    }
}

/// One replica of a room as Redis has it: a shard of a node, with its sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The node.
    pub node: String,
    /// Its shard.
    pub shard: u16,
    /// The room's sessions on it.
    pub sessions: usize,
}

/// Where a node's directory lives and what it calls itself.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://host:port/db`.
    pub url: String,
    /// The cluster's key prefix.
    pub prefix: String,
    /// This node's name, unique in the cluster.
    pub node: String,
}

/// What this node advertises in its record, besides its load.
#[derive(Debug, Clone)]
pub struct Advertised {
    /// Its HTTP API.
    pub http: SocketAddr,
    /// Its shards' RTP addresses.
    pub rtp: Vec<SocketAddr>,
    /// Its QUIC endpoint for links.
    pub link: Option<SocketAddr>,
}

/// The room directory in Redis, over this node's in-process one.
pub struct RedisDirectory {
    local: MemoryDirectory,
    redis: ConnectionManager,
    cfg: RedisConfig,
    /// Rooms whose fields this node wrote, so that a refresh can remove those it left.
    written: Mutex<HashSet<Arc<str>>>,
    /// Whether the last write reached Redis (false until the node is first registered).
    up: AtomicBool,
    /// Whether this node is draining, as its record says.
    draining: AtomicBool,
    /// What the record advertises, once the refresh has started.
    advertised: std::sync::OnceLock<Advertised>,
}

impl fmt::Debug for RedisDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisDirectory")
            .field("prefix", &self.cfg.prefix)
            .field("node", &self.cfg.node)
            .finish_non_exhaustive()
    }
}

/// Why the directory cannot start.
#[derive(Debug, thiserror::Error)]
#[error("redis at {url}: {source}")]
pub struct ConnectError {
    url: String,
    #[source]
    source: redis::RedisError,
}

impl RedisDirectory {
    /// A directory over `local` that registers this node in Redis. Reconnects by itself;
    /// fails only on a URL that cannot be used.
    pub async fn connect(local: MemoryDirectory, cfg: RedisConfig) -> Result<Self, ConnectError> {
        let err = |source| ConnectError {
            url: cfg.url.clone(),
            source,
        };
        let client = redis::Client::open(cfg.url.as_str()).map_err(err)?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(1);
        // A lazy manager: the relay starts while Redis is down and connects when it can.
        let redis = ConnectionManager::new_lazy_with_config(client, manager).map_err(err)?;
        Ok(Self {
            local,
            redis,
            cfg,
            written: Mutex::new(HashSet::new()),
            up: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            advertised: std::sync::OnceLock::new(),
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.cfg.node
    }

    /// Sessions on each of this node's shards, joined or joining.
    pub fn local_load(&self) -> Vec<usize> {
        self.local.load_now()
    }

    /// Marks this node draining in its record, rewritten at once so that the other
    /// nodes stop placing joins on it (a failed write is repeated by the next refresh).
    pub async fn set_draining(&self) {
        if self.draining.swap(true, Ordering::Relaxed) {
            // Already marked: a drain asks again every 100 ms until its sessions are gone.
            return;
        }
        if let Some(addrs) = self.advertised.get()
            && let Err(e) = self.refresh(addrs).await
        {
            tracing::warn!(error = %e, "could not mark this node draining in the directory yet");
        }
    }

    /// Rewrites this node's record, rooms and sessions now, once the refresh has started:
    /// for a Redis that lost them (it restarted empty), without waiting for the next
    /// refresh.
    pub async fn refresh_now(&self) -> Result<(), DirectoryError> {
        match self.advertised.get() {
            Some(addrs) => self.refresh(addrs).await,
            None => Ok(()),
        }
    }

    /// Whether this node is draining.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    fn node_key(&self, node: &str) -> String {
        format!("{}:node:{node}", self.cfg.prefix)
    }

    fn room_key(&self, room: &str) -> String {
        format!("{}:room:{room}", self.cfg.prefix)
    }

    fn session_key(&self, session: SessionId) -> String {
        format!("{}:session:{}", self.cfg.prefix, format_session_id(session))
    }

    fn moved_key(&self, session: SessionId) -> String {
        format!("{}:moved:{}", self.cfg.prefix, format_session_id(session))
    }

    /// Marks `session`, which another node served, as resumed on this one: that node, if
    /// it comes back (it was frozen, or cut off), ends its copy ([`Self::moved`]).
    pub async fn mark_moved(&self, session: SessionId) -> Result<(), DirectoryError> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.moved_key(session))
            .arg(&self.cfg.node)
            .arg("PX")
            .arg(MOVED_TTL.as_millis() as u64)
            .ignore();
        self.query(&pipe).await
    }

    /// Every session this node serves.
    pub fn local_sessions(&self) -> Vec<SessionId> {
        self.local.sessions()
    }

    /// The shard of this node serving `session`, if any.
    pub fn local_session_shard(&self, session: SessionId) -> Option<usize> {
        self.local.session_shard_now(session)
    }

    /// This node's sessions that another node has resumed since: superseded here.
    pub async fn moved(&self) -> Result<Vec<SessionId>, DirectoryError> {
        let sessions = self.local.sessions();
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = sessions.iter().map(|s| self.moved_key(*s)).collect();
        let mut redis = self.redis.clone();
        let marks: Vec<Option<String>> =
            self.noted(redis::cmd("MGET").arg(&keys).query_async(&mut redis).await)?;
        Ok(sessions
            .into_iter()
            .zip(marks)
            .filter(|(_, by)| by.as_deref().is_some_and(|n| n != self.cfg.node))
            .map(|(s, _)| s)
            .collect())
    }

    fn load_key(&self) -> String {
        format!("{}:load", self.cfg.prefix)
    }

    /// Queues the write of this node's sessions over all its rooms.
    fn put_load(&self, pipe: &mut redis::Pipeline) {
        let total: usize = self.local.load_now().iter().sum();
        pipe.cmd("HSET")
            .arg(self.load_key())
            .arg(&self.cfg.node)
            .arg(total)
            .ignore();
    }

    fn field(&self, shard: usize) -> String {
        format!("{}#{shard}", self.cfg.node)
    }

    /// Queues the writes that make `room`'s fields of this node what `placed` says: each
    /// shard's count, and no field for a shard it is not on.
    fn put_room(&self, pipe: &mut redis::Pipeline, room: &str, placed: &[RoomPlacement]) {
        let key = self.room_key(room);
        for k in 0..self.local.shards() {
            match placed.iter().find(|p| p.shard == k && p.sessions > 0) {
                Some(p) => pipe
                    .cmd("HSET")
                    .arg(&key)
                    .arg(self.field(k))
                    .arg(p.sessions),
                None => pipe.cmd("HDEL").arg(&key).arg(self.field(k)),
            }
            .ignore();
        }
    }

    /// Writes this node's fields of `room` as the in-process directory has them now.
    /// Under the same lock as [`Self::refresh`], so the writes reach Redis in the order
    /// of the states they copy.
    async fn record(&self, room: &str) -> Result<(), DirectoryError> {
        let mut written = self.written.lock().await;
        let placed = self.local.placements_of(room);
        let mut pipe = redis::pipe();
        self.put_room(&mut pipe, room, &placed);
        self.put_load(&mut pipe);
        self.query(&pipe).await?;
        if placed.is_empty() {
            written.remove(room);
        } else {
            written.insert(Arc::from(room));
        }
        Ok(())
    }

    /// Runs `pipe`, noting whether Redis answered.
    async fn query(&self, pipe: &redis::Pipeline) -> Result<(), DirectoryError> {
        let mut redis = self.redis.clone();
        self.noted(pipe.query_async(&mut redis).await)
    }

    /// Notes whether Redis answered, for [`Directory::available`].
    fn noted<T>(&self, r: redis::RedisResult<T>) -> Result<T, DirectoryError> {
        self.up.store(r.is_ok(), Ordering::Relaxed);
        r.map_err(unavailable)
    }

    /// Rewrites this node's record (`addrs`, its load, whether it drains), its rooms'
    /// fields and its sessions, and removes the fields of the rooms it no longer holds:
    /// what makes the directory whole again after Redis lost it.
    pub async fn refresh(&self, addrs: &Advertised) -> Result<(), DirectoryError> {
        let record = NodeRecord {
            http: addrs.http,
            rtp: addrs.rtp.clone(),
            load: self.local.load_now(),
            link: addrs.link,
            draining: self.draining(),
        };
        let mut written = self.written.lock().await;
        let rooms = self.local.rooms();
        let mut pipe = redis::pipe();
        let json = serde_json::to_string(&record).unwrap_or_default();
        let ttl = NODE_TTL.as_millis() as u64;
        pipe.cmd("SET")
            .arg(self.node_key(&self.cfg.node))
            .arg(json)
            .arg("PX")
            .arg(ttl)
            .ignore();
        let held: HashSet<Arc<str>> = rooms.iter().map(|(r, _)| r.clone()).collect();
        for (room, placed) in &rooms {
            self.put_room(&mut pipe, room, placed);
        }
        for gone in written.difference(&held) {
            self.put_room(&mut pipe, gone, &[]);
        }
        self.put_load(&mut pipe);
        for session in self.local.sessions() {
            pipe.cmd("SET")
                .arg(self.session_key(session))
                .arg(&self.cfg.node)
                .arg("PX")
                .arg(ttl)
                .ignore();
        }
        self.query(&pipe).await?;
        *written = held;
        Ok(())
    }

    /// Refreshes every [`REFRESH`], the first time at once, until the directory is
    /// dropped.
    pub fn spawn_refresh(self: &Arc<Self>, addrs: Advertised) -> tokio::task::JoinHandle<()> {
        let _ = self.advertised.set(addrs.clone());
        let dir = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(REFRESH);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(dir) = dir.upgrade() else {
                    return;
                };
                if let Err(e) = dir.refresh(&addrs).await {
                    tracing::warn!(error = %e, "room directory refresh failed; retrying");
                }
            }
        })
    }

    /// Every node registered (alive), by name, this one included.
    pub async fn nodes(&self) -> Result<Vec<(String, NodeRecord)>, DirectoryError> {
        let prefix = self.node_key("");
        let keys = self.scan(&format!("{prefix}*")).await?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut redis = self.redis.clone();
        let values: Vec<Option<String>> =
            self.noted(redis::cmd("MGET").arg(&keys).query_async(&mut redis).await)?;
        Ok(keys
            .iter()
            .zip(values)
            .filter_map(|(key, value)| {
                let name = key.strip_prefix(&prefix)?;
                // A record this version cannot read is a node it cannot work with.
                let record = serde_json::from_str(&value?).ok()?;
                Some((name.to_owned(), record))
            })
            .collect())
    }

    /// The keys matching `pattern`, by `SCAN` (never `KEYS`, which blocks Redis).
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, DirectoryError> {
        let mut redis = self.redis.clone();
        let mut cursor: u64 = 0;
        let mut keys = Vec::new();
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT);
            let (next, batch): (u64, Vec<String>) =
                self.noted(scan.query_async(&mut redis).await)?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// The replicas of `room` on every node; fields this version cannot read are left
    /// out.
    pub async fn replicas(&self, room: &str) -> Result<Vec<Replica>, DirectoryError> {
        let mut redis = self.redis.clone();
        let mut get = redis::cmd("HGETALL");
        get.arg(self.room_key(room));
        let fields: Vec<(String, usize)> = self.noted(get.query_async(&mut redis).await)?;
        Ok(parse_replicas(fields))
    }

    /// The replicas of each of `rooms`, in one round trip.
    pub async fn replicas_of(
        &self,
        rooms: &[Arc<str>],
    ) -> Result<Vec<Vec<Replica>>, DirectoryError> {
        if rooms.is_empty() {
            return Ok(Vec::new());
        }
        let mut redis = self.redis.clone();
        let mut pipe = redis::pipe();
        for room in rooms {
            pipe.cmd("HGETALL").arg(self.room_key(room));
        }
        let all: Vec<Vec<(String, usize)>> = self.noted(pipe.query_async(&mut redis).await)?;
        Ok(all.into_iter().map(parse_replicas).collect())
    }

    /// The rooms this node holds, with its sessions of each on each of its shards.
    pub fn local_rooms(&self) -> Vec<(Arc<str>, Vec<RoomPlacement>)> {
        self.local.rooms()
    }

    /// The replicas of `room`, and every node's sessions as written at its last join or
    /// end (fresher than the records' refresh), in one round trip.
    pub async fn placement_view(
        &self,
        room: &str,
    ) -> Result<(Vec<Replica>, HashMap<String, usize>), DirectoryError> {
        let mut redis = self.redis.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL")
            .arg(self.room_key(room))
            .cmd("HGETALL")
            .arg(self.load_key());
        let (fields, loads): (Vec<(String, usize)>, HashMap<String, usize>) =
            self.noted(pipe.query_async(&mut redis).await)?;
        Ok((parse_replicas(fields), loads))
    }

    /// The node serving `session`, if any node recorded it.
    pub async fn session_node(&self, session: SessionId) -> Result<Option<String>, DirectoryError> {
        let mut redis = self.redis.clone();
        let mut get = redis::cmd("GET");
        get.arg(self.session_key(session));
        self.noted(get.query_async(&mut redis).await)
    }

    /// Takes node `node`, found dead, out of the directory: its record and its rooms'
    /// fields (its sessions' keys expire by themselves). A node still alive writes them
    /// again at its next refresh.
    pub async fn forget_node(&self, node: &str) -> Result<(), DirectoryError> {
        let rooms = self.scan(&format!("{}*", self.room_key(""))).await?;
        let mut redis = self.redis.clone();
        let mut read = redis::pipe();
        for key in &rooms {
            read.cmd("HKEYS").arg(key);
        }
        let fields: Vec<Vec<String>> = match rooms.is_empty() {
            true => Vec::new(),
            false => self.noted(read.query_async(&mut redis).await)?,
        };
        let mut pipe = redis::pipe();
        pipe.cmd("DEL").arg(self.node_key(node)).ignore();
        pipe.cmd("HDEL").arg(self.load_key()).arg(node).ignore();
        for (key, fields) in rooms.iter().zip(fields) {
            for field in fields {
                if field.rsplit_once('#').is_some_and(|(n, _)| n == node) {
                    pipe.cmd("HDEL").arg(key).arg(field).ignore();
                }
            }
        }
        self.query(&pipe).await
    }

    /// Writes (or removes) a session's node.
    async fn record_session(&self, event: &ShardEvent) -> Result<(), DirectoryError> {
        let mut pipe = redis::pipe();
        match event {
            ShardEvent::SessionJoined { session, .. } => pipe
                .cmd("SET")
                .arg(self.session_key(*session))
                .arg(&self.cfg.node)
                .arg("PX")
                .arg(NODE_TTL.as_millis() as u64),
            ShardEvent::SessionGone { session, .. } => {
                pipe.cmd("DEL").arg(self.session_key(*session))
            }
        }
        .ignore();
        self.query(&pipe).await
    }
}

/// A room's fields, `{node}#{shard}` → sessions, as replicas; fields this version cannot
/// read are left out.
fn parse_replicas(fields: Vec<(String, usize)>) -> Vec<Replica> {
    fields
        .into_iter()
        .filter_map(|(field, sessions)| {
            let (node, shard) = field.rsplit_once('#')?;
            Some(Replica {
                node: node.to_owned(),
                shard: shard.parse().ok()?,
                sessions,
            })
        })
        .collect()
}

fn unavailable(e: redis::RedisError) -> DirectoryError {
    DirectoryError::Unavailable(e.to_string())
}

impl Directory for RedisDirectory {
    fn place<'a>(&'a self, room: &'a str, usable: &'a [bool]) -> Pending<'a, usize> {
        Box::pin(async move {
            let shard = self.local.place(room, usable).await?;
            if let Err(e) = self.record(room).await {
                // Not placed after all: the join is refused, so its place is given back.
                self.local.unplace(room, shard).await?;
                return Err(e);
            }
            Ok(shard)
        })
    }

    fn unplace<'a>(&'a self, room: &'a str, shard: usize) -> Pending<'a, ()> {
        Box::pin(async move {
            self.local.unplace(room, shard).await?;
            // Redis lags at worst until the next refresh.
            let _ = self.record(room).await;
            Ok(())
        })
    }

    fn apply(&self, event: ShardEvent) -> Pending<'_, ()> {
        Box::pin(async move {
            let gone = match &event {
                ShardEvent::SessionGone { room, .. } => Some(room.clone()),
                ShardEvent::SessionJoined { .. } => None,
            };
            self.local.apply(event.clone()).await?;
            // Applied in process; Redis lags at worst until the next refresh.
            let _ = self.record_session(&event).await;
            if let Some(room) = gone {
                let _ = self.record(&room).await;
            }
            Ok(())
        })
    }

    fn session_shard(&self, session: SessionId) -> Pending<'_, Option<usize>> {
        self.local.session_shard(session)
    }

    fn room<'a>(&'a self, room: &'a str) -> Pending<'a, Vec<RoomPlacement>> {
        self.local.room(room)
    }

    fn load(&self) -> Pending<'_, Vec<usize>> {
        self.local.load()
    }

    fn available(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
}
