//! The control plane's view of several relay shards: each shard is one relay task owning a
//! [`gsrelay_core::relay::Relay`] core, its own UDP socket and its sessions ([`crate::transport::shard`]);
//! rooms are placed on shards and never share state, so the data path takes no lock.
//!
//! [`Shards`] routes control operations through a [`Directory`], which it alone calls: a
//! join to a shard its room is placed on, every other session operation to the shard the
//! directory has the session on. It applies the shards' [`ShardEvent`]s to the directory
//! before each operation that reads it, and before answering a join or a leave, so the
//! directory has seen what those did by the time they are answered. A shard that has
//! stopped answers [`CommandError::Stopped`] for its own rooms and sessions; the others
//! keep working.

use super::directory::{Directory, DirectoryError, MemoryDirectory, ShardEvent, ShardEvents};
use super::{Cluster, OtherNode, Placement};
use crate::transport::command::{CommandError, JoinAnswer, JoinCommand, RelayHandle, SessionOwner};
use crate::transport::link::Peer;
use crate::transport::mirror::MirrorView;
use crate::transport::replay::{ReplayOp, ReplaySpec, ReplayStatus};
use crate::transport::ring::Tap;
use gsrelay_core::relay::{ControlError, Interest, RoomCounts, RoomInfo, SessionId};
use gsrelay_record::PlayError;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Handles on every shard, with the directory that routes to them. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Shards {
    handles: Arc<[RelayHandle]>,
    directory: Arc<dyn Directory>,
    /// The shards' events not applied to the directory yet; `None` when the shards report
    /// none, and the router then reports their joins itself.
    events: Option<Arc<Mutex<Unapplied>>>,
    /// The other nodes, when this relay is one node of a cluster.
    cluster: Option<Arc<Cluster>>,
}

/// Shard events on their way to the directory.
#[derive(Debug)]
struct Unapplied {
    rx: ShardEvents,
    /// One the directory failed to take, to be applied first next time.
    retry: Option<ShardEvent>,
}

impl From<DirectoryError> for CommandError {
    fn from(e: DirectoryError) -> Self {
        match e {
            DirectoryError::Refused(e) => Self::Control(e),
            DirectoryError::Unavailable(why) => {
                tracing::warn!(error = %why, "room directory unavailable");
                Self::DirectoryUnavailable(why)
            }
        }
    }
}

impl Shards {
    /// Routes over `handles`, shard `k` being `handles[k]`, by `directory`.
    pub fn new(handles: Vec<RelayHandle>, directory: Arc<dyn Directory>) -> Self {
        Self {
            handles: handles.into(),
            directory,
            events: None,
            cluster: None,
        }
    }

    /// Links rooms to their replicas on the other nodes of `cluster` too.
    pub fn with_cluster(self, cluster: Arc<Cluster>) -> Self {
        Self {
            cluster: Some(cluster),
            ..self
        }
    }

    /// This node's name in its cluster; `None` without one.
    pub fn node_name(&self) -> Option<&str> {
        self.cluster.as_deref().map(Cluster::node)
    }

    /// The node a join of `room` is served on: `None` for this one (always, without a
    /// cluster).
    pub async fn placement(&self, room: &str) -> Result<Option<OtherNode>, CommandError> {
        let Some(cluster) = &self.cluster else {
            return Ok(None);
        };
        Ok(match cluster.place(room).await? {
            Placement::Here => None,
            Placement::Node { name, http } => Some(OtherNode { name, http }),
        })
    }

    /// A request forwarded to `node` failed: it is suspect, and placed joins avoid it.
    pub fn forward_failed(&self, node: &str) {
        if let Some(cluster) = &self.cluster {
            cluster.forward_failed(node);
        }
    }

    /// Resolves once `node` is no longer alive; never without a cluster.
    pub async fn fallen(&self, node: &str) {
        match &self.cluster {
            Some(cluster) => cluster.fallen(node).await,
            None => std::future::pending().await,
        }
    }

    /// The other node serving `id`, when this node does not and another node of the
    /// cluster does and is alive.
    pub async fn session_elsewhere(
        &self,
        id: SessionId,
    ) -> Result<Option<OtherNode>, CommandError> {
        let Some(cluster) = &self.cluster else {
            return Ok(None);
        };
        if self.directory.session_shard(id).await?.is_some() {
            return Ok(None);
        }
        Ok(cluster.session_node(id).await?)
    }

