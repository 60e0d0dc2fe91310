//! Rooms and the streams published in them.

use super::api::SessionId;
use super::grid::Grid;
use super::store::{History, Store};
use crate::rtp::CLOCK_RATE;
use crate::rtp::reception::Reception;
use crate::wire::Dialect;
use std::collections::HashMap;
use std::time::Instant;

/// An object that changed hands: who holds it (`None`: back with its stream's
/// publisher, or the room's for a room stream that outlived it) and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The holder, when not the stream's publisher.
    pub by: Option<SessionId>,
    /// When it last changed hands (the handover guard runs from here).
    pub at: Instant,
}

/// Handed objects of a room ([`super::ownership`]) by (stream, objectID).
pub type Holds = HashMap<(u32, u64), Hold>;

/// Whether an object of `ssrc` is held by a session other than its publisher (whose
/// updates of it are then dropped).
pub fn held_elsewhere(holds: &Holds, ssrc: u32, id: u64) -> bool {
    holds.get(&(ssrc, id)).is_some_and(|h| h.by.is_some())
}

/// The owner of a room stream that outlived its publisher: the room itself. No session
/// has this id (the core never numbers one 0).
pub const ROOM: SessionId = 0;

/// One room: its members and streams. Rooms never share state.
#[derive(Debug, Default)]
pub struct Room {
    /// Sessions in join order.
    pub members: Vec<SessionId>,
    /// Streams by SSRC.
    pub streams: HashMap<u32, Stream>,
    /// Subscribers by the cells their area covers.
    pub subscribers: Grid<SessionId>,
    /// Subscribers that must see every update: no area, an area too large for the grid,
    /// or an avatar not seen yet.
    pub everywhere: Vec<SessionId>,
    /// Objects with a position, by cell.
    pub objects: Grid<(u32, u64)>,
    /// Objects that changed hands ([`super::ownership`]).
    pub holds: Holds,
    /// Its recorders ([`super::api::JoinRequest::recorder`]), also among `members`.
    pub recorders: Vec<SessionId>,
}

impl Room {
    /// Objects its room streams hold ([`Stream::room_owned`]), against
    /// [`super::RelayConfig::max_room_objects`].
    pub fn room_objects(&self) -> usize {
        self.streams
            .values()
            .filter(|s| s.room_owned)
            .map(|s| s.store.len())
            .sum()
    }

    /// Members other than recorders: what its caps count.
    pub fn sessions(&self) -> usize {
        self.members.len() - self.recorders.len()
    }

    /// Whether nothing keeps it: no member and no stream that outlived its publisher.
    pub fn is_unused(&self) -> bool {
        self.members.is_empty() && self.streams.is_empty()
    }
}

/// One publisher's stream.
#[derive(Debug)]
pub struct Stream {
    /// The publishing session (for a stream a link carries, the link; [`ROOM`] for a room
    /// stream that outlived its publisher).
    pub owner: SessionId,
    /// A room stream: its objects belong to the room, so it outlives its publisher and
    /// they expire by the room's rule (`docs/relay.md`, "Room objects and ownership").
    pub room_owned: bool,
    /// The wire dialect its objects are in (its publisher's, kept when it leaves).
    pub dialect: Dialect,
    /// A room stream's publisher's identity: who may take it up again after it left.
    pub publisher: Option<Box<str>>,
    /// Taken up again by a new session, whose first packet starts the numbering afresh.
    pub renumbered: bool,
    /// Whether it arrived in a link's containers rather than from its sender: a replica
    /// never sends such a stream over a link (a full mesh of replicas, so nothing loops).
    pub carried: bool,
    /// Whether a replay plays it ([`super::api::JoinRequest::replay`]): it ends when the
    /// replay says, never by silence, and its objects never expire.
    pub replayed: bool,
    /// Latest state per objectID.
    pub store: Store,
    /// Objects per recent source packet.
    pub history: History,
    /// Newest source sequence number.
    pub last_seq: u16,
    /// Newest source RTP timestamp.
    pub last_ts: u32,
    /// Payload type the source uses.
    pub payload_type: u8,
    /// Last packet's arrival.
    pub last_packet: Instant,
    /// When a FIR was last passed on to the source.
    pub fir_forwarded: Option<Instant>,
    /// Sequence number of the relay's next FIR to the source.
    pub fir_seq: u8,
    /// Reception statistics: the relay's reports to the sender.
    pub reception: Reception,
    /// The sender's clock mapping from its latest SR, carried into the relay's SRs.
    pub sender_clock: Option<SenderClock>,
}

/// A sender's NTP time and RTP timestamp of one instant (its SR), and when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderClock {
    /// NTP time of the SR.
    pub ntp: u64,
    /// RTP timestamp of the same instant.
    pub rtp: u32,
    /// When the SR arrived.
    pub at: Instant,
}

impl Stream {
    /// A stream whose first packet (`seq`) has just arrived, not yet applied.
    pub fn new(owner: SessionId, seq: u16, ts: u32, payload_type: u8, now: Instant) -> Self {
        Self {
            owner,
            room_owned: false,
            dialect: Dialect::default(),
            publisher: None,
            renumbered: false,
            carried: false,
            replayed: false,
            store: Store::new(now),
            history: History::default(),
            last_seq: seq.wrapping_sub(1),
            last_ts: ts,
            payload_type,
            last_packet: now,
            fir_forwarded: None,
            fir_seq: 0,
            reception: Reception::new(seq, CLOCK_RATE, now),
            sender_clock: None,
        }
    }
}
