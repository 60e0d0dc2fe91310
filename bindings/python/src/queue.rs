//! Events from the network task to Python: a queue the task appends to in batches (one
//! lock per read of the socket, not per update) and Python drains in batches
//! (`Session.recv_batch`), waking a waiting thread through a condition variable and an
//! asyncio loop through a socket it watches.

use std::collections::VecDeque;
use std::io::Write as _;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// An object's update: `ssrc` its stream, `id` its objectID, `data` its TLV bytes.
pub const OBJECT: u8 = 2;
/// The room asked for has arrived; `code` 1 when the wait timed out (partial).
pub const SNAPSHOT_COMPLETE: u8 = 3;
/// The first packet of stream `ssrc`.
pub const STREAM_STARTED: u8 = 4;
/// Stream `ssrc` ended (its sender's BYE).
pub const STREAM_ENDED: u8 = 5;
/// An ownership notice for object (`ssrc`, `id`): `code` the notice kind.
pub const OWNERSHIP: u8 = 6;
/// The session came back with its SSRC after the relay went silent.
pub const RESUMED: u8 = 7;
/// The session came back under a new SSRC (`ssrc`).
pub const REJOINED: u8 = 8;
/// The session is over: `code` 0 left, 1 ended by the relay; `data` says more.
pub const ENDED: u8 = 9;
/// Something failed without ending the session: `data` is the message and code.
pub const ERROR: u8 = 10;
/// Updates were dropped because nobody drained the queue: `code` how many.
pub const DROPPED: u8 = 11;

/// Most events a queue holds: at 20 updates a second from 500 players, 6.5 s of them.
/// Past it the oldest updates go first, never an end or a rejoin.
pub const MAX_QUEUED: usize = 65_536;

/// What an event carries besides its numbers.
#[derive(Debug)]
pub enum Data {
    /// Nothing.
    None,
    /// An object's TLV bytes.
    Bytes(Vec<u8>),
    /// A message.
    Text(String),
}

/// One event.
#[derive(Debug)]
pub struct Record {
    /// Its kind (the constants above).
    pub kind: u8,
    /// The stream or session it is about.
    pub ssrc: u32,
    /// The object it is about.
    pub id: u64,
    /// A count, flag, notice or end code, by kind.
    pub code: i64,
    /// Bytes or a message.
    pub data: Data,
}

impl Record {
    /// An event with no data.
    pub fn plain(kind: u8, ssrc: u32, id: u64, code: i64) -> Self {
        Self {
            kind,
            ssrc,
            id,
            code,
            data: Data::None,
        }
    }

    /// An event with a message.
    pub fn text(kind: u8, code: i64, message: impl Into<String>) -> Self {
        Self {
            kind,
            ssrc: 0,
            id: 0,
            code,
            data: Data::Text(message.into()),
        }
    }
}

#[derive(Default)]
struct Inner {
    records: VecDeque<Record>,
    dropped: u64,
    /// A byte was written to the wake socket since the queue was last drained empty.
    woken: bool,
    /// No more events will come (an `ENDED` is the last).
    closed: bool,
}

/// The queue and what wakes its reader.
pub struct Queue {
    inner: Mutex<Inner>,
    ready: Condvar,
    /// Written one byte when the queue goes from drained to holding events.
    #[cfg(unix)]
    wake: Option<std::os::unix::net::UnixStream>,
}

impl Queue {
    /// A queue, and the socket an event loop may watch for it (`None` where there are no
    /// Unix sockets, or the pair could not be made: waiting threads still wake).
    pub fn new() -> (Self, Option<Waker>) {
        #[cfg(unix)]
        {
            let pair = std::os::unix::net::UnixStream::pair().and_then(|(a, b)| {
                a.set_nonblocking(true)?;
                b.set_nonblocking(true)?;
                Ok((a, b))
            });
            let (wake, reader) = match pair {
                Ok((a, b)) => (Some(a), Some(Waker(b))),
                Err(_) => (None, None),
            };
            let queue = Self {
                inner: Mutex::default(),
                ready: Condvar::new(),
                wake,
            };
            (queue, reader)
        }
        #[cfg(not(unix))]
        {
            let queue = Self {
                inner: Mutex::default(),
                ready: Condvar::new(),
            };
            (queue, None)
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `batch` (left empty), dropping the oldest updates past [`MAX_QUEUED`].
    pub fn append(&self, batch: &mut Vec<Record>) {
        if batch.is_empty() {
            return;
        }
        let mut inner = self.lock();
        inner.records.extend(batch.drain(..));
        if inner.records.len() > MAX_QUEUED {
            let over = inner.records.len() - MAX_QUEUED;
            let mut kept = Vec::new();
            let mut dropped = 0;
            while dropped < over {
                let Some(r) = inner.records.pop_front() else {
                    break;
                };
                if r.kind == OBJECT {
                    dropped += 1;
                } else {
                    kept.push(r);
                }
            }
            for r in kept.into_iter().rev() {
                inner.records.push_front(r);
            }
            inner.dropped += dropped as u64;
        }
        self.wake(&mut inner);
    }

    /// Appends one event.
    pub fn push(&self, record: Record) {
        self.append(&mut vec![record]);
    }

    /// Appends the last event: nothing follows it.
    pub fn close(&self, record: Record) {
        let mut inner = self.lock();
        inner.records.push_back(record);
        inner.closed = true;
        self.wake(&mut inner);
    }

    fn wake(&self, inner: &mut Inner) {
        self.ready.notify_all();
        #[cfg(unix)]
        if !inner.woken {
            inner.woken = true;
            if let Some(mut w) = self.wake.as_ref() {
                // Full means a byte is already waiting to be read: woken either way.
                let _ = w.write(&[1]);
            }
        }
        #[cfg(not(unix))]
        let _ = inner;
    }

    /// Whether the queue is closed and drained.
    pub fn is_over(&self) -> bool {
        let inner = self.lock();
        inner.closed && inner.records.is_empty() && inner.dropped == 0
    }

    /// Up to `max` events, waiting until `deadline` for the first; and whether the queue
    /// is closed and drained (nothing will ever come again).
    pub fn take(&self, max: usize, deadline: Instant) -> (Vec<Record>, bool) {
        let mut inner = self.lock();
        while inner.records.is_empty() && inner.dropped == 0 && !inner.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            inner = self
                .ready
                .wait_timeout(inner, left.min(Duration::from_secs(3600)))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let mut out = Vec::with_capacity(inner.records.len().min(max) + 1);
        if inner.dropped > 0 {
            let dropped = std::mem::take(&mut inner.dropped);
            out.push(Record::plain(DROPPED, 0, 0, dropped as i64));
        }
        let n = inner
            .records
            .len()
            .min(max.saturating_sub(out.len()).max(1));
        out.extend(inner.records.drain(..n));
        if inner.records.is_empty() {
            inner.woken = false;
        }
        let over = inner.closed && inner.records.is_empty() && out.is_empty();
        (out, over)
    }
}

/// The end of the wake socket an event loop reads (`Session.wake_fd`).
pub struct Waker(#[cfg(unix)] pub std::os::unix::net::UnixStream);
