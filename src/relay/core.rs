//! [`Relay`]: the sans-I/O state machine. Inputs are control operations, packets from
//! sessions and time; outputs are packets to sessions ([`Relay::poll_transmit`]) and the
//! next wake-up ([`Relay::poll_timeout`]). It owns no socket and reads no clock.

use super::aggregate::{Aggregator, Tx};
use super::api::{
    ControlError, JoinRequest, Joined, RoomInfo, SessionId, SessionInfo, StreamInfo,
    format_session_id,
};
use super::budget::FeedbackBudget;
use super::config::RelayConfig;
use super::forward::{self, Packet, Scratch};
use super::grid::{self, Cell, Grid};
use super::interest::Interest;
use super::outbox::{Outbox, OutboxMark, Transmit};
use super::pacing::Pacing;
use super::relevance;
use super::reports::{Reports, RtcpLeg};
use super::room::{Room, Stream};
use super::session::{Session, TokenBucket};
use super::stats::{RelayStats, StatEvent};
use crate::rtp::RtpPacket;
use crate::wire::{self, ObjectKind, ObjectRef};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// The fixed RTP header of the packets the relay builds (no CSRC, no extension).
const RTP_HEADER_BYTES: usize = 12;

/// The smallest payload budget a path can impose: below it a packet holds too little.
const MIN_PAYLOAD_BUDGET: usize = 256;

/// The relay core.
pub struct Relay {
    pub(super) cfg: RelayConfig,
    pub(super) relay_ssrc: u32,
    pub(super) rng: u64,
    next_id: SessionId,
    /// Step between session ids: the number of shards, so that a shard's ids are exactly
    /// those `≡ shard (mod shards)` and any session id names its shard.
    id_step: SessionId,
    pub(super) rooms: HashMap<Arc<str>, Room>,
    pub(super) sessions: HashMap<SessionId, Session>,
    by_ssrc: HashMap<u32, SessionId>,
    pub(super) out: Outbox,
    pub(super) stats: RelayStats,
    /// Scratch for the objects of the packet being handled (reused: no allocation).
    refs: Vec<ObjectRef>,
    scratch: Scratch,
    /// When the earliest paced subscriber has something due.
    pace_at: Option<Instant>,
    next_sweep: Option<Instant>,
    closed: Vec<SessionId>,
    draining: bool,
    /// Aggregated delivery: views and members.
    pub(super) agg: Aggregator,
    /// Scratch: streams whose deferred snapshots are due, sessions to drain, and objects
    /// that expired (reused: no allocation per wake-up).
    pub(super) due_streams: Vec<u32>,
    drain_ids: Vec<SessionId>,
    expired: Vec<(u32, u64)>,
    /// The session whose input (or whose room's timers) the core is handling: the room a
    /// defect would have left inconsistent, for [`Relay::quarantine`].
    pub(super) busy: Option<SessionId>,
    /// RTCP reports: schedule, wall clock, counts.
    pub(super) reports: Reports,
}

impl Relay {
    /// A relay with no rooms. `seed` drives SSRC allocation (deterministic in tests).
    pub fn new(cfg: RelayConfig, seed: u64) -> Self {
        let max_outbox = cfg.max_outbox_bytes;
        let mut rng = seed | 1;
        let relay_ssrc = loop {
            let s = xorshift(&mut rng) as u32;
            if s != 0 {
                break s;
            }
        };
        let agg = Aggregator::new(xorshift(&mut rng));
        // Ids start at a random point (the top bit clear, so they never wrap): a relay that
        // restarted does not hand a client's old session id to someone else's session.
        let first_id = (xorshift(&mut rng) >> 1).max(1);
        Self {
            cfg,
            relay_ssrc,
            rng,
            next_id: first_id,
            id_step: 1,
            rooms: HashMap::new(),
            sessions: HashMap::new(),
            by_ssrc: HashMap::new(),
            out: Outbox::with_limit(max_outbox),
            stats: RelayStats::default(),
            refs: Vec::new(),
            scratch: Scratch::default(),
            pace_at: None,
            next_sweep: None,
            closed: Vec::new(),
            draining: false,
            agg,
            due_streams: Vec::new(),
            drain_ids: Vec::new(),
            expired: Vec::new(),
            busy: None,
            reports: Reports::new(relay_ssrc),
        }
    }

