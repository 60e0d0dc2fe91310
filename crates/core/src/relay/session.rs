//! Per-session state: rights, interest, rate limit, and per forwarded stream the
//! sequence rewriting and what was sent (for NACK).

use super::api::{Sends, SessionId};
use super::budget::FeedbackBudget;
use super::congestion::Controller;
use super::interest::Interest;
use super::leg::RtcpLeg;
use super::pacing::Pacing;
use super::room::Stream;
use super::union::Union;
use crate::rtp::SeqRewriter;
use crate::wire::Dialect;
use crate::wire::motion::Motion;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many sent packets per (subscriber, stream) a NACK can still name.
pub const SENT_RING: usize = 64;

/// One joined session.
#[derive(Debug)]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// Room name (shared with the room directory: cloning it allocates nothing).
    pub room: Arc<str>,
    /// Identity from the token.
    pub identity: String,
    /// SSRC it publishes and signs RTCP with.
    pub ssrc: u32,
    /// Every SSRC it owns: `ssrc` first, then those declared at join and those learned
    /// from its containers.
    pub streams: Vec<u32>,
    /// Which RTP inputs it may send.
    pub sends: Sends,
    /// A link's newest container packet sequence number (its packets' order).
    pub link_seq: Option<u16>,
    /// A link's peer's SSRC, which its packets carry ([`super::api::JoinRequest::peer_ssrc`]).
    pub peer_ssrc: Option<u32>,
    /// A link's next refresh: the whole state this replica's own sessions published.
    pub refresh_at: Option<Instant>,
    /// A link's peer's interest union: what it wants at full rate (everything until it
    /// sends one).
    pub union: Option<Union>,
    /// May publish.
    pub publish: bool,
    /// Its publishing is suspended ([`super::api::Input::Mute`]).
    pub muted: bool,
    /// May subscribe.
    pub subscribe: bool,
    /// A recorder ([`super::api::JoinRequest::recorder`]): sent a copy of every RTP
    /// packet its room accepts, never timed out.
    pub recorder: bool,
    /// A replay ([`super::api::JoinRequest::replay`]): its containers' streams are its
    /// own, numbered as it numbers them, and never time out.
    pub replay: bool,
    /// Wire dialect.
    pub dialect: Dialect,
    /// What it wants to receive.
    pub interest: Interest,
    /// Forwarding state per stream it receives.
    pub subs: HashMap<u32, Subscription>,
    /// Where its numbering of an SSRC whose stream ended would go on, should a stream
    /// with that SSRC start again (a publisher rejoining with its SSRC): newest last, at
    /// most [`RESUME_CAP`].
    pub resume: Vec<(u32, u16)>,
    /// How often its requests for state are answered.
    pub feedback: FeedbackBudget,
    /// Rate cap from RTCP TMMBR, in bits per second.
    pub tmmbr_bps: Option<u64>,
    /// Send rate its transport allows now (a QUIC connection under congestion), in bits
    /// per second; `None` when the transport sets no limit.
    pub path_bps: Option<u64>,
    /// Largest RTP payload the relay packs for it: the relay's budget, or less when its
    /// path carries smaller packets (a QUIC connection's datagram size).
    pub payload_budget: usize,
    /// Packet-rate limiter.
    pub bucket: TokenBucket,
    /// Last time anything arrived from it.
    pub last_seen: Instant,
    /// Objects (stream SSRC, objectID) inside its area of interest.
    pub inside: HashSet<(u32, u64)>,
    /// Its area's centre at the last rescan of the room's objects.
    pub last_scan: Option<[f32; 3]>,
    /// Rate tiers and bandwidth cap state.
    pub pacing: Pacing,
    /// Per (stream, objectID): the motion last sent and when (prediction gating).
    pub predicted: HashMap<(u32, u64), (Motion, Instant)>,
    /// Grid cells it is registered in; `None` when in the room's `everywhere` list (or,
    /// for a session that does not subscribe, nowhere).
    pub cells: Option<Vec<super::grid::Cell>>,
    /// Its RTCP reports: schedule, round-trip time, CNAME.
    pub rtcp: RtcpLeg,
    /// Its room stream's SSRC, if it asked for one at join: what it publishes there
    /// belongs to the room and outlives it.
    pub room_ssrc: Option<u32>,
    /// Objects of other streams it holds (stream, objectID): its packets' objects with
    /// these objectIDs update them ([`super::ownership`]).
    pub holds: Vec<(u32, u64)>,
    /// Ownership-message rate limiter.
    pub claims: TokenBucket,
    /// ObjectIDs it held and lost (or gave back) just now, each until when: what it had
    /// in flight then is dropped (`not_owner`) rather than taken as objects of its own.
    pub lost: Vec<(u64, Instant)>,
    /// Send budget from its transport or its congestion feedback, bits per second.
    pub send_budget_bps: Option<u64>,
    /// The controller its RFC 8888 feedback drives, once it sent some.
    pub congestion: Option<Controller>,
}

