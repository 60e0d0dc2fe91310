//! Recordings (`docs/recording.md`): starting and stopping a room's recording, listing,
//! exporting and deleting what was recorded, and retention. A recording is a recorder
//! session on one of the room's shards ([`crate::transport::recorder`]) feeding a writer
//! thread ([`crate::record::writer`]) through a ring: this service only wires them up and
//! follows them; it never touches a packet.
//!
//! A recording lives in its own directory under the configured one, named by its id:
//! `rec-<start, Unix ms>-<8 hex digits>`, so a directory listing sorts by start time and
//! an id in a URL can never name a path outside it.

use super::rooms::{HookRecording, RoomService};
use crate::cluster::shards::Shards;
use crate::metrics::Metrics;
use crate::record::writer::{self, Layout, Stopped};
use crate::transport::command::CommandError;
use crate::transport::ring;
use gsrelay_record::Meta;
use serde::Serialize;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// How long stopping a recording waits for its writer to close its files.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The recording settings (`docs/configuration.md`, "Recording").
#[derive(Debug, Clone)]
pub struct RecordingConfig {
    /// Where recordings are kept.
    pub dir: PathBuf,
    /// Rooms recorded from their first join: patterns where `*` matches any run of
    /// characters and `?` one.
    pub auto: Vec<String>,
    /// Time between checkpoints.
    pub checkpoint: Duration,
    /// How segments are cut and kept.
    pub layout: Layout,
    /// The key encrypted segments open with.
    pub key: Option<gsrelay_record::Key>,
    /// Stopped recordings older than this are deleted.
    pub max_age: Option<Duration>,
    /// The oldest stopped recordings are deleted while all of them hold more bytes.
    pub max_bytes: Option<u64>,
}

/// Why a recording call failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The room has no session on this relay.
    #[error("no room {0:?} here")]
    NoRoom(String),
    /// The room is being recorded already.
    #[error("room {0:?} is being recorded already")]
    AlreadyRecording(String),
    /// The room is not being recorded.
    #[error("room {0:?} is not being recorded")]
    NotRecording(String),
    /// No recording has that id.
    #[error("no recording {0:?}")]
    NoRecording(String),
    /// The recording is still running (it cannot be deleted).
    #[error("recording {0:?} is running; stop it first")]
    Running(String),
    /// The recording's files cannot be read or written.
    #[error("recording storage: {0}")]
    Storage(String),
    /// The recording is damaged beyond its torn tail.
    #[error("recording {0:?} is damaged: {1}")]
    Damaged(String, String),
    /// The relay could not carry it out.
    #[error(transparent)]
    Relay(CommandError),
}

impl From<std::io::Error> for RecordingError {
    fn from(e: std::io::Error) -> Self {
        Self::Storage(e.to_string())
    }
}

/// A recording as the server API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RecordingView {
    /// Its id.
    pub id: String,
    /// The room recorded.
    pub room: String,
    /// The node that recorded it.
    pub node: String,
    /// `recording`, `stopped`, `failed`, or `interrupted` (its relay died while
    /// recording: its files open up to their last complete record).
    pub state: String,
    /// When it started, Unix milliseconds.
    pub started_at: u64,
    /// When it stopped, Unix milliseconds.
    pub stopped_at: Option<u64>,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// Its files' size, bytes.
    pub bytes: u64,
    /// Its segment files.
    pub segments: usize,
    /// Seconds between its checkpoints.
    pub checkpoint_secs: u32,
}

/// A running recording.
#[derive(Debug)]
struct Active {
    id: String,
    /// Turns true once its writer has closed its files.
    done: watch::Receiver<bool>,
}

/// The recordings of this relay.
pub struct Recordings {
    cfg: RecordingConfig,
    node: String,
    relay: Shards,
    rooms: Arc<RoomService>,
    metrics: Metrics,
    /// Running recordings by room.
    active: Mutex<HashMap<String, Active>>,
    /// How the recordings that ended here ended, by id: what `recording.json` says,
    /// unless a full disk kept it from being written.
    ended: Mutex<HashMap<String, Meta>>,
    /// Rooms recorded automatically that another node records, with that node and
    /// when it was last seen doing so (Unix ns): where a taken-over recording's gap
    /// begins.
    elsewhere: Mutex<HashMap<String, (String, u64)>>,
}

