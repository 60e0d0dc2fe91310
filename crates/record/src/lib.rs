//! gsrelay's recording format, and the clock that replays it.
//!
//! A recording is a directory: `recording.json` ([`Meta`]) and segments `000000.pcapng`,
//! `000001.pcapng`, ... (`.pcapng.gz` once closed and compressed). Each segment is one
//! pcapng section that Wireshark and tshark open as it is: the RTP packets the relay
//! accepted (plaintext, inside synthetic IPv4/UDP headers), the room's [`Event`]s as JSON
//! exported PDUs, and every few seconds a checkpoint, the relay's own snapshot of the
//! room. `docs/recording-format.md` describes it byte by byte.
//!
//! - [`writer`]: [`SegmentWriter`], records in, bytes out; no I/O, so the server writes
//!   the files on a thread of its own.
//! - [`read`]: [`scan`] a segment's bytes: its records, its torn tail, its checksum.
//! - [`dir`]: the only file I/O: [`Recording::open`], [`Recording::repair`], export to one
//!   pcapng file, [`compress_segment`].
//! - [`player`]: [`Player`], the sans-I/O replay clock: speed, pause, seek.
#![warn(missing_docs)]

mod crypt;
pub mod dir;
mod event;
mod pcapng;
pub mod player;
pub mod read;
mod state;
pub mod writer;

pub use crypt::{CryptError, Key};
pub use dir::{Recording, RecordingError, SegmentInfo, compress_segment, encrypt_segment};
pub use event::{Event, META_VERSION, Meta};
pub use pcapng::MAX_RTP;
pub use player::{Output, PlayError, Player, StreamState};
pub use read::{Record, Scan, scan};
pub use writer::SegmentWriter;

/// What is wrong with a segment's bytes, or with a record given to the writer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The bytes do not start with a pcapng section header.
    #[error("not a pcapng file")]
    Foreign,
    /// They start with one that is bad.
    #[error("bad pcapng section header: {0}")]
    BadHeader(&'static str),
    /// The segment is finished but its checksum does not match its bytes: they changed
    /// after they were written.
    #[error("corrupt segment: segment_end says CRC-32C {expected}, the bytes give {actual}")]
    Corrupt {
        /// The checksum `segment_end` holds.
        expected: String,
        /// The checksum of the bytes.
        actual: String,
    },
    /// An RTP packet too long for a UDP datagram over IPv4.
    #[error("RTP packet of {0} bytes: a record holds at most {MAX_RTP}")]
    TooLong(usize),
    /// A record given to a writer after `finish`.
    #[error("the segment is finished: nothing may follow its segment_end")]
    Finished,
    /// A segment given to a player that is not one of its recording's.
    #[error("segment {0} is not part of this recording")]
    UnknownSegment(u32),
}
