//! The control plane's view of several relay shards: each shard is one relay task owning a
//! [`crate::relay::Relay`] core, its own UDP socket and its sessions; rooms are pinned to
//! one shard and never share state, so the data path takes no lock.
//!
//! [`Shards`] routes control operations: a join by its room, through the [`RoomDirectory`]
//! (the one shared map, a dashmap); every other operation by its session id, whose value
//! names the shard ([`crate::relay::shard_of`]). A shard that has stopped answers
//! [`CommandError::Stopped`] for its own rooms and sessions; the others keep working.

use super::command::{CommandError, JoinAnswer, JoinCommand, RelayHandle, SessionOwner};
use super::quic::QuicShard;
use super::udp::{self, UdpConfig};
use super::webrtc::WebRtcShard;
use crate::metrics::Metrics;
use crate::relay::{ControlError, Interest, Relay, RoomInfo, SessionId};
use anyhow::Context;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::oneshot;

/// Where each open room lives, and how many sessions each shard holds. It also keeps the
/// relay-wide caps on rooms and sessions, which no one shard can see.
#[derive(Debug)]
pub struct RoomDirectory {
    rooms: DashMap<Arc<str>, Placement>,
    load: Vec<AtomicUsize>,
    open_rooms: AtomicUsize,
    sessions: AtomicUsize,
    max_rooms: usize,
    max_sessions: usize,
}

/// One room's shard and its sessions (joined, or joining right now).
#[derive(Debug, Clone, Copy)]
struct Placement {
    shard: usize,
    sessions: usize,
}

impl RoomDirectory {
    /// A directory for `shards` shards, with no rooms, admitting at most `max_rooms`
    /// rooms and `max_sessions` sessions over all shards.
    pub fn new(shards: usize, max_rooms: usize, max_sessions: usize) -> Self {
        Self {
            rooms: DashMap::new(),
            load: (0..shards.max(1)).map(|_| AtomicUsize::new(0)).collect(),
            open_rooms: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            max_rooms,
            max_sessions,
        }
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.load.len()
    }

    /// Counts one more session in `room` and returns its shard: the room's own if it is
    /// open, else the least-loaded shard among those `usable` says can take it. Refuses
    /// past the relay-wide caps.
    fn reserve(&self, room: &str, usable: impl Fn(usize) -> bool) -> Result<usize, ControlError> {
        take(&self.sessions, self.max_sessions)
            .ok_or(ControlError::RelayFull(self.max_sessions))?;
        let placed = match self.rooms.entry(Arc::from(room)) {
            Entry::Occupied(mut e) => {
                e.get_mut().sessions += 1;
                Ok(e.get().shard)
            }
            Entry::Vacant(e) => match take(&self.open_rooms, self.max_rooms) {
                Some(()) => {
                    let shard = (0..self.load.len())
                        .filter(|&k| usable(k))
                        .min_by_key(|&k| self.load[k].load(Ordering::Relaxed))
                        .unwrap_or(0);
                    e.insert(Placement { shard, sessions: 1 });
                    Ok(shard)
                }
                None => Err(ControlError::TooManyRooms(self.max_rooms)),
            },
        };
        match placed {
            Ok(shard) => {
                self.load[shard].fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.sessions.fetch_sub(1, Ordering::Relaxed);
            }
        }
        placed
    }

