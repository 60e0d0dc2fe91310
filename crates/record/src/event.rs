//! The room's events as recorded (interface 1, one JSON object per record), and
//! `recording.json`.

use serde::{Deserialize, Serialize};

/// One event of a recording. On the wire: a JSON object whose `type` names the variant in
/// snake_case, the variant's fields beside it.
///
/// A reader meets files written by newer writers: a type it does not know, or a known
/// type whose fields do not fit, is kept whole as [`Event::Other`]; extra fields of a
/// known type are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The first record of a recording's first segment.
    RecordingStarted {
        /// The recording's id.
        recording: String,
        /// The room recorded.
        room: String,
        /// The node that records it.
        node: String,
        /// Seconds between checkpoints.
        checkpoint_secs: u32,
    },
    /// The first record of every segment (the writer puts it there).
    SegmentStarted {
        /// The segment's number.
        segment: u32,
    },
    /// A participant joined.
    ParticipantJoined {
        /// Its session id.
        session: u64,
        /// Its identity (from its token).
        identity: String,
        /// Its metadata, if it has any.
        metadata: Option<String>,
    },
    /// A participant left.
    ParticipantLeft {
        /// Its session id.
        session: u64,
        /// Its identity.
        identity: String,
    },
    /// A stream started.
    StreamStarted {
        /// The stream's SSRC.
        ssrc: u32,
        /// The session sending it.
        session: u64,
    },
    /// A stream ended: its objects are no longer part of the room's state.
    StreamEnded {
        /// The stream's SSRC.
        ssrc: u32,
        /// The session that sent it.
        session: u64,
    },
    /// An object changed hands.
    Ownership {
        /// The stream the object belongs to.
        ssrc: u32,
        /// Its objectID.
        object: u64,
        /// The SSRC of the new holder; `None`: given back to the stream's sender.
        holder: Option<u32>,
    },
    /// The next `packets` RTP records with destination port 5005 are one checkpoint: the
    /// whole room at this time.
    Checkpoint {
        /// How many checkpoint packets follow.
        packets: u32,
    },
    /// Nothing was recorded between two times (for instance: the node recording died).
    Gap {
        /// Start of the gap, nanoseconds since the Unix epoch.
        from_ns: u64,
        /// End of the gap.
        to_ns: u64,
        /// Why.
        reason: String,
    },
    /// Records the writer never got (its queue was full).
    Dropped {
        /// How many.
        records: u64,
        /// Why.
        reason: String,
    },
    /// The last record of a finished segment: its checksum.
    SegmentEnd {
        /// How many records come before this one in the segment.
        records: u64,
        /// CRC-32C of every byte of the segment before this record's block, 8 lowercase
        /// hex digits.
        crc32c: String,
    },
    /// The recording stopped.
    RecordingStopped {
        /// Why.
        reason: String,
    },
    /// An event this reader does not know, kept as it was read.
    #[serde(untagged)]
    Other(serde_json::Value),
}

impl Event {
    /// Whether this event is part of the format's own bookkeeping (segments, checkpoints)
    /// rather than something that happened in the room; the player does not replay those.
    pub fn is_bookkeeping(&self) -> bool {
        matches!(
            self,
            Event::SegmentStarted { .. } | Event::SegmentEnd { .. } | Event::Checkpoint { .. }
        )
    }
}

/// The version of `recording.json` (and of the segment layout) this crate writes.
pub const META_VERSION: u32 = 1;

/// `recording.json`: what a recording is, written by the recorder when it starts and
/// again when it stops (atomically: `recording.json.tmp`, then a rename).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The layout version, [`META_VERSION`].
    pub version: u32,
    /// The recording's id.
    pub id: String,
    /// The room recorded.
    pub room: String,
    /// The node that recorded it.
    pub node: String,
    /// When it started, nanoseconds since the Unix epoch.
    pub started_ns: u64,
    /// When it stopped; `None` while it runs (or if the recorder died).
    pub stopped_ns: Option<u64>,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// Seconds between checkpoints.
    pub checkpoint_secs: u32,
}

impl Meta {
    /// The metadata of a recording starting now.
    pub fn new(id: &str, room: &str, node: &str, started_ns: u64, checkpoint_secs: u32) -> Meta {
        Meta {
            version: META_VERSION,
            id: id.to_owned(),
            room: room.to_owned(),
            node: node.to_owned(),
            started_ns,
            stopped_ns: None,
            stop_reason: None,
            checkpoint_secs,
        }
    }

    /// `recording.json`'s bytes (pretty-printed: people read it).
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings and integers always serializes; the fallback is unreachable
        // but keeps this free of panics.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Parses `recording.json`.
    pub fn from_json(bytes: &[u8]) -> Result<Meta, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}