/// SSRCs whose numbering a session remembers after their stream ended.
pub const RESUME_CAP: usize = 64;

/// Notes where `sub`'s numbering of `ssrc` would go on.
fn remember_resume(resume: &mut Vec<(u32, u16)>, ssrc: u32, sub: &Subscription) {
    resume.retain(|r| r.0 != ssrc);
    if resume.len() >= RESUME_CAP {
        resume.remove(0);
    }
    resume.push((ssrc, sub.rewriter.next_seq()));
}

/// A subscriber's forwarding state for stream `ssrc`, started when the relay first sends
/// it anything. It numbers on from the last packet the subscriber got of an earlier stream
/// with that SSRC, if any, else from the source's `src_seq`: an SRTP leg's packet index
/// follows the sequence number, so a numbering that went back would be dropped by the
/// subscriber as replayed (and would reuse keystream).
pub fn subscription<'a>(
    subs: &'a mut HashMap<u32, Subscription>,
    resume: &mut Vec<(u32, u16)>,
    ssrc: u32,
    src_seq: u16,
) -> &'a mut Subscription {
    subs.entry(ssrc).or_insert_with(|| {
        let first = match resume.iter().position(|r| r.0 == ssrc) {
            Some(i) => resume.remove(i).1,
            None => src_seq,
        };
        Subscription::new(first)
    })
}

/// One stream as one subscriber receives it.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// Sequence/timestamp rewriting.
    pub rewriter: SeqRewriter,
    /// (output seq, source seq) of recently forwarded packets.
    sent: [(u16, u16); SENT_RING],
    next: usize,
}

impl Subscription {
    /// Starts at the source's current sequence number, timestamps unchanged.
    pub fn new(src_seq: u16) -> Self {
        Self {
            rewriter: SeqRewriter::new(src_seq, 0),
            sent: [(0, 0); SENT_RING],
            next: 0,
        }
    }

    /// Remembers that output `out` carried source packet `src`.
    pub fn record(&mut self, out: u16, src: u16) {
        if let Some(slot) = self.sent.get_mut(self.next % SENT_RING) {
            *slot = (out, src);
        }
        self.next = self.next.wrapping_add(1);
    }

    /// The source packets of remembered outputs sent after output `out` (by sequence
    /// number, modulo wrap-around).
    pub fn sent_after(&self, out: u16) -> impl Iterator<Item = u16> + '_ {
        let recorded = self.next.min(SENT_RING);
        self.sent[..recorded]
            .iter()
            .filter(move |(o, _)| o.wrapping_sub(out).wrapping_sub(1) < 0x7fff)
            .map(|(_, s)| *s)
    }

    /// The source packet an output sequence number carried, if remembered.
    pub fn source_of(&self, out: u16) -> Option<u16> {
        let recorded = self.next.min(SENT_RING);
        self.sent[..recorded]
            .iter()
            .find(|(o, _)| *o == out)
            .map(|(_, s)| *s)
    }
}

