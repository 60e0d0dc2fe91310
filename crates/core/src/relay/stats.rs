//! What the core counts, as plain data (the model is quinn-proto's `ConnectionStats`):
//! the core adds to these fields and queues a few measurements; the shell reads them after
//! each input and exports them (the metrics module's exporter). The core imports no metrics
//! crate and takes no lock to count.

use std::collections::VecDeque;
use std::time::Duration;

/// Measurements queued for the shell beyond this are dropped (and counted in
/// [`RelayStats::events_lost`]): a shell that never polls cannot grow the core's memory.
const MAX_EVENTS: usize = 1024;

/// Reasons a count holds before its first growth: more than any one family has today, so
/// a reason first counted in steady state does not allocate on the forwarding path.
const REASONS: usize = 32;

/// Measurements the queue holds before its first growth: more than one input produces.
const EVENTS: usize = 64;

/// Counts keyed by a static reason. Room for `REASONS` is made up front; a reason past
/// that grows the table once, and later counts allocate nothing.
#[derive(Debug, PartialEq, Eq)]
pub struct ReasonCounts(Vec<(&'static str, u64)>);

impl Default for ReasonCounts {
    fn default() -> Self {
        Self(Vec::with_capacity(REASONS))
    }
}

impl Clone for ReasonCounts {
    fn clone(&self) -> Self {
        let mut c = Self::default();
        c.clone_from(self);
        c
    }

    /// Copies into the table already held: a shell that keeps the last counts to export
    /// the difference copies them after every input, and must not allocate to do it.
    fn clone_from(&mut self, source: &Self) {
        self.0.clone_from(&source.0);
    }
}

impl ReasonCounts {
    /// Adds `n` to `reason`.
    pub fn add(&mut self, reason: &'static str, n: u64) {
        match self.0.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, c)) => *c += n,
            None => self.0.push((reason, n)),
        }
    }

    /// The count of `reason` (0 when never counted).
    pub fn get(&self, reason: &str) -> u64 {
        self.0
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, c)| *c)
    }

    /// Every reason counted so far, with its count.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().copied()
    }
}

/// What pacing did to object updates.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PacingStats {
    /// Updates held back by a rate tier.
    pub deferred_rate_tier: u64,
    /// Updates held back by a bandwidth cap.
    pub deferred_cap: u64,
    /// Updates dropped under a bandwidth cap (no objectID: nothing cached to send later).
    pub dropped_cap: u64,
    /// Held-back updates superseded by a newer state (never sent).
    pub coalesced: u64,
}

/// A measurement the shell turns into a histogram sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StatEvent {
    /// A snapshot was queued for a subscriber: its objects and payload bytes.
    SnapshotQueued {
        /// Objects in it.
        objects: usize,
        /// Their payload bytes.
        bytes: usize,
    },
    /// A subscriber's snapshot has been sent whole (paced), `took` after it was queued.
    SnapshotSent {
        /// From queued to nothing pending.
        took: Duration,
    },
    /// A round trip measured from a session's reception report on one of the relay's SRs.
    Rtt {
        /// The round-trip time.
        rtt: Duration,
    },
}

/// RTCP reports sent and accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RtcpStats {
    /// SRs sent.
    pub sender_reports_sent: u64,
    /// RRs sent.
    pub receiver_reports_sent: u64,
    /// SRs accepted from sessions.
    pub sender_reports_received: u64,
    /// RRs accepted from sessions.
    pub receiver_reports_received: u64,
}

/// Every counter of the core. Counters only grow; the gauges say what is held now.
#[derive(Debug)]
pub struct RelayStats {
    /// Inbound packets dropped, by reason.
    pub dropped: ReasonCounts,
    /// RTCP feedback received, by kind (`fir`, `pli`, `nack`, `tmmbr`, `bye`).
    pub feedback: ReasonCounts,
    /// Ownership requests by outcome: `granted`, `released`, `lost` (a holder lost an
    /// object to a request), or the reason a request was refused.
    pub ownership: ReasonCounts,
    /// Feedback not answered (or answered later) under the feedback budget, by reason.
    pub suppressed: ReasonCounts,
    /// FIR/PLI answered from the cache.
    pub snapshots: u64,
    /// FIRs passed on to a sender because the relay held no state.
    pub firs_forwarded: u64,
    /// NACK repairs sent.
    pub repairs: u64,
    /// Aggregated payloads built (each shared by its view's members).
    pub aggregate_payloads: u64,
    /// Aggregated packets sent.
    pub aggregate_packets: u64,
    /// What pacing did.
    pub pacing: PacingStats,
    /// RTCP reports.
    pub rtcp: RtcpStats,
    /// Gauge: streams publishing.
    pub streams: u64,
    /// Gauge: objects held in the latest-state store.
    pub cached_objects: u64,
    /// Measurements dropped because the shell did not poll them.
    pub events_lost: u64,
    events: VecDeque<StatEvent>,
}