impl std::fmt::Debug for Recordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recordings")
            .field("dir", &self.cfg.dir)
            .field("active", &self.active().len())
            .finish_non_exhaustive()
    }
}

impl Recordings {
    /// The recordings of the relay `relay`, on node `node`, kept under `cfg.dir`.
    pub fn new(
        cfg: RecordingConfig,
        node: String,
        relay: Shards,
        rooms: Arc<RoomService>,
        metrics: Metrics,
    ) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            node,
            relay,
            rooms,
            metrics,
            active: Mutex::new(HashMap::new()),
            ended: Mutex::new(HashMap::new()),
            elsewhere: Mutex::new(HashMap::new()),
        })
    }

    fn active(&self) -> std::sync::MutexGuard<'_, HashMap<String, Active>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `room` is recorded from its first join (`record_rooms`).
    pub fn records_automatically(&self, room: &str) -> bool {
        self.cfg
            .auto
            .iter()
            .any(|p| matches(p.as_bytes(), room.as_bytes()))
    }

    /// Starts recording `room` if it is one of those recorded automatically, is not
    /// being recorded, and, in a cluster, is this node's to record: called after each
    /// join. A failure is logged, never the join's.
    pub async fn joined(self: &Arc<Self>, room: &str) {
        if !self.records_automatically(room) || self.active().contains_key(room) {
            return;
        }
        match self.relay.records_here(room).await {
            Ok(Ok(())) => {}
            Ok(Err(node)) => return tracing::debug!(%room, %node, "recorded by another node"),
            Err(e) => return tracing::warn!(%room, error = %e, "automatic recording not started"),
        }
        match self.start_with(room, Vec::new()).await {
            Ok(_) | Err(RecordingError::AlreadyRecording(_)) => {}
            Err(e) => tracing::warn!(%room, error = %e, "automatic recording not started"),
        }
    }

    /// Looks once at every room of this node recorded automatically (in a cluster):
    /// starts recording those that became this node's to record (their recorder's node
    /// was lost: the recording starts with a `gap` from when that node was last seen
    /// recording it), stops those that another node records now.
    pub async fn follow_owners(self: &Arc<Self>) {
        let Ok(rooms) = self.relay.rooms().await else {
            return;
        };
        for room in rooms.into_iter().map(|c| c.room) {
            if !self.records_automatically(&room) {
                continue;
            }
            let here = self.active().contains_key(&room);
            match self.relay.records_here(&room).await {
                Ok(Ok(())) if !here => {
                    let gap = self.elsewhere().remove(&room).map(|(node, last_ns)| {
                        gsrelay_record::Event::Gap {
                            from_ns: last_ns,
                            to_ns: unix_ns(),
                            reason: format!("node {node}, which recorded the room, was lost"),
                        }
                    });
                    let started = self.start_with(&room, gap.into_iter().collect()).await;
                    if let Err(e) = started {
                        tracing::warn!(%room, error = %e, "recording not taken over");
                    }
                }
                Ok(Err(node)) => {
                    self.elsewhere().insert(room.clone(), (node, unix_ns()));
                    if here {
                        let _ = self.stop_for(&room, "handed_over").await;
                    }
                }
                Ok(Ok(())) | Err(_) => {}
            }
        }
    }

    /// Runs [`Recordings::follow_owners`] every `every`, as long as the service lives
    /// and something is recorded automatically.
    pub fn spawn_owner_watch(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(this) = this.upgrade() else {
                    return;
                };
                if this.cfg.auto.is_empty() {
                    return;
                }
                this.follow_owners().await;
            }
        })
    }

    fn elsewhere(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, u64)>> {
        self.elsewhere
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts recording `room`, which must have a session on this relay.
    pub async fn start(self: &Arc<Self>, room: &str) -> Result<RecordingView, RecordingError> {
        self.start_with(room, Vec::new()).await
    }

    /// Starts recording `room`, writing `first` right after the recording's start.
    async fn start_with(
        self: &Arc<Self>,
        room: &str,
        first: Vec<gsrelay_record::Event>,
    ) -> Result<RecordingView, RecordingError> {
        if self.active().contains_key(room) {
            return Err(RecordingError::AlreadyRecording(room.into()));
        }
        let started_ns = unix_ns();
        let id = new_id(started_ns);
        let dir = self.cfg.dir.join(&id);
        let (tap, drain) = ring::ring(ring::RING_BYTES);
        match self.relay.record(room, tap, self.cfg.checkpoint).await {
            Ok(()) => {}
            Err(CommandError::NotHere(_)) => return Err(RecordingError::NoRoom(room.into())),
            Err(CommandError::Recording(_)) => {
                return Err(RecordingError::AlreadyRecording(room.into()));
            }
            Err(e) => return Err(RecordingError::Relay(e)),
        }
        let checkpoint_secs =
            u32::try_from(self.cfg.checkpoint.as_secs().max(1)).unwrap_or(u32::MAX);
        let meta = Meta::new(&id, room, &self.node, started_ns, checkpoint_secs);
        let (done_tx, done) = watch::channel(false);
        let this = Arc::downgrade(self);
        let on_stop = Box::new(move |stopped: Stopped| {
            if let Some(this) = this.upgrade() {
                this.stopped(&stopped);
            }
            let _ = done_tx.send(true);
        });
        let spawned = fs::create_dir_all(&dir).and_then(|()| {
            let files = (dir.clone(), meta.clone());
            writer::spawn(files, self.cfg.layout.clone(), drain, first, on_stop)
        });
        if let Err(e) = spawned {
            // The shard's recorder finds its ring let go and leaves at its next look.
            let _ = fs::remove_dir_all(&dir);
            self.metrics
                .recordings_failed
                .with_label_values(&["disk_error"])
                .inc();
            return Err(e.into());
        }
        self.active().insert(
            room.into(),
            Active {
                id: id.clone(),
                done,
            },
        );
        self.metrics.recordings_active.inc();
        self.metrics.recordings_started.inc();
        tracing::info!(%room, recording = %id, "recording started");
        let note = HookRecording {
            id,
            reason: None,
            failed: false,
        };
        self.rooms.recording_hook("recording_started", room, note);
        Ok(view(&meta, &dir))
    }

    /// What the writer reports once a recording has ended, however it ended.
    fn stopped(&self, s: &Stopped) {
        let room = &s.meta.room;
        {
            let mut active = self.active();
            if active.get(room).is_some_and(|a| a.id == s.meta.id) {
                active.remove(room);
            }
        }
        self.metrics.recordings_active.dec();
        self.ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(s.meta.id.clone(), s.meta.clone());
        let reason = s.meta.stop_reason.clone().unwrap_or_default();
        if s.failed {
            // The reason's kind, one of a closed set: its detail goes to the log.
            let label = match reason.starts_with("disk_error") {
                true => "disk_error",
                false => "writer_behind",
            };
            self.metrics
                .recordings_failed
                .with_label_values(&[label])
                .inc();
            tracing::warn!(%room, recording = %s.meta.id, %reason, "recording failed; the room goes on");
        } else {
            tracing::info!(%room, recording = %s.meta.id, %reason, bytes = s.bytes, "recording stopped");
        }
        let note = HookRecording {
            id: s.meta.id.clone(),
            reason: Some(reason),
            failed: s.failed,
        };
        self.rooms.recording_hook("recording_stopped", room, note);
        // On the writer's thread, which is done with its files: a recording that ends
        // is when the others' age and total size are looked at, besides the minute's.
        self.enforce_retention();
    }

    /// Stops recording `room`; answers once its files are closed (or after a while).
    pub async fn stop(&self, room: &str) -> Result<RecordingView, RecordingError> {
        self.stop_for(room, "stopped").await
    }

    /// Stops recording `room` for `reason`.
    async fn stop_for(&self, room: &str, reason: &str) -> Result<RecordingView, RecordingError> {
        let (id, mut done) = {
            let active = self.active();
            let a = active
                .get(room)
                .ok_or_else(|| RecordingError::NotRecording(room.into()))?;
            (a.id.clone(), a.done.clone())
        };
        self.relay
            .stop_recording(room, reason)
            .await
            .map_err(RecordingError::Relay)?;
        let _ = tokio::time::timeout(STOP_WAIT, done.wait_for(|d| *d)).await;
        self.info(&id)
    }

    /// The id of `room`'s running recording, if any.
    pub fn running(&self, room: &str) -> Option<String> {
        self.active().get(room).map(|a| a.id.clone())
    }

    /// One recording.
    pub fn info(&self, id: &str) -> Result<RecordingView, RecordingError> {
        let dir = self.dir_of(id)?;
        let mut meta = read_meta(&dir)?;
        if meta.stopped_ns.is_none()
            && let Some(ended) = self
                .ended
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
        {
            meta = ended.clone();
        }
        let mut v = view(&meta, &dir);
        if v.state == "recording" && self.running(&meta.room).as_deref() != Some(id) {
            // No stop written and no writer here: its relay died while recording.
            v.state = "interrupted".into();
        }
        Ok(v)
    }

    /// Every recording, oldest first.
    pub fn list(&self) -> Result<Vec<RecordingView>, RecordingError> {
        let entries = match fs::read_dir(&self.cfg.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| valid_id(n))
            .collect();
        ids.sort();
        Ok(ids.iter().filter_map(|id| self.info(id).ok()).collect())
    }

    /// Deletes a stopped recording.
    pub fn delete(&self, id: &str) -> Result<(), RecordingError> {
        let dir = self.dir_of(id)?;
        if self.active().values().any(|a| a.id == id) {
            return Err(RecordingError::Running(id.into()));
        }
        fs::remove_dir_all(dir)?;
        self.ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        Ok(())
    }

    /// A recording, opened (its segments scanned and checked; encrypted ones with the
    /// relay's key): blocking, call it off the runtime's workers.
    pub fn open(&self, id: &str) -> Result<gsrelay_record::Recording, RecordingError> {
        let dir = self.dir_of(id)?;
        gsrelay_record::Recording::open_with(&dir, self.cfg.key.as_ref())
            .map_err(|e| RecordingError::Damaged(id.into(), e.to_string()))
    }

    /// The recording's directory, once its id is checked and it exists.
    pub fn dir_of(&self, id: &str) -> Result<PathBuf, RecordingError> {
        if !valid_id(id) {
            return Err(RecordingError::NoRecording(id.into()));
        }
        let dir = self.cfg.dir.join(id);
        match dir.join("recording.json").is_file() {
            true => Ok(dir),
            false => Err(RecordingError::NoRecording(id.into())),
        }
    }

    /// Applies the retention settings once: stopped recordings past the age go, then
    /// the oldest stopped ones while all recordings hold more than the size. Returns the
    /// ids deleted.
    pub fn enforce_retention(&self) -> Vec<String> {
        let Ok(all) = self.list() else {
            return Vec::new();
        };
        let now_ms = unix_ns() / 1_000_000;
        let mut total: u64 = all.iter().map(|r| r.bytes).sum();
        let mut deleted = Vec::new();
        for r in all.iter().filter(|r| r.state != "recording") {
            let age = self.cfg.max_age.is_some_and(|a| {
                now_ms.saturating_sub(r.stopped_at.unwrap_or(r.started_at)) > a.as_millis() as u64
            });
            let over = self.cfg.max_bytes.is_some_and(|m| total > m);
            if (age || over) && self.delete(&r.id).is_ok() {
                total = total.saturating_sub(r.bytes);
                self.metrics.recordings_deleted.inc();
                deleted.push(r.id.clone());
            }
        }
        if !deleted.is_empty() {
            tracing::info!(count = deleted.len(), "recordings deleted by retention");
        }
        deleted
    }

    /// Runs retention every `every`, as long as the service lives.
    pub fn spawn_retention(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(this) = this.upgrade() else {
                    return;
                };
                if this.cfg.max_age.is_none() && this.cfg.max_bytes.is_none() {
                    return;
                }
                let _ = tokio::task::spawn_blocking(move || this.enforce_retention()).await;
            }
        })
    }

    /// Stops every running recording (the relay is stopping).
    pub async fn stop_all(&self) {
        let rooms: Vec<String> = self.active().keys().cloned().collect();
        for room in rooms {
            let _ = self.stop_for(&room, "shutdown").await;
        }
    }
}