    /// The HTTP APIs of the other nodes `room` is on.
    pub async fn room_elsewhere(&self, room: &str) -> Result<Vec<SocketAddr>, CommandError> {
        match &self.cluster {
            Some(cluster) => Ok(cluster.room_nodes(room).await?),
            None => Ok(Vec::new()),
        }
    }

    /// Applies `events`, which the shards report into, to the directory.
    pub fn with_events(self, events: ShardEvents) -> Self {
        let unapplied = Unapplied {
            rx: events,
            retry: None,
        };
        Self {
            events: Some(Arc::new(Mutex::new(unapplied))),
            ..self
        }
    }

    /// One shard: the relay's single task.
    pub fn single(handle: RelayHandle) -> Self {
        Self::new(
            vec![handle],
            Arc::new(MemoryDirectory::new(1, usize::MAX, usize::MAX)),
        )
    }

    /// The handle of every shard, in order.
    pub fn handles(&self) -> &[RelayHandle] {
        &self.handles
    }

    /// The room directory, with every shard event reported so far applied.
    pub async fn directory(&self) -> &Arc<dyn Directory> {
        self.settle().await;
        &self.directory
    }

    /// Whether any shard has stopped: the relay is then degraded (its rooms are gone)
    /// and says so on its health probes.
    pub fn any_stopped(&self) -> bool {
        self.handles.iter().any(RelayHandle::is_stopped)
    }

    /// Whether the directory answered its last request (joins cannot be placed while it
    /// does not).
    pub fn directory_available(&self) -> bool {
        self.directory.available()
    }

    /// Whether this node has settled in its cluster (linked to the nodes it found at
    /// start); always without a cluster.
    pub fn cluster_settled(&self) -> bool {
        self.cluster.as_deref().is_none_or(Cluster::settled)
    }

    /// Whether this node is cut off from its cluster's majority; never without one.
    pub fn cluster_isolated(&self) -> bool {
        self.cluster.as_deref().is_some_and(Cluster::isolated)
    }

    /// Whether every shard has stopped: the relay serves nothing.
    pub fn all_stopped(&self) -> bool {
        self.handles.iter().all(RelayHandle::is_stopped)
    }

    /// Applies the shard events reported so far to the directory, in order. One the
    /// directory fails to take waits for the next call.
    async fn settle(&self) {
        let Some(events) = &self.events else {
            return;
        };
        let mut events = events.lock().await;
        while let Some(event) = events.retry.take().or_else(|| events.rx.try_recv().ok()) {
            if let Err(e) = self.directory.apply(event.clone()).await {
                tracing::warn!(error = %e, "room directory missed a shard event; retrying later");
                events.retry = Some(event);
                return;
            }
        }
    }

    /// The shard holding a session.
    async fn of_session(&self, id: SessionId) -> Result<&RelayHandle, CommandError> {
        let k = self.directory.session_shard(id).await?;
        let k = k.ok_or(CommandError::Control(ControlError::NoSuchSession(id)))?;
        self.handles.get(k).ok_or(CommandError::Stopped)
    }

    /// Joins a session on the shard the directory places it on, linking the room there
    /// to its other shards first when it is on several.
    pub async fn join(&self, cmd: JoinCommand) -> Result<JoinAnswer, CommandError> {
        self.settle().await;
        let room = cmd.request.room.clone();
        let usable: Vec<bool> = self.handles.iter().map(|h| !h.is_stopped()).collect();
        let k = self.directory.place(&room, &usable).await?;
        let Some(handle) = self.handles.get(k) else {
            self.directory.unplace(&room, k).await?;
            return Err(CommandError::Stopped);
        };
        let peers = match self.peers(&room, k, &usable, &[]).await {
            Ok(peers) => peers,
            Err(e) => {
                self.directory.unplace(&room, k).await?;
                return Err(e);
            }
        };
        let answer = match handle.join_linked(cmd, peers.clone()).await {
            Ok(answer) => answer,
            Err(e) => {
                self.directory.unplace(&room, k).await?;
                return Err(e);
            }
        };
        // A shard placed while this join was on its way may have offered a link that the
        // shard refused then (it held no session of the room yet): link them now.
        if let Ok(late) = self.peers(&room, k, &usable, &peers).await
            && !late.is_empty()
        {
            let _ = handle.link(room.clone(), late).await;
        }
        if self.events.is_some() {
            // The shard reported the join before answering it.
            self.settle().await;
        } else {
            let joined = ShardEvent::SessionJoined {
                room: Arc::from(room.as_str()),
                session: answer.joined.session,
                shard: k,
            };
            self.directory.apply(joined).await?;
        }
        Ok(answer)
    }

