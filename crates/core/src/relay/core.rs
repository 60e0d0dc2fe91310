//! [`Relay`]: the sans-I/O state machine and its one door. Every input (a packet, the
//! passing of time, a control operation) enters through [`Relay::handle_input`], which
//! does the per-input set-up once, for every input; outputs leave through
//! [`Relay::poll_transmit`] (packets), [`Relay::poll_event`] (sessions it closed,
//! measurements) and [`Relay::poll_timeout`] (the next wake-up). The work is done by the
//! parts that borrow the core's [`State`]: [`Ingest`] (RTP), [`feedback`] and
//! [`reports`] (RTCP), the [`Aggregator`] (aggregated delivery). It owns no socket and
//! reads no clock.

use super::aggregate::Aggregator;
use super::api::{
    ControlError, Event, Input, JoinRequest, Joined, Reply, RoomCounts, RoomInfo, SessionId,
    SessionInfo, StreamInfo, format_session_id,
};
use super::budget::FeedbackBudget;
use super::config::RelayConfig;
use super::feedback;
use super::ingest::Ingest;
use super::interest::Interest;
use super::leg::RtcpLeg;
use super::limits::BITRATE;
use super::outbox::{OutboxMark, Transmit};
use super::ownership::{self, message as handover};
use super::pacing::Pacing;
use super::record;
use super::relevance;
use super::replica;
use super::reports::{self, Reports};
use super::rng::Rng;
use super::room::{ROOM, Room};
use super::session::{Session, TokenBucket};
use super::state::State;
use super::stats::RelayStats;
use super::union;
use crate::rtp::PacketClass;
use crate::rtp::rtcp::{self, RtcpItem};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fixed RTP header of the packets the relay builds (no CSRC, no extension).
const RTP_HEADER_BYTES: usize = 12;

/// The smallest payload budget a path can impose: below it a packet holds too little.
const MIN_PAYLOAD_BUDGET: usize = 256;

/// The shortest interval between two refreshes of a link, whatever `link_refresh` says:
/// each refresh walks the whole store.
const MIN_LINK_REFRESH: Duration = Duration::from_millis(100);

/// How long an object of a carried stream lives without news from its home: two
/// refreshes and a sweep, so that one lost refresh does not expire it.
fn carried_ttl(cfg: &RelayConfig) -> Duration {
    cfg.link_refresh.max(MIN_LINK_REFRESH) * 2 + cfg.sweep_interval
}

/// The relay core.
#[derive(Debug)]
pub struct Relay {
    st: State,
    agg: Aggregator,
    reports: Reports,
    ingest: Ingest,
    next_id: SessionId,
    /// Step between session ids: the number of shards, so that the shards' ids never
    /// collide.
    id_step: SessionId,
    next_sweep: Option<Instant>,
    /// The earliest link refresh due.
    next_refresh: Option<Instant>,
    /// Sessions the core removed by itself, until the shell polls them.
    closed: Vec<SessionId>,
    draining: bool,
    /// Scratch: sessions to drain, and objects that expired (reused: no allocation per
    /// wake-up).
    drain_ids: Vec<SessionId>,
    expired: Vec<(u32, u64)>,
}

impl Relay {
    /// A relay with no rooms. `seed` drives SSRC allocation (deterministic in tests).
    pub fn new(cfg: RelayConfig, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let relay_ssrc = loop {
            let s = rng.next_u64() as u32;
            if s != 0 {
                break s;
            }
        };
        let agg = Aggregator::new(rng.next_u64());
        // Ids start at a random point (the top bit clear, so they never wrap): a relay that
        // restarted does not hand a client's old session id to someone else's session.
        let first_id = (rng.next_u64() >> 1).max(1);
        Self {
            st: State::new(cfg, relay_ssrc, rng),
            agg,
            reports: Reports::new(relay_ssrc),
            ingest: Ingest::default(),
            next_id: first_id,
            id_step: 1,
            next_sweep: None,
            next_refresh: None,
            closed: Vec::new(),
            draining: false,
            drain_ids: Vec::new(),
            expired: Vec::new(),
        }
    }

    /// Makes this core shard `shard` of `shards`: its session ids are those with
    /// `id % shards == shard`, so no two shards ever hand out the same id. Call before
    /// the first join.
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

    /// The same relay, with `ssrcs` (the SSRCs its peer replicas send from) refused to
    /// every session.
    pub fn with_peer_ssrcs(mut self, ssrcs: &[u32]) -> Self {
        self.st.peer_ssrcs = ssrcs
            .iter()
            .copied()
            .filter(|s| *s != self.st.relay_ssrc)
            .collect();
        self
    }

    /// The relay's own SSRC.
    pub fn relay_ssrc(&self) -> u32 {
        self.st.relay_ssrc
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.st.cfg
    }

