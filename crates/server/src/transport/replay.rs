//! The replay port (`docs/recording.md`, "Replay"): plays recordings into rooms. A replay
//! is a session of its room that sends containers, each one recorded sender's objects
//! under the outer header's sequence number and timestamp, which the core makes that
//! sender's stream in the room (`JoinRequest::replay`): subscribers join the room as any
//! room, with FIR, late join and interest as usual.
//!
//! What is due when is the recording format's [`Player`], sans-I/O: this port feeds it
//! segments, read off the shard's thread by blocking tasks that hand them back as the
//! port's input, and turns what it gives into packets for the core:
//!
//! - a recorded RTP packet: a container of its payload under its sender's SSRC (the
//!   recorded one when free on this shard, another otherwise: a recording of a room that
//!   is still live replays beside it), numbered one by one per stream, with its
//!   recorded timestamp;
//! - a stream's end: an RTCP BYE for it;
//! - the whole room after a seek (and at the start): a BYE for every stream it plays,
//!   then each stream's objects, so that the room's cache and every subscriber hold the
//!   room at the target.

use super::playback::Playback;
use super::port::{Core, Port};
use crate::metrics::export::StatsExporter;
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_record::{Event, Output, PlayError, Player, Recording};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// A segment read for a replay, or why it could not be.
#[derive(Debug)]
pub struct Loaded {
    session: SessionId,
    index: u32,
    bytes: io::Result<Vec<u8>>,
}

/// A replay to start.
#[derive(Debug)]
pub struct ReplaySpec {
    /// The recording, opened.
    pub recording: Arc<Recording>,
    /// Where to start, nanoseconds from its start.
    pub from_ns: u64,
    /// At what speed (0.25 to 8).
    pub speed: f64,
    /// Paused at the start.
    pub paused: bool,
}

/// What a replay is asked to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayOp {
    /// Go to this time, nanoseconds from the recording's start.
    Seek(u64),
    /// Play at this speed (0.25 to 8).
    Speed(f64),
    /// Stop the clock.
    Pause,
    /// Start it again.
    Resume,
}

/// Where a replay is.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayStatus {
    /// The room it plays into.
    pub room: String,
    /// The recording it plays.
    pub recording: String,
    /// Its position, milliseconds from the recording's start.
    pub position_ms: u64,
    /// The recording's length, milliseconds.
    pub duration_ms: u64,
    /// Its speed.
    pub speed: f64,
    /// Whether it is paused.
    pub paused: bool,
    /// Whether it has played to the end (it holds the room's last state until stopped).
    pub ended: bool,
    /// Each recorded SSRC that plays under another one, as `[recorded, played]`.
    pub remapped: Vec<(u32, u32)>,
}

/// One replay.
struct Replay {
    room: Arc<str>,
    recording: Arc<Recording>,
    player: Player,
    /// What it plays into the room, as its session.
    playback: Playback,
    /// A segment being read.
    loading: Option<u32>,
    ended: bool,
    /// The recorded packet being played (reused).
    recorded: Vec<u8>,
}

/// The replays of a shard.
pub struct ReplayPort {
    replays: HashMap<SessionId, Replay>,
    loaded_tx: mpsc::UnboundedSender<Loaded>,
    loaded_rx: mpsc::UnboundedReceiver<Loaded>,
}

impl std::fmt::Debug for ReplayPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayPort")
            .field("replays", &self.replays.len())
            .finish_non_exhaustive()
    }
}

impl Default for ReplayPort {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayPort {
    /// A port with no replay.
    pub fn new() -> Self {
        let (loaded_tx, loaded_rx) = mpsc::unbounded_channel();
        Self {
            replays: HashMap::new(),
            loaded_tx,
            loaded_rx,
        }
    }

    /// Starts replay session `id` (sending as `ssrc`) of `room`, playing `recording`
    /// from `from_ns`, at `speed`, paused or not.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add(
        &mut self,
        now: Instant,
        (id, ssrc): (SessionId, u32),
        room: Arc<str>,
        recording: Arc<Recording>,
        (from_ns, speed, paused): (u64, f64, bool),
        core: &mut impl Core,
    ) -> Result<(), PlayError> {
        let mut player = Player::new(recording.segments.clone(), now);
        player.set_speed(now, speed)?;
        // Even from the start: the recording's first checkpoint is the room it began in.
        player.seek(now, from_ns)?;
        if paused {
            player.pause(now);
        }
        let replay = Replay {
            room,
            recording,
            player,
            playback: Playback::new(id, ssrc),
            loading: None,
            ended: false,
            recorded: Vec::new(),
        };
        self.replays.insert(id, replay);
        self.pump(now, id, core);
        Ok(())
    }

    /// The replay session of `room`, if one plays here.
    pub fn session_of(&self, room: &str) -> Option<SessionId> {
        self.replays
            .iter()
            .find(|(_, r)| &*r.room == room)
            .map(|(id, _)| *id)
    }

