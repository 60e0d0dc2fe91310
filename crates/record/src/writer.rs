//! The segment writer: records in, pcapng bytes out, no I/O.
//!
//! The caller (the server's recording thread) hands it records, writes what
//! [`SegmentWriter::pending`] holds to the segment's file when it likes, then calls
//! [`SegmentWriter::consume`]. The buffer keeps its capacity, so once it has grown to the
//! largest batch the caller lets build up, a record costs no allocation.

use crate::FormatError;
use crate::event::Event;
use crate::pcapng::*;

/// Builds one segment: one pcapng section (SHB, the two IDBs, then EPBs).
#[derive(Debug)]
pub struct SegmentWriter {
    pending: Vec<u8>,
    /// Bytes handed out (written by the caller) and forgotten.
    consumed: u64,
    records: u64,
    /// CRC-32C of every byte so far, for `segment_end`.
    crc32c: u32,
    finished: bool,
}

impl SegmentWriter {
    /// A segment of recording `recording` of room `room`, number `segment`, with its
    /// section header and interface descriptions queued. Its first record should be a
    /// `segment_started` event, which the caller writes with its own clock.
    pub fn new(recording: &str, room: &str, segment: u32) -> Self {
        let mut w = SegmentWriter {
            pending: Vec::with_capacity(4096),
            consumed: 0,
            records: 0,
            crc32c: 0,
            finished: false,
        };
        let comment = serde_json::json!({
            "recording": recording,
            "room": room,
            "segment": segment,
        })
        .to_string();
        w.block(SHB, |b| {
            b.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes());
            b.extend_from_slice(&(-1i64).to_le_bytes());
            push_option(b, OPT_SHB_USERAPPL, b"gsrelay");
            push_option(b, OPT_COMMENT, comment.as_bytes());
            push_option(b, OPT_END, &[]);
        });
        for (linktype, name) in [(LINKTYPE_IPV4, "rtp"), (LINKTYPE_UPPER_PDU, "events")] {
            w.block(IDB, |b| {
                b.extend_from_slice(&linktype.to_le_bytes());
                b.extend_from_slice(&0u16.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
                push_option(b, OPT_IF_NAME, name.as_bytes());
                push_option(b, OPT_IF_TSRESOL, &[9]);
                push_option(b, OPT_END, &[]);
            });
        }
        w
    }

    /// Appends one RTP packet (plaintext, header and payload) that arrived at `at_ns`
    /// (nanoseconds since the Unix epoch); `checkpoint`: it is one of a checkpoint's
    /// packets. Refuses a packet longer than a UDP datagram over IPv4 carries (65 507
    /// bytes), and anything after [`finish`](Self::finish).
    pub fn rtp(&mut self, at_ns: u64, checkpoint: bool, packet: &[u8]) -> Result<(), FormatError> {
        if packet.len() > MAX_RTP {
            return Err(FormatError::TooLong(packet.len()));
        }
        if self.finished {
            return Err(FormatError::Finished);
        }
        self.epb(IF_RTP, at_ns, |b| {
            push_ip_udp(b, packet.len(), checkpoint);
            b.extend_from_slice(packet);
        });
        Ok(())
    }

    /// Appends one event that happened at `at_ns`. After [`finish`](Self::finish) it is
    /// ignored: nothing may follow a segment's checksum.
    pub fn event(&mut self, at_ns: u64, event: &Event) {
        if self.finished {
            return;
        }
        self.epb(IF_EVENTS, at_ns, |b| {
            b.extend_from_slice(&EVENT_PDU_HEADER);
            // Serializing into a Vec cannot fail for these types (no map with non-string
            // keys, no failing Serialize impl); on the impossible error the record would
            // hold a truncated object, which a reader rejects as a torn record.
            let _ = serde_json::to_writer(&mut *b, event);
        });
    }

    /// Closes the segment: appends `segment_end` with the checksum of every byte before
    /// it. Nothing can be appended after it; a second call does nothing.
    pub fn finish(&mut self, at_ns: u64) {
        if self.finished {
            return;
        }
        let end = Event::SegmentEnd {
            records: self.records,
            crc32c: format!("{:08x}", self.crc32c),
        };
        self.event(at_ns, &end);
        self.finished = true;
    }

    /// The bytes queued and not yet handed out.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// The caller has written [`pending`](Self::pending): forget them (the buffer keeps
    /// its capacity).
    pub fn consume(&mut self) {
        self.consumed += self.pending.len() as u64;
        self.pending.clear();
    }

    /// The segment's length so far: bytes handed out plus bytes pending. The caller
    /// rotates to a new segment when this passes its limit.
    pub fn bytes(&self) -> u64 {
        self.consumed + self.pending.len() as u64
    }

    /// Records (EPBs) appended so far, `segment_end` included.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Appends an EPB on `interface` whose packet data `data` writes.
    fn epb(&mut self, interface: u32, at_ns: u64, data: impl FnOnce(&mut Vec<u8>)) {
        self.block(EPB, |b| {
            let fixed = b.len();
            b.extend_from_slice(&interface.to_le_bytes());
            b.extend_from_slice(&((at_ns >> 32) as u32).to_le_bytes());
            b.extend_from_slice(&(at_ns as u32).to_le_bytes());
            b.extend_from_slice(&[0; 8]); // captured and original length, set below
            let start = b.len();
            data(b);
            let len = b.len() - start;
            let crc = crc32fast::hash(&b[start..]);
            b.extend(std::iter::repeat_n(0u8, pad4(len)));
            b[fixed + 12..fixed + 16].copy_from_slice(&(len as u32).to_le_bytes());
            b[fixed + 16..fixed + 20].copy_from_slice(&(len as u32).to_le_bytes());
            let mut hash = [HASH_CRC32, 0, 0, 0, 0];
            hash[1..].copy_from_slice(&crc.to_le_bytes());
            push_option(b, OPT_EPB_HASH, &hash);
            push_option(b, OPT_END, &[]);
        });
        self.records += 1;
    }

    /// Appends a block of type `kind` whose body `body` writes, with both lengths.
    fn block(&mut self, kind: u32, body: impl FnOnce(&mut Vec<u8>)) {
        let start = self.pending.len();
        self.pending.extend_from_slice(&kind.to_le_bytes());
        self.pending.extend_from_slice(&[0; 4]);
        body(&mut self.pending);
        let total = (self.pending.len() - start + 4) as u32;
        self.pending.extend_from_slice(&total.to_le_bytes());
        self.pending[start + 4..start + 8].copy_from_slice(&total.to_le_bytes());
        self.crc32c = crc32c::crc32c_append(self.crc32c, &self.pending[start..]);
    }
}
