//! Events, from the network thread to the engine's poll, allocating nothing per update in
//! steady state on either side.
//!
//! The network thread appends records (and each object's bytes) to the shared [`Queue`];
//! a poll swaps the whole queue for the buffers it handed out at the poll before (emptied,
//! their capacity kept), then turns records into [`gsr_event`]s in the caller's array,
//! decoding each object into its typed struct. What a poll hands out (bytes, decoded
//! arrays) lives in the poll side's buffers, so it stays valid until the next poll.

#![allow(non_camel_case_types)]

use crate::object::{GSR_OBJECT_NONE, Storage, gsr_object, write_c};
use gsrelay_core::wire::layout::read_tlv;
use gsrelay_core::wire::reader::Reader;
use gsrelay_core::wire::{Dialect, Object, decode_tlv};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// What an event tells.
pub type gsr_event_kind = u32;
/// The join succeeded: `ssrc` is the session's SSRC, `data` its session id (text).
pub const GSR_EVENT_JOINED: gsr_event_kind = 1;
/// An object's update: `ssrc` is its stream, `object_id` its objectID, `data` its TLV
/// bytes as sent, `object` the object decoded (type `GSR_OBJECT_NONE` and the flag
/// `GSR_FLAG_UNDECODED` when the bytes do not decode).
pub const GSR_EVENT_OBJECT: gsr_event_kind = 2;
/// Every stream in the room at the join has sent its state since the request for the
/// room (or ended); `GSR_FLAG_PARTIAL` when the wait for it timed out instead.
pub const GSR_EVENT_SNAPSHOT_COMPLETE: gsr_event_kind = 3;
/// The first packet of stream `ssrc` arrived.
pub const GSR_EVENT_STREAM_STARTED: gsr_event_kind = 4;
/// Stream `ssrc` ended (its sender's BYE, relayed).
pub const GSR_EVENT_STREAM_ENDED: gsr_event_kind = 5;
/// An ownership notice for object (`ssrc`, `object_id`): `flags` is the notice
/// (`GSR_NOTICE_*`), `code` the reason number (`docs/relay.md`, "GSOW").
pub const GSR_EVENT_OWNERSHIP: gsr_event_kind = 6;
/// The relay was silent or gone and the session came back with its SSRC (a resume, or a
/// rejoin that kept it): the stream goes on. A request for the room follows.
pub const GSR_EVENT_RESUMED: gsr_event_kind = 7;
/// The session came back under a new SSRC (`ssrc`). A request for the room follows.
pub const GSR_EVENT_REJOINED: gsr_event_kind = 8;
/// The session is over: `code` says why (`GSR_ENDED_*`), `data` may say more. Nothing
/// follows it.
pub const GSR_EVENT_ENDED: gsr_event_kind = 9;
/// Something failed without ending the session (a publish, an interest change, a rejoin
/// attempt): `code` is the status, `data` the message.
pub const GSR_EVENT_ERROR: gsr_event_kind = 10;
/// The queue was full (nobody polled for a while): `flags` events were dropped before
/// this one, oldest state first lost, never an end.
pub const GSR_EVENT_DROPPED: gsr_event_kind = 11;

/// `flags` of an object event: its bytes did not decode into a typed object.
pub const GSR_FLAG_UNDECODED: u32 = 1;
/// `flags` of a snapshot event: the wait timed out with streams still missing.
pub const GSR_FLAG_PARTIAL: u32 = 2;

/// `flags` of an ownership event: the object is this session's from now on.
pub const GSR_NOTICE_GRANTED: u32 = 3;
/// `flags` of an ownership event: the object is no longer this session's (`code` says why).
pub const GSR_NOTICE_LOST: u32 = 4;
/// `flags` of an ownership event: the request for the object was refused (`code` says why).
pub const GSR_NOTICE_REFUSED: u32 = 5;

/// `code` of an end: the app left.
pub const GSR_ENDED_LEFT: i32 = 0;
/// `code` of an end: the relay ended the session (the room closed, the identity removed).
pub const GSR_ENDED_BY_RELAY: i32 = 1;
/// `code` of an end: the join failed (`data` says why).
pub const GSR_ENDED_FAILED: i32 = 2;

