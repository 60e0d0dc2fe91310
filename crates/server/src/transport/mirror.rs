//! Broadcast-delayed mirrors (`docs/recording.md`, "Broadcast delay"): a room played
//! into another one a fixed delay later, for spectators, so that a player who streams the
//! match cannot ghost another. A mirror is a recorder of the source room whose ring
//! feeds, instead of a disk, a delay line on the same shard, and a replay session of the
//! mirror room that plays each record once it is `delay` old ([`super::playback`]).
//!
//! The mirror room holds nothing newer than now minus the delay: its cache (what a FIR
//! or a late joiner gets) is built only from what was played into it, and nobody may
//! publish into it. It starts empty and, `delay` after the mirror started, holds the
//! source room as it was then (the recorder's first checkpoint); the source's later
//! checkpoints are not played (the streams already hold that state). When the source
//! room ends, the mirror plays what its line holds, then ends.
//!
//! The line holds `delay` worth of the source room's accepted packets, framed as the
//! ring frames them, in one buffer that keeps its size once grown: a dense room of 200
//! at 30 Hz (about 7 MB/s) holds about 210 MB for 30 s.

use super::playback::Playback;
use super::port::{Core, Port};
use super::ring::{Drain, Kind};
use crate::metrics::export::StatsExporter;
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::RtpPacket;
use gsrelay_record::Event;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a mirror takes what its recorder queued.
const POLL: Duration = Duration::from_millis(5);

/// The shortest and longest delays.
pub const DELAYS: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(600);

/// A record in the line: time (Unix ns), kind, length, then its bytes.
const FRAME: usize = 8 + 1 + 4;

/// A mirror as the API shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MirrorView {
    /// The source room.
    pub room: String,
    /// The mirror room.
    pub mirror: String,
    /// The delay, milliseconds.
    pub delay_ms: u64,
    /// When it started, Unix milliseconds.
    pub started_at: u64,
}

/// One mirror.
struct Mirror {
    source: Arc<str>,
    room: Arc<str>,
    delay: Duration,
    started_at: u64,
    /// The recorder session in the source room that feeds it.
    recorder: SessionId,
    drain: Drain,
    line: VecDeque<u8>,
    playback: Playback,
    /// The first checkpoint, until it is whole: (recorded SSRC, objects).
    checkpoint: Vec<(u32, Vec<u8>)>,
    /// Whether the first checkpoint was played.
    started: bool,
    /// The record being played (reused).
    record: Vec<u8>,
}

/// The mirrors of a shard.
pub struct MirrorPort {
    mirrors: HashMap<SessionId, Mirror>,
    /// When the mirrors next take what their recorders queued: a fixed time, so that a
    /// shard busier than every [`POLL`] does not keep pushing it back.
    next: Instant,
    /// The wall clock at an instant: records carry Unix nanoseconds.
    anchor: (Instant, u64),
}

impl std::fmt::Debug for MirrorPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorPort")
            .field("mirrors", &self.mirrors.len())
            .finish_non_exhaustive()
    }
}

impl Default for MirrorPort {
    fn default() -> Self {
        Self::new()
    }
}

impl MirrorPort {
    /// A port with no mirror.
    pub fn new() -> Self {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let now = Instant::now();
        Self {
            mirrors: HashMap::new(),
            next: now,
            anchor: (now, since.as_nanos() as u64),
        }
    }

    fn wall_ns(&self, now: Instant) -> u64 {
        let (at, ns) = self.anchor;
        ns + now.saturating_duration_since(at).as_nanos() as u64
    }

    /// Starts mirror session `id` (sending as `ssrc`) of `room`, playing `source` `delay`
    /// late from what its recorder session `recorder` queues into `drain`.
    pub(super) fn add(
        &mut self,
        now: Instant,
        (id, ssrc): (SessionId, u32),
        (source, room): (Arc<str>, Arc<str>),
        (recorder, drain): (SessionId, Drain),
        delay: Duration,
    ) {
        let started_at = self.wall_ns(now) / 1_000_000;
        let mirror = Mirror {
            source,
            room,
            delay,
            started_at,
            recorder,
            drain,
            line: VecDeque::new(),
            playback: Playback::new(id, ssrc),
            checkpoint: Vec::new(),
            started: false,
            record: Vec::new(),
        };
        self.mirrors.insert(id, mirror);
        self.next = now;
    }

    /// The mirror session and the recorder of `source`'s mirror, if it has one here.
    pub fn of_source(&self, source: &str) -> Option<(SessionId, SessionId)> {
        self.mirrors
            .iter()
            .find(|(_, m)| &*m.source == source)
            .map(|(id, m)| (*id, m.recorder))
    }

    /// Whether `room` is a mirror room here.
    pub fn plays(&self, room: &str) -> bool {
        self.mirrors.values().any(|m| &*m.room == room)
    }

