//! The queue between a shard and a recording's writer thread: one lock-free
//! single-producer, single-consumer byte ring per recording (`rtrb`, a well-kept
//! realtime-safe ring: no lock, no allocation once built), so the shard never waits for
//! a disk, never allocates per packet and never takes a lock. A record is a 13-byte
//! header (length of what follows the header, little-endian u32; [`Kind`]; arrival time,
//! nanoseconds since the Unix epoch, little-endian u64) and its bytes.
//!
//! A record that finds the ring full is not written and the recording is stopped
//! (`writer_behind`): a recording with holes in it would replay states that never were,
//! so a disk too slow to keep up ends the recording, never the room.

use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An RTP packet the room accepted, plaintext, with its source header.
    Live = 0,
    /// One packet of a checkpoint (the room's whole state).
    Checkpoint = 1,
    /// The checkpoint whose packets came before is complete.
    CheckpointEnd = 2,
    /// An event of the room, as JSON (`gsrelay_record::Event`).
    Event = 3,
}

impl Kind {
    /// The kind a record's byte names.
    pub(super) fn of(byte: u8) -> Option<Self> {
        Some(match byte {
            0 => Self::Live,
            1 => Self::Checkpoint,
            2 => Self::CheckpointEnd,
            3 => Self::Event,
            _ => return None,
        })
    }
}

const HEADER: usize = 13;

/// A ring's size: about two seconds of a dense 200-player room at 30 Hz (12 000 packets
/// a second of ~600 bytes); a reader that falls further behind than that stops its
/// recording (`writer_behind`).
pub const RING_BYTES: usize = 16 << 20;

/// What the shard and the writer both see of a recording.
#[derive(Debug, Default)]
pub struct Shared {
    stopped: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Shared {
    /// Stops the recording for `reason`, unless it was stopped already (the first reason
    /// stands).
    pub fn stop(&self, reason: &str) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            *self.reason.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason.into());
        }
    }

    /// Whether it was stopped, by either side.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Why it stopped, once it did.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The shard's end.
#[derive(Debug)]
pub struct Tap {
    producer: Producer<u8>,
    /// Shared with the writer.
    pub shared: Arc<Shared>,
}

/// The writer's end.
#[derive(Debug)]
pub struct Drain {
    consumer: Consumer<u8>,
    record: Vec<u8>,
    /// Shared with the shard.
    pub shared: Arc<Shared>,
}

/// A ring of `bytes` bytes and its two ends.
pub fn ring(bytes: usize) -> (Tap, Drain) {
    let (producer, consumer) = RingBuffer::new(bytes);
    let shared = Arc::new(Shared::default());
    let tap = Tap {
        producer,
        shared: shared.clone(),
    };
    let drain = Drain {
        consumer,
        record: Vec::new(),
        shared,
    };
    (tap, drain)
}

impl Tap {
    /// Queues one record; `false` when the recording is stopped, or is stopped now
    /// because the ring is full.
    pub fn push(&mut self, kind: Kind, at_ns: u64, bytes: &[u8]) -> bool {
        if self.shared.is_stopped() {
            return false;
        }
        let Ok(len) = u32::try_from(bytes.len()) else {
            return false;
        };
        let Ok(chunk) = self.producer.write_chunk_uninit(HEADER + bytes.len()) else {
            self.shared.stop("writer_behind");
            return false;
        };
        let header = len
            .to_le_bytes()
            .into_iter()
            .chain([kind as u8])
            .chain(at_ns.to_le_bytes());
        chunk.fill_from_iter(header.chain(bytes.iter().copied()));
        true
    }
}

impl Tap {
    /// Whether the reader let go of its end (a mirror that stopped).
    pub fn is_abandoned(&self) -> bool {
        self.producer.is_abandoned()
    }
}

impl Drain {
    /// The next record, if one is queued.
    pub fn next(&mut self) -> Option<(Kind, u64, &[u8])> {
        // Peeked, not committed: the record is read again whole below.
        let head = self.consumer.read_chunk(HEADER).ok()?;
        let (a, b) = head.as_slices();
        let mut h = [0u8; HEADER];
        for (d, s) in h.iter_mut().zip(a.iter().chain(b)) {
            *d = *s;
        }
        let [l0, l1, l2, l3, kind, t @ ..] = h;
        let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
        let at_ns = u64::from_le_bytes(t);
        // The producer writes a record whole, in one commit: its body is there.
        let whole = self.consumer.read_chunk(HEADER + len).ok()?;
        let (a, b) = whole.as_slices();
        self.record.clear();
        self.record.extend(a.iter().chain(b).skip(HEADER));
        whole.commit_all();
        Some((Kind::of(kind)?, at_ns, &self.record))
    }

    /// Whether the shard let go of its end (the recording ended there) and everything it
    /// queued has been read.
    pub fn is_finished(&self) -> bool {
        self.consumer.is_abandoned() && self.consumer.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_whole_and_in_order_across_the_wrap() {
        let (mut tap, mut drain) = ring(64);
        for round in 0..20u8 {
            let body = vec![round; usize::from(round % 7) + 1];
            assert!(tap.push(Kind::Live, u64::from(round), &body));
            let (kind, at, got) = drain.next().expect("a record");
            assert_eq!((kind, at, got), (Kind::Live, u64::from(round), &body[..]));
        }
        assert!(drain.next().is_none());
    }

    #[test]
    fn a_full_ring_stops_the_recording_and_nothing_more_is_queued() {
        let (mut tap, mut drain) = ring(32);
        assert!(tap.push(Kind::Event, 1, &[1; 10]));
        assert!(!tap.push(Kind::Event, 2, &[2; 10]), "no room for a second");
        assert_eq!(drain.shared.reason().as_deref(), Some("writer_behind"));
        assert!(drain.next().is_some());
        assert!(!tap.push(Kind::Event, 3, &[3; 1]), "stopped");
        drop(tap);
        assert!(drain.is_finished());
    }
}