    /// Makes this core shard `shard` of `shards`: its session ids are those with
    /// `id % shards == shard` (see [`shard_of`]), so the control plane routes a session's
    /// commands without a lookup. Call before the first join.
    pub fn in_shard(mut self, shard: u64, shards: u64) -> Self {
        let shards = shards.max(1);
        let base = self.next_id - self.next_id % shards;
        self.next_id = base + shard % shards;
        if self.next_id == 0 {
            // Session 0 is never handed out (the lag probe asks for it).
            self.next_id = shards;
        }
        self.id_step = shards;
        self
    }

    /// The relay's own SSRC.
    pub fn relay_ssrc(&self) -> u32 {
        self.relay_ssrc
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.cfg
    }

    /// A session, by id.
    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// The session that owns an SSRC.
    pub fn session_by_ssrc(&self, ssrc: u32) -> Option<SessionId> {
        self.by_ssrc.get(&ssrc).copied()
    }

    /// Number of joined sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Number of open rooms.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    /// What the core has counted so far (the shell exports it).
    pub fn stats(&self) -> &RelayStats {
        &self.stats
    }

    /// The oldest measurement (for a histogram) the shell has not taken yet.
    pub fn poll_stat_event(&mut self) -> Option<StatEvent> {
        self.stats.pop_event()
    }

    /// Refuses new joins from now on (graceful drain); existing rooms keep flowing.
    pub fn set_draining(&mut self, draining: bool) {
        self.draining = draining;
    }

