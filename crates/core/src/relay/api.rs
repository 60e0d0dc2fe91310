//! The core's surface: its one input type ([`Input`]) with what an input answers
//! ([`Reply`]) and how a control input can fail ([`ControlError`]); the events it reports
//! ([`Event`]); and what joining asks and answers.

use super::delivery::{Delivery, DeliveryMode};
use super::interest::Interest;
use super::stats::StatEvent;
use crate::wire::Dialect;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// A session's handle, unique for the relay's lifetime.
pub type SessionId = u64;

/// Everything a join needs (the HTTP layer has checked the token).
#[derive(Debug, Clone, Default)]
pub struct JoinRequest {
    /// Room name.
    pub room: String,
    /// Who joins (the token's subject).
    pub identity: String,
    /// May publish a stream.
    pub publish: bool,
    /// May receive the room's streams.
    pub subscribe: bool,
    /// Wanted SSRC.
    pub ssrc: Option<u32>,
    /// Fail with [`ControlError::SsrcTaken`] instead of picking another SSRC.
    pub require_ssrc: bool,
    /// Wire dialect the session speaks.
    pub dialect: Dialect,
    /// Initial interest.
    pub interest: Interest,
    /// Further SSRCs the session publishes under, besides its own (each must be free).
    pub ssrcs: Vec<u32>,
    /// Which RTP inputs the session may send.
    pub sends: Sends,
    /// Joins with its publishing suspended ([`Input::Mute`]): a backend muted this
    /// identity in the room before it joined again.
    pub muted: bool,
    /// Asks for a room stream: one more SSRC whose objects belong to the room, so they
    /// outlive the session (`docs/relay.md`, "Room objects and ownership").
    pub room_stream: bool,
    /// The room stream's wanted SSRC (a resume names its own): free, or a room stream
    /// of this room that outlived a publisher of the same identity, taken up again.
    pub room_ssrc: Option<u32>,
    /// A link's: the SSRC its peer replica sends from (the peer's relay SSRC). The link
    /// is known by it on the wire but does not own it: the peer's links of every room
    /// it shares with this replica send from it.
    pub peer_ssrc: Option<u32>,
    /// A recorder's (`docs/recording.md`): a session that publishes and subscribes to
    /// nothing but is sent a copy of every RTP packet the room accepts, with its source
    /// header, and the room's whole state on [`Input::Checkpoint`]. It is never timed
    /// out, is not counted against the room's cap, and does not keep the room alive.
    pub recorder: bool,
    /// A replay's (`docs/recording.md`, "Replay"): a session that plays a recording into
    /// its room. It sends containers, one recorded sender's objects each, under the
    /// outer header's sequence number and timestamp, which its streams keep as their
    /// own: they are the room's streams as any sender's are (reported, sent over links),
    /// and neither they nor their objects time out, since a paused replay sends nothing.
    pub replay: bool,
}

impl JoinRequest {
    /// A link from the peer replica `peer` of `room`, which sends its aggregated stream
    /// from `peer_ssrc` (`docs/relay.md`, "Links"): it publishes containers only, and
    /// receives this replica's own streams aggregated with no delay of its own (the
    /// peer's subscribers' delays apply there).
    pub fn link(room: &str, peer: String, peer_ssrc: u32) -> Self {
        Self {
            room: room.into(),
            identity: peer,
            publish: true,
            subscribe: true,
            peer_ssrc: Some(peer_ssrc),
            sends: Sends::Containers,
            interest: Interest {
                delivery: Delivery::aggregated(Some(0)),
                ..Interest::default()
            },
            ..Self::default()
        }
    }
}

impl JoinRequest {
    /// A replay into `room` ([`JoinRequest::replay`]).
    pub fn replaying(room: &str) -> Self {
        Self {
            room: room.into(),
            identity: "gsrelay-replay".into(),
            publish: true,
            sends: Sends::Containers,
            replay: true,
            ..Self::default()
        }
    }

    /// A recorder of `room` ([`JoinRequest::recorder`]).
    pub fn recording(room: &str) -> Self {
        Self {
            room: room.into(),
            identity: "gsrelay-recorder".into(),
            recorder: true,
            ..Self::default()
        }
    }
}

/// Which RTP inputs a session may send; checked on every packet, and a packet of another
/// kind is dropped and counted (`container_from_sender`, `not_container`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sends {
    /// Its own streams: game-state payloads under SSRCs it owns (any client).
    #[default]
    Streams,
    /// Containers only (a link from a peer relay): each container carries one sender's
    /// objects, and a sender SSRC first seen in a container becomes a stream the session
    /// owns, as if declared at join.
    Containers,
    /// Either, packet by packet (never both in one packet).
    Both,
}

impl Sends {
    /// Whether plain payloads (no container) are allowed.
    pub fn streams(self) -> bool {
        matches!(self, Self::Streams | Self::Both)
    }

