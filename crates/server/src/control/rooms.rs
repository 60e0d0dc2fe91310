//! The room service: what a game's backend and its players see of the rooms on this node.
//!
//! It follows the shards' [`Activity`] to keep each room's participants (an identity with
//! one or more sessions), and holds what only the control plane decides: room and
//! participant metadata, mutes, rooms closed for a while, identities removed from a room.
//! Every change, whether a shard or the API made it, goes out two ways at once: to the
//! room's players as presence ([`Notice`], `GET /v1/rooms/{room}/presence`) and to the
//! backend as a webhook ([`HookEvent`], through [`Hooks`]).
//!
//! Nothing here is on the data path: the shards call [`RoomService::observe`] at control
//! rate, and it takes one short lock, sends on a broadcast channel and hands webhooks to
//! a bounded queue, none of which waits. `docs/backend.md` tells the backend's side.

use crate::transport::activity::{Activity, Gone, Observer};
use gsrelay_core::api::{PresenceParticipant, PresenceSnapshot};
use gsrelay_core::relay::{SessionId, format_session_id};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast;

/// Largest room or participant metadata, in bytes of compact JSON.
pub const MAX_METADATA_BYTES: usize = 4096;

/// How many presence notices a slow watcher may fall behind before it is sent the whole
/// room again instead.
const PRESENCE_BACKLOG: usize = 1024;

/// Where webhooks go; [`super::webhooks::Webhooks`] delivers them. `deliver` must not
/// wait: it queues, or drops and counts.
pub trait Hooks: std::fmt::Debug + Send + Sync {
    /// Queues one event for delivery.
    fn deliver(&self, event: HookEvent);
}

/// One webhook's body (`docs/webhooks.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookEvent {
    /// Unique per event, the same on every retry: a receiver drops repeats by it.
    pub id: String,
    /// `room_started`, `room_finished`, `participant_joined`, `participant_left`,
    /// `stream_started`, `stream_ended`, `recording_started` or `recording_stopped`.
    pub event: &'static str,
    /// When it happened, Unix milliseconds.
    pub created_at: u64,
    /// The room.
    pub room: HookRoom,
    /// The participant concerned, for participant and stream events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub participant: Option<HookParticipant>,
    /// The session concerned, for participant and stream events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The stream, for stream events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssrc: Option<u32>,
    /// Why a participant left: `left`, `disconnected`, `timeout` or `removed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The node that saw it, in a cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The recording, for recording events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recording: Option<HookRecording>,
}

/// The recording of a [`HookEvent`] (`docs/recording.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookRecording {
    /// Its id.
    pub id: String,
    /// Why it stopped (`recording_stopped`): `stopped`, `room_ended`, `writer_behind`,
    /// `disk_error: …`, `shutdown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether it stopped on a failure of its own (the disk, the writer behind) rather
    /// than because it was stopped or its room ended.
    pub failed: bool,
}

/// The room of a [`HookEvent`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookRoom {
    /// Its name.
    pub name: String,
    /// Its metadata (`null` when none was set).
    pub metadata: Value,
}

/// The participant of a [`HookEvent`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookParticipant {
    /// Its identity.
    pub identity: String,
    /// Its metadata (`null` when none was set).
    pub metadata: Value,
}

/// A participant as the server API shows it (and another node's answer is read back).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ParticipantView {
    /// Its identity (the tokens' subject).
    pub identity: String,
    /// Its metadata (`null` when none was set).
    pub metadata: Value,
    /// Its sessions in the room.
    pub sessions: Vec<String>,
    /// The SSRCs its sessions own.
    pub ssrcs: Vec<u32>,
    /// Whether one of its sessions may publish.
    pub publish: bool,
    /// Whether one of its sessions may subscribe.
    pub subscribe: bool,
    /// Whether its publishing is suspended.
    pub muted: bool,
    /// When its first session joined, Unix milliseconds.
    pub joined_at: u64,
}