/// One event.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct gsr_event {
    /// What it tells (`GSR_EVENT_*`).
    pub kind: gsr_event_kind,
    /// The stream or session it is about.
    pub ssrc: u32,
    /// The object it is about.
    pub object_id: u64,
    /// A reason, status or end code, by kind.
    pub code: i32,
    /// `GSR_FLAG_*`, or a count or notice kind, by kind.
    pub flags: u32,
    /// Bytes: an object's TLV, a message (UTF-8, NUL after it, not counted).
    pub data_length: usize,
    /// `data_length` bytes, valid until the next poll; null when there are none.
    pub data: *const u8,
    /// The decoded object of an object event.
    pub object: gsr_object,
}

/// Most records a queue holds before it drops: at 20 updates a second from 500 players
/// that is 6.5 s an engine did not poll.
pub const GSR_MAX_QUEUED_EVENTS: usize = 65_536;

/// Most bytes a queue holds before it drops.
pub const GSR_MAX_QUEUED_BYTES: usize = 16 << 20;

/// One event as the network thread writes it: its bytes are a range of the queue's.
#[derive(Debug, Clone, Copy)]
struct Record {
    kind: gsr_event_kind,
    ssrc: u32,
    object_id: u64,
    code: i32,
    flags: u32,
    start: usize,
    len: usize,
}

/// Events and their bytes, as the network thread gathers them before it hands them to
/// the queue ([`Queue::append`]).
#[derive(Default)]
pub struct Batch {
    records: Vec<Record>,
    bytes: Vec<u8>,
}

impl Batch {
    fn clear(&mut self) {
        self.records.clear();
        self.bytes.clear();
    }

    /// Adds an event with `bytes`.
    pub fn push(
        &mut self,
        kind: gsr_event_kind,
        ssrc: u32,
        object_id: u64,
        code: i32,
        flags: u32,
        bytes: &[u8],
    ) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.records.push(Record {
            kind,
            ssrc,
            object_id,
            code,
            flags,
            start,
            len: bytes.len(),
        });
    }

    /// Adds a message event (an error, an end, the joined session's id): its text with a
    /// NUL after it, which the event's length does not count (`to_event`).
    pub fn push_text(&mut self, kind: gsr_event_kind, ssrc: u32, code: i32, text: &str) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(0);
        self.records.push(Record {
            kind,
            ssrc,
            object_id: 0,
            code,
            flags: 0,
            start,
            len: text.len() + 1,
        });
    }
}

#[derive(Default)]
struct Pending {
    batch: Batch,
    dropped: u32,
}

/// The events the network thread has written and no poll has taken.
#[derive(Default)]
pub struct Queue {
    pending: Mutex<Pending>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Every write leaves the batch whole, so a poisoned lock is taken as it is.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves `local`'s events to the queue in one step (one lock per batch of packets, not
    /// per object); what does not fit is counted dropped (an end always goes in: nothing
    /// follows it). `local` is left empty, its capacity kept or swapped for the queue's.
    pub fn append(&self, local: &mut Batch) {
        if local.records.is_empty() {
            return;
        }
        let mut p = self.lock();
        if p.batch.records.is_empty() && within_bounds(local) {
            std::mem::swap(&mut p.batch, local);
            local.clear();
            return;
        }
        for r in &local.records {
            let bytes = local
                .bytes
                .get(r.start..r.start + r.len)
                .unwrap_or_default();
            let full = !fits_one(&p.batch, bytes.len());
            if full && r.kind != GSR_EVENT_ENDED {
                p.dropped = p.dropped.saturating_add(1);
                continue;
            }
            let start = p.batch.bytes.len();
            p.batch.bytes.extend_from_slice(bytes);
            p.batch.records.push(Record { start, ..*r });
        }
        drop(p);
        local.clear();
    }

    /// Appends one event at once (the rare ones: a join, an end, an error).
    pub fn push_text(&self, kind: gsr_event_kind, ssrc: u32, code: i32, text: &str) {
        let mut one = Batch::default();
        one.push_text(kind, ssrc, code, text);
        self.append(&mut one);
    }
}

