//! RTCP from sessions: FIR/PLI answered with snapshots from the store, NACK answered
//! with the current state of what the lost packet carried, TMMBR recorded, BYE ending a
//! stream; and the RTCP the relay sends (BYE to subscribers, FIR to a sender).
//!
//! Answers are held to the subscriber's feedback budget ([`super::budget`]): a snapshot
//! per stream and a repair per object at most once per `snapshot_interval`, and every
//! byte the relay makes itself is paced against the subscriber's cap (or the relay-made
//! send budget): a snapshot's objects become pending updates that the pacer sends in
//! bursts a default receive buffer holds, each with the newest state when it goes.

use super::api::SessionId;
use super::budget::Verdict;
use super::core::Relay;
use super::forward::{admits_entry, entry_relevance};
use super::limits::BITRATE;
use super::relevance;
use super::room::Stream;
use super::session::{Session, Subscription};
use super::stats::StatEvent;
use crate::rtp::PacketClass;
use crate::rtp::rtcp::{self, FirEntry, RtcpItem};
use std::time::Instant;

impl Relay {
    /// Handles one plaintext RTCP compound packet from a session.
    pub fn handle_rtcp(&mut self, now: Instant, from: SessionId, packet: &[u8]) {
        self.busy = Some(from);
        self.out.now = Some(now);
        if let Err(reason) = self.accept_rtcp(now, from, packet) {
            self.drop_packet(reason);
        }
        // Snapshots asked for by feedback go out now, also in aggregated delivery.
        self.mix(now, true);
        self.count_overflow();
    }

