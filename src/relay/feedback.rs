//! RTCP from sessions: FIR/PLI answered with snapshots from the store, NACK answered
//! with the current state of what the lost packet carried, TMMBR recorded, BYE ending a
//! stream; and the RTCP the relay sends (BYE to subscribers, FIR to a sender).

use super::api::SessionId;
use super::core::Relay;
use super::forward::{admits_entry, entry_relevance, pack_entries, subscription};
use super::relevance;
use super::session::Session;
use crate::rtp::rtcp::{self, FirEntry, RtcpItem};
use crate::rtp::{PacketClass, RtpHeader};
use std::time::Instant;

impl Relay {
    /// Handles one plaintext RTCP compound packet from a session.
    pub fn handle_rtcp(&mut self, now: Instant, from: SessionId, packet: &[u8]) {
        if let Err(reason) = self.accept_rtcp(now, from, packet) {
            self.drop_packet(reason);
        }
        // Snapshots asked for by feedback go out now, also in aggregated delivery.
        self.mix(now, true);
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
                        self.repair(from, media_ssrc, &lost);
                    }
                }
                RtcpItem::Tmmbr {
                    sender_ssrc,
                    entries,
                } if sender_ssrc == own => {
                    self.count_feedback("tmmbr");
                    let relay = self.relay_ssrc;
                    let cap = entries
                        .iter()
                        .filter(|e| e.ssrc == relay)
                        .map(|e| e.bitrate_bps)
                        .min();
                    if let (Some(s), Some(cap)) = (self.sessions.get_mut(&from), cap) {
                        s.tmmbr_bps = Some(cap);
                        s.refresh_cap(self.cfg.subscriber_max_bitrate_bps, now);
                        // A capped subscriber no longer shares an aggregated view.
                        self.sync_delivery(from, now);
                    }
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

    fn count_feedback(&self, kind: &str) {
        self.metrics.feedback.with_label_values(&[kind]).inc();
    }

    /// A FIR entry: answered once per FIR command sequence number (RFC 5104 §4.3.1.2).
    fn on_fir(&mut self, now: Instant, from: SessionId, e: FirEntry) {
        let Some(s) = self.sessions.get_mut(&from) else {
            return;
        };
        if s.firs.insert(e.ssrc, e.sequence_number) == Some(e.sequence_number) {
            return;
        }
        self.refresh(now, from, e.ssrc);
    }

    /// Sends `to` the cached state of stream `media`, or of every stream when `media` is
    /// the relay's own SSRC. A stream with no cached state has the request passed on to
    /// its sender.
    fn refresh(&mut self, now: Instant, to: SessionId, media: u32) {
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
        targets.sort_unstable();
        for ssrc in targets {
            if !self.snapshot(to, ssrc) {
                self.forward_fir(now, ssrc);
            }
        }
    }

    /// Snapshot of one stream for one subscriber, filtered by its interest (area
    /// included); false when no state is cached.
    fn snapshot(&mut self, to: SessionId, ssrc: u32) -> bool {
        let Some(room) = self.sessions.get(&to).and_then(|s| self.rooms.get(&s.room)) else {
            return true;
        };
        let Some(stream) = room.streams.get(&ssrc) else {
            return true;
        };
        if stream.store.is_empty() {
            return false;
        }
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
            return true;
        };
        if !sub.interest.admits_stream(ssrc, stream.owner == to) {
            return true;
        }
        let Session {
            id,
            subs,
            interest,
            dialect,
            inside,
            ..
        } = sub;
        let state = subscription(subs, ssrc, stream);
        let packets = pack_entries(
            &mut self.out,
            *id,
            state,
            ssrc,
            stream,
            self.cfg.payload_budget,
            stream.store.iter(),
            |eid, e| {
                entry_relevance(
                    inside, interest, *dialect, from, center, stream, ssrc, eid, e,
                )
                .is_some_and(|(is_inside, _)| is_inside)
            },
        );
        self.metrics.snapshots.inc();
        self.metrics.snapshot_packets.inc_by(packets);
        true
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
            self.metrics.firs_forwarded.inc();
        } else {
            self.out.abandon(start);
        }
    }

    /// Answers a NACK: each lost output packet is sent again under its own sequence number,
    /// carrying the *current* state of the objects it carried (stale state would be wrong).
    fn repair(&mut self, to: SessionId, media: u32, lost: &[u16]) {
        let Some(sub) = self.sessions.get(&to) else {
            return;
        };
        let Some(stream) = self
            .rooms
            .get(&sub.room)
            .and_then(|r| r.streams.get(&media))
        else {
            return;
        };
        let Some(state) = sub.subs.get(&media) else {
            return;
        };
        let from = self
            .sessions
            .get(&stream.owner)
            .map(|s| s.dialect)
            .unwrap_or_default();
        for &out_seq in lost {
            let Some(ids) = state
                .source_of(out_seq)
                .and_then(|src| stream.history.ids(src))
            else {
                self.metrics.drop("nack_unknown");
                continue;
            };
            let (buf, start) = self.out.begin();
            let header = RtpHeader {
                marker: false,
                payload_type: stream.payload_type,
                sequence_number: out_seq,
                timestamp: stream.last_ts,
                ssrc: media,
                csrcs: &[],
                extension: None,
            };
            if header.append_to(buf).is_err() {
                self.out.abandon(start);
                continue;
            }
            let header_len = buf.len() - start;
            for (i, id) in ids.iter().enumerate() {
                let first = ids.iter().position(|x| x == id) == Some(i);
                let Some(e) = stream.store.get(*id).filter(|_| first) else {
                    continue;
                };
                let used = self.out.buffered() - start - header_len;
                if admits_entry(&sub.interest, sub.dialect, from, e)
                    && used + e.bytes.len() <= self.cfg.payload_budget
                {
                    self.out.extend(&e.bytes);
                }
            }
            if self.out.buffered() - start == header_len {
                self.out.abandon(start);
            } else {
                self.out.commit(to, PacketClass::Rtp, start);
                self.metrics.repairs.inc();
            }
        }
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
            if let Some(cell) = e.cell {
                room.objects.remove(cell, (ssrc, id));
            }
        }
        self.metrics.streams.dec();
        self.metrics.cached_objects.sub(stream.store.len() as i64);
        self.agg.sender_left(room_name, ssrc);
        for member in room.members.clone() {
            let Some(s) = self.sessions.get_mut(&member) else {
                continue;
            };
            s.subs.remove(&ssrc);
            s.firs.remove(&ssrc);
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