/// One presence notice for the players of a room.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The room.
    pub room: Arc<str>,
    /// `participant_joined`, `participant_updated`, `participant_left`, `room_updated`
    /// or `room_closed`.
    pub event: &'static str,
    /// Its JSON data.
    pub data: String,
}

/// What the registry holds of a session.
#[derive(Debug, Clone)]
struct SessionRecord {
    ssrcs: Vec<u32>,
    publish: bool,
    subscribe: bool,
}

/// An identity with sessions in a room.
#[derive(Debug, Clone)]
struct Participant {
    metadata: Value,
    sessions: BTreeMap<SessionId, SessionRecord>,
    joined_at: u64,
}

/// A room with sessions on this node.
#[derive(Debug, Default)]
struct RoomRecord {
    metadata: Value,
    participants: BTreeMap<String, Participant>,
    /// Identities muted in the room, for as long as it lives here: a muted player that
    /// joins again stays muted.
    muted: std::collections::HashSet<String>,
}

/// Why the room service refuses a join.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The room was closed; it opens again after the wait.
    #[error("the room is closed for another {} s", .0.as_secs())]
    Closed(Duration),
    /// The identity was removed from the room, and the token predates that.
    #[error("this identity was removed from the room; a token issued after the removal is needed")]
    Removed,
}

/// The registry behind the lock.
#[derive(Debug, Default)]
struct Registry {
    rooms: HashMap<Arc<str>, RoomRecord>,
    /// Rooms closed, until when.
    closed: HashMap<String, Instant>,
    /// (room, identity) removed: tokens issued up to the Unix second given are refused,
    /// until the second instant (by when they have all expired).
    removed: HashMap<(String, String), (u64, Instant)>,
}

/// The room service of one node.
#[derive(Debug)]
pub struct RoomService {
    registry: Mutex<Registry>,
    presence: broadcast::Sender<Arc<Notice>>,
    hooks: Option<Arc<dyn Hooks>>,
    node: Option<String>,
    /// How long a closed room refuses joins.
    closed_for: Duration,
    /// How long a removal bars the identity's older tokens: the longest token lifetime.
    removed_for: Duration,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A fresh event id: 16 random bytes in hex.
fn event_id() -> String {
    let mut b = [0u8; 16];
    // Without the OS's randomness the id is still unique enough by time; it only dedupes.
    if getrandom::fill(&mut b).is_err() {
        b[..8].copy_from_slice(&unix_ms().to_be_bytes());
    }
    hex::encode(b)
}

impl Participant {
    fn view(&self, identity: &str, muted: bool) -> ParticipantView {
        ParticipantView {
            identity: identity.to_owned(),
            metadata: self.metadata.clone(),
            sessions: self
                .sessions
                .keys()
                .map(|&s| format_session_id(s))
                .collect(),
            ssrcs: self.ssrcs(),
            publish: self.sessions.values().any(|s| s.publish),
            subscribe: self.sessions.values().any(|s| s.subscribe),
            muted,
            joined_at: self.joined_at,
        }
    }

    fn presence(&self, identity: &str, muted: bool) -> PresenceParticipant {
        PresenceParticipant {
            identity: identity.to_owned(),
            metadata: self.metadata.clone(),
            ssrcs: self.ssrcs(),
            muted,
        }
    }

    fn ssrcs(&self) -> Vec<u32> {
        self.sessions
            .values()
            .flat_map(|s| s.ssrcs.iter().copied())
            .collect()
    }
}

impl RoomRecord {
    fn snapshot(&self, room: &str) -> PresenceSnapshot {
        PresenceSnapshot {
            room: room.to_owned(),
            metadata: self.metadata.clone(),
            participants: self
                .participants
                .iter()
                .map(|(i, p)| p.presence(i, self.muted.contains(i)))
                .collect(),
        }
    }

