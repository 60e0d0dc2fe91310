//! Feedback from sessions: FIR/PLI answered with snapshots from the store, NACK answered
//! with the current state of what the lost packet carried, TMMBR and RFC 8888 congestion
//! feedback turned into caps; and the FIR the relay passes on to a sender. The core's
//! RTCP dispatch ([`super::core`]) calls these with its borrowed [`State`].
//!
//! Answers are held to the subscriber's feedback budget ([`super::budget`]): a snapshot
//! per stream and a repair per object at most once per `snapshot_interval`, and every
//! byte the relay makes itself is paced against the subscriber's cap (or the relay-made
//! send budget): a snapshot's objects become pending updates that the pacer sends in
//! bursts a default receive buffer holds, each with the newest state when it goes.

use super::api::SessionId;
use super::budget::Verdict;
use super::congestion::{Controller, MAX_DELAY, PathSample};
use super::forward::{admits_entry, entry_relevance};
use super::limits::BITRATE;
use super::relevance;
use super::room::Stream;
use super::session::{Session, Subscription};
use super::state::State;
use super::stats::StatEvent;
use crate::rtp::PacketClass;
use crate::rtp::ccfb::{ATO_OVERRANGE, Ccfb};
use crate::rtp::ntp;
use crate::rtp::rtcp::{self, FirEntry, TmmbEntry};
use std::time::Instant;

/// A FIR entry: answered once per FIR command sequence number (RFC 5104 §4.3.1.2).
/// Only entries naming a stream of the room (or the relay) are remembered, so the
/// map cannot grow with made-up SSRCs.
pub(super) fn on_fir(st: &mut State, now: Instant, from: SessionId, e: FirEntry) {
    let relay = st.relay_ssrc;
    let Some(s) = st.sessions.get_mut(&from) else {
        return;
    };
    let known = e.ssrc == relay
        || st
            .rooms
            .get(&s.room)
            .is_some_and(|r| r.streams.contains_key(&e.ssrc));
    if !known {
        st.stats.suppress("unknown_stream");
        return;
    }
    if !s.feedback.fir_is_new(e.ssrc, e.sequence_number) {
        st.stats.suppress("fir_repeat");
        return;
    }
    refresh(st, now, from, e.ssrc);
}

/// Sends `to` the cached state of stream `media`, or of every stream when `media` is
/// the relay's own SSRC, within its feedback budget. A stream with no cached state has
/// the request passed on to its sender.
pub(super) fn refresh(st: &mut State, now: Instant, to: SessionId, media: u32) {
    let interval = st.cfg.snapshot_interval;
    let Some(s) = st.sessions.get(&to).filter(|s| s.subscribe) else {
        return;
    };
    let Some(room) = st.rooms.get(&s.room) else {
        return;
    };
    let mut targets: Vec<u32> = if media == st.relay_ssrc {
        // Only the streams it receives: a link asks nothing of another link's streams.
        room.streams
            .iter()
            .filter(|(ssrc, stream)| s.wants_stream(**ssrc, stream))
            .map(|(ssrc, _)| *ssrc)
            .collect()
    } else {
        room.streams
            .keys()
            .copied()
            .filter(|s| *s == media)
            .collect()
    };
    if targets.is_empty() {
        st.stats.suppress("unknown_stream");
    }
    targets.sort_unstable();
    for ssrc in targets {
        if !has_state(st, to, ssrc) {
            forward_fir(st, now, ssrc);
            continue;
        }
        let Some(sub) = st.sessions.get_mut(&to) else {
            return;
        };
        match sub.feedback.ask_snapshot(ssrc, now, interval) {
            Verdict::Now => queue_snapshot(st, now, to, ssrc),
            // Built when the interval ends: drain_session schedules the wake-up.
            Verdict::Later(_) => st.stats.suppress("snapshot_interval"),
        }
    }
    st.drain_session(now, to);
}

/// Whether stream `ssrc` in `to`'s room has cached state.
fn has_state(st: &State, to: SessionId, ssrc: u32) -> bool {
    st.sessions
        .get(&to)
        .and_then(|s| st.rooms.get(&s.room))
        .and_then(|r| r.streams.get(&ssrc))
        .is_some_and(|st| !st.store.is_empty())
}