/// A recording's view from its metadata and its files.
fn view(meta: &Meta, dir: &Path) -> RecordingView {
    let (mut bytes, mut segments) = (0, 0);
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let name = name.strip_suffix(".enc").unwrap_or(&name);
            if name.ends_with(".pcapng") || name.ends_with(".pcapng.gz") {
                segments += 1;
                bytes += e.metadata().map_or(0, |m| m.len());
            }
        }
    }
    let failed = meta.stop_reason.as_deref().is_some_and(is_failure);
    let state = match (meta.stopped_ns, failed) {
        (None, _) => "recording",
        (Some(_), true) => "failed",
        (Some(_), false) => "stopped",
    };
    RecordingView {
        id: meta.id.clone(),
        room: meta.room.clone(),
        node: meta.node.clone(),
        state: state.into(),
        started_at: meta.started_ns / 1_000_000,
        stopped_at: meta.stopped_ns.map(|n| n / 1_000_000),
        stop_reason: meta.stop_reason.clone(),
        bytes,
        segments,
        checkpoint_secs: meta.checkpoint_secs,
    }
}

/// Whether a stop reason is a failure of the recording itself.
fn is_failure(reason: &str) -> bool {
    reason.starts_with("disk_error") || reason == "writer_behind"
}

fn read_meta(dir: &Path) -> Result<Meta, RecordingError> {
    let bytes = fs::read(dir.join("recording.json"))?;
    Meta::from_json(&bytes)
        .map_err(|e| RecordingError::Damaged(dir.display().to_string(), e.to_string()))
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `rec-<Unix ms>-<8 random hex digits>`.
fn new_id(started_ns: u64) -> String {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        b = (started_ns as u32).to_be_bytes();
    }
    format!("rec-{}-{}", started_ns / 1_000_000, hex::encode(b))
}