    /// Whether container payloads are allowed.
    pub fn containers(self) -> bool {
        matches!(self, Self::Containers | Self::Both)
    }
}

/// One input to the core ([`super::Relay::handle_input`]): a packet from a session, the
/// passing of time, or a control operation. Every input goes through the same door, so
/// every input gets the same set-up (the time, the session a defect would implicate).
#[derive(Debug)]
pub enum Input<'a> {
    /// One plaintext RTP packet from a session.
    Rtp {
        /// The session it came from (the shell authenticated it).
        from: SessionId,
        /// The packet.
        packet: &'a [u8],
    },
    /// One plaintext RTCP compound packet from a session.
    Rtcp {
        /// The session it came from.
        from: SessionId,
        /// The packet.
        packet: &'a [u8],
    },
    /// Time passed: whatever is due by now is done (see
    /// [`super::Relay::poll_timeout`]).
    Timeout,
    /// A batch of inputs ended: aggregated packets whose delay is up go now, so that
    /// `max_delay_ms: 0` sends what one batch brought as one packet per view.
    BatchEnd,
    /// Joins a session to a room, creating the room if needed: answers
    /// [`Reply::Joined`].
    Join(JoinRequest),
    /// Removes a session; its streams end and the others get an RTCP BYE for them.
    Leave(SessionId),
    /// Replaces a session's interest.
    SetInterest {
        /// The session.
        session: SessionId,
        /// Its new interest.
        interest: Interest,
    },
    /// What a session's path carries, as its transport measures it: the largest RTP
    /// packet that fits one datagram, and the send rate it allows (`None`: no limit).
    /// Snapshots and paced updates are packed to that size, and its updates paced
    /// (latest value per object) to that rate, as under a bandwidth cap.
    SetPath {
        /// The session.
        session: SessionId,
        /// Largest RTP packet one datagram carries.
        max_packet: usize,
        /// Send rate the path allows, bits per second.
        send_bps: Option<u64>,
    },
    /// Sets (or, with `None`, lifts) a session's send budget in bits per second: what a
    /// transport's own congestion controller allows. It joins the session's other caps
    /// (configuration, interest, TMMBR, RFC 8888 feedback): the lowest applies.
    SetSendBudget {
        /// The session.
        session: SessionId,
        /// The budget.
        bps: Option<u64>,
    },
    /// Anchors the relay's NTP time: the input's `now` is `since_unix` after the Unix
    /// epoch. The shell reads both clocks once; until it does, NTP times count from the
    /// epoch at the first report.
    SetWallclock {
        /// Time since the Unix epoch at `now`.
        since_unix: Duration,
    },
    /// Sends recorder `session` the whole state of its room now, unpaced: for each stream,
    /// RTP packets from the stream's SSRC (its newest sequence number and timestamp)
    /// holding every cached object's latest TLVs, at most [`CHECKPOINT_PACKET`] bytes
    /// each. Nothing else is queued for the session by the same input, so a shell that
    /// flushes right after it knows these packets for the checkpoint. Ignored for a
    /// session that is not a recorder.
    Checkpoint(SessionId),
    /// Refuses new joins from now on (graceful drain), or accepts them again; existing
    /// rooms keep flowing.
    SetDraining(bool),
    /// Ends sessions of a room by the relay's will (a backend closed the room or removed
    /// a participant): each is sent an RTCP BYE for the relay's SSRC, so its client knows
    /// the relay ended it, then leaves as by [`Input::Leave`] and is reported closed
    /// ([`Event::SessionClosed`]). Links are left alone: a room closed everywhere lets
    /// its links go. Answers [`Reply::Sessions`].
    Evict {
        /// The room.
        room: &'a str,
        /// Only this identity's sessions; `None`: every session of the room.
        identity: Option<&'a str>,
    },
    /// Suspends (or restores) an identity's right to publish in a room: a muted session's
    /// RTP is dropped and counted (`muted`); its streams and their state stay. Answers
    /// [`Reply::Sessions`].
    Mute {
        /// The room.
        room: &'a str,
        /// The identity.
        identity: &'a str,
        /// Muted from now on, or not.
        muted: bool,
    },
}

/// The largest RTP packet of a checkpoint ([`Input::Checkpoint`]): far above any path's
/// MTU (a recorder has no network path), under the 65 507 bytes one UDP datagram holds.
pub const CHECKPOINT_PACKET: usize = 60_000;

/// What an input answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Done; packets are dropped and counted by reason, never refused here.
    Done,
    /// A session joined.
    Joined(Joined),
    /// How many sessions the input concerned ([`Input::Evict`], [`Input::Mute`]).
    Sessions(usize),
}

impl Reply {
    /// The join this reply carries, if it is one.
    pub fn joined(self) -> Option<Joined> {
        match self {
            Self::Joined(j) => Some(j),
            Self::Done | Self::Sessions(_) => None,
        }
    }
}