    /// Joins a session to a room, creating the room if needed.
    pub fn join(&mut self, now: Instant, req: JoinRequest) -> Result<Joined, ControlError> {
        self.busy = None;
        self.out.now = Some(now);
        if self.draining {
            return Err(ControlError::Draining);
        }
        req.interest
            .validate()
            .map_err(ControlError::InvalidInterest)?;
        if self.sessions.len() >= self.cfg.max_sessions {
            return Err(ControlError::RelayFull(self.cfg.max_sessions));
        }
        let room = self.rooms.get(req.room.as_str());
        if room.is_none() && self.rooms.len() >= self.cfg.max_rooms {
            return Err(ControlError::TooManyRooms(self.cfg.max_rooms));
        }
        let members = room.map_or(0, |r| r.members.len());
        if members >= self.cfg.max_sessions_per_room {
            return Err(ControlError::RoomFull(req.room));
        }
        let ssrc = match req.ssrc {
            Some(s) if self.ssrc_free(s) => s,
            Some(s) if req.require_ssrc => return Err(ControlError::SsrcTaken(s)),
            _ => self.fresh_ssrc(),
        };
        let id = self.next_id;
        self.next_id += self.id_step;
        let name: Arc<str> = Arc::from(req.room);
        let room = self.rooms.entry(name.clone()).or_default();
        room.members.push(id);
        let streams = room.streams.keys().copied().collect();
        self.by_ssrc.insert(ssrc, id);
        self.sessions.insert(
            id,
            Session {
                id,
                room: name,
                identity: req.identity,
                ssrc,
                publish: req.publish,
                subscribe: req.subscribe,
                dialect: req.dialect,
                interest: req.interest,
                subs: HashMap::new(),
                feedback: FeedbackBudget::default(),
                tmmbr_bps: None,
                path_bps: None,
                payload_budget: self.cfg.payload_budget,
                bucket: TokenBucket::new(self.cfg.max_packets_per_sec, now),
                last_seen: now,
                inside: HashSet::new(),
                last_scan: None,
                pacing: Pacing::new(
                    self.cfg.relay_send_bitrate_bps,
                    self.cfg.relay_send_burst_bytes,
                    now,
                ),
                predicted: HashMap::new(),
                cells: None,
                rtcp: RtcpLeg::new(now),
                send_budget_bps: None,
                congestion: None,
            },
        );
        self.schedule_first_report(id, now);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.refresh_cap(self.cfg.subscriber_max_bitrate_bps, now);
            if let Some(room) = self.rooms.get_mut(&s.room) {
                let center = s.interest.area.as_ref().and_then(|a| a.center);
                relevance::place(room, s, center);
            }
        }
        self.sync_delivery(id, now);
        self.next_sweep.get_or_insert(now + self.cfg.sweep_interval);
        Ok(Joined {
            session: id,
            ssrc,
            relay_ssrc: self.relay_ssrc,
            streams,
        })
    }

    fn ssrc_free(&self, ssrc: u32) -> bool {
        ssrc != 0 && ssrc != self.relay_ssrc && !self.by_ssrc.contains_key(&ssrc)
    }

    fn fresh_ssrc(&mut self) -> u32 {
        loop {
            let s = xorshift(&mut self.rng) as u32;
            if self.ssrc_free(s) {
                return s;
            }
        }
    }

    /// Removes a session; its stream ends and the others get an RTCP BYE for it.
    pub fn leave(&mut self, id: SessionId) -> Result<(), ControlError> {
        self.busy = Some(id);
        let s = self
            .sessions
            .get(&id)
            .ok_or(ControlError::NoSuchSession(id))?;
        let (room_name, ssrc) = (s.room.clone(), s.ssrc);
        self.end_stream(&room_name, ssrc);
        if let (Some(room), Some(s)) = (self.rooms.get_mut(&room_name), self.sessions.get_mut(&id))
        {
            relevance::unplace(room, s);
        }
        self.sessions.remove(&id);
        self.out.sent.forget_session(id);
        self.end_delivery(id);
        self.by_ssrc.remove(&ssrc);
        if let Some(room) = self.rooms.get_mut(&room_name) {
            room.members.retain(|m| *m != id);
            if room.members.is_empty() {
                self.rooms.remove(&room_name);
            }
        }
        Ok(())
    }

    /// Replaces a session's interest.
    pub fn set_interest(
        &mut self,
        now: Instant,
        id: SessionId,
        interest: Interest,
    ) -> Result<(), ControlError> {
        self.busy = Some(id);
        self.out.now = Some(now);
        interest.validate().map_err(ControlError::InvalidInterest)?;
        let s = self
            .sessions
            .get_mut(&id)
            .ok_or(ControlError::NoSuchSession(id))?;
        s.interest = interest;
        s.inside.clear();
        s.last_scan = None;
        s.pacing.pending.clear();
        s.predicted.clear();
        s.refresh_cap(self.cfg.subscriber_max_bitrate_bps, now);
        if let Some(room) = self.rooms.get_mut(&s.room) {
            let center = s.interest.area.as_ref().and_then(|a| a.center);
            relevance::place(room, s, center);
        }
        self.sync_delivery(id, now);
        Ok(())
    }

    /// A room's sessions and streams.
    pub fn room_info(&self, name: &str) -> Option<RoomInfo> {
        let room = self.rooms.get(name)?;
        let sessions = room
            .members
            .iter()
            .filter_map(|id| self.sessions.get(id))
            .map(|s| SessionInfo {
                session_id: format_session_id(s.id),
                identity: s.identity.clone(),
                ssrc: s.ssrc,
                publish: s.publish,
                subscribe: s.subscribe,
                dialect: s.dialect,
                delivery: s.interest.delivery.mode,
                rtt_ms: s.rtcp.rtt().map(|d| d.as_secs_f64() * 1e3),
                send_budget_bps: s.send_budget_bps,
            })
            .collect();
        let mut streams: Vec<StreamInfo> = room
            .streams
            .iter()
            .map(|(ssrc, st)| StreamInfo {
                ssrc: *ssrc,
                objects: st.store.len(),
                bytes: st.store.bytes(),
            })
            .collect();
        streams.sort_by_key(|s| s.ssrc);
        Some(RoomInfo {
            room: name.to_owned(),
            sessions,
            streams,
        })
    }

    /// The next packet to send. Call until `None` after every input.
    pub fn poll_transmit(&mut self) -> Option<Transmit<'_>> {
        self.out.pop()
    }

    /// When [`Relay::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
            .into_iter()
            .chain(self.pace_at)
            .chain(self.agg.due())
            .chain(self.reports.due())
            .min()
    }

    /// Sessions the relay removed by itself (timeouts) since the last call, so the
    /// transport can forget them.
    pub fn poll_closed(&mut self) -> Option<SessionId> {
        self.closed.pop()
    }

    /// Expires objects, streams and sessions whose time has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.busy = None;
        self.out.now = Some(now);
        if self.pace_at.is_some_and(|t| now >= t) {
            self.drain_paced(now);
        }
        self.mix(now, false);
        self.flush_aggregates(now);
        self.send_due_reports(now);
        self.count_overflow();
        if self.next_sweep.is_none_or(|t| now < t) {
            return;
        }
        let object_cutoff = now.checked_sub(self.cfg.object_ttl);
        let mut ended = Vec::new();
        let mut expired = std::mem::take(&mut self.expired);
        for (name, room) in &mut self.rooms {
            let Room {
                streams,
                objects,
                members,
                ..
            } = room;
            self.busy = members.first().copied();
            expired.clear();
            for (ssrc, st) in streams {
                if let Some(cutoff) = object_cutoff {
                    let n = st.store.expire(cutoff, |id, e| {
                        if let Some(cell) = e.cell() {
                            objects.remove(cell, (*ssrc, id));
                        }
                        expired.push((*ssrc, id));
                    });
                    self.stats.objects_changed(0, n);
                }
                if now.saturating_duration_since(st.last_packet) >= self.cfg.stream_timeout {
                    ended.push((name.clone(), *ssrc));
                }
            }
            // Per-subscriber state keyed by an object goes with the object.
            for m in members.iter() {
                let Some(s) = self.sessions.get_mut(m) else {
                    continue;
                };
                for key in &expired {
                    s.forget_object(*key);
                }
                s.feedback.prune(now, self.cfg.snapshot_interval);
            }
        }
        self.expired = expired;
        for (room, ssrc) in ended {
            self.end_stream(&room, ssrc);
        }
        let idle: Vec<SessionId> = self
            .sessions
            .values()
            .filter(|s| s.idle(now, self.cfg.session_timeout))
            .map(|s| s.id)
            .collect();
        for id in idle {
            if self.leave(id).is_ok() {
                self.closed.push(id);
            }
        }
        self.next_sweep = (!self.sessions.is_empty()).then(|| now + self.cfg.sweep_interval);
    }

    /// Sends every subscriber's due pending updates and deferred snapshots, and schedules
    /// the next drain.
    fn drain_paced(&mut self, now: Instant) {
        let mut ids = std::mem::take(&mut self.drain_ids);
        ids.clear();
        ids.extend(
            self.sessions
                .values()
                .filter(|s| !s.pacing.pending.is_empty() || s.feedback.next_deferred().is_some())
                .map(|s| s.id),
        );
        self.pace_at = None;
        for &id in &ids {
            self.busy = Some(id);
            self.deferred_snapshots(now, id);
            self.drain_session(now, id);
        }
        self.drain_ids = ids;
    }

    /// Sends one subscriber's due pending updates as its budget allows, and schedules its
    /// next drain (pending updates, or a snapshot deferred by the feedback budget).
    pub(super) fn drain_session(&mut self, now: Instant, id: SessionId) {
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
            forward::drain_pending(room, sub, &mut self.out, now, budget)
        };
        if let Some(took) = sub.pacing.snapshot_done(now) {
            self.stats.record(StatEvent::SnapshotSent { took });
        }
        let deferred = sub.feedback.next_deferred();
        self.pace_at = self.pace_at.into_iter().chain(due).chain(deferred).min();
    }

    /// Adds what pacing did during a fan-out to the statistics.
    fn count_paced(&mut self) {
        let c = std::mem::take(&mut self.scratch.paced);
        let p = &mut self.stats.pacing;
        p.deferred_rate_tier += c.rate_tier;
        p.deferred_cap += c.cap_deferred;
        p.dropped_cap += c.cap_dropped;
        p.coalesced += c.coalesced;
    }

    pub(super) fn drop_packet(&mut self, reason: &'static str) {
        self.stats.drop(reason);
    }

    /// What a session's path carries, as its transport measures it: the largest RTP
    /// packet that fits one datagram, and the send rate it allows (`None`: no limit).
    /// Snapshots and paced updates for it are packed to that size, and its updates are
    /// paced (latest value per object) to that rate, as under a bandwidth cap.
    pub fn set_session_path(
        &mut self,
        now: Instant,
        id: SessionId,
        max_packet: usize,
        send_bps: Option<u64>,
    ) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let fits = max_packet
            .saturating_sub(RTP_HEADER_BYTES)
            .max(MIN_PAYLOAD_BUDGET);
        let budget = self.cfg.payload_budget.min(fits);
        let moved = s.payload_budget != budget;
        s.payload_budget = budget;
        if s.path_bps != send_bps {
            s.path_bps = send_bps;
            s.refresh_cap(self.cfg.subscriber_max_bitrate_bps, now);
        }
        if moved {
            // An aggregated subscriber's packets are built for its view: a narrower path
            // needs a view whose packets fit it.
            self.sync_delivery(id, now);
        }
    }

    /// Handles one plaintext RTP packet from a session.
    pub fn handle_rtp(&mut self, now: Instant, from: SessionId, packet: &[u8]) {
        self.busy = Some(from);
        self.out.now = Some(now);
        if let Err(reason) = self.accept_rtp(now, from, packet) {
            self.drop_packet(reason);
        }
        self.mix(now, false);
        self.count_overflow();
    }

    /// Counts the packets the outbox refused at its ceiling.
    pub(super) fn count_overflow(&mut self) {
        let n = self.out.take_overflowed();
        if n > 0 {
            self.stats.dropped.add("outbox_full", n);
        }
    }

    /// Where the output queue stands: a shell takes this before an input so that, if the
    /// input hits a defect, [`Relay::quarantine`] can drop what it half-queued.
    pub fn outbox_mark(&self) -> OutboxMark {
        self.out.mark()
    }

    /// Recovers from a defect: a panic the shell caught while the core handled an input.
    /// The room of the session being handled may be half-updated, so it is dropped whole
    /// (its sessions are reported by [`Relay::poll_closed`]), with what the input queued
    /// since `mark`; every other room is untouched. Returns the room dropped, if any.
    pub fn quarantine(&mut self, now: Instant, mark: OutboxMark) -> Option<Arc<str>> {
        self.out.rewind(mark);
        // Wake at once to reschedule every other session's timers.
        self.pace_at = Some(now);
        self.next_sweep = Some(now);
        let id = self.busy.take()?;
        let name = self.sessions.get(&id)?.room.clone();
        self.drop_room(&name);
        Some(name)
    }

    /// A defect while handling `session`'s input: panics (unit tests of the shells'
    /// fault isolation only).
    #[cfg(test)]
    pub(crate) fn inject_fault(&mut self, session: SessionId) {
        self.busy = Some(session);
        panic!("injected fault");
    }

    /// Removes a room and its sessions at once, without touching their state.
    fn drop_room(&mut self, name: &str) {
        let Some(room) = self.rooms.remove(name) else {
            return;
        };
        self.stats.streams = self.stats.streams.saturating_sub(room.streams.len() as u64);
        let objects: usize = room.streams.values().map(|s| s.store.len()).sum();
        self.stats.objects_changed(0, objects);
        for id in room.members {
            self.out.sent.forget_session(id);
            if let Some(s) = self.sessions.remove(&id) {
                self.by_ssrc.remove(&s.ssrc);
                self.closed.push(id);
            }
            self.end_delivery(id);
        }
    }

    /// The checks every packet from a session passes first: the session exists (and is
    /// alive from now), is within its packet rate, and the packet within the size limit.
    pub(super) fn admit(
        &mut self,
        now: Instant,
        from: SessionId,
        len: usize,
    ) -> Result<&mut Session, &'static str> {
        let max = self.cfg.max_packet_bytes;
        let s = self.sessions.get_mut(&from).ok_or("unknown_session")?;
        s.last_seen = now;
        if !s.bucket.take(now) {
            return Err("rate_limited");
        }
        if len > max {
            return Err("oversized");
        }
        Ok(s)
    }

    fn accept_rtp(
        &mut self,
        now: Instant,
        from: SessionId,
        packet: &[u8],
    ) -> Result<(), &'static str> {
        self.admit(now, from, packet.len())?;
        let s = self.sessions.get_mut(&from).ok_or("unknown_session")?;
        let pkt = RtpPacket::parse(packet).map_err(|e| e.reason())?;
        if pkt.ssrc() != s.ssrc {
            return Err("ssrc_mismatch");
        }
        if !s.publish {
            return Err("not_publisher");
        }
        s.rtcp.received(packet.len());
        let dialect = s.dialect;
        self.refs.clear();
        for r in wire::objects(pkt.payload(), dialect) {
            self.refs.push(r.map_err(|e| e.reason())?);
        }
        // Containers are the relay's own framing towards subscribers (aggregated delivery).
        if self.refs.iter().any(|r| r.kind == ObjectKind::Container) {
            return Err("container_from_sender");
        }
        let room = self.rooms.get_mut(&s.room).ok_or("unknown_session")?;
        let (seq, ts) = (pkt.sequence_number(), pkt.timestamp());
        let stream = room.streams.entry(pkt.ssrc()).or_insert_with(|| {
            self.stats.streams += 1;
            Stream::new(from, seq, ts, pkt.payload_type(), now)
        });
        stream.reception.packet(seq, ts, now);
        let late = match seq.wrapping_sub(stream.last_seq) {
            0 => return Err("duplicate"),
            d => d >= 0x8000,
        };
        if late {
            // Reordered: keep the objects no newer packet has refreshed; stale game state
            // is never applied over newer state. Objects without an objectID are never
            // cached, so they cannot regress anything and go through.
            self.refs
                .retain(|r| r.id.is_none_or(|id| stream.store.is_news(id, seq)));
            if self.refs.is_empty() {
                return Err("late");
            }
        }
        if stream.store.len() + stream.store.count_new(&self.refs) > self.cfg.max_objects_per_stream
        {
            return Err("too_many_objects");
        }
        let before = stream.store.len();
        stream.store.apply(pkt.payload(), &self.refs, seq, now);
        self.scratch.moved_from.clear();
        index_objects(
            &mut room.objects,
            stream,
            pkt.ssrc(),
            &self.refs,
            &mut self.scratch.moved_from,
        );
        self.stats.objects_changed(stream.store.len() - before, 0);
        stream.history.record(seq, &self.refs);
        if !late {
            stream.last_seq = seq;
            stream.last_ts = ts;
            stream.payload_type = pkt.payload_type();
        }
        stream.last_packet = now;
        let room = &self.rooms[&self.sessions[&from].room];
        let packet = Packet {
            rtp: &pkt,
            refs: &self.refs,
            complete: !late,
            from,
            dialect,
        };
        let due = forward::fan_out(
            room,
            &mut self.sessions,
            &mut self.out,
            &mut self.scratch,
            &packet,
            now,
        );
        self.pace_at = self.pace_at.into_iter().chain(due).min();
        let mut tx = Tx::new(&mut self.out, &mut self.stats, self.relay_ssrc, now);
        self.agg
            .fan_out(&self.sessions[&from].room, &packet, &mut tx);
        self.count_paced();
        let mut followers = std::mem::take(&mut self.scratch.to_drain);
        for id in followers.drain(..) {
            self.drain_session(now, id);
        }
        self.scratch.to_drain = followers;
        // A subscriber whose area follows its own avatar may have walked up to objects.
        let s = &self.sessions[&from];
        if s.interest.area.as_ref().is_some_and(|a| a.center.is_none()) {
            let name = s.room.clone();
            if let Some(room) = self.rooms.get_mut(&name) {
                forward::rescan_area(room, &mut self.sessions, from, now);
                self.drain_session(now, from);
            }
        }
        Ok(())
    }
}

/// Keeps the room's object grid in step with the objects' new positions, noting the
/// cells objects left.
fn index_objects(
    grid: &mut Grid<(u32, u64)>,
    stream: &mut Stream,
    ssrc: u32,
    refs: &[ObjectRef],
    moved_from: &mut Vec<Cell>,
) {
    for id in refs.iter().filter_map(|r| r.id) {
        let Some(e) = stream.store.get_mut(id) else {
            continue;
        };
        let cell = e.position().and_then(grid::cell_of);
        if cell != e.cell() {
            if let Some(old) = e.cell() {
                grid.remove(old, (ssrc, id));
                moved_from.push(old);
            }
            if let Some(new) = cell {
                grid.insert(new, (ssrc, id));
            }
            e.set_cell(cell);
        }
    }
}

/// The shard of `shards` that owns session `id` (see [`Relay::in_shard`]).
pub fn shard_of(id: SessionId, shards: u64) -> usize {
    (id % shards.max(1)) as usize
}

pub(super) fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