    /// A session's whole state, by id: for this crate's tests, which look inside (its
    /// type is not part of the public API; [`Relay::room_info`] is).
    #[doc(hidden)]
    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.st.sessions.get(&id)
    }

    /// The session that owns an SSRC.
    pub fn session_by_ssrc(&self, ssrc: u32) -> Option<SessionId> {
        self.st.owner_of(ssrc)
    }

    /// A session's smoothed round-trip time, once its reports gave one.
    pub fn session_rtt(&self, id: SessionId) -> Option<std::time::Duration> {
        self.st.sessions.get(&id).and_then(|s| s.rtcp.rtt())
    }

    /// A session's send budget, if one is set.
    pub fn send_budget(&self, id: SessionId) -> Option<u64> {
        self.st.sessions.get(&id).and_then(|s| s.send_budget_bps)
    }

    /// Number of joined sessions.
    pub fn session_count(&self) -> usize {
        self.st.sessions.len()
    }

    /// With no session and no room left, gives back the capacity the tables and buffers
    /// grew to under load (a table keeps its largest size otherwise, and the output
    /// buffer its largest burst). Returns whether it did: not while anything is joined,
    /// open or queued. The shell calls it when its last session leaves.
    pub fn release_idle(&mut self) -> bool {
        if !self.st.release_idle() {
            return false;
        }
        self.ingest = Ingest::default();
        self.closed = Vec::new();
        self.drain_ids = Vec::new();
        self.expired = Vec::new();
        true
    }

    /// Bytes of capacity the relay's tables and buffers hold, entries or not (an
    /// estimate by entry size, for bounded-state tests).
    pub fn capacity_bytes(&self) -> usize {
        self.st.capacity_bytes()
            + self.drain_ids.capacity() * size_of::<SessionId>()
            + self.expired.capacity() * size_of::<(u32, u64)>()
    }

    /// Number of open rooms.
    pub fn room_count(&self) -> usize {
        self.st.rooms.len()
    }

    /// Whether room `name` holds room streams published here (not carried from another
    /// replica): objects that may outlive every session of the room.
    pub fn holds_room_objects(&self, name: &str) -> bool {
        self.st
            .rooms
            .get(name)
            .is_some_and(|r| r.streams.values().any(|s| s.room_owned && !s.carried))
    }

    /// What the core has counted so far (the shell exports it).
    pub fn stats(&self) -> &RelayStats {
        &self.st.stats
    }

    /// Every room's size here.
    pub fn room_counts(&self) -> Vec<RoomCounts> {
        self.st
            .rooms
            .iter()
            .map(|(name, room)| RoomCounts {
                room: name.to_string(),
                sessions: room
                    .members
                    .iter()
                    .filter_map(|id| self.st.sessions.get(id))
                    .filter(|s| s.is_participant())
                    .count(),
                streams: room.streams.len(),
                objects: room.streams.values().map(|s| s.store.len()).sum(),
            })
            .collect()
    }

    /// A room's sessions and streams.
    pub fn room_info(&self, name: &str) -> Option<RoomInfo> {
        let room = self.st.rooms.get(name)?;
        let sessions = room
            .members
            .iter()
            .filter_map(|id| self.st.sessions.get(id))
            // Links are the replicas' plumbing, recorders a service: not participants.
            .filter(|s| s.is_participant())
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
                muted: s.muted,
                streams: s.streams.clone(),
            })
            .collect();
        let mut streams: Vec<StreamInfo> = room
            .streams
            .iter()
            .map(|(ssrc, st)| StreamInfo {
                ssrc: *ssrc,
                objects: st.store.len(),
                bytes: st.store.bytes(),
                room_owned: st.room_owned,
                orphaned: st.owner == ROOM,
            })
            .collect();
        streams.sort_by_key(|s| s.ssrc);
        Some(RoomInfo {
            room: name.to_owned(),
            sessions,
            streams,
        })
    }

    /// The one door: handles `input` at `now`. Packets always answer [`Reply::Done`]
    /// (a bad one is dropped and counted by reason in [`Relay::stats`]); control inputs
    /// answer what they did or why they could not. After every input, poll
    /// [`Relay::poll_transmit`] and [`Relay::poll_event`] until `None`, then wait until
    /// [`Relay::poll_timeout`].
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) -> Result<Reply, ControlError> {
        self.st.out.now = Some(now);
        self.st.busy_room = None;
        self.st.busy = match &input {
            Input::Rtp { from, .. } | Input::Rtcp { from, .. } => Some(*from),
            Input::Leave(id)
            | Input::SetInterest { session: id, .. }
            | Input::SetPath { session: id, .. }
            | Input::SetSendBudget { session: id, .. } => Some(*id),
            _ => None,
        };
        let reply = match input {
            Input::Rtp { from, packet } => {
                self.on_rtp(now, from, packet);
                Reply::Done
            }
            Input::Rtcp { from, packet } => {
                self.on_rtcp(now, from, packet);
                Reply::Done
            }
            Input::Timeout => {
                self.on_timeout(now);
                Reply::Done
            }
            Input::BatchEnd => {
                self.agg.flush(&mut self.st, now);
                Reply::Done
            }
            Input::Join(req) => Reply::Joined(self.join(now, req)?),
            Input::Leave(id) => {
                self.leave(now, id)?;
                Reply::Done
            }
            Input::SetInterest { session, interest } => {
                self.set_interest(now, session, interest)?;
                Reply::Done
            }
            Input::SetPath {
                session,
                max_packet,
                send_bps,
            } => {
                self.set_path(now, session, max_packet, send_bps);
                Reply::Done
            }
            Input::SetSendBudget { session, bps } => {
                self.set_send_budget(now, session, bps)?;
                Reply::Done
            }
            Input::SetWallclock { since_unix } => {
                self.st.set_wallclock(now, since_unix);
                Reply::Done
            }
            Input::Checkpoint(session) => {
                record::checkpoint(&mut self.st, session);
                Reply::Done
            }
            Input::SetDraining(on) => {
                self.draining = on;
                Reply::Done
            }
            Input::Evict { room, identity } => Reply::Sessions(self.evict(now, room, identity)),
            Input::Mute {
                room,
                identity,
                muted,
            } => Reply::Sessions(self.mute(now, room, identity, muted)),
        };
        self.st.count_overflow();
        Ok(reply)
    }

    /// The next packet to send. Call until `None` after every input.
    pub fn poll_transmit(&mut self) -> Option<Transmit<'_>> {
        self.st.out.pop()
    }

    /// The buffer the packets [`Relay::poll_transmit`] gave since the last input are in,
    /// each at its [`Transmit::at`] and followed by the room [`Relay::reserve_trailer`]
    /// reserved: a transport protects them there, in place, and sends them from there, so
    /// nothing copies a packet between the core's writing it and the kernel's reading it.
    pub fn transmitted(&mut self) -> &mut [u8] {
        self.st.out.transmitted()
    }

    /// Leaves `bytes` spare after each packet from now on, for a transport that protects
    /// packets in place ([`Relay::transmitted`]): the largest trailer it appends.
    pub fn reserve_trailer(&mut self, bytes: usize) {
        self.st.out.reserve_trailer(bytes);
    }

    /// The next event for the shell: streams begun and ended, in order, then sessions
    /// the core closed by itself (the shell forgets their transport state), then
    /// measurements. Call until `None` after every input.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.st.stream_events.pop_front() {
            return Some(e);
        }
        if let Some(id) = self.closed.pop() {
            return Some(Event::SessionClosed(id));
        }
        self.st.stats.pop_event().map(Event::Stat)
    }

    /// When [`Input::Timeout`] should next be handled.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
            .into_iter()
            .chain(self.next_refresh)
            .chain(self.st.pace_at)
            .chain(self.agg.due())
            .chain(self.reports.due())
            .min()
    }

    /// Where the output queue stands: a shell takes this before an input so that, if the
    /// input hits a defect, [`Relay::quarantine`] can drop what it half-queued.
    pub fn outbox_mark(&self) -> OutboxMark {
        self.st.out.mark()
    }

    /// Recovers from a defect: a panic the shell caught while the core handled an input.
    /// The room of the session being handled may be half-updated, so it is dropped whole
    /// (its sessions are reported by [`Relay::poll_event`]), with what the input queued
    /// since `mark`; every other room is untouched. Returns the room dropped, if any.
    pub fn quarantine(&mut self, now: Instant, mark: OutboxMark) -> Option<Arc<str>> {
        self.st.out.rewind(mark);
        // Wake at once to reschedule every other session's timers.
        self.st.pace_at = Some(now);
        self.next_sweep = Some(now);
        let busy = self.st.busy.take().and_then(|id| self.st.room_of(id));
        let name = busy.or_else(|| self.st.busy_room.take())?;
        self.drop_room(&name);
        Some(name)
    }

    /// A defect while handling `session`'s input: panics (unit tests of the shells'
    /// fault isolation only: the server's tests turn on the feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fn inject_fault(&mut self, session: SessionId) {
        self.st.busy = Some(session);
        panic!("injected fault");
    }

    fn join(&mut self, now: Instant, req: JoinRequest) -> Result<Joined, ControlError> {
        if self.draining {
            return Err(ControlError::Draining);
        }
        req.interest
            .validate()
            .map_err(ControlError::InvalidInterest)?;
        let cfg = &self.st.cfg;
        if self.st.sessions.len() >= cfg.max_sessions {
            return Err(ControlError::RelayFull(cfg.max_sessions));
        }
        let room = self.st.rooms.get(req.room.as_str());
        if room.is_none() && self.st.rooms.len() >= cfg.max_rooms {
            return Err(ControlError::TooManyRooms(cfg.max_rooms));
        }
        let members = room.map_or(0, Room::sessions);
        if members >= cfg.max_sessions_per_room && !req.recorder {
            return Err(ControlError::RoomFull(req.room));
        }
        let mut declared = self.declared_ssrcs(&req)?;
        let ssrc = match req.ssrc {
            Some(s) if self.st.ssrc_free(s) && !declared.contains(&s) => s,
            Some(s) if req.require_ssrc => return Err(ControlError::SsrcTaken(s)),
            _ => self.fresh_ssrc_besides(&declared),
        };
        declared.push(ssrc);
        let room_ssrc = match (req.room_stream, req.room_ssrc) {
            (false, _) => None,
            (true, Some(s)) if self.adoptable(&req, s) => Some(s),
            (true, Some(s)) if self.st.ssrc_free(s) && !declared.contains(&s) => Some(s),
            // Taken meanwhile (another identity's now, or carried here from another
            // replica): the session gets a room stream all the same, a new one.
            (true, _) => Some(self.fresh_ssrc_besides(&declared)),
        };
        declared.pop();
        let id = self.next_id;
        self.next_id += self.id_step;
        let name: Arc<str> = Arc::from(req.room);
        let room = self.st.rooms.entry(name.clone()).or_default();
        room.members.push(id);
        if req.recorder {
            room.recorders.push(id);
        }
        let streams = room.streams.keys().copied().collect();
        let owned: Vec<u32> = std::iter::once(ssrc)
            .chain(declared)
            .chain(room_ssrc)
            .collect();
        for s in &owned {
            self.st.by_ssrc.insert(*s, id);
        }
        // A room stream that outlived this identity's earlier session is its again.
        if let Some(stream) = room_ssrc.and_then(|s| room.streams.get_mut(&s)) {
            stream.owner = id;
            // Its new session numbers its packets afresh.
            stream.renumbered = true;
        }
        let cfg = &self.st.cfg;
        let session = Session {
            id,
            room: name,
            identity: req.identity,
            ssrc,
            streams: owned,
            sends: req.sends,
            link_seq: None,
            // Only a link is known by its peer's SSRC.
            peer_ssrc: req.peer_ssrc.filter(|_| req.sends.containers()),
            // A link is sent the whole room at once, then every `link_refresh`.
            refresh_at: req.sends.containers().then_some(now),
            union: None,
            // A recorder is sent copies (`record`), never the fan-out.
            publish: req.publish && !req.recorder,
            muted: req.muted,
            subscribe: req.subscribe && !req.recorder,
            recorder: req.recorder,
            replay: req.replay && req.sends.containers(),
            dialect: req.dialect,
            interest: req.interest,
            subs: HashMap::new(),
            resume: Vec::new(),
            feedback: FeedbackBudget::default(),
            tmmbr_bps: None,
            path_bps: None,
            payload_budget: cfg.payload_budget,
            bucket: TokenBucket::new(cfg.max_packets_per_sec, now),
            last_seen: now,
            inside: HashSet::new(),
            last_scan: None,
            pacing: Pacing::new(cfg.relay_send_bitrate_bps, cfg.relay_send_burst_bytes, now),
            predicted: HashMap::new(),
            cells: None,
            rtcp: RtcpLeg::new(now),
            room_ssrc,
            holds: Vec::new(),
            lost: Vec::new(),
            claims: TokenBucket::new(ownership::REQUESTS_PER_SEC, now),
            send_budget_bps: None,
            congestion: None,
        };
        if session.refresh_at.is_some() {
            self.next_refresh = Some(now);
        }
        self.st.sessions.insert(id, session);
        self.reports.schedule_first(&mut self.st, id, now);
        self.replace_interest(now, id);
        self.next_sweep
            .get_or_insert(now + self.st.cfg.sweep_interval);
        Ok(Joined {
            session: id,
            ssrc,
            relay_ssrc: self.st.relay_ssrc,
            streams,
            room_ssrc,
        })
    }

    /// A random free SSRC not among `taken`.
    fn fresh_ssrc_besides(&mut self, taken: &[u32]) -> u32 {
        loop {
            let s = self.st.fresh_ssrc();
            if !taken.contains(&s) {
                break s;
            }
        }
    }

    /// Whether `ssrc` is a room stream of the joined room that outlived a publisher of
    /// the joining identity, which may take it up again.
    fn adoptable(&self, req: &JoinRequest, ssrc: u32) -> bool {
        self.st
            .rooms
            .get(req.room.as_str())
            .and_then(|r| r.streams.get(&ssrc))
            .is_some_and(|s| {
                s.owner == ROOM
                    && !s.carried
                    && s.dialect == req.dialect
                    && s.publisher.as_deref() == Some(&*req.identity)
            })
    }

    /// The further SSRCs a join declares, once each, every one free; at most as many as
    /// a room holds sessions.
    fn declared_ssrcs(&self, req: &JoinRequest) -> Result<Vec<u32>, ControlError> {
        let mut declared: Vec<u32> = Vec::with_capacity(req.ssrcs.len());
        for &s in &req.ssrcs {
            if !self.st.ssrc_free(s) || declared.contains(&s) || Some(s) == req.ssrc {
                return Err(ControlError::SsrcTaken(s));
            }
            declared.push(s);
        }
        if declared.len() >= self.st.cfg.max_sessions_per_room {
            return Err(ControlError::TooManyStreams(declared.len()));
        }
        Ok(declared)
    }

    /// Removes a session; its streams end and the others get an RTCP BYE for them.
    fn leave(&mut self, now: Instant, id: SessionId) -> Result<(), ControlError> {
        let s = self.st.session_mut(id)?;
        let (name, owned) = (s.room.clone(), std::mem::take(&mut s.streams));
        ownership::give_back(&mut self.st, now, id, false);
        for &ssrc in &owned {
            self.publisher_left(now, &name, ssrc);
        }
        if let (Some(room), Some(s)) = (self.st.rooms.get_mut(&name), self.st.sessions.get_mut(&id))
        {
            relevance::unplace(room, s);
        }
        self.st.sessions.remove(&id);
        self.st.out.sent.forget_session(id);
        self.agg.end(&mut self.st, id);
        for ssrc in owned {
            // A room stream that outlived it keeps its SSRC, now the room's.
            if self.st.by_ssrc.get(&ssrc) == Some(&id) {
                self.st.by_ssrc.remove(&ssrc);
            }
        }
        if let Some(room) = self.st.rooms.get_mut(&name) {
            room.members.retain(|m| *m != id);
            room.recorders.retain(|m| *m != id);
        }
        self.drop_room_if_unused(&name);
        Ok(())
    }

    /// Forgets a room nothing keeps any more.
    fn drop_room_if_unused(&mut self, name: &str) {
        if self.st.rooms.get(name).is_some_and(Room::is_unused) {
            self.st.rooms.remove(name);
        }
    }

    /// The sessions of `room` other than links, of `identity` only when given.
    fn members_of(&self, room: &str, identity: Option<&str>) -> Vec<SessionId> {
        let Some(r) = self.st.rooms.get(room) else {
            return Vec::new();
        };
        r.members
            .iter()
            .filter_map(|id| self.st.sessions.get(id))
            .filter(|s| !s.is_link() && identity.is_none_or(|i| s.identity == i))
            .map(|s| s.id)
            .collect()
    }

    /// Ends sessions by the relay's will ([`Input::Evict`]); how many.
    fn evict(&mut self, now: Instant, room: &str, identity: Option<&str>) -> usize {
        let ids = self.members_of(room, identity);
        let relay = self.st.relay_ssrc;
        for &id in &ids {
            let (buf, start) = self.st.out.begin();
            if rtcp::write_bye(buf, &[relay]).is_ok() {
                self.st.out.commit(id, PacketClass::Rtcp, start);
            } else {
                self.st.out.abandon(start);
            }
            if self.leave(now, id).is_ok() {
                self.closed.push(id);
            }
        }
        if identity.is_none() {
            // A closed room's objects go with it, room streams too.
            let orphans: Vec<u32> = self.st.rooms.get(room).map_or_else(Vec::new, |r| {
                r.streams
                    .iter()
                    .filter(|(_, s)| s.owner == ROOM)
                    .map(|(ssrc, _)| *ssrc)
                    .collect()
            });
            for ssrc in orphans {
                self.end_stream(now, room, ssrc);
            }
        }
        ids.len()
    }

    /// Suspends or restores publishing ([`Input::Mute`]); how many sessions it touched.
    fn mute(&mut self, now: Instant, room: &str, identity: &str, muted: bool) -> usize {
        let ids = self.members_of(room, Some(identity));
        for &id in &ids {
            if let Some(s) = self.st.sessions.get_mut(&id) {
                s.muted = muted;
            }
            // What a muted session held would freeze: it goes back to the publishers.
            if muted {
                ownership::give_back(&mut self.st, now, id, true);
            }
        }
        ids.len()
    }

    fn set_interest(
        &mut self,
        now: Instant,
        id: SessionId,
        interest: Interest,
    ) -> Result<(), ControlError> {
        interest.validate().map_err(ControlError::InvalidInterest)?;
        let s = self.st.session_mut(id)?;
        s.interest = interest;
        s.inside.clear();
        s.last_scan = None;
        s.pacing.pending.clear();
        s.predicted.clear();
        self.replace_interest(now, id);
        Ok(())
    }

    /// Applies a session's new (or first) interest: its cap, its place in the room's
    /// grid, its delivery.
    fn replace_interest(&mut self, now: Instant, id: SessionId) {
        if let Some(s) = self.st.sessions.get_mut(&id) {
            s.refresh_cap(self.st.cfg.subscriber_max_bitrate_bps, now);
            if let Some(room) = self.st.rooms.get_mut(&s.room) {
                let center = s.interest.area.as_ref().and_then(|a| a.center);
                relevance::place(room, s, center);
            }
        }
        self.agg.sync(&mut self.st, id, now);
    }

    fn set_path(&mut self, now: Instant, id: SessionId, max_packet: usize, send_bps: Option<u64>) {
        let Some(s) = self.st.sessions.get_mut(&id) else {
            return;
        };
        let fits = max_packet
            .saturating_sub(RTP_HEADER_BYTES)
            .max(MIN_PAYLOAD_BUDGET);
        let budget = self.st.cfg.payload_budget.min(fits);
        let moved = s.payload_budget != budget;
        s.payload_budget = budget;
        if s.path_bps != send_bps {
            s.path_bps = send_bps;
            s.refresh_cap(self.st.cfg.subscriber_max_bitrate_bps, now);
        }
        if moved {
            // An aggregated subscriber's packets are built for its view: a narrower path
            // needs a view whose packets fit it.
            self.agg.sync(&mut self.st, id, now);
        }
    }

    fn set_send_budget(
        &mut self,
        now: Instant,
        id: SessionId,
        bps: Option<u64>,
    ) -> Result<(), ControlError> {
        let configured = self.st.cfg.subscriber_max_bitrate_bps;
        let s = self.st.session_mut(id)?;
        let bps = bps.map(|b| b.clamp(BITRATE.0, BITRATE.1));
        let changed_kind = s.send_budget_bps.is_some() != bps.is_some();
        s.send_budget_bps = bps;
        s.refresh_cap(configured, now);
        if changed_kind {
            // A capped subscriber no longer shares an aggregated view (and back).
            self.agg.sync(&mut self.st, id, now);
        }
        Ok(())
    }

    fn on_rtp(&mut self, now: Instant, from: SessionId, packet: &[u8]) {
        if let Err(reason) = self
            .ingest
            .rtp(&mut self.st, &mut self.agg, now, from, packet)
        {
            self.st.stats.drop(reason);
        }
        self.agg.mix(&mut self.st, now, false);
    }

    fn on_rtcp(&mut self, now: Instant, from: SessionId, packet: &[u8]) {
        if let Err(reason) = self.dispatch_rtcp(now, from, packet) {
            self.st.stats.drop(reason);
        }
        // Snapshots asked for by feedback go out now, also in aggregated delivery.
        self.agg.mix(&mut self.st, now, true);
    }

    /// Hands each item of an RTCP compound to the part that handles it. Feedback must be
    /// signed with the session's own SSRC; reports may speak for any stream it owns.
    fn dispatch_rtcp(
        &mut self,
        now: Instant,
        from: SessionId,
        packet: &[u8],
    ) -> Result<(), &'static str> {
        let own = self.st.admit(now, from, packet.len())?.sends_as();
        let items = rtcp::parse_compound(packet).map_err(|e| e.reason())?;
        for item in items {
            match item {
                RtcpItem::Fir {
                    sender_ssrc,
                    entries,
                } if sender_ssrc == own => {
                    for e in entries {
                        self.st.stats.feedback.add("fir", 1);
                        feedback::on_fir(&mut self.st, now, from, e);
                    }
                }
                RtcpItem::Pli {
                    sender_ssrc,
                    media_ssrc,
                } if sender_ssrc == own => {
                    self.st.stats.feedback.add("pli", 1);
                    feedback::refresh(&mut self.st, now, from, media_ssrc);
                }
                RtcpItem::Nack {
                    sender_ssrc,
                    media_ssrc,
                    lost,
                } if sender_ssrc == own => {
                    self.st.stats.feedback.add("nack", 1);
                    if media_ssrc == self.st.relay_ssrc {
                        self.agg.repair(&mut self.st, now, from, &lost);
                    } else {
                        feedback::repair(&mut self.st, now, from, media_ssrc, &lost);
                    }
                }
                RtcpItem::Tmmbr {
                    sender_ssrc,
                    entries,
                } if sender_ssrc == own => {
                    self.st.stats.feedback.add("tmmbr", 1);
                    if feedback::tmmbr(&mut self.st, now, from, &entries) {
                        // A capped subscriber no longer shares an aggregated view.
                        self.agg.sync(&mut self.st, from, now);
                    }
                }
                RtcpItem::SenderReport {
                    ssrc,
                    info,
                    reports,
                } => reports::on_sender_report(&mut self.st, now, from, ssrc, info, &reports),
                RtcpItem::ReceiverReport { ssrc, reports } => {
                    reports::on_receiver_report(&mut self.st, now, from, ssrc, &reports);
                }
                RtcpItem::Sdes { chunks } => reports::on_sdes(&mut self.st, from, own, &chunks),
                RtcpItem::Ccfb(fb) => {
                    self.st.stats.feedback.add("ccfb", 1);
                    if let Some(rate) = feedback::ccfb(&mut self.st, now, from, own, &fb)
                        && self.set_send_budget(now, from, Some(rate)).is_err()
                    {
                        self.st.stats.drop("unknown_session");
                    }
                }
                RtcpItem::Bye { ssrcs } => self.on_bye(now, from, &ssrcs),
                RtcpItem::App {
                    subtype,
                    ssrc,
                    name: handover::NAME,
                    data,
                } => {
                    let at = (subtype, ssrc, &data[..]);
                    if let Err(reason) = ownership::on_app(&mut self.st, now, from, own, at) {
                        self.st.stats.drop(reason);
                    }
                }
                RtcpItem::App {
                    subtype: union::SUBTYPE,
                    ssrc,
                    name,
                    data,
                } => replica::on_app(&mut self.st, from, own, (name, ssrc, &data)),
                RtcpItem::Fir { .. }
                | RtcpItem::Pli { .. }
                | RtcpItem::Nack { .. }
                | RtcpItem::Tmmbr { .. } => self.st.stats.drop("ssrc_mismatch"),
                _ => {}
            }
        }
        Ok(())
    }

    /// An RTCP BYE: ends those of the named streams the session owns.
    fn on_bye(&mut self, now: Instant, from: SessionId, ssrcs: &[u32]) {
        let Some(name) = self.st.room_of(from) else {
            return;
        };
        let mut counted = false;
        for &ssrc in ssrcs {
            if self.st.owner_of(ssrc) == Some(from) {
                if !counted {
                    self.st.stats.feedback.add("bye", 1);
                    counted = true;
                }
                self.publisher_left(now, &name, ssrc);
            }
        }
    }

    /// Its publisher left a stream (BYE, or the session went): a room stream outlives it,
    /// owned by the room, and nobody sees a change; any other ends.
    fn publisher_left(&mut self, now: Instant, room: &str, ssrc: u32) {
        let Some(stream) = self
            .st
            .rooms
            .get_mut(room)
            .and_then(|r| r.streams.get_mut(&ssrc))
        else {
            return;
        };
        if stream.room_owned && !stream.carried {
            let publisher = std::mem::replace(&mut stream.owner, ROOM);
            self.st.by_ssrc.insert(ssrc, ROOM);
            if let Some(s) = self.st.sessions.get_mut(&publisher) {
                s.streams.retain(|x| *x != ssrc);
                s.room_ssrc = None;
            }
            return;
        }
        self.end_stream(now, room, ssrc);
    }

    /// Ends a stream: its state goes, its objects' holders lose them, the room's
    /// subscribers get an RTCP BYE for it, and aggregated delivery forgets it.
    fn end_stream(&mut self, now: Instant, room: &str, ssrc: u32) {
        ownership::objects_gone(&mut self.st, now, room, |key| key.0 == ssrc);
        if self.st.end_stream(room, ssrc) {
            self.agg.sender_left(room, ssrc);
        }
        self.drop_room_if_unused(room);
    }

    /// Paced sends, aggregated flushes and reports that are due; then, at each sweep,
    /// expiry of objects, streams and sessions.
    fn on_timeout(&mut self, now: Instant) {
        if self.next_refresh.is_some_and(|t| now >= t) {
            self.refresh_links(now);
        }
        if self.st.pace_at.is_some_and(|t| now >= t) {
            self.drain_paced(now);
        }
        self.agg.mix(&mut self.st, now, false);
        self.agg.flush(&mut self.st, now);
        self.reports.send_due(&mut self.st, &self.agg, now);
        if self.next_sweep.is_some_and(|t| now >= t) {
            self.sweep(now);
            replica::send_unions(&mut self.st);
        }
    }

    /// The sessions `keep` picks, in the reused scratch list: the caller hands it back
    /// to `drain_ids` when done, so a wake-up allocates nothing.
    fn sessions_where(&mut self, keep: impl Fn(&Session) -> bool) -> Vec<SessionId> {
        let mut ids = std::mem::take(&mut self.drain_ids);
        ids.clear();
        ids.extend(self.st.sessions.values().filter(|s| keep(s)).map(|s| s.id));
        ids
    }

    /// Sends each link whose refresh is due the whole state of the streams this replica's
    /// own sessions publish (a link never gets a carried stream), and schedules the next.
    fn refresh_links(&mut self, now: Instant) {
        let every = self.st.cfg.link_refresh.max(MIN_LINK_REFRESH);
        let ids = self.sessions_where(|s| s.refresh_at.is_some_and(|t| now >= t));
        let relay = self.st.relay_ssrc;
        for &id in &ids {
            self.st.busy = Some(id);
            if let Some(s) = self.st.sessions.get_mut(&id) {
                s.refresh_at = Some(now + every);
            }
            feedback::refresh(&mut self.st, now, id, relay);
        }
        self.drain_ids = ids;
        self.next_refresh = self.st.sessions.values().filter_map(|s| s.refresh_at).min();
    }

    /// Sends every subscriber's due pending updates and deferred snapshots, and schedules
    /// the next drain.
    fn drain_paced(&mut self, now: Instant) {
        let ids = self.sessions_where(|s| {
            !s.pacing.pending.is_empty() || s.feedback.next_deferred().is_some()
        });
        self.st.pace_at = None;
        for &id in &ids {
            self.st.busy = Some(id);
            feedback::deferred_snapshots(&mut self.st, now, id);
            self.st.drain_session(now, id);
        }
        self.drain_ids = ids;
    }

    /// Expires objects, streams and sessions whose time has come.
    fn sweep(&mut self, now: Instant) {
        let st = &mut self.st;
        let object_cutoff = now.checked_sub(st.cfg.object_ttl);
        // A carried stream's objects live as long as their home refreshes them: one its
        // home expired stops coming, and goes here two refreshes later.
        let carried_cutoff = now.checked_sub(st.cfg.object_ttl.min(carried_ttl(&st.cfg)));
        // Room objects expire by the room's rule, and their streams never time out.
        let room_cutoff = now.checked_sub(st.cfg.room_object_ttl);
        let mut ended = Vec::new();
        let mut held_gone = Vec::new();
        let mut expired = std::mem::take(&mut self.expired);
        for (name, room) in &mut st.rooms {
            ownership::prune(room, now, st.cfg.handover_guard);
            let Room {
                streams,
                objects,
                members,
                holds,
                ..
            } = room;
            st.busy = members.first().copied();
            st.busy_room = Some(name.clone());
            expired.clear();
            for (ssrc, stream) in streams {
                let cutoff = match (stream.carried, stream.room_owned) {
                    // A replay ends its streams and their objects as its recording does.
                    _ if stream.replayed => None,
                    (true, _) => carried_cutoff,
                    (false, true) => room_cutoff,
                    (false, false) => object_cutoff,
                };
                if let Some(cutoff) = cutoff {
                    let n = stream.store.expire(cutoff, |id, e| {
                        if let Some(cell) = e.cell() {
                            objects.remove(cell, (*ssrc, id));
                        }
                        expired.push((*ssrc, id));
                    });
                    st.stats.objects_changed(0, n);
                }
                let silent = now.saturating_duration_since(stream.last_packet)
                    >= st.cfg.stream_timeout
                    && (!stream.room_owned || stream.carried)
                    && !stream.replayed;
                let emptied = stream.owner == ROOM && stream.store.is_empty();
                if silent || emptied {
                    ended.push((name.clone(), *ssrc));
                }
            }
            held_gone.extend(
                expired
                    .iter()
                    .filter(|key| holds.contains_key(key))
                    .map(|key| (name.clone(), *key)),
            );
            // Per-subscriber state keyed by an object goes with the object.
            for m in members.iter() {
                let Some(s) = st.sessions.get_mut(m) else {
                    continue;
                };
                for key in &expired {
                    s.forget_object(*key);
                }
                s.feedback.prune(now, st.cfg.snapshot_interval);
            }
        }
        self.expired = expired;
        for (room, key) in held_gone {
            ownership::objects_gone(&mut self.st, now, &room, |k| k == key);
        }
        for (room, ssrc) in ended {
            self.end_stream(now, &room, ssrc);
        }
        let timeout = self.st.cfg.session_timeout;
        let idle: Vec<SessionId> = self
            .st
            .sessions
            .values()
            .filter(|s| s.idle(now, timeout))
            .map(|s| s.id)
            .collect();
        for id in idle {
            if self.leave(now, id).is_ok() {
                self.closed.push(id);
            }
        }
        // Rooms without sessions may hold room objects, which expire at a sweep.
        self.next_sweep = (!self.st.rooms.is_empty()).then(|| now + self.st.cfg.sweep_interval);
    }

    /// Removes a room and its sessions at once, without touching their state.
    fn drop_room(&mut self, name: &str) {
        let Some(room) = self.st.rooms.remove(name) else {
            return;
        };
        let st = &mut self.st;
        st.stats.streams = st.stats.streams.saturating_sub(room.streams.len() as u64);
        let objects: usize = room.streams.values().map(|s| s.store.len()).sum();
        st.stats.objects_changed(0, objects);
        for (ssrc, stream) in &room.streams {
            if stream.owner == ROOM {
                st.by_ssrc.remove(ssrc);
            }
        }
        for id in room.members {
            st.out.sent.forget_session(id);
            if let Some(s) = st.sessions.remove(&id) {
                for ssrc in &s.streams {
                    st.by_ssrc.remove(ssrc);
                }
                self.closed.push(id);
            }
            self.agg.end(st, id);
        }
    }
}