/// Builds the snapshots deferred by the feedback budget whose interval has ended.
pub(super) fn deferred_snapshots(st: &mut State, now: Instant, to: SessionId) {
    let mut due = std::mem::take(&mut st.due_streams);
    if let Some(s) = st.sessions.get_mut(&to) {
        s.feedback.take_due(now, &mut due);
    }
    for &ssrc in &due {
        if let Some(s) = st.sessions.get_mut(&to) {
            let _ = s.feedback.ask_snapshot(ssrc, now, st.cfg.snapshot_interval);
        }
        queue_snapshot(st, now, to, ssrc);
    }
    st.due_streams = due;
}

/// Queues a snapshot of one stream for one subscriber, filtered by its interest (area
/// included): each admitted object becomes a pending update, sent by the pacer with
/// the newest state as the budget allows.
fn queue_snapshot(st: &mut State, now: Instant, to: SessionId, ssrc: u32) {
    let Some(room) = st.sessions.get(&to).and_then(|s| st.rooms.get(&s.room)) else {
        return;
    };
    let Some(stream) = room.streams.get(&ssrc) else {
        return;
    };
    let from = stream.dialect;
    let center = st
        .sessions
        .get(&to)
        .and_then(|s| relevance::center(room, s));
    let Some(sub) = st.sessions.get_mut(&to) else {
        return;
    };
    if !sub.wants_stream(ssrc, stream) {
        return;
    }
    let Session {
        interest,
        dialect,
        inside,
        pacing,
        ..
    } = sub;
    let (mut queued, mut bytes) = (0u64, 0usize);
    for (eid, e) in stream.store.iter() {
        let wanted = entry_relevance(
            inside, interest, *dialect, from, center, stream, ssrc, eid, e,
        )
        .is_some_and(|(is_inside, _)| is_inside);
        if wanted {
            pacing.defer((ssrc, eid), now, now);
            queued += 1;
            bytes += e.bytes.len();
        }
    }
    if queued > 0 {
        pacing.snapshot_since.get_or_insert(now);
        st.stats.snapshots += 1;
        st.stats.record(StatEvent::SnapshotQueued {
            objects: queued as usize,
            bytes,
        });
    }
}

/// Asks a stream's sender for a full refresh, at most once per `fir_forward_interval`.
fn forward_fir(st: &mut State, now: Instant, ssrc: u32) {
    let relay = st.relay_ssrc;
    let interval = st.cfg.fir_forward_interval;
    let Some(owner) = st.owner_of(ssrc) else {
        return;
    };
    let Some(room) = st.sessions.get(&owner).map(|s| s.room.clone()) else {
        return;
    };
    let Some(stream) = st
        .rooms
        .get_mut(&room)
        .and_then(|r| r.streams.get_mut(&ssrc))
    else {
        return;
    };
    if stream
        .fir_forwarded
        .is_some_and(|t| now.saturating_duration_since(t) < interval)
    {
        return;
    }
    stream.fir_forwarded = Some(now);
    stream.fir_seq = stream.fir_seq.wrapping_add(1);
    let entry = FirEntry {
        ssrc,
        sequence_number: stream.fir_seq,
    };
    let (buf, start) = st.out.begin();
    if rtcp::write_fir(buf, relay, &[entry]).is_ok() {
        st.out.commit(owner, PacketClass::Rtcp, start);
        st.stats.firs_forwarded += 1;
    } else {
        st.out.abandon(start);
    }
}

/// Answers a NACK with the *current* state (stale game state would be wrong) of the
/// objects the lost packets carried that the subscriber still lacks: objects no later
/// forwarded packet carried and not repaired within the interval. They become pending
/// updates, sent by the pacer within the subscriber's budget under fresh sequence
/// numbers. Re-sending new content under the lost number would seal one SRTP index
/// twice (keystream reuse; under AES-GCM it gives away the authentication key), so a
/// repair is always a new packet.
pub(super) fn repair(st: &mut State, now: Instant, to: SessionId, media: u32, lost: &[u16]) {
    let interval = st.cfg.snapshot_interval;
    let Some(sub) = st.sessions.get(&to) else {
        return;
    };
    let Some(stream) = st.rooms.get(&sub.room).and_then(|r| r.streams.get(&media)) else {
        st.stats.suppress("unknown_stream");
        return;
    };
    let from = stream.dialect;
    let Some(sub) = st.sessions.get_mut(&to) else {
        return;
    };
    let Session {
        subs,
        interest,
        dialect,
        feedback,
        pacing,
        ..
    } = sub;
    let Some(state) = subs.get(&media) else {
        return;
    };
    let mut repaired = false;
    for (i, &out_seq) in lost.iter().enumerate() {
        if lost[..i].contains(&out_seq) {
            continue;
        }
        let Some(ids) = state
            .source_of(out_seq)
            .and_then(|src| stream.history.ids(src))
        else {
            st.stats.drop("nack_unknown");
            continue;
        };
        let mut answered = false;
        for (j, id) in ids.iter().enumerate() {
            let Some(e) = stream.store.get(*id).filter(|_| !ids[..j].contains(id)) else {
                continue;
            };
            if !admits_entry(interest, *dialect, from, e)
                || carried_later(state, stream, out_seq, *id)
            {
                continue;
            }
            if !feedback.may_repair((media, *id), now, interval) {
                st.stats.suppress("nack_repeat");
                continue;
            }
            pacing.defer((media, *id), now, now);
            answered = true;
        }
        if answered {
            st.stats.repairs += 1;
            repaired = true;
        }
    }
    if repaired {
        st.drain_session(now, to);
    }
}