    /// Carries out `op` on the replay of `room`.
    pub(super) fn control(
        &mut self,
        now: Instant,
        room: &str,
        op: ReplayOp,
        core: &mut impl Core,
    ) -> Option<Result<ReplayStatus, PlayError>> {
        let id = self.session_of(room)?;
        let r = self.replays.get_mut(&id)?;
        let done = match op {
            ReplayOp::Seek(ns) => r.player.seek(now, ns).map(|()| r.ended = false),
            ReplayOp::Speed(speed) => r.player.set_speed(now, speed),
            ReplayOp::Pause => {
                r.player.pause(now);
                Ok(())
            }
            ReplayOp::Resume => {
                r.player.resume(now);
                Ok(())
            }
        };
        if let Err(e) = done {
            return Some(Err(e));
        }
        self.pump(now, id, core);
        self.status(now, room).map(Ok)
    }

    /// Where the replay of `room` is.
    pub fn status(&self, now: Instant, room: &str) -> Option<ReplayStatus> {
        let r = self.replays.get(&self.session_of(room)?)?;
        let remapped = r.playback.remapped();
        Some(ReplayStatus {
            room: r.room.to_string(),
            recording: r.recording.meta.id.clone(),
            position_ms: r.player.position_ns(now) / 1_000_000,
            duration_ms: r.player.duration_ns() / 1_000_000,
            speed: r.player.speed(),
            paused: r.player.paused(),
            ended: r.ended,
            remapped,
        })
    }

    /// Every replay's room.
    pub fn rooms(&self) -> Vec<Arc<str>> {
        self.replays.values().map(|r| r.room.clone()).collect()
    }

    /// Hands the core what is due of replay `id`, then asks for the segment its player
    /// wants next.
    fn pump(&mut self, now: Instant, id: SessionId, core: &mut impl Core) {
        let Some(r) = self.replays.get_mut(&id) else {
            return;
        };
        loop {
            let due = match r.player.poll(now) {
                None => break,
                Some(Output::Rtp { ssrc, packet }) => {
                    r.recorded.clear();
                    r.recorded.extend_from_slice(packet);
                    Due::Packet(ssrc)
                }
                Some(Output::Event(Event::StreamEnded { ssrc, .. })) => Due::End(*ssrc),
                Some(Output::Event(_)) => continue,
                Some(Output::State { streams }) => Due::State(
                    streams
                        .iter()
                        .map(|s| (s.ssrc, s.objects.clone()))
                        .collect(),
                ),
                Some(Output::Ended) => Due::Ended,
            };
            match due {
                Due::Packet(ssrc) => r.playback.play(now, ssrc, &r.recorded, core),
                Due::End(ssrc) => r.playback.end_recorded(now, ssrc, core),
                Due::State(streams) => r.playback.restore(now, &streams, core),
                Due::Ended => r.ended = true,
            }
        }
        if let (Some(index), None) = (r.player.wants_segment(), r.loading) {
            r.loading = Some(index);
            let (recording, tx) = (r.recording.clone(), self.loaded_tx.clone());
            // Reading a segment (tens of megabytes, perhaps inflating it) is no work for
            // the shard's thread.
            tokio::task::spawn_blocking(move || {
                let bytes = recording.read_segment(index).map_err(io::Error::other);
                let _ = tx.send(Loaded {
                    session: id,
                    index,
                    bytes,
                });
            });
        }
    }
}

/// What a player gave, owned, so the replay can act on it.
enum Due {
    /// A recorded packet of this SSRC, in `Replay::recorded`.
    Packet(u32),
    End(u32),
    State(Vec<(u32, Vec<u8>)>),
    Ended,
}

impl Port for ReplayPort {
    /// A segment read for one of its replays.
    type Input = Loaded;

    async fn next(&mut self) -> Loaded {
        match self.loaded_rx.recv().await {
            Some(l) => l,
            // The port holds a sender itself: the channel never closes.
            None => std::future::pending().await,
        }
    }

    fn receive(&mut self, now: Instant, first: Loaded, core: &mut impl Core) {
        let id = first.session;
        let Some(r) = self.replays.get_mut(&id) else {
            return;
        };
        r.loading = None;
        let fed = first.bytes.map_err(|e| e.to_string()).and_then(|b| {
            r.player
                .feed_segment(first.index, b)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = fed {
            tracing::warn!(room = %r.room, segment = first.index, error = %e, "replay segment unreadable; the replay ends there");
            r.ended = true;
            return;
        }
        self.pump(now, id, core);
    }

    fn observe_latency(&mut self, _seconds: f64) {}

    /// A replay subscribes to nothing: the core's reports to it go nowhere.
    fn queue(&mut self, _now: Instant, _t: &Transmit<'_>, _stats: &mut StatsExporter) {}

    async fn send_queued(&mut self, _transmitted: &mut [u8], _stats: &mut StatsExporter) {}

    fn forget(&mut self, id: SessionId) {
        self.replays.remove(&id);
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.replays
            .values()
            .filter(|r| r.loading.is_none())
            .filter_map(|r| r.player.poll_timeout())
            .min()
    }

    fn handle_timeout(&mut self, now: Instant, core: &mut impl Core) {
        let ids: Vec<SessionId> = self.replays.keys().copied().collect();
        for id in ids {
            self.pump(now, id, core);
        }
    }
}
