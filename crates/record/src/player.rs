//! The replay clock: which record is due when, at a speed, paused or not, after a seek.
//!
//! Sans-I/O: the shell reads segments (off its hot thread) and feeds them when
//! [`Player::wants_segment`] asks; it calls [`Player::poll`] with the time until it gives
//! `None`, and sleeps until [`Player::poll_timeout`]. The player holds at most the segment
//! it plays and the next one.
//!
//! What it gives out: the live RTP packets and the room's events, each when it is due.
//! Checkpoint packets and the format's own events (`segment_started`, `segment_end`,
//! `checkpoint`) are not replayed; they serve seeking. After a seek it gives the whole
//! room at the target once ([`Output::State`]), then carries on from there.

use crate::FormatError;
use crate::dir::SegmentInfo;
use crate::event::Event;
use crate::read::{Cursor, Item, Record, scan};
use crate::state::RoomState;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The slowest speed.
pub const MIN_SPEED: f64 = 0.25;
/// The fastest speed.
pub const MAX_SPEED: f64 = 8.0;

/// What is due.
#[derive(Debug, Clone, PartialEq)]
pub enum Output<'a> {
    /// A recorded RTP packet to send into the room.
    Rtp {
        /// Its SSRC.
        ssrc: u32,
        /// The packet (plaintext RTP).
        packet: &'a [u8],
    },
    /// A room event.
    Event(&'a Event),
    /// After a seek: the whole room at the target time (each live stream's objects).
    State {
        /// The streams, by SSRC.
        streams: &'a [StreamState],
    },
    /// The recording has played to its end (given once).
    Ended,
}

/// One stream's state after a seek.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    /// The stream's SSRC.
    pub ssrc: u32,
    /// Its objects' latest TLVs, concatenated, in the order they were first seen.
    pub objects: Vec<u8>,
}

/// A request the player refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlayError {
    /// A speed outside 0.25..=8 (or not a number).
    #[error("speed {0} is outside {MIN_SPEED}..={MAX_SPEED}")]
    Speed(f64),
    /// A seek past the end of the recording.
    #[error("seek past the end: the recording lasts {end_ns} ns")]
    PastEnd {
        /// The recording's length, nanoseconds.
        end_ns: u64,
    },
}

/// A segment fed to the player.
struct Loaded {
    bytes: Vec<u8>,
    /// Where its good blocks start and end, and the interfaces its IDBs declare.
    start: Cursor,
}

/// A seek in progress: fast-forwarding to `target` (ns from the start).
#[derive(Debug, Clone, Copy)]
struct Seek {
    target: u64,
    /// The checkpoint to start from (its time, ns since the epoch), until it is reached.
    checkpoint: Option<u64>,
    /// Packets of the checkpoint still to apply: they count even when stamped after the
    /// target, since the checkpoint is the room at its event's time.
    checkpoint_left: u32,
}

/// The replay clock of one recording.
pub struct Player {
    segments: Vec<SegmentInfo>,
    loaded: BTreeMap<usize, Loaded>,
    /// Time of the recording's first record, ns since the epoch.
    start_ns: u64,
    /// Its length, ns.
    end_ns: u64,
    /// The clock: position `anchor_pos` at `anchor_at`, moving at `speed` unless paused.
    anchor_at: Instant,
    anchor_pos: u64,
    speed: f64,
    paused: bool,
    /// Which segment (position in `segments`) and where in it.
    seg: usize,
    cursor: Option<Cursor>,
    seek: Option<Seek>,
    state: RoomState,
    /// The state to give out after a seek, while it waits to be polled.
    state_out: Vec<StreamState>,
    state_due: bool,
    /// The event last given out (borrowed by the `Output`).
    event: Option<Event>,
    ended: bool,
    ended_told: bool,
}