    /// The replicas of `room` other than shard `k`, leaving out `known`: the running
    /// shards of this node it is on, and its shards on the other nodes of the cluster.
    async fn peers(
        &self,
        room: &str,
        k: usize,
        usable: &[bool],
        known: &[Peer],
    ) -> Result<Vec<Peer>, CommandError> {
        let placed = self.directory.room(room).await?;
        let mut peers: Vec<Peer> = placed
            .iter()
            .map(|p| p.shard)
            .filter(|&s| s != k && usable.get(s) == Some(&true))
            .map(Peer::local)
            .collect();
        if let Some(cluster) = &self.cluster {
            peers.extend(cluster.remote_peers(room).await?);
        }
        peers.retain(|p| !known.contains(p));
        Ok(peers)
    }

    /// Resumes session `id` of resume generation `generation` (`docs/api.md`, "Resume"):
    /// where this node still has it, with the transport `cmd` asks for instead of its
    /// old one; where it has not (the relay restarted, or the session timed out), as a
    /// join that must get the session's SSRC, which `cmd` names. A credential already
    /// used, or an SSRC another session holds now, is [`CommandError::ResumeStale`].
    pub async fn resume(
        &self,
        id: SessionId,
        generation: u32,
        mut cmd: JoinCommand,
    ) -> Result<JoinAnswer, CommandError> {
        self.settle().await;
        let ssrc = cmd.request.ssrc.unwrap_or_default();
        if let Some(k) = self.directory.session_shard(id).await? {
            let handle = self.handles.get(k).ok_or(CommandError::Stopped)?;
            let transport = cmd.transport.clone();
            match handle.reattach(id, (generation, ssrc), transport).await {
                Err(CommandError::Control(ControlError::NoSuchSession(_))) => {}
                done => return done,
            }
        }
        cmd.generation = generation.saturating_add(1);
        cmd.request.require_ssrc = true;
        let answer = match self.join(cmd).await {
            Err(CommandError::Control(ControlError::SsrcTaken(_))) => {
                Err(CommandError::ResumeStale)
            }
            done => done,
        }?;
        if let Some(cluster) = &self.cluster {
            // Its old node, if it comes back, must not serve it too.
            cluster.mark_moved(id).await;
        }
        Ok(answer)
    }

    /// Removes a session.
    pub async fn leave(&self, id: SessionId) -> Result<(), CommandError> {
        let left = self.of_session(id).await?.leave(id).await;
        // The shard reported the session gone before answering.
        self.settle().await;
        left
    }

    /// Replaces a session's interest.
    pub async fn set_interest(
        &self,
        id: SessionId,
        interest: Interest,
    ) -> Result<(), CommandError> {
        self.of_session(id).await?.set_interest(id, interest).await
    }

    /// Who owns a session and where it is.
    pub async fn session_owner(&self, id: SessionId) -> Result<Option<SessionOwner>, CommandError> {
        match self.directory.session_shard(id).await? {
            Some(k) => match self.handles.get(k) {
                Some(h) => h.session_owner(id).await,
                None => Err(CommandError::Stopped),
            },
            None => Ok(None),
        }
    }

    /// A room's sessions on every shard it is on, and its streams (every replica's cache
    /// is whole: the first shard's); `None` when no shard holds it.
    pub async fn room_info(&self, room: String) -> Result<Option<RoomInfo>, CommandError> {
        self.settle().await;
        let placed = self.directory.room(&room).await?;
        let mut merged: Option<RoomInfo> = None;
        for h in placed.iter().filter_map(|p| self.handles.get(p.shard)) {
            let Some(info) = h.room_info(room.clone()).await? else {
                continue;
            };
            match &mut merged {
                Some(m) => m.sessions.extend(info.sessions),
                None => merged = Some(info),
            }
        }
        Ok(merged)
    }

    /// Records `room` into `tap` on the first of this node's shards that holds it (every
    /// replica's cache is whole, and a recorder gets every packet its replica accepts,
    /// carried ones included), a checkpoint every `every`.
    pub async fn record(&self, room: &str, tap: Tap, every: Duration) -> Result<(), CommandError> {
        self.settle().await;
        let placed = self.directory.room(room).await?;
        let handle = placed
            .iter()
            .filter(|p| p.sessions > 0)
            .find_map(|p| self.handles.get(p.shard))
            .ok_or_else(|| CommandError::NotHere(room.into()))?;
        handle.record(room.into(), tap, every).await
    }