/// Whether `id` has the form [`new_id`] makes (nothing else is ever a path).
pub fn valid_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("rec-") else {
        return false;
    };
    let Some((ms, hex)) = rest.split_once('-') else {
        return false;
    };
    (1..=20).contains(&ms.len())
        && ms.bytes().all(|b| b.is_ascii_digit())
        && hex.len() == 8
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Whether `name` matches `pattern`, where `*` matches any run of bytes and `?` one.
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => {
            matches(rest, name) || name.split_first().is_some_and(|(_, n)| matches(pattern, n))
        }
        (Some((b'?', rest)), Some((_, n))) => matches(rest, n),
        (Some((p, rest)), Some((c, n))) if p == c => matches(rest, n),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names() {
        assert!(matches(b"match-*", b"match-42"));
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"a?c", b"abc"));
        assert!(!matches(b"a?c", b"ac"));
        assert!(!matches(b"match-*", b"lobby"));
        assert!(matches(b"*-ranked", b"eu-ranked"));
        assert!(!matches(b"*-ranked", b"eu-ranked-2"));
    }

    #[test]
    fn only_ids_the_relay_makes_are_paths() {
        let id = new_id(unix_ns());
        assert!(valid_id(&id), "{id}");
        for bad in [
            "",
            "rec-",
            "rec-1-",
            "../etc",
            "rec-1-../../x",
            "rec-1-ABCDEF12",
            "rec-x-abcdef12",
            "rec-1-abcdef1",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }
}
