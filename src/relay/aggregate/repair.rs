//! NACK repair in aggregated delivery: a lost packet of a subscriber's aggregated stream is
//! sent again under its sequence number with the *current* state of what it carried, held
//! to the same feedback budget as per-stream repairs.

use super::builder::Segment;
use super::member::write_packet;
use super::{Aggregator, Scratch, Tx};
use crate::relay::api::SessionId;
use crate::relay::core::Relay;
use crate::relay::forward::{RTP_HEADER, admits_entry};
use crate::relay::room::Room;
use crate::relay::session::Session;
use crate::relay::store::Entry;
use crate::wire::Dialect;
use crate::wire::container::{container_len, write_header};
use std::time::{Duration, Instant};

impl Aggregator {
    /// Answers a NACK from member `to`: each lost packet is sent again under its sequence
    /// number with the *current* state of what it carried that no later packet carried
    /// (see [`RepairSource`]); one its budget cannot pay becomes pending updates.
    fn repair<'r>(
        &mut self,
        to: SessionId,
        lost: &[u16],
        tx: &mut Tx<'_>,
        src: &mut impl RepairSource<'r>,
    ) -> Repaired {
        let Self {
            views,
            members,
            scratch,
            ..
        } = self;
        let mut done = Repaired::default();
        let Some(m) = members.get(&to) else {
            return done;
        };
        let Some(view) = views.get(m.view).and_then(Option::as_ref) else {
            return done;
        };
        for (i, &seq) in lost.iter().enumerate() {
            if lost[..i].contains(&seq) {
                continue;
            }
            let Some(carried) = m.serial_of(seq).and_then(|s| view.history.get(s)) else {
                done.unknown += 1;
                continue;
            };
            let newer = |key: &(u32, u64)| {
                m.serials_after(seq)
                    .any(|s| view.history.get(s).is_some_and(|c| c.contains(key)))
            };
            scratch.payload.clear();
            scratch.segments.clear();
            for (j, &(ssrc, _)) in carried.iter().enumerate() {
                if carried[..j].iter().any(|c| c.0 == ssrc) || (!m.echo && ssrc == m.own) {
                    continue;
                }
                current_container(scratch, tx.budget, ssrc, carried, |key| {
                    if newer(&key) { None } else { src.current(key) }
                });
            }
            if scratch.segments.is_empty() {
                continue;
            }
            let Scratch {
                payload, segments, ..
            } = &*scratch;
            if !src.afford(payload.len() + RTP_HEADER) {
                for key in carried.iter().filter(|c| m.echo || c.0 != m.own) {
                    src.defer(*key);
                }
                done.deferred += 1;
                continue;
            }
            let header = (seq, m.timestamp(tx.now));
            let contributors = segments.iter().map(|s| s.ssrc);
            if write_packet(tx.out, to, tx.relay_ssrc, header, contributors, |buf| {
                buf.extend_from_slice(payload)
            }) {
                done.repaired += 1;
            }
        }
        done
    }
}

/// What answering a NACK did.
#[derive(Debug, Default)]
struct Repaired {
    repaired: u64,
    unknown: u64,
    deferred: u64,
}

/// What a NACK repair needs from the rest of the core.
trait RepairSource<'r> {
    /// The current bytes of an object the member still gets and may have repaired now
    /// (the feedback budget's repair interval).
    fn current(&mut self, key: (u32, u64)) -> Option<&'r [u8]>;
    /// Whether the member's budget pays for a packet of `bytes`.
    fn afford(&mut self, bytes: usize) -> bool;
    /// Makes an object a pending update instead (sent with the newest state).
    fn defer(&mut self, key: (u32, u64));
}

