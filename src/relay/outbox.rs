//! Packets the core wants sent, queued in one reused buffer: no allocation per packet in
//! steady state.

use super::api::SessionId;
use crate::rtp::PacketClass;
use std::collections::VecDeque;

/// One packet to send to one session (plaintext; the transport encrypts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// Destination session.
    pub session: SessionId,
    /// RTP or RTCP.
    pub class: PacketClass,
    /// The packet.
    pub bytes: &'a [u8],
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    to: SessionId,
    class: PacketClass,
    start: usize,
    end: usize,
}

/// How far the outbox was filled: what [`Outbox::rewind`] goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxMark {
    queued: usize,
    bytes: usize,
}

/// The output queue, with a ceiling on the bytes it holds.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
    queue: VecDeque<Pending>,
    /// Bytes it may hold; 0 means no ceiling.
    limit: usize,
    /// Packets refused at the ceiling since the last [`Outbox::take_overflowed`].
    overflowed: u64,
}

impl Outbox {
    /// An outbox holding at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// The current fill, to rewind to if the input being handled must be undone.
    pub fn mark(&self) -> OutboxMark {
        OutboxMark {
            queued: self.queue.len(),
            bytes: self.buf.len(),
        }
    }

    /// Drops what was queued since `mark` (nothing if it was sent meanwhile).
    pub fn rewind(&mut self, mark: OutboxMark) {
        if self.queue.len() >= mark.queued && self.buf.len() >= mark.bytes {
            self.queue.truncate(mark.queued);
            self.buf.truncate(mark.bytes);
        }
    }

    /// Packets refused at the ceiling since the last call.
    pub fn take_overflowed(&mut self) -> u64 {
        std::mem::take(&mut self.overflowed)
    }

    /// Starts a packet: returns the buffer to append it to and where it starts.
    pub fn begin(&mut self) -> (&mut Vec<u8>, usize) {
        if self.queue.is_empty() {
            self.buf.clear();
        }
        let start = self.buf.len();
        (&mut self.buf, start)
    }

    /// Queues the bytes appended since `start`.
    pub fn commit(&mut self, to: SessionId, class: PacketClass, start: usize) {
        let end = self.buf.len();
        if self.limit > 0 && end > self.limit {
            self.buf.truncate(start);
            self.overflowed += 1;
            return;
        }
        if end > start {
            self.queue.push_back(Pending {
                to,
                class,
                start,
                end,
            });
        }
    }

    /// Appends to the packet being built.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Drops a packet begun at `start` that will not be sent.
    pub fn abandon(&mut self, start: usize) {
        self.buf.truncate(start);
    }

    /// The next packet to send.
    pub fn pop(&mut self) -> Option<Transmit<'_>> {
        let p = self.queue.pop_front()?;
        let bytes = self.buf.get(p.start..p.end).unwrap_or_default();
        Some(Transmit {
            session: p.to,
            class: p.class,
            bytes,
        })
    }

    /// Bytes buffered (the end offset of the packet being built).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}
