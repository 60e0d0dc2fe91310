//! The recorder port (`docs/recording.md`): a recorder is one more kind of session of a
//! room, which the core sends a copy of every RTP packet the room accepts and, on
//! [`Core::checkpoint`], the room's whole state. This port hands both, with the room's
//! events, to each recording's writer through its ring ([`super::ring`]): no socket, no
//! lock, no allocation per packet, and never a wait for a disk.
//!
//! A checkpoint is asked for from [`Port::handle_timeout`], which the shard follows with
//! a flush and nothing else: every packet queued for a recorder in that flush belongs to
//! the checkpoint, and its end is marked once they are all queued.

use super::port::{Core, Port};
use super::ring::{Kind, Tap};
use crate::metrics::export::StatsExporter;
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::PacketClass;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a recording that its writer stopped is looked for, at most.
const STOPPED_CHECK: Duration = Duration::from_secs(1);

/// One recording of a room on this shard.
#[derive(Debug)]
struct Recording {
    tap: Tap,
    room: Arc<str>,
    every: Option<Duration>,
    /// Its next checkpoint.
    next: Option<Instant>,
    /// When to look next whether its writer stopped it.
    check: Instant,
    /// A checkpoint's packets are being queued.
    checkpointing: bool,
    /// Written to a disk (else: a mirror's).
    disk: bool,
}

/// The recorders of a shard.
#[derive(Debug)]
pub struct RecorderPort {
    recordings: HashMap<SessionId, Recording>,
    /// The wall clock at an instant: arrival times are written as Unix nanoseconds.
    anchor: (Instant, u64),
}

impl Default for RecorderPort {
    fn default() -> Self {
        Self::new()
    }
}

impl RecorderPort {
    /// A port with no recording.
    pub fn new() -> Self {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            recordings: HashMap::new(),
            anchor: (Instant::now(), since.as_nanos() as u64),
        }
    }

    /// Unix nanoseconds at `now`.
    pub fn wall_ns(&self, now: Instant) -> u64 {
        let (at, ns) = self.anchor;
        ns + now.saturating_duration_since(at).as_nanos() as u64
    }

    /// Starts feeding recorder session `id` of `room` to `tap`, with a checkpoint now
    /// and every `every` after (`None`: only now); `disk` when it is a recording's.
    pub fn add(
        &mut self,
        now: Instant,
        (id, room): (SessionId, Arc<str>),
        tap: Tap,
        every: Option<Duration>,
        disk: bool,
    ) {
        let r = Recording {
            tap,
            room,
            every,
            next: Some(now),
            check: now + STOPPED_CHECK,
            checkpointing: false,
            disk,
        };
        self.recordings.insert(id, r);
    }

    /// Writes an event of `room` to its recordings, if it has any.
    pub fn event(&mut self, now: Instant, room: &str, event: &gsrelay_record::Event) {
        let at = self.wall_ns(now);
        let mut json = None;
        for r in self.recordings.values_mut().filter(|r| &*r.room == room) {
            let bytes = json.get_or_insert_with(|| serde_json::to_vec(event).unwrap_or_default());
            r.tap.push(Kind::Event, at, bytes);
        }
    }

    /// Whether `room` is being recorded to a disk here.
    pub fn records(&self, room: &str) -> bool {
        self.recordings.values().any(|r| r.disk && &*r.room == room)
    }

    /// Ends the recordings of `room` for `reason`: each is told why, its ring let go
    /// (its writer then closes its files), and its recorder session leaves the core.
    /// Returns how many there were.
    pub(super) fn stop_room(
        &mut self,
        now: Instant,
        room: &str,
        reason: &str,
        core: &mut impl Core,
    ) -> usize {
        let ids: Vec<SessionId> = self
            .recordings
            .iter()
            .filter(|(_, r)| &*r.room == room)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            self.stop(now, *id, reason, core);
        }
        ids.len()
    }

    /// Ends recorder session `id` for `reason`, as [`RecorderPort::stop_room`] does.
    pub(super) fn stop(&mut self, now: Instant, id: SessionId, reason: &str, core: &mut impl Core) {
        let at = self.wall_ns(now);
        if let Some(mut r) = self.recordings.remove(&id) {
            let event = gsrelay_record::Event::RecordingStopped {
                reason: reason.into(),
            };
            r.tap.push(
                Kind::Event,
                at,
                &serde_json::to_vec(&event).unwrap_or_default(),
            );
        }
        core.leave(now, id);
    }
}

impl Port for RecorderPort {
    /// A recorder reads nothing.
    type Input = ();

    async fn next(&mut self) {
        std::future::pending::<()>().await
    }

    fn receive(&mut self, _now: Instant, _first: (), _core: &mut impl Core) {}

    fn observe_latency(&mut self, _seconds: f64) {}

    fn queue(&mut self, now: Instant, t: &Transmit<'_>, _stats: &mut StatsExporter) {
        // RTCP (the core's reports to every session) is not the room's: not recorded.
        if t.class != PacketClass::Rtp {
            return;
        }
        let at = self.wall_ns(now);
        if let Some(r) = self.recordings.get_mut(&t.session) {
            let kind = match r.checkpointing {
                true => Kind::Checkpoint,
                false => Kind::Live,
            };
            r.tap.push(kind, at, t.bytes);
        }
    }

    async fn send_queued(&mut self, _transmitted: &mut [u8], _stats: &mut StatsExporter) {
        // Every flush of the shard comes here: nothing to do, no clock read, without a
        // checkpoint in progress.
        if !self.recordings.values().any(|r| r.checkpointing) {
            return;
        }
        let now = Instant::now();
        let at = self.wall_ns(now);
        for r in self.recordings.values_mut().filter(|r| r.checkpointing) {
            r.checkpointing = false;
            r.tap.push(Kind::CheckpointEnd, at, &[]);
        }
    }

    fn forget(&mut self, id: SessionId) {
        // The core removed it (its room was closed or failed): its writer closes.
        self.recordings.remove(&id);
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.recordings
            .values()
            .map(|r| r.next.map_or(r.check, |n| n.min(r.check)))
            .min()
    }

    /// Checkpoints that are due; recordings their writer stopped leave.
    fn handle_timeout(&mut self, now: Instant, core: &mut impl Core) {
        let due: Vec<SessionId> = self
            .recordings
            .iter()
            .filter(|(_, r)| r.next.map_or(r.check, |n| n.min(r.check)) <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let Some(r) = self.recordings.get_mut(&id) else {
                continue;
            };
            if r.tap.shared.is_stopped() || r.tap.is_abandoned() {
                let reason = r.tap.shared.reason().unwrap_or_else(|| "stopped".into());
                self.stop(now, id, &reason, core);
                continue;
            }
            r.check = now + STOPPED_CHECK;
            if r.next.is_some_and(|n| n <= now) {
                r.checkpointing = true;
                r.next = r.every.map(|e| now + e);
                core.checkpoint(now, id);
            }
        }
    }
}