    fn accept_rtcp(
        &mut self,
        now: Instant,
        from: SessionId,
        packet: &[u8],
    ) -> Result<(), &'static str> {
        let own = self.admit(now, from, packet.len())?.ssrc;
        let items = rtcp::parse_compound(packet).map_err(|e| e.reason())?;
        for item in items {
            match item {
                RtcpItem::Fir {
                    sender_ssrc,
                    entries,
                } if sender_ssrc == own => {
                    for e in entries {
                        self.count_feedback("fir");
                        self.on_fir(now, from, e);
                    }
                }
                RtcpItem::Pli {
                    sender_ssrc,
                    media_ssrc,
                } if sender_ssrc == own => {
                    self.count_feedback("pli");
                    self.refresh(now, from, media_ssrc);
                }
                RtcpItem::Nack {
                    sender_ssrc,
                    media_ssrc,
                    lost,
                } if sender_ssrc == own => {
                    self.count_feedback("nack");
                    if media_ssrc == self.relay_ssrc {
                        self.repair_aggregated(now, from, &lost);
                    } else {
                        self.repair(now, from, media_ssrc, &lost);
                    }
                }
                RtcpItem::Tmmbr {
                    sender_ssrc,
                    entries,
                } if sender_ssrc == own => {
                    self.count_feedback("tmmbr");
                    let relay = self.relay_ssrc;
                    // A cap below the floor would starve the subscriber of everything,
                    // snapshots included: clamped into the range an interest may ask.
                    let cap = entries
                        .iter()
                        .filter(|e| e.ssrc == relay)
                        .map(|e| e.bitrate_bps.clamp(BITRATE.0, BITRATE.1))
                        .min();
                    if let (Some(s), Some(cap)) = (self.sessions.get_mut(&from), cap) {
                        s.tmmbr_bps = Some(cap);
                        s.refresh_cap(self.cfg.subscriber_max_bitrate_bps, now);
                        // A capped subscriber no longer shares an aggregated view.
                        self.sync_delivery(from, now);
                    }
                }
                RtcpItem::SenderReport {
                    ssrc,
                    info,
                    reports,
                } => self.on_sender_report(now, from, (own, ssrc), info, &reports),
                RtcpItem::ReceiverReport { ssrc, reports } => {
                    self.on_receiver_report(now, from, (own, ssrc), &reports);
                }
                RtcpItem::Sdes { chunks } => self.on_sdes(from, own, &chunks),
                RtcpItem::Ccfb(fb) => {
                    self.count_feedback("ccfb");
                    self.on_ccfb(now, from, own, &fb);
                }
                RtcpItem::Bye { ssrcs } if ssrcs.contains(&own) => {
                    self.count_feedback("bye");
                    if let Some(room) = self.sessions.get(&from).map(|s| s.room.clone()) {
                        self.end_stream(&room, own);
                    }
                }
                RtcpItem::Fir { .. }
                | RtcpItem::Pli { .. }
                | RtcpItem::Nack { .. }
                | RtcpItem::Tmmbr { .. } => {
                    self.drop_packet("ssrc_mismatch");
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn count_feedback(&mut self, kind: &'static str) {
        self.stats.feedback.add(kind, 1);
    }

    /// A FIR entry: answered once per FIR command sequence number (RFC 5104 §4.3.1.2).
    /// Only entries naming a stream of the room (or the relay) are remembered, so the
    /// map cannot grow with made-up SSRCs.
    fn on_fir(&mut self, now: Instant, from: SessionId, e: FirEntry) {
        let relay = self.relay_ssrc;
        let Some(s) = self.sessions.get_mut(&from) else {
            return;
        };
        let known = e.ssrc == relay
            || self
                .rooms
                .get(&s.room)
                .is_some_and(|r| r.streams.contains_key(&e.ssrc));
        if !known {
            self.suppress("unknown_stream");
            return;
        }
        if !s.feedback.fir_is_new(e.ssrc, e.sequence_number) {
            self.suppress("fir_repeat");
            return;
        }
        self.refresh(now, from, e.ssrc);
    }

    /// Sends `to` the cached state of stream `media`, or of every stream when `media` is
    /// the relay's own SSRC, within its feedback budget. A stream with no cached state has
    /// the request passed on to its sender.
    fn refresh(&mut self, now: Instant, to: SessionId, media: u32) {
        let interval = self.cfg.snapshot_interval;
        let Some(s) = self.sessions.get(&to).filter(|s| s.subscribe) else {
            return;
        };
        let Some(room) = self.rooms.get(&s.room) else {
            return;
        };
        let mut targets: Vec<u32> = if media == self.relay_ssrc {
            room.streams.keys().copied().collect()
        } else {
            room.streams
                .keys()
                .copied()
                .filter(|s| *s == media)
                .collect()
        };
        if targets.is_empty() {
            self.suppress("unknown_stream");
        }
        targets.sort_unstable();
        for ssrc in targets {
            if !self.has_state(to, ssrc) {
                self.forward_fir(now, ssrc);
                continue;
            }
            let Some(sub) = self.sessions.get_mut(&to) else {
                return;
            };
            match sub.feedback.ask_snapshot(ssrc, now, interval) {
                Verdict::Now => self.queue_snapshot(now, to, ssrc),
                // Built when the interval ends: drain_session schedules the wake-up.
                Verdict::Later(_) => self.suppress("snapshot_interval"),
            }
        }
        self.drain_session(now, to);
    }

    /// Whether stream `ssrc` in `to`'s room has cached state.
    fn has_state(&self, to: SessionId, ssrc: u32) -> bool {
        self.sessions
            .get(&to)
            .and_then(|s| self.rooms.get(&s.room))
            .and_then(|r| r.streams.get(&ssrc))
            .is_some_and(|st| !st.store.is_empty())
    }

    /// Builds the snapshots deferred by the feedback budget whose interval has ended.
    pub(super) fn deferred_snapshots(&mut self, now: Instant, to: SessionId) {
        let mut due = std::mem::take(&mut self.due_streams);
        if let Some(s) = self.sessions.get_mut(&to) {
            s.feedback.take_due(now, &mut due);
        }
        for &ssrc in &due {
            if let Some(s) = self.sessions.get_mut(&to) {
                let _ = s
                    .feedback
                    .ask_snapshot(ssrc, now, self.cfg.snapshot_interval);
            }
            self.queue_snapshot(now, to, ssrc);
        }
        self.due_streams = due;
    }

    /// Queues a snapshot of one stream for one subscriber, filtered by its interest (area
    /// included): each admitted object becomes a pending update, sent by the pacer with
    /// the newest state as the budget allows.
    fn queue_snapshot(&mut self, now: Instant, to: SessionId, ssrc: u32) {
        let Some(room) = self.sessions.get(&to).and_then(|s| self.rooms.get(&s.room)) else {
            return;
        };
        let Some(stream) = room.streams.get(&ssrc) else {
            return;
        };
        let from = self
            .sessions
            .get(&stream.owner)
            .map(|s| s.dialect)
            .unwrap_or_default();
        let center = self
            .sessions
            .get(&to)
            .and_then(|s| relevance::center(room, s));
        let Some(sub) = self.sessions.get_mut(&to) else {
            return;
        };
        if !sub.interest.admits_stream(ssrc, stream.owner == to) {
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
            self.stats.snapshots += 1;
            self.stats.record(StatEvent::SnapshotQueued {
                objects: queued as usize,
                bytes,
            });
        }
    }

    /// Asks a stream's sender for a full refresh, at most once per `fir_forward_interval`.
    fn forward_fir(&mut self, now: Instant, ssrc: u32) {
        let relay = self.relay_ssrc;
        let interval = self.cfg.fir_forward_interval;
        let Some(owner) = self.session_by_ssrc(ssrc) else {
            return;
        };
        let Some(room) = self.sessions.get(&owner).map(|s| s.room.clone()) else {
            return;
        };
        let Some(st) = self
            .rooms
            .get_mut(&room)
            .and_then(|r| r.streams.get_mut(&ssrc))
        else {
            return;
        };
        if st
            .fir_forwarded
            .is_some_and(|t| now.saturating_duration_since(t) < interval)
        {
            return;
        }
        st.fir_forwarded = Some(now);
        st.fir_seq = st.fir_seq.wrapping_add(1);
        let entry = FirEntry {
            ssrc,
            sequence_number: st.fir_seq,
        };
        let (buf, start) = self.out.begin();
        if rtcp::write_fir(buf, relay, &[entry]).is_ok() {
            self.out.commit(owner, PacketClass::Rtcp, start);
            self.stats.firs_forwarded += 1;
        } else {
            self.out.abandon(start);
        }
    }

    /// Answers a NACK with the *current* state (stale game state would be wrong) of the
    /// objects the lost packets carried that the subscriber still lacks: objects no later
    /// forwarded packet carried and not repaired within the interval. They become pending
    /// updates, sent by the pacer within the subscriber's budget under fresh sequence
    /// numbers. Re-sending new content under the lost number would seal one SRTP index
    /// twice (keystream reuse; under AES-GCM it gives away the authentication key), so a
    /// repair is always a new packet.
    fn repair(&mut self, now: Instant, to: SessionId, media: u32, lost: &[u16]) {
        let interval = self.cfg.snapshot_interval;
        let Some(sub) = self.sessions.get(&to) else {
            return;
        };
        let Some(stream) = self
            .rooms
            .get(&sub.room)
            .and_then(|r| r.streams.get(&media))
        else {
            self.stats.suppress("unknown_stream");
            return;
        };
        let from = self
            .sessions
            .get(&stream.owner)
            .map(|s| s.dialect)
            .unwrap_or_default();
        let Some(sub) = self.sessions.get_mut(&to) else {
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
                self.stats.drop("nack_unknown");
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
                    self.stats.suppress("nack_repeat");
                    continue;
                }
                pacing.defer((media, *id), now, now);
                answered = true;
            }
            if answered {
                self.stats.repairs += 1;
                repaired = true;
            }
        }
        if repaired {
            self.drain_session(now, to);
        }
    }

    fn suppress(&mut self, reason: &'static str) {
        self.stats.suppress(reason);
    }

    /// Ends a stream: drops its state and sends an RTCP BYE for it to the room's
    /// subscribers.
    pub(super) fn end_stream(&mut self, room_name: &str, ssrc: u32) {
        let Some(room) = self.rooms.get_mut(room_name) else {
            return;
        };
        let Some(stream) = room.streams.remove(&ssrc) else {
            return;
        };
        for (id, e) in stream.store.iter() {
            if let Some(cell) = e.cell() {
                room.objects.remove(cell, (ssrc, id));
            }
        }
        self.stats.streams = self.stats.streams.saturating_sub(1);
        self.stats.objects_changed(0, stream.store.len());
        self.agg.sender_left(room_name, ssrc);
        for member in room.members.clone() {
            let Some(s) = self.sessions.get_mut(&member) else {
                continue;
            };
            s.forget_stream(ssrc);
            self.out.sent.forget_stream(member, ssrc);
            if member == stream.owner || !s.subscribe {
                continue;
            }
            let (buf, start) = self.out.begin();
            if rtcp::write_bye(buf, &[ssrc]).is_ok() {
                self.out.commit(member, PacketClass::Rtcp, start);
            } else {
                self.out.abandon(start);
            }
        }
    }
}

/// Whether an output packet sent after `out_seq` carried object `id` (so the subscriber
/// has newer state of it than the lost packet held).
fn carried_later(state: &Subscription, stream: &Stream, out_seq: u16, id: u64) -> bool {
    state
        .sent_after(out_seq)
        .any(|src| stream.history.ids(src).is_some_and(|ids| ids.contains(&id)))
}
