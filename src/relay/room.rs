//! Rooms and the streams published in them.

use super::api::SessionId;
use super::grid::Grid;
use super::store::{History, Store};
use crate::rtp::CLOCK_RATE;
use crate::rtp::reception::Reception;
use std::collections::HashMap;
use std::time::Instant;

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
}

/// One publisher's stream.
#[derive(Debug)]
pub struct Stream {
    /// The publishing session (for a stream a link carries, the link).
    pub owner: SessionId,
    /// Whether it arrived in a link's containers rather than from its sender: a replica
    /// never sends such a stream over a link (a full mesh of replicas, so nothing loops).
    pub carried: bool,
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
            carried: false,
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
