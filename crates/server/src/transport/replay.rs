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

use super::port::{Core, Port};
use crate::metrics::export::StatsExporter;
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::{PacketClass, RtpHeader, RtpPacket, rtcp};
use gsrelay_core::wire::{self, Dialect, container};
use gsrelay_record::{Event, Output, PlayError, Player, Recording};
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// Largest run of objects a state container carries: a snapshot's packets fit any path.
const STATE_CHUNK: usize = 1100;

/// The payload type of the containers of a state.
const STATE_PT: u8 = 96;

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
    /// The replay session's own SSRC: the outer header's.
    ssrc: u32,
    /// The SSRC each recorded one plays under.
    ssrcs: HashMap<u32, u32>,
    /// Each played stream's next sequence number and last timestamp.
    numbering: HashMap<u32, (u16, u32)>,
    /// Played streams the room holds now.
    live: HashSet<u32>,
    /// A segment being read.
    loading: Option<u32>,
    ended: bool,
    /// The packet being built (reused).
    out: Vec<u8>,
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
            ssrc,
            ssrcs: HashMap::new(),
            numbering: HashMap::new(),
            live: HashSet::new(),
            loading: None,
            ended: false,
            out: Vec::new(),
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
        let mut remapped: Vec<(u32, u32)> = r
            .ssrcs
            .iter()
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        remapped.sort_unstable();
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
                Due::Packet(ssrc) => {
                    let recorded = std::mem::take(&mut r.recorded);
                    r.play(now, id, ssrc, &recorded, core);
                    r.recorded = recorded;
                }
                Due::End(ssrc) => {
                    let played = r.played(ssrc, core);
                    r.end(now, id, &[played], core);
                }
                Due::State(streams) => r.restore(now, id, &streams, core),
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

impl Replay {
    /// The SSRC recorded stream `ssrc` plays under: its own when no session of this
    /// shard holds it, another free one otherwise.
    fn played(&mut self, ssrc: u32, core: &impl Core) -> u32 {
        if let Some(p) = self.ssrcs.get(&ssrc) {
            return *p;
        }
        let mut candidate = ssrc;
        while core.session_by_ssrc(candidate).is_some() || candidate == self.ssrc {
            // A fixed odd step walks every 32-bit value before coming back: the search
            // ends.
            candidate = candidate.wrapping_add(0x9E37_79B9);
        }
        self.ssrcs.insert(ssrc, candidate);
        candidate
    }

    /// One recorded packet of `ssrc`, as a container.
    fn play(
        &mut self,
        now: Instant,
        id: SessionId,
        ssrc: u32,
        packet: &[u8],
        core: &mut impl Core,
    ) {
        let Ok(pkt) = RtpPacket::parse(packet) else {
            return;
        };
        let played = self.played(ssrc, core);
        let (pt, ts, marker) = (pkt.payload_type(), pkt.timestamp(), pkt.marker());
        self.send(now, id, (played, pt, ts, marker), &[pkt.payload()], core);
    }

    /// Sends `body` (the objects of `played`'s stream, in parts) as one container packet.
    fn send(
        &mut self,
        now: Instant,
        id: SessionId,
        (played, pt, ts, marker): (u32, u8, u32, bool),
        body: &[&[u8]],
        core: &mut impl Core,
    ) {
        let (seq, last_ts) = self.numbering.entry(played).or_insert((0, ts));
        *last_ts = ts;
        let header = RtpHeader {
            marker,
            payload_type: pt,
            sequence_number: *seq,
            timestamp: ts,
            ssrc: self.ssrc,
            csrcs: &[],
            extension: None,
        };
        *seq = seq.wrapping_add(1);
        self.out.clear();
        if header.append_to(&mut self.out).is_err() {
            return;
        }
        let len = body.iter().map(|b| b.len()).sum();
        container::write_header(&mut self.out, played, len);
        for b in body {
            self.out.extend_from_slice(b);
        }
        self.live.insert(played);
        core.packet(now, id, PacketClass::Rtp, &self.out);
    }

    /// Ends the played streams `ssrcs` with an RTCP BYE.
    fn end(&mut self, now: Instant, id: SessionId, ssrcs: &[u32], core: &mut impl Core) {
        // A BYE names at most 31 sources.
        for chunk in ssrcs.chunks(31) {
            self.out.clear();
            if rtcp::write_bye(&mut self.out, chunk).is_ok() {
                core.packet(now, id, PacketClass::Rtcp, &self.out);
            }
            for s in chunk {
                self.live.remove(s);
            }
        }
    }

    /// Makes the room hold `streams` and nothing else: every played stream ends, then
    /// each of these starts again with its objects.
    fn restore(
        &mut self,
        now: Instant,
        id: SessionId,
        streams: &[(u32, Vec<u8>)],
        core: &mut impl Core,
    ) {
        let mut live: Vec<u32> = self.live.iter().copied().collect();
        live.sort_unstable();
        self.end(now, id, &live, core);
        for (ssrc, objects) in streams {
            let played = self.played(*ssrc, core);
            let ts = self.numbering.get(&played).map_or(0, |n| n.1);
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut size = 0;
            for r in wire::objects(objects, Dialect::Draft01).filter_map(Result::ok) {
                let tlv = r.bytes(objects);
                if size > 0 && size + tlv.len() > STATE_CHUNK {
                    self.send(now, id, (played, STATE_PT, ts, false), &parts, core);
                    parts.clear();
                    size = 0;
                }
                parts.push(tlv);
                size += tlv.len();
            }
            if !parts.is_empty() {
                self.send(now, id, (played, STATE_PT, ts, false), &parts, core);
            }
        }
    }
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