    /// Stops recording `room` on every shard for `reason`; how many recordings stopped.
    pub async fn stop_recording(&self, room: &str, reason: &str) -> Result<usize, CommandError> {
        let mut n = 0;
        for h in self.running() {
            n += h.stop_recording(room.into(), reason.into()).await?;
        }
        Ok(n)
    }

    /// Plays a recording into `room`, which must be held nowhere (this node's shards, nor
    /// the cluster's other nodes): the room is placed as a join would place it, and its
    /// replay session counts as its first session there.
    pub async fn replay(&self, room: &str, spec: ReplaySpec) -> Result<ReplayStatus, CommandError> {
        self.settle().await;
        let live = !self.directory.room(room).await?.is_empty()
            || !self.room_elsewhere(room).await?.is_empty();
        if live {
            return Err(CommandError::RoomLive(room.into()));
        }
        let usable: Vec<bool> = self.handles.iter().map(|h| !h.is_stopped()).collect();
        let k = self.directory.place(room, &usable).await?;
        let Some(handle) = self.handles.get(k) else {
            self.directory.unplace(room, k).await?;
            return Err(CommandError::Stopped);
        };
        match handle.replay(room.into(), spec).await {
            Ok(status) => {
                // The shard reported the replay's session before answering.
                self.settle().await;
                Ok(status)
            }
            Err(e) => {
                self.directory.unplace(room, k).await?;
                Err(e)
            }
        }
    }

    /// Whether this node is the one to record `room` (`docs/recording.md`, "In a
    /// cluster"): always without a cluster; in one, the node the rule names, and `Err`
    /// with the one it names when that is another.
    pub async fn records_here(&self, room: &str) -> Result<Result<(), String>, CommandError> {
        let Some(cluster) = &self.cluster else {
            return Ok(Ok(()));
        };
        match cluster.recording_node(room).await? {
            Some(n) if n != cluster.node_name() => Ok(Err(n)),
            _ => Ok(Ok(())),
        }
    }

    /// Mirrors `source` into `mirror`, `delay` late (`docs/recording.md`, "Broadcast
    /// delay"): on the first of this node's shards that holds the source, where the
    /// mirror room, which must be held nowhere, is placed.
    pub async fn mirror(
        &self,
        source: &str,
        mirror: &str,
        delay: Duration,
    ) -> Result<MirrorView, CommandError> {
        self.settle().await;
        let live = !self.directory.room(mirror).await?.is_empty()
            || !self.room_elsewhere(mirror).await?.is_empty();
        if live {
            return Err(CommandError::RoomLive(mirror.into()));
        }
        let k = self
            .directory
            .room(source)
            .await?
            .iter()
            .find(|p| p.sessions > 0 && self.handles.get(p.shard).is_some())
            .map(|p| p.shard)
            .ok_or_else(|| CommandError::NotHere(source.into()))?;
        // The mirror plays from the source's shard: only that one is usable for it.
        let usable: Vec<bool> = (0..self.handles.len()).map(|s| s == k).collect();
        let placed = self.directory.place(mirror, &usable).await?;
        let handle = match self.handles.get(placed) {
            Some(h) if placed == k => h,
            _ => {
                self.directory.unplace(mirror, placed).await?;
                return Err(CommandError::Stopped);
            }
        };
        match handle.mirror(source.into(), mirror.into(), delay).await {
            Ok(view) => {
                self.settle().await;
                Ok(view)
            }
            Err(e) => {
                self.directory.unplace(mirror, k).await?;
                Err(e)
            }
        }
    }

    /// Every mirror on this node.
    pub async fn mirrors(&self) -> Result<Vec<MirrorView>, CommandError> {
        let mut all = Vec::new();
        for h in self.running() {
            all.extend(h.mirrors().await?);
        }
        Ok(all)
    }

    /// Stops the mirror of `source`; whether it had one on this node.
    pub async fn stop_mirror(&self, source: &str) -> Result<bool, CommandError> {
        let mut stopped = false;
        for h in self.running() {
            stopped |= h.stop_mirror(source.into()).await?;
        }
        Ok(stopped)
    }

    /// Carries out `op` on the replay of `room`; `None` when none plays on this node.
    pub async fn replay_control(
        &self,
        room: &str,
        op: ReplayOp,
    ) -> Result<Option<Result<ReplayStatus, PlayError>>, CommandError> {
        for h in self.running() {
            if let Some(done) = h.replay_control(room.into(), op).await? {
                return Ok(Some(done));
            }
        }
        Ok(None)
    }