/// Something the core reports to its shell ([`super::Relay::poll_event`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The core removed a session by itself (a timeout, or its room failed): the shell
    /// forgets its transport state.
    SessionClosed(SessionId),
    /// A measurement for a histogram.
    Stat(StatEvent),
    /// A publisher's stream began: its first packet arrived. A stream a link carries is
    /// its home replica's to report, so each stream is reported once.
    StreamStarted {
        /// Its room.
        room: Arc<str>,
        /// The publishing session.
        session: SessionId,
        /// The stream.
        ssrc: u32,
    },
    /// An object changed hands (`docs/relay.md`, "Room objects and ownership"), in a
    /// room that is being recorded (its recorders write it down; nobody else asks).
    Ownership {
        /// Its room.
        room: Arc<str>,
        /// The object's stream.
        ssrc: u32,
        /// Its objectID.
        object: u64,
        /// The SSRC of the session that holds it now; `None`: back with its stream's
        /// publisher (or the room's).
        holder: Option<u32>,
    },
    /// A publisher's stream ended: a BYE, its timeout, or its session gone.
    StreamEnded {
        /// Its room.
        room: Arc<str>,
        /// The publishing session.
        session: SessionId,
        /// The stream.
        ssrc: u32,
    },
}

/// A successful join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The new session.
    pub session: SessionId,
    /// The SSRC the session publishes (and signs its RTCP) with.
    pub ssrc: u32,
    /// The relay's own SSRC (a FIR naming it asks for every stream).
    pub relay_ssrc: u32,
    /// SSRCs of the streams already in the room.
    pub streams: Vec<u32>,
    /// Its room stream's SSRC, when it asked for one ([`JoinRequest::room_stream`]).
    pub room_ssrc: Option<u32>,
}

/// Why a control operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The room holds its maximum number of sessions.
    #[error("room {0:?} is full")]
    RoomFull(String),
    /// The relay holds its maximum number of rooms and the join would open another.
    #[error("the relay holds its maximum of {0} rooms")]
    TooManyRooms(usize),
    /// The relay holds its maximum number of sessions.
    #[error("the relay holds its maximum of {0} sessions")]
    RelayFull(usize),
    /// The SSRC asked for is in use and the client required it.
    #[error("SSRC {0} is already taken")]
    SsrcTaken(u32),
    /// A join declared more SSRCs than a session may own (as many as a room holds
    /// sessions).
    #[error("a session may own at most as many streams as a room holds sessions, not {0}")]
    TooManyStreams(usize),
    /// No such session.
    #[error("no session {0}")]
    NoSuchSession(SessionId),
    /// The interest is invalid; the message names the field.
    #[error("{0}")]
    InvalidInterest(String),
    /// The relay is draining and takes no new sessions.
    #[error("the relay is draining")]
    Draining,
}

/// A room as `GET /v1/rooms/{room}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomInfo {
    /// Room name.
    pub room: String,
    /// Sessions in join order.
    pub sessions: Vec<SessionInfo>,
    /// Streams with their cached state.
    pub streams: Vec<StreamInfo>,
}

/// One session of a room.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    /// Session id.
    pub session_id: String,
    /// Identity from the token.
    pub identity: String,
    /// SSRC.
    pub ssrc: u32,
    /// May publish.
    pub publish: bool,
    /// May subscribe.
    pub subscribe: bool,
    /// Wire dialect.
    pub dialect: Dialect,
    /// Per-stream or aggregated delivery.
    pub delivery: DeliveryMode,
    /// Round-trip time between the relay and the session, smoothed, in milliseconds:
    /// from the session's RTCP reception reports on the relay's SRs; `null` until then.
    pub rtt_ms: Option<f64>,
    /// Send budget from the session's transport or congestion feedback (RFC 8888), bits
    /// per second; `null` without one.
    pub send_budget_bps: Option<u64>,
    /// Its publishing is suspended by the room's admin.
    pub muted: bool,
    /// The SSRCs it owns: its own first, then those it declared.
    pub streams: Vec<u32>,
}

/// A room's size on one replica, as `GET /v1/rooms` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomCounts {
    /// Room name.
    pub room: String,
    /// Its sessions (links apart).
    pub sessions: usize,
    /// Its streams.
    pub streams: usize,
    /// The objects cached for them.
    pub objects: usize,
}

/// One stream of a room.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamInfo {
    /// SSRC.
    pub ssrc: u32,
    /// Objects cached.
    pub objects: usize,
    /// Their wire size in bytes.
    pub bytes: usize,
    /// A room stream: its objects belong to the room.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub room_owned: bool,
    /// Whether its publisher left and the room holds it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub orphaned: bool,
}

/// Session ids as the HTTP API spells them.
pub fn format_session_id(id: SessionId) -> String {
    format!("s{id:016x}")
}

/// Parses [`format_session_id`]'s form.
pub fn parse_session_id(s: &str) -> Option<SessionId> {
    s.strip_prefix('s')
        .filter(|h| h.len() == 16)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
}