    fn presence_of(&self, identity: &str) -> Option<PresenceParticipant> {
        let p = self.participants.get(identity)?;
        Some(p.presence(identity, self.muted.contains(identity)))
    }
}

/// What one change produced, sent once the lock is released.
#[derive(Default)]
struct Outcome {
    notices: Vec<Notice>,
    hooks: Vec<HookEvent>,
}

/// The notice every presence stream gets, whatever its room, when the relay stops.
pub const STOPPING: &str = "relay_stopping";

/// A closed room's default wait before it takes joins again.
pub const DEFAULT_CLOSED_SECS: u64 = 60;

impl Default for RoomService {
    /// No webhooks, no cluster, [`DEFAULT_CLOSED_SECS`], and removals kept for the
    /// default longest token lifetime.
    fn default() -> Self {
        Self::new(
            None,
            None,
            Duration::from_secs(DEFAULT_CLOSED_SECS),
            Duration::from_secs(super::token::DEFAULT_MAX_TTL_SECS),
        )
    }
}

impl RoomService {
    /// A room service; webhooks go to `hooks`, events name `node` in a cluster. A closed
    /// room refuses joins for `closed_for`; a removal bars older tokens for `removed_for`.
    pub fn new(
        hooks: Option<Arc<dyn Hooks>>,
        node: Option<String>,
        closed_for: Duration,
        removed_for: Duration,
    ) -> Self {
        let (presence, _) = broadcast::channel(PRESENCE_BACKLOG);
        Self {
            registry: Mutex::default(),
            presence,
            hooks,
            node,
            closed_for,
            removed_for,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock left plain data behind, still consistent
        // enough to serve: every change is applied whole or not at all.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn hook(&self, event: &'static str, room: &str, metadata: &Value) -> HookEvent {
        HookEvent {
            id: event_id(),
            event,
            created_at: unix_ms(),
            room: HookRoom {
                name: room.to_owned(),
                metadata: metadata.clone(),
            },
            participant: None,
            session_id: None,
            ssrc: None,
            reason: None,
            node: self.node.clone(),
            recording: None,
        }
    }

    /// Sends a recording event's webhook (`recording_started`, `recording_stopped`).
    pub fn recording_hook(&self, event: &'static str, room: &str, recording: HookRecording) {
        let Some(hooks) = &self.hooks else {
            return;
        };
        let metadata = self.room_metadata(room).unwrap_or(Value::Null);
        let mut h = self.hook(event, room, &metadata);
        h.recording = Some(recording);
        hooks.deliver(h);
    }

    fn send(&self, out: Outcome) {
        for n in out.notices {
            // No watcher: nobody to tell.
            let _ = self.presence.send(Arc::new(n));
        }
        if let Some(hooks) = &self.hooks {
            for h in out.hooks {
                hooks.deliver(h);
            }
        }
    }

    /// Whether `identity`, with a token issued at `iat` (Unix seconds), may join `room`
    /// now; whether it joins muted.
    pub fn admit(&self, room: &str, identity: &str, iat: u64) -> Result<bool, Refusal> {
        let now = Instant::now();
        let mut reg = self.lock();
        reg.closed.retain(|_, until| *until > now);
        reg.removed.retain(|_, (_, until)| *until > now);
        if let Some(until) = reg.closed.get(room) {
            return Err(Refusal::Closed(until.saturating_duration_since(now)));
        }
        if let Some((before, _)) = reg.removed.get(&(room.to_owned(), identity.to_owned()))
            && iat <= *before
        {
            return Err(Refusal::Removed);
        }
        Ok(reg
            .rooms
            .get(room)
            .is_some_and(|r| r.muted.contains(identity)))
    }

    /// Marks `room` closed from now for the configured time; presence watchers are told.
    /// The caller ends its sessions.
    pub fn close(&self, room: &str) -> Duration {
        let mut reg = self.lock();
        reg.closed
            .insert(room.to_owned(), Instant::now() + self.closed_for);
        drop(reg);
        let notice = Notice {
            room: Arc::from(room),
            event: "room_closed",
            data: "{}".to_owned(),
        };
        self.send(Outcome {
            notices: vec![notice],
            hooks: Vec::new(),
        });
        self.closed_for
    }

    /// Ends every presence stream: the relay is stopping (each is told `relay_stopping`).
    pub fn stop(&self) {
        let _ = self.presence.send(Arc::new(Notice {
            room: Arc::from(""),
            event: STOPPING,
            data: "{}".to_owned(),
        }));
    }

    /// Bars `identity`'s tokens issued up to `now_unix` from `room`. The caller ends its
    /// sessions.
    pub fn remove(&self, room: &str, identity: &str, now_unix: u64) {
        let until = Instant::now() + self.removed_for;
        self.lock()
            .removed
            .insert((room.to_owned(), identity.to_owned()), (now_unix, until));
    }

    /// Records `identity`'s mute in `room` (kept while the room lives here); its
    /// participant, if here, is announced again. The caller mutes its sessions.
    pub fn set_muted(&self, room: &str, identity: &str, muted: bool) {
        let mut reg = self.lock();
        let Some(r) = reg.rooms.get_mut(room) else {
            return;
        };
        let changed = if muted {
            r.muted.insert(identity.to_owned())
        } else {
            r.muted.remove(identity)
        };
        let updated = r.presence_of(identity).filter(|_| changed);
        drop(reg);
        if let Some(p) = updated {
            self.send(Outcome {
                notices: vec![notice(room, "participant_updated", &p)],
                hooks: Vec::new(),
            });
        }
    }

    /// Sets a room's metadata; `false` when the room has no session here.
    pub fn set_room_metadata(&self, room: &str, metadata: Value) -> bool {
        let mut reg = self.lock();
        let Some(r) = reg.rooms.get_mut(room) else {
            return false;
        };
        r.metadata = metadata;
        let data = serde_json::json!({ "metadata": r.metadata });
        drop(reg);
        self.send(Outcome {
            notices: vec![notice(room, "room_updated", &data)],
            hooks: Vec::new(),
        });
        true
    }

    /// Sets a participant's metadata; `false` when it has no session here.
    pub fn set_participant_metadata(&self, room: &str, identity: &str, metadata: Value) -> bool {
        let mut reg = self.lock();
        let Some(r) = reg.rooms.get_mut(room) else {
            return false;
        };
        let Some(p) = r.participants.get_mut(identity) else {
            return false;
        };
        p.metadata = metadata;
        let updated = r.presence_of(identity);
        drop(reg);
        if let Some(p) = updated {
            self.send(Outcome {
                notices: vec![notice(room, "participant_updated", &p)],
                hooks: Vec::new(),
            });
        }
        true
    }

    /// The participants of `room` here, by identity.
    pub fn participants(&self, room: &str) -> Vec<ParticipantView> {
        let reg = self.lock();
        let Some(r) = reg.rooms.get(room) else {
            return Vec::new();
        };
        r.participants
            .iter()
            .map(|(i, p)| p.view(i, r.muted.contains(i)))
            .collect()
    }

    /// The metadata of `room`, if it has sessions here.
    pub fn room_metadata(&self, room: &str) -> Option<Value> {
        self.lock().rooms.get(room).map(|r| r.metadata.clone())
    }

    /// Watches `room`'s presence: its whole presence now (`None` when it has no session
    /// here), and every notice from that instant on. Both are taken under one lock, so
    /// no change falls between them.
    pub fn watch(
        &self,
        room: &str,
    ) -> (Option<PresenceSnapshot>, broadcast::Receiver<Arc<Notice>>) {
        let reg = self.lock();
        let rx = self.presence.subscribe();
        (reg.rooms.get(room).map(|r| r.snapshot(room)), rx)
    }

    /// `room`'s whole presence now, if it has sessions here.
    pub fn snapshot(&self, room: &str) -> Option<PresenceSnapshot> {
        self.lock().rooms.get(room).map(|r| r.snapshot(room))
    }

    fn joined(
        &self,
        reg: &mut Registry,
        room: Arc<str>,
        session: SessionId,
        identity: String,
        record: SessionRecord,
        out: &mut Outcome,
    ) {
        let started = !reg.rooms.contains_key(&room);
        let r = reg.rooms.entry(room.clone()).or_default();
        if started {
            out.hooks
                .push(self.hook("room_started", &room, &r.metadata));
        }
        let first = !r.participants.contains_key(&identity);
        let p = r
            .participants
            .entry(identity.clone())
            .or_insert_with(|| Participant {
                metadata: Value::Null,
                sessions: BTreeMap::new(),
                joined_at: unix_ms(),
            });
        p.sessions.insert(session, record);
        let muted = r.muted.contains(&identity);
        let presence = p.presence(&identity, muted);
        let event = if first {
            "participant_joined"
        } else {
            "participant_updated"
        };
        out.notices.push(notice(&room, event, &presence));
        if first {
            let mut h = self.hook("participant_joined", &room, &r.metadata);
            h.participant = Some(HookParticipant {
                identity,
                metadata: Value::Null,
            });
            h.session_id = Some(format_session_id(session));
            out.hooks.push(h);
        }
    }

    fn gone(
        &self,
        reg: &mut Registry,
        room: &Arc<str>,
        session: SessionId,
        why: Gone,
        out: &mut Outcome,
    ) {
        let Some(r) = reg.rooms.get_mut(room) else {
            return;
        };
        let Some((identity, p)) = r
            .participants
            .iter_mut()
            .find(|(_, p)| p.sessions.contains_key(&session))
        else {
            return;
        };
        p.sessions.remove(&session);
        let identity = identity.clone();
        if p.sessions.is_empty() {
            let p = r.participants.remove(&identity);
            let metadata = p.map(|p| p.metadata).unwrap_or_default();
            let data = serde_json::json!({ "identity": identity });
            out.notices.push(notice(room, "participant_left", &data));
            let mut h = self.hook("participant_left", room, &r.metadata);
            h.participant = Some(HookParticipant { identity, metadata });
            h.session_id = Some(format_session_id(session));
            h.reason = Some(why.as_str());
            out.hooks.push(h);
        } else if let Some(presence) = r.presence_of(&identity) {
            out.notices
                .push(notice(room, "participant_updated", &presence));
        }
        if r.participants.is_empty()
            && let Some(r) = reg.rooms.remove(room)
        {
            out.hooks
                .push(self.hook("room_finished", room, &r.metadata));
        }
    }

    fn stream(
        &self,
        reg: &Registry,
        room: &str,
        session: SessionId,
        ssrc: u32,
        event: &'static str,
    ) -> Option<HookEvent> {
        let r = reg.rooms.get(room)?;
        let (identity, p) = r
            .participants
            .iter()
            .find(|(_, p)| p.sessions.contains_key(&session))?;
        let mut h = self.hook(event, room, &r.metadata);
        h.participant = Some(HookParticipant {
            identity: identity.clone(),
            metadata: p.metadata.clone(),
        });
        h.session_id = Some(format_session_id(session));
        h.ssrc = Some(ssrc);
        Some(h)
    }
}

/// A notice of `event` in `room` with `data` as JSON.
fn notice(room: &str, event: &'static str, data: &impl Serialize) -> Notice {
    Notice {
        room: Arc::from(room),
        event,
        data: serde_json::to_string(data).unwrap_or_else(|_| "{}".to_owned()),
    }
}

impl Observer for RoomService {
    fn observe(&self, activity: Activity) {
        let mut out = Outcome::default();
        let mut reg = self.lock();
        match activity {
            Activity::Joined {
                room,
                session,
                identity,
                ssrcs,
                publish,
                subscribe,
                muted: _,
            } => {
                let record = SessionRecord {
                    ssrcs,
                    publish,
                    subscribe,
                };
                self.joined(&mut reg, room, session, identity, record, &mut out);
            }
            Activity::Gone { room, session, why } => {
                self.gone(&mut reg, &room, session, why, &mut out);
            }
            Activity::StreamStarted {
                room,
                session,
                ssrc,
            } => {
                out.hooks
                    .extend(self.stream(&reg, &room, session, ssrc, "stream_started"));
            }
            Activity::StreamEnded {
                room,
                session,
                ssrc,
            } => {
                out.hooks
                    .extend(self.stream(&reg, &room, session, ssrc, "stream_ended"));
            }
        }
        drop(reg);
        self.send(out);
    }
}
