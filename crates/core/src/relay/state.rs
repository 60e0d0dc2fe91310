//! The tables every part of the core works on: configuration, rooms, sessions and the
//! SSRCs they own, the output queue, the statistics and the scratch of the input being
//! handled. [`super::core::Relay`] owns one `State`; the parts that handle one kind of
//! input (ingest, feedback, reports, aggregation) borrow it for the length of a call, as
//! quinn-proto's helpers borrow its `Connection`. Nothing here imports those parts, so
//! the core's modules import each other in one direction only.

use super::api::{ControlError, Event, SessionId};
use super::config::RelayConfig;
use super::forward::{self, PaceCounts, Scratch};
use super::outbox::Outbox;
use super::rng::Rng;
use super::room::{ROOM, Room};
use super::session::Session;
use super::stats::{RelayStats, StatEvent};
use crate::rtp::PacketClass;
use crate::rtp::ntp::Wallclock;
use crate::rtp::rtcp;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The core's shared tables.
#[derive(Debug)]
pub(super) struct State {
    pub cfg: RelayConfig,
    /// The relay's own SSRC: its aggregated streams, reports and FIRs.
    pub relay_ssrc: u32,
    /// The SSRCs its peer replicas send from: no session may take one, or its stream
    /// would be claimed on the peer as the peer's own.
    pub peer_ssrcs: Vec<u32>,
    pub rng: Rng,
    pub rooms: HashMap<Arc<str>, Room>,
    pub sessions: HashMap<SessionId, Session>,
    /// Every SSRC a session owns, to its session.
    pub by_ssrc: HashMap<u32, SessionId>,
    pub out: Outbox,
    pub stats: RelayStats,
    /// Forwarding scratch (reused: no allocation per packet).
    pub scratch: Scratch,
    /// When the earliest paced subscriber has something due.
    pub pace_at: Option<Instant>,
    /// Scratch: streams whose deferred snapshots are due.
    pub due_streams: Vec<u32>,
    /// The session whose input (or whose room's timers) the core is handling: the room a
    /// defect would have left inconsistent, for [`super::core::Relay::quarantine`].
    pub busy: Option<SessionId>,
    /// The room whose timers the core is handling when no session names it (a room
    /// that holds only room objects), for the same purpose.
    pub busy_room: Option<Arc<str>>,
    /// The relay's NTP anchor, set by the shell (else the epoch at first use).
    wallclock: Option<Wallclock>,
    /// Streams begun and ended, oldest first, for [`super::core::Relay::poll_event`].
    pub stream_events: VecDeque<Event>,
}

impl State {
    /// With no session and no room left, gives back the capacity the tables and buffers
    /// grew to under load: a table keeps its largest size and a buffer its longest
    /// length otherwise. Returns whether it did.
    pub fn release_idle(&mut self) -> bool {
        if !self.sessions.is_empty() || !self.rooms.is_empty() || !self.out.release() {
            return false;
        }
        self.sessions.shrink_to_fit();
        self.by_ssrc.shrink_to_fit();
        self.rooms.shrink_to_fit();
        self.scratch = Scratch::default();
        self.due_streams = Vec::new();
        self.stream_events.shrink_to_fit();
        true
    }

    /// Bytes of capacity the tables and buffers hold, entries or not (an estimate by
    /// entry size, for bounded-state tests).
    pub fn capacity_bytes(&self) -> usize {
        self.sessions.capacity() * size_of::<(SessionId, Session)>()
            + self.by_ssrc.capacity() * size_of::<(u32, SessionId)>()
            + self.rooms.capacity() * size_of::<(Arc<str>, Room)>()
            + self.out.capacity_bytes()
            + self.scratch.capacity_bytes()
            + self.due_streams.capacity() * size_of::<u32>()
            + self.stream_events.capacity() * size_of::<Event>()
    }

    /// Empty tables; `rng` has already drawn `relay_ssrc`.
    pub fn new(cfg: RelayConfig, relay_ssrc: u32, rng: Rng) -> Self {
        let limit = cfg.max_outbox_bytes;
        Self {
            cfg,
            relay_ssrc,
            peer_ssrcs: Vec::new(),
            rng,
            rooms: HashMap::new(),
            sessions: HashMap::new(),
            by_ssrc: HashMap::new(),
            out: Outbox::with_limit(limit),
            stats: RelayStats::default(),
            scratch: Scratch::default(),
            pace_at: None,
            due_streams: Vec::new(),
            busy: None,
            busy_room: None,
            wallclock: None,
            stream_events: VecDeque::new(),
        }
    }

    /// Anchors the relay's NTP time: `now` is `since_unix` after the Unix epoch.
    pub fn set_wallclock(&mut self, now: Instant, since_unix: Duration) {
        self.wallclock = Some(Wallclock::new(now, since_unix));
    }

    /// The relay's NTP anchor; until the shell sets one, NTP times count from the epoch
    /// at the first use.
    pub fn wallclock(&mut self, now: Instant) -> Wallclock {
        *self
            .wallclock
            .get_or_insert_with(|| Wallclock::new(now, Duration::ZERO))
    }

    /// Whether `ssrc` may be given to a session: not zero, not the relay's, not owned.
    pub fn ssrc_free(&self, ssrc: u32) -> bool {
        ssrc != 0
            && ssrc != self.relay_ssrc
            && !self.peer_ssrcs.contains(&ssrc)
            && !self.by_ssrc.contains_key(&ssrc)
    }