fn fits_one(b: &Batch, len: usize) -> bool {
    b.records.len() < GSR_MAX_QUEUED_EVENTS && b.bytes.len() + len <= GSR_MAX_QUEUED_BYTES
}

fn within_bounds(b: &Batch) -> bool {
    b.records.len() <= GSR_MAX_QUEUED_EVENTS && b.bytes.len() <= GSR_MAX_QUEUED_BYTES
}

/// The poll side: what the last poll handed out, and where it continues.
#[derive(Default)]
pub struct PollSide {
    front: Batch,
    next: usize,
    decoded: Vec<Option<Object>>,
    storage: Storage,
}

impl PollSide {
    /// Fills `out` with the oldest events not yet handed out; returns how many. What the
    /// poll before handed out is invalid from here on.
    pub fn poll(&mut self, queue: &Queue, dialect: Dialect, out: &mut [gsr_event]) -> usize {
        if self.next >= self.front.records.len() {
            self.front.clear();
            self.next = 0;
            let mut p = queue.lock();
            std::mem::swap(&mut p.batch, &mut self.front);
            let dropped = std::mem::take(&mut p.dropped);
            drop(p);
            if dropped > 0 {
                // First, so the engine learns of the gap before the state after it.
                self.front.records.insert(
                    0,
                    Record {
                        kind: GSR_EVENT_DROPPED,
                        ssrc: 0,
                        object_id: 0,
                        code: 0,
                        flags: dropped,
                        start: 0,
                        len: 0,
                    },
                );
            }
        }
        let take = out.len().min(self.front.records.len() - self.next);
        let records = &self.front.records[self.next..self.next + take];
        // Decode first, then reserve for every array at once, then point into it: a
        // pointer handed out is never moved by a later object of the same poll.
        self.decoded.clear();
        self.decoded.extend(records.iter().map(|r| {
            (r.kind == GSR_EVENT_OBJECT)
                .then(|| decode_one(bytes_of(&self.front.bytes, r), dialect))
                .flatten()
        }));
        self.storage.clear();
        self.storage.reserve_for(self.decoded.iter().flatten());
        for ((slot, r), decoded) in out.iter_mut().zip(records).zip(&self.decoded) {
            fill(
                slot,
                r,
                &self.front.bytes,
                decoded.as_ref(),
                &mut self.storage,
            );
        }
        self.next += take;
        take
    }
}

fn bytes_of<'a>(bytes: &'a [u8], r: &Record) -> &'a [u8] {
    bytes.get(r.start..r.start + r.len).unwrap_or_default()
}

/// One TLV's object, or `None` when it does not decode.
fn decode_one(tlv: &[u8], dialect: Dialect) -> Option<Object> {
    let mut r = Reader::new(tlv);
    read_tlv(&mut r).and_then(|t| decode_tlv(t, dialect)).ok()
}

/// Writes event `r` into `slot`, field by field: only the union member of its object (if
/// any) is written, not the whole union.
fn fill(
    slot: &mut gsr_event,
    r: &Record,
    bytes: &[u8],
    decoded: Option<&Object>,
    store: &mut Storage,
) {
    let data = bytes_of(bytes, r);
    // Message events carry a NUL the length does not count.
    let message = matches!(r.kind, GSR_EVENT_JOINED | GSR_EVENT_ENDED | GSR_EVENT_ERROR);
    slot.kind = r.kind;
    slot.ssrc = r.ssrc;
    slot.object_id = r.object_id;
    slot.code = r.code;
    slot.flags = r.flags;
    slot.data_length = if message {
        data.len().saturating_sub(1)
    } else {
        data.len()
    };
    slot.data = if data.is_empty() {
        std::ptr::null()
    } else {
        data.as_ptr()
    };
    match decoded {
        Some(o) => write_c(o, store, &mut slot.object),
        None => {
            if r.kind == GSR_EVENT_OBJECT {
                slot.flags |= GSR_FLAG_UNDECODED;
            }
            slot.object.r#type = GSR_OBJECT_NONE;
            slot.object.extra_length = 0;
            slot.object.extra = std::ptr::null();
        }
    }
}