impl Player {
    /// A player of the recording made of `segments` (as [`crate::Recording::open`] lists
    /// them), at 1x, from the start, its clock starting at `now`.
    pub fn new(segments: Vec<SegmentInfo>, now: Instant) -> Self {
        let spans = segments.iter().filter(|s| s.has_records());
        let start_ns = spans.clone().map(|s| s.first_ns).min().unwrap_or(0);
        let last_ns = spans.map(|s| s.last_ns).max().unwrap_or(0);
        Player {
            segments,
            loaded: BTreeMap::new(),
            start_ns,
            end_ns: last_ns.saturating_sub(start_ns),
            anchor_at: now,
            anchor_pos: 0,
            speed: 1.0,
            paused: false,
            seg: 0,
            cursor: None,
            seek: None,
            state: RoomState::default(),
            state_out: Vec::new(),
            state_due: false,
            event: None,
            ended: false,
            ended_told: false,
        }
    }

    /// The segment the player needs next (its index, the file's number): the one it
    /// plays if it is not fed yet, else the one after, to have it ready. The shell reads
    /// it and gives it to [`feed_segment`](Self::feed_segment).
    pub fn wants_segment(&self) -> Option<u32> {
        if self.ended {
            return None;
        }
        [self.seg, self.seg + 1]
            .into_iter()
            .find(|p| p < &self.segments.len() && !self.loaded.contains_key(p))
            .and_then(|p| self.segments.get(p))
            .map(|s| s.index)
    }

    /// Gives the player segment `index`'s bytes (inflated if it was compressed). Errors:
    /// not a segment of this recording, or bytes that are not a segment.
    pub fn feed_segment(&mut self, index: u32, bytes: Vec<u8>) -> Result<(), FormatError> {
        let pos = self
            .segments
            .iter()
            .position(|s| s.index == index)
            .ok_or(FormatError::UnknownSegment(index))?;
        let start = Cursor::new(&scan(&bytes)?);
        if pos == self.seg || pos == self.seg + 1 {
            self.loaded.insert(pos, Loaded { bytes, start });
        }
        Ok(())
    }

    /// Sets the speed, 0.25 to 8 (1 = as recorded).
    pub fn set_speed(&mut self, now: Instant, speed: f64) -> Result<(), PlayError> {
        if !(MIN_SPEED..=MAX_SPEED).contains(&speed) {
            return Err(PlayError::Speed(speed));
        }
        self.reanchor(now);
        self.speed = speed;
        Ok(())
    }

    /// Stops the clock.
    pub fn pause(&mut self, now: Instant) {
        self.reanchor(now);
        self.paused = true;
    }

    /// Starts the clock again.
    pub fn resume(&mut self, now: Instant) {
        self.reanchor(now);
        self.paused = false;
    }

    /// Goes to `to_ns_from_start`: from the nearest checkpoint at or before it, applying
    /// every packet up to it without giving it out. The next [`poll`](Self::poll) gives
    /// [`Output::State`] (once the segments it needs are fed), then what follows.
    pub fn seek(&mut self, now: Instant, to_ns_from_start: u64) -> Result<(), PlayError> {
        if to_ns_from_start > self.end_ns {
            return Err(PlayError::PastEnd {
                end_ns: self.end_ns,
            });
        }
        let mut target_ns = self.start_ns.saturating_add(to_ns_from_start);
        // A recording's first checkpoint is the room it began in (the events written
        // with it may come a moment before it): a seek before it starts there.
        let first = self
            .segments
            .iter()
            .flat_map(|s| s.checkpoints.iter().copied())
            .min();
        if let Some(c) = first.filter(|c| *c > target_ns) {
            target_ns = c;
        }
        let to_ns_from_start = target_ns - self.start_ns;
        let from = self
            .segments
            .iter()
            .enumerate()
            .flat_map(|(p, s)| s.checkpoints.iter().map(move |&c| (p, c)))
            .filter(|&(_, c)| c <= target_ns)
            .max_by_key(|&(_, c)| c);
        let (seg, checkpoint) = match from {
            Some((p, c)) => (p, Some(c)),
            None => (0, None),
        };
        self.goto_segment(seg);
        self.seek = Some(Seek {
            target: to_ns_from_start,
            checkpoint,
            checkpoint_left: 0,
        });
        self.state.clear();
        self.state_due = false;
        self.ended = false;
        self.ended_told = false;
        self.anchor_at = now;
        self.anchor_pos = to_ns_from_start;
        Ok(())
    }