    /// A random free SSRC.
    pub fn fresh_ssrc(&mut self) -> u32 {
        loop {
            let s = self.rng.next_u64() as u32;
            if self.ssrc_free(s) {
                return s;
            }
        }
    }

    /// The session that owns an SSRC (none for a room stream that outlived its
    /// publisher).
    pub fn owner_of(&self, ssrc: u32) -> Option<SessionId> {
        self.by_ssrc.get(&ssrc).copied().filter(|id| *id != ROOM)
    }

    /// A session's room name.
    pub fn room_of(&self, id: SessionId) -> Option<Arc<str>> {
        self.sessions.get(&id).map(|s| s.room.clone())
    }

    /// The checks every packet from a session passes first: the session exists (and is
    /// alive from now), is within its packet rate, and the packet within the size limit.
    pub fn admit(
        &mut self,
        now: Instant,
        from: SessionId,
        len: usize,
    ) -> Result<&mut Session, &'static str> {
        let max = self.cfg.max_packet_bytes;
        let s = self.sessions.get_mut(&from).ok_or("unknown_session")?;
        s.last_seen = now;
        // A replay is the relay's own: it plays a whole room at up to eight times its
        // speed, in containers a little larger than what they carry.
        if s.replay {
            return Ok(s);
        }
        if !s.bucket.take(now) {
            return Err("rate_limited");
        }
        if len > max {
            return Err("oversized");
        }
        Ok(s)
    }

    /// Sends one subscriber's due pending updates as its budget allows, and schedules its
    /// next drain (pending updates, or a snapshot deferred by the feedback budget).
    pub fn drain_session(&mut self, now: Instant, id: SessionId) {
        let Some(sub) = self.sessions.get_mut(&id) else {
            return;
        };
        let Some(room) = self.rooms.get(&sub.room) else {
            return;
        };
        let due = if sub.pacing.pending.is_empty() {
            None
        } else {
            let budget = sub.payload_budget;
            let scratch = &mut self.scratch.drain;
            forward::drain_pending(room, sub, &mut self.out, scratch, now, budget)
        };
        if let Some(took) = sub.pacing.snapshot_done(now) {
            self.stats.record(StatEvent::SnapshotSent { took });
        }
        let deferred = sub.feedback.next_deferred();
        self.pace_at = self.pace_at.into_iter().chain(due).chain(deferred).min();
    }

    /// Drains the subscribers a fan-out left in `scratch.to_drain`.
    pub fn drain_followers(&mut self, now: Instant) {
        let mut followers = std::mem::take(&mut self.scratch.to_drain);
        for id in followers.drain(..) {
            self.drain_session(now, id);
        }
        self.scratch.to_drain = followers;
    }

    /// Adds what pacing did during a fan-out to the statistics.
    pub fn count_paced(&mut self) {
        let c: PaceCounts = std::mem::take(&mut self.scratch.paced);
        let p = &mut self.stats.pacing;
        p.deferred_rate_tier += c.rate_tier;
        p.deferred_cap += c.cap_deferred;
        p.dropped_cap += c.cap_dropped;
        p.coalesced += c.coalesced;
    }

    /// Counts the packets the outbox refused at its ceiling.
    pub fn count_overflow(&mut self) {
        let n = self.out.take_overflowed();
        if n > 0 {
            self.stats.dropped.add("outbox_full", n);
        }
    }

    /// A session, or the error a control operation on a missing one answers.
    pub fn session_mut(&mut self, id: SessionId) -> Result<&mut Session, ControlError> {
        self.sessions
            .get_mut(&id)
            .ok_or(ControlError::NoSuchSession(id))
    }

    /// Drops a stream's state and sends an RTCP BYE for it to the room's subscribers.
    /// Returns whether the stream existed (the caller tells the aggregator).
    pub fn end_stream(&mut self, room_name: &str, ssrc: u32) -> bool {
        let Some(name) = self.rooms.get_key_value(room_name).map(|(k, _)| k.clone()) else {
            return false;
        };
        let Some(room) = self.rooms.get_mut(room_name) else {
            return false;
        };
        let Some(stream) = room.streams.remove(&ssrc) else {
            return false;
        };
        if stream.owner == ROOM {
            self.by_ssrc.remove(&ssrc);
        }
        if !stream.carried {
            self.stream_events.push_back(Event::StreamEnded {
                room: name,
                session: stream.owner,
                ssrc,
            });
        }
        for (id, e) in stream.store.iter() {
            if let Some(cell) = e.cell() {
                room.objects.remove(cell, (ssrc, id));
            }
        }
        self.stats.streams = self.stats.streams.saturating_sub(1);
        self.stats.objects_changed(0, stream.store.len());
        for &member in &room.members {
            let Some(s) = self.sessions.get_mut(&member) else {
                continue;
            };
            s.forget_stream(ssrc);
            self.out.sent.forget_stream(member, ssrc);
            if member == stream.owner || !s.subscribe {
                continue;
            }
            let (buf, start) = self.out.begin();
            if rtcp::write_bye(buf, &[ssrc]).is_ok() {
                self.out.commit(member, PacketClass::Rtcp, start);
            } else {
                self.out.abandon(start);
            }
        }
        true
    }
}
