//! The per-subscriber feedback budget (in the spirit of RFC 4585 §3.4 and RFC 8083): how
//! often the relay answers one subscriber's requests for state. A snapshot of a stream is
//! built at most once per interval, whatever mix of FIR and PLI asked and whatever their
//! sequence numbers; a request inside the interval is remembered and answered when it
//! ends. An object is repaired (NACK) at most once per interval. So a subscriber that
//! floods feedback gets a few snapshots' worth per second, and an honest joiner's first
//! FIR is answered at once.
//!
//! Every map here is keyed by a stream or object that exists: entries go when the stream
//! ends or the object expires, and repair times older than the interval are pruned.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What to do with a snapshot request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Build it now.
    Now,
    /// Asked again within the interval: built when the interval ends.
    Later(Instant),
}

/// One subscriber's feedback state.
#[derive(Debug, Default)]
pub struct FeedbackBudget {
    /// Latest FIR command sequence number per media SSRC (RFC 5104 §4.3.1.2: a repeated
    /// number is a retransmission of a request already seen).
    firs: HashMap<u32, u8>,
    /// Per stream: when its last snapshot was built for this subscriber.
    snapshots: HashMap<u32, Instant>,
    /// Streams asked for again within the interval, with when that interval ends.
    deferred: HashMap<u32, Instant>,
    /// Per (stream, objectID): when it was last repaired.
    repaired: HashMap<(u32, u64), Instant>,
}

impl FeedbackBudget {
    /// Records a FIR's sequence number; false when it repeats the last one for `ssrc`.
    pub fn fir_is_new(&mut self, ssrc: u32, seq: u8) -> bool {
        self.firs.insert(ssrc, seq) != Some(seq)
    }

    /// Whether a snapshot of `ssrc` may be built now, or when.
    pub fn ask_snapshot(&mut self, ssrc: u32, now: Instant, interval: Duration) -> Verdict {
        match self.snapshots.get(&ssrc) {
            Some(last) if now < *last + interval => {
                let at = *last + interval;
                self.deferred.insert(ssrc, at);
                Verdict::Later(at)
            }
            _ => {
                self.snapshots.insert(ssrc, now);
                self.deferred.remove(&ssrc);
                Verdict::Now
            }
        }
    }

    /// When the earliest deferred snapshot is due.
    pub fn next_deferred(&self) -> Option<Instant> {
        self.deferred.values().min().copied()
    }

    /// Takes the deferred snapshots due at `now` into `due` (cleared first).
    pub fn take_due(&mut self, now: Instant, due: &mut Vec<u32>) {
        due.clear();
        due.extend(
            self.deferred
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(s, _)| *s),
        );
        for s in due.iter() {
            self.deferred.remove(s);
        }
    }

    /// Whether object `key` may be repaired now (recording it when it may).
    pub fn may_repair(&mut self, key: (u32, u64), now: Instant, interval: Duration) -> bool {
        match self.repaired.get(&key) {
            Some(last) if now < *last + interval => false,
            _ => {
                self.repaired.insert(key, now);
                true
            }
        }
    }

    /// Drops repair times older than the interval: they no longer suppress anything.
    pub fn prune(&mut self, now: Instant, interval: Duration) {
        self.repaired.retain(|_, at| now < *at + interval);
    }

    /// Forgets a stream that ended.
    pub fn forget_stream(&mut self, ssrc: u32) {
        self.firs.remove(&ssrc);
        self.snapshots.remove(&ssrc);
        self.deferred.remove(&ssrc);
        self.repaired.retain(|k, _| k.0 != ssrc);
    }

    /// Forgets an object that expired.
    pub fn forget_object(&mut self, key: (u32, u64)) {
        self.repaired.remove(&key);
    }

    /// Entries held, over every map (for bounded-state tests).
    pub fn entries(&self) -> usize {
        self.firs.len() + self.snapshots.len() + self.deferred.len() + self.repaired.len()
    }
}