/// Whether an output packet sent after `out_seq` carried object `id` (so the subscriber
/// has newer state of it than the lost packet held).
fn carried_later(state: &Subscription, stream: &Stream, out_seq: u16, id: u64) -> bool {
    state
        .sent_after(out_seq)
        .any(|src| stream.history.ids(src).is_some_and(|ids| ids.contains(&id)))
}

/// A TMMBR's entries for the relay: the lowest bitrate, clamped into the range an interest
/// may ask (a cap below the floor would starve the subscriber of everything, snapshots
/// included). Returns whether the session's cap was set (its delivery must be synced).
pub(super) fn tmmbr(st: &mut State, now: Instant, from: SessionId, entries: &[TmmbEntry]) -> bool {
    let relay = st.relay_ssrc;
    let cap = entries
        .iter()
        .filter(|e| e.ssrc == relay)
        .map(|e| e.bitrate_bps.clamp(BITRATE.0, BITRATE.1))
        .min();
    match (st.sessions.get_mut(&from), cap) {
        (Some(s), Some(cap)) => {
            s.tmmbr_bps = Some(cap);
            s.refresh_cap(st.cfg.subscriber_max_bitrate_bps, now);
            true
        }
        _ => false,
    }
}

/// RFC 8888 feedback from `from` (whose SSRC is `own`), read into its congestion
/// controller. Returns the send budget the controller now allows, for the core to apply.
pub(super) fn ccfb(
    st: &mut State,
    now: Instant,
    from: SessionId,
    own: u32,
    fb: &Ccfb,
) -> Option<u64> {
    if fb.sender_ssrc != own {
        st.stats.drop("ssrc_mismatch");
        return None;
    }
    st.out.sent.track(from);
    let sent_base = st.wallclock(now);
    let s = st.sessions.get_mut(&from)?;
    let ctrl = s.congestion.get_or_insert_with(Controller::default);
    if let Err(reason) = ctrl.admit(now, fb.report_timestamp) {
        st.stats.suppress(reason);
        return None;
    }
    let mut sample = PathSample::default();
    let mut bogus = false;
    for r in &fb.reports {
        let Some(p) = st
            .out
            .sent
            .get_mut(from, r.ssrc)
            .and_then(|c| c.history())
            .and_then(|h| h.get_mut(r.seq))
            .filter(|p| !p.reported)
        else {
            continue;
        };
        p.reported = true;
        if !r.received {
            sample.lost += 1;
            continue;
        }
        sample.received += 1;
        sample.octets += p.size as u64;
        if r.ato == ATO_OVERRANGE {
            continue;
        }
        // Compact NTP: the receiver's arrival time minus the relay's send time.
        let sent = ntp::compact(sent_base.ntp(p.at));
        let arrival = fb.report_timestamp.wrapping_sub(u32::from(r.ato) * 64);
        let delay = f64::from(arrival.wrapping_sub(sent) as i32) / 65_536.0;
        if sample
            .min_delay
            .is_some_and(|m| (delay - m).abs() > MAX_DELAY.as_secs_f64())
        {
            bogus = true;
        }
        sample.min_delay = Some(sample.min_delay.map_or(delay, |m| m.min(delay)));
    }
    if bogus {
        st.stats.suppress("ccfb_bad_timestamp");
        return None;
    }
    ctrl.update(now, fb.report_timestamp, sample);
    ctrl.rate_bps()
}