    /// Every replay on this node.
    pub async fn replays(&self) -> Result<Vec<ReplayStatus>, CommandError> {
        let mut all = Vec::new();
        for h in self.running() {
            all.extend(h.replays().await?);
        }
        all.sort_by(|a, b| a.room.cmp(&b.room));
        Ok(all)
    }

    /// Stops the replay of `room`; whether one played on this node.
    pub async fn stop_replay(&self, room: &str) -> Result<bool, CommandError> {
        let mut stopped = false;
        for h in self.running() {
            stopped |= h.stop_replay(room.into()).await?;
        }
        Ok(stopped)
    }

    /// Every room's size on this node: sessions summed over its shards, streams and
    /// objects as the fullest replica holds them (each replica's cache is whole).
    pub async fn rooms(&self) -> Result<Vec<RoomCounts>, CommandError> {
        let mut merged: BTreeMap<String, RoomCounts> = BTreeMap::new();
        for h in self.running() {
            for c in h.rooms().await? {
                merge_counts(&mut merged, c);
            }
        }
        Ok(merged.into_values().collect())
    }

    /// Ends the sessions of `room` (of `identity` only, when given) on every shard, by
    /// the relay's will; how many.
    pub async fn evict(&self, room: &str, identity: Option<&str>) -> Result<usize, CommandError> {
        let mut n = 0;
        for h in self.running() {
            n += h
                .evict(room.to_owned(), identity.map(str::to_owned))
                .await?;
        }
        self.settle().await;
        Ok(n)
    }

    /// Mutes or unmutes `identity` in `room` on every shard; how many of its sessions.
    pub async fn mute(
        &self,
        room: &str,
        identity: &str,
        muted: bool,
    ) -> Result<usize, CommandError> {
        let mut n = 0;
        for h in self.running() {
            n += h.mute(room.to_owned(), identity.to_owned(), muted).await?;
        }
        Ok(n)
    }

    /// The HTTP APIs of every other node of the cluster this node is linked to.
    pub fn other_nodes(&self) -> Vec<SocketAddr> {
        self.cluster
            .as_ref()
            .map(|c| c.other_nodes())
            .unwrap_or_default()
    }

    /// The shards still running.
    fn running(&self) -> impl Iterator<Item = &RelayHandle> {
        self.handles.iter().filter(|h| !h.is_stopped())
    }

    /// Starts draining every shard; returns the sessions still joined on the running ones.
    pub async fn drain(&self) -> Result<usize, CommandError> {
        if let Some(cluster) = &self.cluster {
            // The other nodes place no more joins here.
            cluster.set_draining().await;
        }
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

/// Adds one replica's counts of a room to `merged`: sessions add up, streams and
/// objects are the fullest replica's.
pub fn merge_counts(merged: &mut BTreeMap<String, RoomCounts>, c: RoomCounts) {
    match merged.get_mut(&c.room) {
        Some(m) => {
            m.sessions += c.sessions;
            m.streams = m.streams.max(c.streams);
            m.objects = m.objects.max(c.objects);
        }
        None => {
            merged.insert(c.room.clone(), c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::command::TransportRequest;
    use gsrelay_core::relay::JoinRequest;

    fn join(room: &str) -> JoinCommand {
        JoinCommand {
            request: JoinRequest {
                room: room.into(),
                ..JoinRequest::default()
            },
            generation: 0,
            metadata: None,
            transport: TransportRequest::Rtp(None),
        }
    }

    #[tokio::test]
    async fn a_join_that_fails_gives_its_place_back() {
        let (dead, commands) = RelayHandle::channel(1);
        drop(commands);
        let directory = Arc::new(MemoryDirectory::new(1, 1, 1));
        let shards = Shards::new(vec![dead], directory.clone());
        for _ in 0..2 {
            // Not `RelayFull` the second time: the first join's place was given back.
            assert_eq!(shards.join(join("a")).await, Err(CommandError::Stopped));
        }
        assert_eq!(directory.load().await, Ok(vec![0]));
        assert_eq!(directory.room("a").await, Ok(vec![]));
    }

    #[tokio::test]
    async fn an_unknown_session_is_refused_without_asking_a_shard() {
        let (handle, _commands) = RelayHandle::channel(1);
        let shards = Shards::single(handle);
        assert_eq!(
            shards.leave(9).await,
            Err(CommandError::Control(ControlError::NoSuchSession(9)))
        );
        assert_eq!(shards.session_owner(9).await, Ok(None));
    }
}