/// A token bucket: `rate` tokens per second, holding at most one second's worth.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: u32, now: Instant) -> Self {
        Self {
            rate: f64::from(rate),
            tokens: f64::from(rate),
            at: now,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + dt * self.rate).min(self.rate);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Session {
    /// Whether its packets can be built once for everyone with the same filters:
    /// aggregated, and nothing in its selection depends on its own state (area
    /// membership, rate tiers, a bandwidth cap, what it can predict).
    pub fn shares_view(&self) -> bool {
        self.interest.delivery.is_aggregated()
            && self.interest.area.is_none()
            && self.interest.rates.is_empty()
            && self.interest.prediction.is_none()
            && self.pacing.bucket.is_none()
            && !self.is_link()
    }

    /// Whether it is a link from a peer replica: a session that may send containers.
    pub fn is_link(&self) -> bool {
        self.sends.containers()
    }

    /// The streams it owns as they count against the room's cap on a session's streams:
    /// all of them, its own SSRC included, for a client or a link (a peer replica holds
    /// at most the cap less the session on this side of its link); for a replay, those
    /// it plays, its own SSRC apart, since the room it recorded may have held the whole
    /// cap.
    pub fn counted_streams(&self) -> usize {
        match self.replay {
            true => self.streams.iter().filter(|s| **s != self.ssrc).count(),
            false => self.streams.len(),
        }
    }

    /// Whether it is one of its room's participants: neither a link (the replicas'
    /// plumbing) nor a recorder.
    pub fn is_participant(&self) -> bool {
        !self.is_link() && !self.recorder
    }

    /// The SSRC its packets carry as their sender: a link's peer's, anyone else's own.
    pub fn sends_as(&self) -> u32 {
        self.peer_ssrc.unwrap_or(self.ssrc)
    }

    /// Whether it receives stream `ssrc`: its interest admits it (its own only with
    /// echo), and a link never gets a stream another link carried.
    pub fn wants_stream(&self, ssrc: u32, stream: &Stream) -> bool {
        self.wants_from(ssrc, stream, stream.owner)
    }

    /// Whether it receives a packet of stream `ssrc` that `sender` sent: as
    /// [`Session::wants_stream`], but its own only with echo when it sent it (a
    /// publisher sees the updates of its objects another session holds).
    pub fn wants_from(&self, ssrc: u32, stream: &Stream, sender: super::api::SessionId) -> bool {
        !(stream.carried && self.is_link()) && self.interest.admits_stream(ssrc, sender == self.id)
    }

    /// Applies the lowest of the configured, requested, TMMBR and send-budget caps.
    pub fn refresh_cap(&mut self, configured: Option<u64>, now: Instant) {
        let cap = [
            configured,
            self.interest.max_bitrate_bps,
            self.tmmbr_bps,
            self.send_budget_bps,
            self.path_bps,
        ]
        .into_iter()
        .flatten()
        .min();
        self.pacing.set_cap(cap, now);
    }

    /// Whether updates to it are paced (rate tiers or a bandwidth cap).
    pub fn paced(&self) -> bool {
        !self.interest.rates.is_empty() || self.pacing.bucket.is_some()
    }

    /// Forgets everything it holds about a stream that ended.
    pub fn forget_stream(&mut self, ssrc: u32) {
        if let Some(sub) = self.subs.remove(&ssrc) {
            remember_resume(&mut self.resume, ssrc, &sub);
        }
        self.feedback.forget_stream(ssrc);
        self.pacing.forget_stream(ssrc);
        self.inside.retain(|k| k.0 != ssrc);
        self.predicted.retain(|k, _| k.0 != ssrc);
    }

    /// Forgets its forwarding state of every stream (it changes delivery mode), keeping
    /// where each numbering would go on.
    pub fn forget_subscriptions(&mut self) {
        for (ssrc, sub) in self.subs.drain() {
            remember_resume(&mut self.resume, ssrc, &sub);
        }
    }

    /// Forgets everything it holds about an object that expired.
    pub fn forget_object(&mut self, key: (u32, u64)) {
        self.feedback.forget_object(key);
        self.pacing.forget_object(key);
        self.inside.remove(&key);
        self.predicted.remove(&key);
    }

    /// Entries in its per-stream and per-object maps (for bounded-state tests).
    pub fn state_entries(&self) -> usize {
        self.subs.len()
            + self.feedback.entries()
            + self.pacing.last_sent.len()
            + self.pacing.pending.len()
            + self.inside.len()
            + self.predicted.len()
    }

    /// Whether the session has been silent for `timeout`.
    pub fn idle(&self, now: Instant, timeout: Duration) -> bool {
        // A recorder sends nothing: its shell ends it with its room or its recording.
        !self.recorder && !self.replay && now.saturating_duration_since(self.last_seen) >= timeout
    }
}