    /// Counts one session of `room` gone; forgets the room with its last session, so that
    /// its next join may be placed anew. The shard owning the room calls this for every
    /// session it forgets, whether it left, timed out or went with a failed room.
    pub fn release(&self, room: &str) {
        let mut gone = None;
        if let Some(mut p) = self.rooms.get_mut(room) {
            p.sessions = p.sessions.saturating_sub(1);
            gone = Some(p.shard);
        }
        if let Some(shard) = gone {
            self.load[shard].fetch_sub(1, Ordering::Relaxed);
            self.sessions.fetch_sub(1, Ordering::Relaxed);
            if self.rooms.remove_if(room, |_, p| p.sessions == 0).is_some() {
                self.open_rooms.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// The shard of an open room.
    pub fn shard_of_room(&self, room: &str) -> Option<usize> {
        self.rooms.get(room).map(|p| p.shard)
    }

    /// Sessions each shard holds.
    pub fn load(&self) -> Vec<usize> {
        self.load
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect()
    }
}

/// Takes one unit of `counter` if it is below `max`.
fn take(counter: &AtomicUsize, max: usize) -> Option<()> {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(drop)
}

/// Handles on every shard, with the directory that routes to them. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Shards {
    handles: Arc<[RelayHandle]>,
    directory: Arc<RoomDirectory>,
}

impl Shards {
    /// Routes over `handles`, shard `k` being `handles[k]`.
    pub fn new(handles: Vec<RelayHandle>, directory: Arc<RoomDirectory>) -> Self {
        Self {
            handles: handles.into(),
            directory,
        }
    }

    /// One shard: the relay's single task.
    pub fn single(handle: RelayHandle) -> Self {
        Self::new(
            vec![handle],
            Arc::new(RoomDirectory::new(1, usize::MAX, usize::MAX)),
        )
    }

    /// The handle of every shard, in order.
    pub fn handles(&self) -> &[RelayHandle] {
        &self.handles
    }

    /// The room directory.
    pub fn directory(&self) -> &Arc<RoomDirectory> {
        &self.directory
    }

    /// Whether any shard has stopped: the relay is then degraded (its rooms are gone)
    /// and says so on its health probes.
    pub fn any_stopped(&self) -> bool {
        self.handles.iter().any(RelayHandle::is_stopped)
    }

    /// Whether every shard has stopped: the relay serves nothing.
    pub fn all_stopped(&self) -> bool {
        self.handles.iter().all(RelayHandle::is_stopped)
    }

    fn of_session(&self, id: SessionId) -> &RelayHandle {
        let k = (id % self.handles.len().max(1) as u64) as usize;
        &self.handles[k.min(self.handles.len() - 1)]
    }

    /// Joins a session on its room's shard (placing a new room on the least-loaded
    /// running shard).
    pub async fn join(&self, cmd: JoinCommand) -> Result<JoinAnswer, CommandError> {
        let room = cmd.request.room.clone();
        let k = self
            .directory
            .reserve(&room, |k| !self.handles[k].is_stopped())?;
        let answer = self.handles[k].join(cmd).await;
        if answer.is_err() {
            self.directory.release(&room);
        }
        answer
    }

    /// Removes a session.
    pub async fn leave(&self, id: SessionId) -> Result<(), CommandError> {
        self.of_session(id).leave(id).await
    }

    /// Replaces a session's interest.
    pub async fn set_interest(
        &self,
        id: SessionId,
        interest: Interest,
    ) -> Result<(), CommandError> {
        self.of_session(id).set_interest(id, interest).await
    }

    /// Who owns a session and where it is.
    pub async fn session_owner(&self, id: SessionId) -> Result<Option<SessionOwner>, CommandError> {
        self.of_session(id).session_owner(id).await
    }

    /// A room's sessions and streams (`None` when no shard holds it).
    pub async fn room_info(&self, room: String) -> Result<Option<RoomInfo>, CommandError> {
        match self.directory.shard_of_room(&room) {
            Some(k) => self.handles[k].room_info(room).await,
            None => Ok(None),
        }
    }

    /// Starts draining every shard; returns the sessions still joined on the running ones.
    pub async fn drain(&self) -> Result<usize, CommandError> {
        let mut left = 0;
        let mut running = 0;
        for h in self.handles.iter() {
            if let Ok(n) = h.drain().await {
                left += n;
                running += 1;
            }
        }
        if running == 0 {
            return Err(CommandError::Stopped);
        }
        Ok(left)
    }
}

/// Name prefix of the shard threads (`gsr-shard-0`, …): per-shard CPU is read by it.
pub const SHARD_THREADS: &str = "gsr-shard-";

/// A running shard.
pub struct ShardThread {
    /// Its control handle.
    pub handle: RelayHandle,
    /// Where its UDP socket is bound.
    pub addr: SocketAddr,
    /// The thread; it ends once every handle on the shard is dropped.
    pub thread: std::thread::JoinHandle<()>,
}

/// Starts shard `k` on its own thread with a single-threaded runtime: its core, its UDP
/// socket and its sessions never leave that thread, and its CPU time is that thread's.
pub async fn start(
    k: usize,
    udp: UdpConfig,
    quic: Option<QuicShard>,
    webrtc: Option<WebRtcShard>,
    relay: Relay,
    metrics: &Metrics,
) -> anyhow::Result<ShardThread> {
    let metrics = metrics.clone();
    let (ready, started) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name(format!("{SHARD_THREADS}{k}"))
        .spawn(move || run(udp, quic, webrtc, relay, metrics, ready))
        .context("spawning the shard thread")?;
    let (handle, addr) = started.await.context("the shard thread ended at start")??;
    Ok(ShardThread {
        handle,
        addr,
        thread,
    })
}

/// The body of a shard thread: binds, reports the handle, then runs the relay task until
/// every handle is dropped.
fn run(
    udp: UdpConfig,
    quic: Option<QuicShard>,
    webrtc: Option<WebRtcShard>,
    relay: Relay,
    metrics: Metrics,
    ready: oneshot::Sender<anyhow::Result<(RelayHandle, SocketAddr)>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e.into()));
            return;
        }
    };
    rt.block_on(async move {
        match udp::spawn_with(udp, quic, webrtc, relay, metrics).await {
            Ok(t) => {
                let _ = ready.send(Ok((t.handle, t.local_addr)));
                if let Err(e) = t.task.await {
                    tracing::error!(error = %e, "relay shard stopped");
                }
            }
            Err(e) => {
                let _ = ready.send(Err(e.into()));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_room_stays_on_its_shard_until_its_last_session_goes() {
        let d = RoomDirectory::new(2, 10, 10);
        let a = d.reserve("a", |_| true).unwrap();
        let b = d.reserve("b", |_| true).unwrap();
        assert_ne!(a, b, "the second room goes to the idle shard");
        assert_eq!(d.reserve("a", |_| true).unwrap(), a);
        assert_eq!(d.load(), if a == 0 { vec![2, 1] } else { vec![1, 2] });
        d.release("a");
        assert_eq!(d.shard_of_room("a"), Some(a));
        d.release("a");
        assert_eq!(
            d.shard_of_room("a"),
            None,
            "forgotten with its last session"
        );
        assert_eq!(d.load().iter().sum::<usize>(), 1);
    }

    #[test]
    fn new_rooms_avoid_stopped_shards() {
        let d = RoomDirectory::new(3, 10, 10);
        for name in ["a", "b", "c", "d"] {
            assert_ne!(d.reserve(name, |k| k != 1).unwrap(), 1);
        }
    }

    #[test]
    fn the_caps_hold_over_all_shards() {
        let d = RoomDirectory::new(2, 1, 2);
        d.reserve("a", |_| true).unwrap();
        assert_eq!(d.reserve("b", |_| true), Err(ControlError::TooManyRooms(1)));
        d.reserve("a", |_| true).unwrap();
        assert_eq!(d.reserve("a", |_| true), Err(ControlError::RelayFull(2)));
        d.release("a");
        d.release("a");
        d.reserve("b", |_| true).expect("room and sessions freed");
    }

    #[test]
    fn releasing_an_unknown_room_changes_nothing() {
        let d = RoomDirectory::new(2, 10, 10);
        d.release("nobody");
        assert_eq!(d.load(), vec![0, 0]);
    }
}
