//! The room directory in Redis (`serve --redis-url`): the relay's nodes register there,
//! and each room records the nodes it is on with its sessions on each. Behind the same
//! [`Directory`] trait as the in-process directory, which it wraps: this node's own
//! shards are still placed, capped and routed in process ([`MemoryDirectory`]); Redis
//! holds what the other nodes need to see. Shards never call it, so the data path never
//! waits for Redis.
//!
//! Keys, under a prefix shared by a cluster's nodes (`redis_prefix`, `gsrelay`):
//!
//! | key | type | what | written |
//! |---|---|---|---|
//! | `{prefix}:node:{node}` | string (JSON: [`NodeRecord`]) | a node, alive while the key exists | every [`REFRESH`], expiring after [`NODE_TTL`] |
//! | `{prefix}:room:{room}` | hash: node → sessions | the nodes a room is on | at each join and end (the node's count as it is then), and every [`REFRESH`] |
//!
//! Everything in Redis is rebuilt by the nodes: each rewrites its own record and its
//! rooms' fields every [`REFRESH`], so a Redis restarted empty is whole again within
//! that. A join needs Redis (its room's record is updated before it is answered); when
//! Redis cannot be reached the join is refused as [`DirectoryError::Unavailable`]
//! (HTTP 503 `directory_unavailable` with `Retry-After`), while the rooms already open
//! keep flowing. A session's end is applied in process at once and written to Redis
//! when it can be; the next refresh repairs a write that failed.

use super::directory::{
    Directory, DirectoryError, MemoryDirectory, Pending, RoomPlacement, ShardEvent,
};
use crate::relay::SessionId;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;

/// How often a node rewrites its record and its rooms' fields.
pub const REFRESH: Duration = Duration::from_secs(2);

/// How long a node's record outlives its last refresh: three refreshes missed.
pub const NODE_TTL: Duration = Duration::from_secs(6);

/// How long one Redis command may take before the directory counts Redis unavailable.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);

/// What a node says of itself in its record.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRecord {
    /// Its HTTP API.
    pub http: SocketAddr,
    /// Its shards' RTP addresses, as join answers give them.
    pub rtp: Vec<SocketAddr>,
    /// Sessions on each of its shards.
    pub load: Vec<usize>,
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

/// The room directory in Redis, over this node's in-process one.
pub struct RedisDirectory {
    local: MemoryDirectory,
    redis: ConnectionManager,
    cfg: RedisConfig,
    /// Rooms whose field this node wrote, so that a refresh can remove those it left.
    written: Mutex<HashSet<Arc<str>>>,
    /// Whether the last write reached Redis (false until the node is first registered).
    up: AtomicBool,
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
        })
    }

    fn node_key(&self) -> String {
        format!("{}:node:{}", self.cfg.prefix, self.cfg.node)
    }

    fn room_key(&self, room: &str) -> String {
        format!("{}:room:{room}", self.cfg.prefix)
    }

    /// Writes this node's sessions of `room` as the in-process directory has them now,
    /// removing the field at zero. Under the same lock as [`Self::refresh`], so the
    /// writes reach Redis in the order of the states they copy.
    async fn record(&self, room: &str) -> Result<(), DirectoryError> {
        let mut written = self.written.lock().await;
        let sessions = self.local.sessions_of(room);
        let key = self.room_key(room);
        let mut redis = self.redis.clone();
        let cmd = if sessions > 0 {
            let mut c = redis::cmd("HSET");
            c.arg(&key).arg(&self.cfg.node).arg(sessions);
            c
        } else {
            let mut c = redis::cmd("HDEL");
            c.arg(&key).arg(&self.cfg.node);
            c
        };
        let () = self.noted(
            cmd.query_async(&mut redis)
                .await
                .map(|_: i64| ())
                .map_err(unavailable),
        )?;
        if sessions > 0 {
            written.insert(Arc::from(room));
        } else {
            written.remove(room);
        }
        Ok(())
    }

    /// Rewrites this node's record (its addresses `http` and `rtp`, and its load) and its
    /// rooms' fields, and removes the fields of the rooms it no longer holds: what makes
    /// the directory whole again after Redis lost it.
    pub async fn refresh(
        &self,
        http: SocketAddr,
        rtp: &[SocketAddr],
    ) -> Result<(), DirectoryError> {
        let record = NodeRecord {
            http,
            rtp: rtp.to_vec(),
            load: self.local.load_now(),
        };
        let rooms = self.local.rooms();
        let mut written = self.written.lock().await;
        let mut pipe = redis::pipe();
        let json = serde_json::to_string(&record).unwrap_or_default();
        pipe.cmd("SET")
            .arg(self.node_key())
            .arg(json)
            .arg("PX")
            .arg(NODE_TTL.as_millis() as u64)
            .ignore();
        let held: HashSet<Arc<str>> = rooms.iter().map(|(r, _)| r.clone()).collect();
        for (room, sessions) in &rooms {
            pipe.cmd("HSET")
                .arg(self.room_key(room))
                .arg(&self.cfg.node)
                .arg(*sessions)
                .ignore();
        }
        for gone in written.difference(&held) {
            pipe.cmd("HDEL")
                .arg(self.room_key(gone))
                .arg(&self.cfg.node)
                .ignore();
        }
        let mut redis = self.redis.clone();
        let () = self.noted(pipe.query_async(&mut redis).await.map_err(unavailable))?;
        *written = held;
        Ok(())
    }

    /// Notes whether a write reached Redis, for [`Directory::available`].
    fn noted<T>(&self, r: Result<T, DirectoryError>) -> Result<T, DirectoryError> {
        self.up.store(r.is_ok(), Ordering::Relaxed);
        r
    }

    /// Refreshes every [`REFRESH`], the first time at once, until the directory is
    /// dropped.
    pub fn spawn_refresh(
        self: &Arc<Self>,
        http: SocketAddr,
        rtp: Vec<SocketAddr>,
    ) -> tokio::task::JoinHandle<()> {
        let dir = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(REFRESH);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(dir) = dir.upgrade() else {
                    return;
                };
                if let Err(e) = dir.refresh(http, &rtp).await {
                    tracing::warn!(error = %e, "room directory refresh failed; retrying");
                }
            }
        })
    }
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
            self.local.apply(event).await?;
            if let Some(room) = gone {
                // Applied in process; Redis lags at worst until the next refresh.
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