    /// What is due by `now`, one item per call; `None` when nothing is (yet), or when the
    /// segment it needs has not been fed (see [`wants_segment`](Self::wants_segment)).
    pub fn poll(&mut self, now: Instant) -> Option<Output<'_>> {
        if self.seek.is_some() && !self.fast_forward() {
            return None;
        }
        if self.state_due {
            self.state_due = false;
            self.state_out.clear();
            self.state_out.extend(
                self.state
                    .snapshot()
                    .map(|(ssrc, objects)| StreamState { ssrc, objects }),
            );
            return Some(Output::State {
                streams: &self.state_out,
            });
        }
        let pos = self.position_ns(now);
        loop {
            let Some(at) = self.peek() else {
                if !self.ended || self.ended_told {
                    return None;
                }
                self.ended_told = true;
                return Some(Output::Ended);
            };
            if at.saturating_sub(self.start_ns) > pos {
                return None;
            }
            let (Some(loaded), Some(cursor)) = (self.loaded.get(&self.seg), self.cursor.as_mut())
            else {
                return None;
            };
            match cursor.next_item(&loaded.bytes)? {
                Item::Rtp {
                    checkpoint: false,
                    packet,
                    ..
                } => {
                    // Borrowed again here rather than kept from `next_item`: a borrow of
                    // `self` returned from one arm of a loop would hold `self` for the
                    // loop's other turns too.
                    let packet = self.loaded.get(&self.seg)?.bytes.get(packet)?;
                    let ssrc = ssrc_of(packet);
                    return Some(Output::Rtp { ssrc, packet });
                }
                Item::Rtp { .. } => {}
                Item::Event { event, .. } if !event.is_bookkeeping() => {
                    return Some(Output::Event(self.event.insert(event)));
                }
                Item::Event { .. } => {}
            }
        }
    }

    /// When the next record is due; `None` while paused, at the end, or while the segment
    /// it needs has not been fed. A time in the past: poll now.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.state_due || (self.ended && !self.ended_told) {
            return Some(self.anchor_at);
        }
        if self.paused || self.ended {
            return None;
        }
        if self.seek.is_some() {
            return self
                .loaded
                .contains_key(&self.seg)
                .then_some(self.anchor_at);
        }
        let at = match self.peek_ro() {
            Peek::Record(at) => at.saturating_sub(self.start_ns),
            Peek::Blocked => return None,
            Peek::SegmentDone => return Some(self.anchor_at),
        };
        let ahead = at.saturating_sub(self.anchor_pos) as f64 / self.speed;
        Some(self.anchor_at + Duration::from_nanos(ahead.ceil() as u64))
    }

    /// Where the replay is, ns from the start of the recording.
    pub fn position_ns(&self, now: Instant) -> u64 {
        if self.paused || self.seek.is_some() {
            return self.anchor_pos;
        }
        let elapsed = now.saturating_duration_since(self.anchor_at).as_nanos() as f64;
        // Rounded, not truncated: `poll_timeout` rounds its wake-up up to the nanosecond,
        // and at that instant the position must have reached the record, whatever the
        // floating-point product lands on.
        let pos = self
            .anchor_pos
            .saturating_add((elapsed * self.speed).round() as u64);
        pos.min(self.end_ns)
    }

    /// The recording's length, ns.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns
    }

    /// The speed.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Whether the clock is stopped.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Moves the clock's anchor to `now`, keeping the position.
    fn reanchor(&mut self, now: Instant) {
        self.anchor_pos = self.position_ns(now);
        self.anchor_at = now;
    }

    /// Starts reading segment `pos` from its beginning; forgets the segments it will not
    /// need.
    fn goto_segment(&mut self, pos: usize) {
        self.seg = pos;
        self.cursor = None;
        self.loaded.retain(|&p, _| p == pos || p == pos + 1);
        if pos >= self.segments.len() {
            self.ended = true;
        }
    }

    /// The next record's time, moving on to the next segment at the end of one; `None`
    /// at the end of the recording or while the segment it needs is not fed.
    fn peek(&mut self) -> Option<u64> {
        loop {
            if self.seg >= self.segments.len() {
                self.ended = true;
                return None;
            }
            if self.cursor.is_none() {
                self.cursor = Some(self.loaded.get(&self.seg)?.start.clone());
            }
            let (loaded, cursor) = (self.loaded.get(&self.seg)?, self.cursor.as_ref()?);
            match cursor.peek_at(&loaded.bytes) {
                Some(at) => return Some(at),
                None => self.goto_segment(self.seg + 1),
            }
        }
    }

    /// The next record's time, without moving.
    fn peek_ro(&self) -> Peek {
        let Some(loaded) = self.loaded.get(&self.seg) else {
            return match self.seg >= self.segments.len() {
                true => Peek::SegmentDone,
                false => Peek::Blocked,
            };
        };
        let cursor = self.cursor.as_ref().unwrap_or(&loaded.start);
        match cursor.peek_at(&loaded.bytes) {
            Some(at) => Peek::Record(at),
            None => Peek::SegmentDone,
        }
    }

    /// Carries the seek on: applies records up to the target. `true` when it is done,
    /// `false` while a segment it needs is not fed.
    fn fast_forward(&mut self) -> bool {
        let Some(mut seek) = self.seek else {
            return true;
        };
        let target_ns = self.start_ns.saturating_add(seek.target);
        loop {
            let Some(at) = self.peek() else {
                if self.ended {
                    break;
                }
                self.seek = Some(seek);
                return false;
            };
            if seek.checkpoint.is_none() && seek.checkpoint_left == 0 && at > target_ns {
                break;
            }
            let (Some(loaded), Some(cursor)) = (self.loaded.get(&self.seg), self.cursor.as_mut())
            else {
                break;
            };
            let Some(record) = cursor.next(&loaded.bytes) else {
                break;
            };
            match (seek.checkpoint, record) {
                // Before the checkpoint: nothing counts, until its own event.
                (
                    Some(c),
                    Record::Event {
                        at_ns,
                        event: Event::Checkpoint { packets },
                    },
                ) if at_ns == c => {
                    seek.checkpoint = None;
                    seek.checkpoint_left = packets;
                    self.state.clear();
                }
                (Some(_), _) => {}
                (
                    None,
                    Record::Rtp {
                        packet, checkpoint, ..
                    },
                ) => {
                    if checkpoint {
                        seek.checkpoint_left = seek.checkpoint_left.saturating_sub(1);
                    }
                    self.state.apply(packet);
                }
                (
                    None,
                    Record::Event {
                        event: Event::Checkpoint { packets },
                        ..
                    },
                ) => {
                    seek.checkpoint_left = packets;
                    self.state.clear();
                }
                (
                    None,
                    Record::Event {
                        event: Event::StreamEnded { ssrc, .. },
                        ..
                    },
                ) => self.state.remove(ssrc),
                (None, Record::Event { .. }) => {}
            }
        }
        self.seek = None;
        self.state_due = true;
        true
    }
}

/// What comes next in the segment being played.
enum Peek {
    Record(u64),
    /// The segment is not fed yet.
    Blocked,
    SegmentDone,
}

/// The SSRC of an RTP packet (bytes 8..12); 0 if it is too short to have one.
fn ssrc_of(packet: &[u8]) -> u32 {
    packet
        .get(8..12)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}
