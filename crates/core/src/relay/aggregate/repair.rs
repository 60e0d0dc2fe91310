//! NACK repair in aggregated delivery: what a lost packet of a subscriber's aggregated
//! stream carried, and the subscriber still lacks, goes again with its *current* state as
//! pending updates, under fresh sequence numbers and within the subscriber's budget, like
//! per-stream repairs (`relay::feedback`): new content under the lost number would seal
//! one SRTP index twice.

use super::Aggregator;
use crate::relay::api::SessionId;
use crate::relay::forward::admits_entry;
use crate::relay::room::Room;
use crate::relay::session::Session;
use crate::relay::state::State;
use crate::wire::Dialect;
use std::time::Instant;

/// What answering a NACK found.
#[derive(Debug, Default)]
struct Repaired {
    /// Lost packets with something to repair.
    repaired: u64,
    /// Lost sequence numbers no longer remembered.
    unknown: u64,
}

impl Aggregator {
    /// The objects member `to`'s lost packets carried that no later packet of its stream
    /// carried, each passed once to `lacking`.
    fn lacking(
        &self,
        to: SessionId,
        lost: &[u16],
        mut lacking: impl FnMut((u32, u64)) -> bool,
    ) -> Repaired {
        let mut done = Repaired::default();
        let Some(m) = self.members.get(&to) else {
            return done;
        };
        let Some(view) = self.views.get(m.view).and_then(Option::as_ref) else {
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
            let mut answered = false;
            for (j, key) in carried.iter().enumerate() {
                if carried[..j].contains(key) || (!m.echo && key.0 == m.own) || newer(key) {
                    continue;
                }
                answered |= lacking(*key);
            }
            done.repaired += u64::from(answered);
        }
        done
    }

    /// Answers a NACK for the relay's own SSRC from a member of aggregated delivery, held
    /// to the same feedback budget as per-stream repairs.
    pub(in crate::relay) fn repair(
        &mut self,
        st: &mut State,
        now: Instant,
        to: SessionId,
        lost: &[u16],
    ) {
        let interval = st.cfg.snapshot_interval;
        let Some(room) = st.sessions.get(&to).and_then(|s| st.rooms.get(&s.room)) else {
            return;
        };
        let owners: Vec<(u32, Dialect)> = room
            .streams
            .iter()
            .map(|(ssrc, stream)| (*ssrc, stream.dialect))
            .collect();
        let Some(sub) = st.sessions.get_mut(&to) else {
            return;
        };
        let stats = &mut st.stats;
        let done = self.lacking(to, lost, |key| {
            let owner = owners.iter().find(|o| o.0 == key.0).map(|o| o.1);
            if !owner.is_some_and(|d| admitted(room, sub, d, key)) {
                return false;
            }
            if !sub.feedback.may_repair(key, now, interval) {
                stats.suppress("nack_repeat");
                return false;
            }
            sub.pacing.defer(key, now, now);
            true
        });
        st.stats.repairs += done.repaired;
        for _ in 0..done.unknown {
            st.stats.drop("nack_unknown");
        }
        if done.repaired > 0 {
            st.drain_session(now, to);
        }
    }
}

/// Whether the member's interest still admits the object (its stream and its type, in
/// the sender's dialect).
fn admitted(room: &Room, sub: &Session, owner: Dialect, (ssrc, id): (u32, u64)) -> bool {
    let Some(stream) = room.streams.get(&ssrc) else {
        return false;
    };
    sub.wants_stream(ssrc, stream)
        && stream
            .store
            .get(id)
            .is_some_and(|e| admits_entry(&sub.interest, sub.dialect, owner, e))
}