    /// The mirror of source room `source`, or into mirror room `source`.
    pub fn view(&self, room: &str) -> Option<MirrorView> {
        let m = self
            .mirrors
            .values()
            .find(|m| &*m.source == room || &*m.room == room)?;
        Some(MirrorView {
            room: m.source.to_string(),
            mirror: m.room.to_string(),
            delay_ms: m.delay.as_millis() as u64,
            started_at: m.started_at,
        })
    }

    /// Takes what `id`'s recorder queued into its line, then plays what is due; whether
    /// the mirror is over (its source ended and everything was played).
    fn pump(&mut self, now: Instant, id: SessionId, core: &mut impl Core) -> bool {
        let wall = self.wall_ns(now);
        let Some(m) = self.mirrors.get_mut(&id) else {
            return false;
        };
        while let Some((kind, at, bytes)) = m.drain.next() {
            m.line.extend(at.to_le_bytes());
            m.line.push_back(kind as u8);
            m.line.extend((bytes.len() as u32).to_le_bytes());
            m.line.extend(bytes);
        }
        let delay = m.delay.as_nanos() as u64;
        while let Some((at, kind)) = head(&m.line) {
            if at.saturating_add(delay) > wall {
                break;
            }
            m.pop();
            m.play(now, kind, core);
        }
        m.line.is_empty() && m.drain.is_finished()
    }
}

/// The time and kind of the line's first record, if it holds one whole.
fn head(line: &VecDeque<u8>) -> Option<(u64, Kind)> {
    if line.len() < FRAME {
        return None;
    }
    let mut h = [0u8; FRAME];
    for (d, s) in h.iter_mut().zip(line.iter()) {
        *d = *s;
    }
    let [t @ .., kind, _, _, _, _] = h;
    Some((u64::from_le_bytes(t), Kind::of(kind)?))
}

impl Mirror {
    /// Moves the line's first record into `record`.
    fn pop(&mut self) {
        let len = self
            .line
            .range(9..FRAME)
            .enumerate()
            .fold(0usize, |n, (i, b)| n | usize::from(*b) << (8 * i));
        self.line.drain(..FRAME);
        self.record.clear();
        self.record
            .extend(self.line.drain(..len.min(self.line.len())));
    }

    /// Plays the record just popped, of `kind`.
    fn play(&mut self, now: Instant, kind: Kind, core: &mut impl Core) {
        match kind {
            Kind::Live => {
                let Some(ssrc) = RtpPacket::parse(&self.record).ok().map(|p| p.ssrc()) else {
                    return;
                };
                self.playback.play(now, ssrc, &self.record, core);
            }
            Kind::Checkpoint if !self.started => {
                if let Ok(p) = RtpPacket::parse(&self.record) {
                    let (ssrc, objects) = (p.ssrc(), p.payload());
                    match self.checkpoint.iter_mut().find(|(s, _)| *s == ssrc) {
                        Some((_, all)) => all.extend_from_slice(objects),
                        None => self.checkpoint.push((ssrc, objects.to_vec())),
                    }
                }
            }
            Kind::CheckpointEnd if !self.started => {
                self.started = true;
                let streams = std::mem::take(&mut self.checkpoint);
                self.playback.restore(now, &streams, core);
            }
            Kind::Checkpoint | Kind::CheckpointEnd => {}
            Kind::Event => {
                if let Ok(Event::StreamEnded { ssrc, .. }) = serde_json::from_slice(&self.record) {
                    self.playback.end_recorded(now, ssrc, core);
                }
            }
        }
    }
}

impl Port for MirrorPort {
    /// A mirror reads from its ring on its timer.
    type Input = ();

    async fn next(&mut self) {
        std::future::pending::<()>().await
    }

    fn receive(&mut self, _now: Instant, _first: (), _core: &mut impl Core) {}

    fn observe_latency(&mut self, _seconds: f64) {}

    /// A mirror subscribes to nothing: the core's reports to it go nowhere.
    fn queue(&mut self, _now: Instant, _t: &Transmit<'_>, _stats: &mut StatsExporter) {}

    async fn send_queued(&mut self, _transmitted: &mut [u8], _stats: &mut StatsExporter) {}

    fn forget(&mut self, id: SessionId) {
        self.mirrors.remove(&id);
    }

    fn next_timeout(&self) -> Option<Instant> {
        (!self.mirrors.is_empty()).then_some(self.next)
    }

    /// Plays what is due; a mirror whose source ended and that played everything
    /// leaves its room.
    fn handle_timeout(&mut self, now: Instant, core: &mut impl Core) {
        self.next = now + POLL;
        let ids: Vec<SessionId> = self.mirrors.keys().copied().collect();
        for id in ids {
            if self.pump(now, id, core) {
                self.mirrors.remove(&id);
                core.leave(now, id);
            }
        }
    }
}