impl Default for RelayStats {
    fn default() -> Self {
        Self {
            dropped: ReasonCounts::default(),
            feedback: ReasonCounts::default(),
            ownership: ReasonCounts::default(),
            suppressed: ReasonCounts::default(),
            snapshots: 0,
            firs_forwarded: 0,
            repairs: 0,
            aggregate_payloads: 0,
            aggregate_packets: 0,
            pacing: PacingStats::default(),
            rtcp: RtcpStats::default(),
            streams: 0,
            cached_objects: 0,
            events_lost: 0,
            events: VecDeque::with_capacity(EVENTS),
        }
    }
}

impl Clone for RelayStats {
    fn clone(&self) -> Self {
        let mut c = Self::default();
        c.clone_from(self);
        c
    }

    /// Copies field by field into the tables already held (the derived `clone_from`
    /// would build a new copy and allocate). Destructured whole, so a new field cannot be
    /// left out.
    fn clone_from(&mut self, source: &Self) {
        let Self {
            dropped,
            feedback,
            ownership,
            suppressed,
            snapshots,
            firs_forwarded,
            repairs,
            aggregate_payloads,
            aggregate_packets,
            pacing,
            rtcp,
            streams,
            cached_objects,
            events_lost,
            events,
        } = source;
        self.dropped.clone_from(dropped);
        self.feedback.clone_from(feedback);
        self.ownership.clone_from(ownership);
        self.suppressed.clone_from(suppressed);
        self.snapshots = *snapshots;
        self.firs_forwarded = *firs_forwarded;
        self.repairs = *repairs;
        self.aggregate_payloads = *aggregate_payloads;
        self.aggregate_packets = *aggregate_packets;
        self.pacing = *pacing;
        self.rtcp = *rtcp;
        self.streams = *streams;
        self.cached_objects = *cached_objects;
        self.events_lost = *events_lost;
        self.events.clone_from(events);
    }
}

impl RelayStats {
    /// Counts one dropped packet.
    pub fn drop(&mut self, reason: &'static str) {
        self.dropped.add(reason, 1);
    }

    /// Counts one feedback request suppressed by the feedback budget.
    pub fn suppress(&mut self, reason: &'static str) {
        self.suppressed.add(reason, 1);
    }

    /// Queues a measurement for the shell.
    pub(super) fn record(&mut self, e: StatEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events_lost += 1;
            return;
        }
        self.events.push_back(e);
    }

    /// The oldest measurement not yet taken.
    pub(super) fn pop_event(&mut self) -> Option<StatEvent> {
        self.events.pop_front()
    }

    /// `cached_objects` moved by `added - removed`.
    pub(super) fn objects_changed(&mut self, added: usize, removed: usize) {
        self.cached_objects = (self.cached_objects + added as u64).saturating_sub(removed as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_add_up_and_unknown_reasons_read_zero() {
        let mut c = ReasonCounts::default();
        c.add("late", 1);
        c.add("late", 2);
        c.add("oversized", 1);
        assert_eq!(c.get("late"), 3);
        assert_eq!(c.get("oversized"), 1);
        assert_eq!(c.get("never"), 0);
        assert_eq!(c.iter().count(), 2);
    }

    #[test]
    fn events_are_capped_and_the_excess_counted() {
        let mut s = RelayStats::default();
        for _ in 0..MAX_EVENTS + 3 {
            s.record(StatEvent::SnapshotSent {
                took: Duration::ZERO,
            });
        }
        assert_eq!(s.events_lost, 3);
        let mut n = 0;
        while s.pop_event().is_some() {
            n += 1;
        }
        assert_eq!(n, MAX_EVENTS);
    }
}