/// Appends to the scratch payload a container of the current state of `ssrc`'s objects
/// that `carried` lists, as far as the budget allows.
fn current_container<'s>(
    s: &mut Scratch,
    budget: usize,
    ssrc: u32,
    carried: &[(u32, u64)],
    mut current: impl FnMut((u32, u64)) -> Option<&'s [u8]>,
) {
    s.body.clear();
    for (j, c) in carried.iter().enumerate() {
        // An object carried twice (two formats) is one cached entry holding both.
        if c.0 != ssrc || carried[..j].contains(c) {
            continue;
        }
        if let Some(bytes) = current(*c)
            && s.payload.len() + container_len(ssrc, s.body.len() + bytes.len()) <= budget
        {
            s.body.extend_from_slice(bytes);
        }
    }
    if s.body.is_empty() {
        return;
    }
    let start = s.payload.len();
    write_header(&mut s.payload, ssrc, s.body.len());
    s.payload.extend_from_slice(&s.body);
    s.segments.push(Segment {
        ssrc,
        range: start..s.payload.len(),
    });
}

impl Relay {
    /// Answers a NACK for the relay's own SSRC from a member of aggregated delivery, held
    /// to the same feedback budget as per-stream repairs.
    pub(in crate::relay) fn repair_aggregated(
        &mut self,
        now: Instant,
        to: SessionId,
        lost: &[u16],
    ) {
        let Some(room) = self.sessions.get(&to).and_then(|s| self.rooms.get(&s.room)) else {
            return;
        };
        let owners: Vec<(u32, Dialect)> = room
            .streams
            .iter()
            .map(|(ssrc, st)| {
                let d = self.sessions.get(&st.owner).map(|o| o.dialect);
                (*ssrc, d.unwrap_or_default())
            })
            .collect();
        let Some(sub) = self.sessions.get_mut(&to) else {
            return;
        };
        let mut src = Repairs {
            room,
            owners,
            sub,
            now,
            interval: self.cfg.snapshot_interval,
            deferred: false,
        };
        let budget = self.cfg.payload_budget;
        let mut tx = Tx::new(&mut self.out, &self.metrics, self.relay_ssrc, now, budget);
        let done = self.agg.repair(to, lost, &mut tx, &mut src);
        let deferred = src.deferred;
        self.metrics.repairs.inc_by(done.repaired);
        for _ in 0..done.unknown {
            self.metrics.drop("nack_unknown");
        }
        for _ in 0..done.deferred {
            self.metrics.suppress("nack_budget");
        }
        if deferred {
            self.drain_session(now, to);
        }
    }
}

/// A NACK repair's view of the member's session and room.
struct Repairs<'r> {
    room: &'r Room,
    owners: Vec<(u32, Dialect)>,
    sub: &'r mut Session,
    now: Instant,
    interval: Duration,
    deferred: bool,
}

impl Repairs<'_> {
    /// The object's cached entry, if the member's interest still admits it.
    fn entry(&self, (ssrc, id): (u32, u64)) -> Option<&Entry> {
        let stream = self.room.streams.get(&ssrc)?;
        if !self
            .sub
            .interest
            .admits_stream(ssrc, stream.owner == self.sub.id)
        {
            return None;
        }
        let from = self.owners.iter().find(|o| o.0 == ssrc)?.1;
        let e = stream.store.get(id)?;
        admits_entry(&self.sub.interest, self.sub.dialect, from, e).then_some(e)
    }
}

impl<'r> RepairSource<'r> for Repairs<'r> {
    fn current(&mut self, key: (u32, u64)) -> Option<&'r [u8]> {
        let stream = self.room.streams.get(&key.0)?;
        self.entry(key)?;
        if !self.sub.feedback.may_repair(key, self.now, self.interval) {
            return None;
        }
        stream.store.get(key.1).map(|e| &e.bytes[..])
    }

    fn afford(&mut self, bytes: usize) -> bool {
        self.sub.pacing.budget().take(bytes, self.now)
    }

    fn defer(&mut self, key: (u32, u64)) {
        if self.entry(key).is_some() {
            self.sub.pacing.defer(key, self.now, self.now);
            self.deferred = true;
        }
    }
}
