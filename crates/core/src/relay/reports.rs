//! RTCP reports, as an RTP endpoint sends and reads them (RFC 3550 §6), on each
//! relay–session leg (rtcp-mux: one port, RFC 5761).
//!
//! **Sent.** Per session, one report per interval: an SR from `relay_ssrc` when the session
//! receives the relay's aggregated stream, else an RR from `relay_ssrc`; it carries the
//! reception block on the session's own stream when it publishes one. Then one SR per
//! stream the session was sent, under the stream's SSRC, with the counts of what *this*
//! session was sent ([`super::ledger`]) and a clock mapping in *its* timestamp space (the
//! source's timestamps plus the rewriter's offset): the publisher's latest SR extrapolated
//! to now when it sent one, so its NTP/RTP mapping survives the relay; before that, the
//! relay's wall clock with the stream's newest timestamp extrapolated from its arrival.
//! An SDES with the CNAMEs (the relay's, and each publisher's once it sent one) ends each
//! compound. Compounds are split after [`SRS_PER_DATAGRAM`] SRs, each starting with an
//! SR or RR.
//!
//! **Timing** (RFC 3550 §6.2, A.7): the interval scales with the leg's RTCP bandwidth (5%
//! of what flowed on it, at least [`SESSION_BW_FLOOR_BPS`]), the members and senders on
//! the leg and the average compound size; at least `rtcp_min_interval` (halved for the
//! first report), randomised over [0.5, 1.5] and divided by e − 3/2. Reports are due
//! through [`super::Relay::poll_timeout`]; nothing here reads a clock.
//!
//! **Read.** A session's SR gives its stream's clock mapping and the LSR of the relay's
//! reception reports; report blocks about SSRCs the relay sends it give its round-trip
//! time (RFC 3550 §6.4.1: now − LSR − DLSR, LSR looked up among the SRs the relay sent);
//! its SDES CNAME is carried to subscribers. Reports for an SSRC the session does not own,
//! blocks naming SSRCs it was not sent or SRs the relay never sent, absurd round trips and
//! reports closer together than [`MIN_REPORT_GAP`] are ignored and counted by reason.

use super::aggregate::Aggregator;
use super::api::SessionId;
use super::leg::FIRST_SIZE_GUESS;
use super::room::{SenderClock, Stream};
use super::state::State;
use super::stats::StatEvent;
use crate::rtp::ntp;
use crate::rtp::rtcp::{self, ReceptionReport, SdesChunk, SenderInfo};
use crate::rtp::{CLOCK_RATE, PacketClass};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Stream SRs per datagram, so a compound with its SDES stays within about 1200 bytes.
pub const SRS_PER_DATAGRAM: usize = 15;
/// The least session bandwidth a leg is credited with, in bits per second.
pub const SESSION_BW_FLOOR_BPS: f64 = 64_000.0;
/// The share of the session bandwidth RTCP takes (RFC 3550 §6.2).
const RTCP_FRACTION: f64 = 0.05;
/// UDP and IPv4 headers, counted in the average compound size (RFC 3550 §6.2).
const UDP_IP_OVERHEAD: usize = 28;
/// RFC 3550 A.7: the randomised interval is divided by e − 3/2.
const COMPENSATION: f64 = std::f64::consts::E - 1.5;
/// Reports from one session closer together than this are a flood: ignored.
pub const MIN_REPORT_GAP: Duration = Duration::from_millis(100);
/// A round trip longer than this is not believed.
pub const MAX_RTT: Duration = Duration::from_secs(60);

/// The relay's report schedule. It borrows the core's [`State`] to build and read
/// reports.
#[derive(Debug)]
pub(super) struct Reports {
    /// (due, session); entries of sessions that left, or were rescheduled, are skipped.
    queue: BinaryHeap<Reverse<(Instant, SessionId)>>,
    /// The relay's CNAME.
    cname: Box<[u8]>,
    /// Scratch: the SRs of the report being built (SSRC, contents, stream owner).
    srs: Vec<(u32, SenderInfo, Option<SessionId>)>,
}

/// What RFC 3550 A.7's interval depends on.
#[derive(Debug, Clone, Copy)]
pub struct IntervalInput {
    /// SSRCs on the leg.
    pub members: usize,
    /// Of them, those that sent RTP in the last interval.
    pub senders: usize,
    /// Whether the relay sent RTP on the leg in the last interval.
    pub we_sent: bool,
    /// Session bandwidth, bits per second.
    pub session_bps: f64,
    /// Average compound size, octets with UDP/IP headers.
    pub avg_size: f64,
    /// Whether no report was sent yet.
    pub initial: bool,
    /// The minimum interval.
    pub min: Duration,
}

/// RFC 3550 A.7 `rtcp_interval`, with `random` in [0, 1).
pub fn rtcp_interval(i: &IntervalInput, random: f64) -> Duration {
    let rtcp_bw = (i.session_bps * RTCP_FRACTION / 8.0).max(1.0);
    let min = if i.initial { i.min / 2 } else { i.min }.as_secs_f64();
    let members = i.members.max(1) as f64;
    let senders = i.senders as f64;
    let (n, c) = if senders <= 0.25 * members {
        if i.we_sent {
            (senders, i.avg_size / (0.25 * rtcp_bw))
        } else {
            (members - senders, i.avg_size / (0.75 * rtcp_bw))
        }
    } else {
        (members, i.avg_size / rtcp_bw)
    };
    let t = (n * c).max(min) * (0.5 + random.clamp(0.0, 1.0)) / COMPENSATION;
    Duration::try_from_secs_f64(t).unwrap_or(i.min)
}

/// Timestamp ticks in `d`, modulo 2^32.
fn ticks(d: Duration) -> u32 {
    // RTP timestamps wrap: truncation is the arithmetic RFC 3550 wants.
    (d.as_micros() * u128::from(CLOCK_RATE) / 1_000_000) as u32
}

/// A stream's (NTP, RTP) at `now` in a subscriber's timestamp space (`offset`): the
/// sender's SR mapping extrapolated, else the relay's clock and the newest timestamp.
fn stream_clock(st: &Stream, offset: u32, ntp_now: u64, now: Instant) -> (u64, u32) {
    match st.sender_clock {
        Some(c) => {
            let e = now.saturating_duration_since(c.at);
            let ntp = c.ntp.wrapping_add(ntp::from_duration(e));
            (ntp, c.rtp.wrapping_add(ticks(e)).wrapping_add(offset))
        }
        None => {
            let e = now.saturating_duration_since(st.last_packet);
            (
                ntp_now,
                st.last_ts.wrapping_add(ticks(e)).wrapping_add(offset),
            )
        }
    }
}

impl Reports {
    /// No session scheduled; `relay_ssrc` names the relay's CNAME.
    pub fn new(relay_ssrc: u32) -> Self {
        Self {
            queue: BinaryHeap::new(),
            cname: format!("gsrelay-{relay_ssrc:08x}").into_bytes().into(),
            srs: Vec::new(),
        }
    }

    /// When the earliest report is due.
    pub fn due(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((at, _))| *at)
    }

    /// Schedules a session's next report from its leg's state.
    fn schedule(&mut self, st: &mut State, id: SessionId, now: Instant, input: IntervalInput) {
        let at = now + rtcp_interval(&input, st.rng.unit());
        if let Some(s) = st.sessions.get_mut(&id) {
            s.rtcp.next = at;
            self.queue.push(Reverse((at, id)));
        }
    }

    /// Schedules a new session's first report.
    pub fn schedule_first(&mut self, st: &mut State, id: SessionId, now: Instant) {
        let input = IntervalInput {
            members: 2,
            senders: 0,
            we_sent: false,
            session_bps: SESSION_BW_FLOOR_BPS,
            avg_size: FIRST_SIZE_GUESS,
            initial: true,
            min: st.cfg.rtcp_min_interval,
        };
        self.schedule(st, id, now, input);
    }

    /// Sends every report due at `now`. `agg` gives the aggregated streams' clocks.
    pub fn send_due(&mut self, st: &mut State, agg: &Aggregator, now: Instant) {
        while let Some(&Reverse((at, id))) = self.queue.peek() {
            if at > now {
                break;
            }
            self.queue.pop();
            if st.sessions.get(&id).is_some_and(|s| s.rtcp.next == at) {
                st.busy = Some(id);
                self.report_to(st, agg, now, id);
            }
        }
    }

    /// Sends one session its report and schedules the next.
    fn report_to(&mut self, st: &mut State, agg: &Aggregator, now: Instant, id: SessionId) {
        let ntp_now = st.wallclock(now).ntp(now);
        let relay = st.relay_ssrc;
        let Some(s) = st.sessions.get(&id) else {
            return;
        };
        let own = s.ssrc;
        let Some(room) = st.rooms.get_mut(&s.room) else {
            return;
        };
        let block = room
            .streams
            .get_mut(&own)
            .filter(|st| st.owner == id)
            .map(|st| st.reception.report(own, now));
        let mut srs = std::mem::take(&mut self.srs);
        srs.clear();
        let (mut members, mut senders, mut octets) = (2usize, usize::from(s.rtcp.published), 0u64);
        let mut we_sent = false;
        for (&ssrc, c) in st.out.sent.of(id).into_iter().flatten() {
            let (clock, owner) = if ssrc == relay {
                let rtp = agg.member_timestamp(id, now);
                (rtp.map(|rtp| (ntp_now, rtp)), None)
            } else {
                let Some(st) = room.streams.get(&ssrc) else {
                    continue;
                };
                let offset = s.subs.get(&ssrc).map_or(0, |sub| sub.rewriter.ts_offset());
                (Some(stream_clock(st, offset, ntp_now, now)), Some(st.owner))
            };
            let Some((ntp_time, rtp_time)) = clock else {
                continue;
            };
            if ssrc != relay {
                members += 1;
            }
            if c.sent_since_report() {
                senders += 1;
                we_sent = true;
            }
            octets += u64::from(c.octets.wrapping_sub(c.octets_at_report));
            let info = SenderInfo {
                ntp_time,
                rtp_time,
                packet_count: c.packets,
                octet_count: c.octets,
            };
            srs.push((ssrc, info, owner));
        }
        srs.sort_unstable_by_key(|(ssrc, ..)| (*ssrc != relay, *ssrc));
        let size = self.write_reports(st, id, &srs, block);
        let at = ntp::compact(ntp_now);
        for (ssrc, info, _) in &srs {
            if let Some(c) = st.out.sent.get_mut(id, *ssrc) {
                c.sr_sent(ntp::compact(info.ntp_time), at);
            }
        }
        self.srs = srs;
        let Some(leg) = st.sessions.get_mut(&id).map(|s| &mut s.rtcp) else {
            return;
        };
        leg.avg_size = size as f64 / 16.0 + leg.avg_size * 15.0 / 16.0;
        let elapsed = now
            .saturating_duration_since(leg.last_report)
            .as_secs_f64()
            .max(1e-3);
        let measured = (octets + leg.octets_in) as f64 * 8.0 / elapsed;
        let input = IntervalInput {
            members,
            senders,
            we_sent,
            session_bps: measured.max(SESSION_BW_FLOOR_BPS),
            avg_size: leg.avg_size,
            initial: false,
            min: st.cfg.rtcp_min_interval,
        };
        leg.initial = false;
        leg.last_report = now;
        leg.octets_in = 0;
        leg.published = false;
        self.schedule(st, id, now, input);
    }

    /// Queues the compound datagrams of one report; returns their size with UDP/IP
    /// headers. `srs` holds the relay's own SR (if any) first.
    fn write_reports(
        &self,
        st: &mut State,
        to: SessionId,
        srs: &[(u32, SenderInfo, Option<SessionId>)],
        block: Option<ReceptionReport>,
    ) -> usize {
        let relay = st.relay_ssrc;
        let State {
            out,
            sessions,
            stats,
            ..
        } = st;
        let (relay_sr, mut rest) = match srs.split_first() {
            Some((first, rest)) if first.0 == relay => (Some(first.1), rest),
            _ => (None, srs),
        };
        let blocks = block.as_slice();
        let mut size = 0;
        let mut first = true;
        while first || !rest.is_empty() {
            let (buf, start) = out.begin();
            let mut ok = true;
            let mut sent = (0, 0);
            if first {
                ok &= match relay_sr {
                    Some(info) => rtcp::write_sr(buf, relay, info, blocks).is_ok(),
                    None => rtcp::write_rr(buf, relay, blocks).is_ok(),
                };
                sent = if relay_sr.is_some() { (1, 0) } else { (0, 1) };
            }
            let take = rest.len().min(SRS_PER_DATAGRAM);
            let (now_batch, later) = rest.split_at(take);
            for (ssrc, info, _) in now_batch {
                ok &= rtcp::write_sr(buf, *ssrc, *info, &[]).is_ok();
            }
            let own = first.then_some((relay, &self.cname[..]));
            let cnames = now_batch.iter().filter_map(|(ssrc, _, owner)| {
                let cname = sessions.get(&(*owner)?)?.rtcp.cname.as_deref()?;
                Some((*ssrc, cname))
            });
            ok &= rtcp::write_sdes_cnames(buf, own.into_iter().chain(cnames)).is_ok();
            if ok {
                size += buf.len() - start + UDP_IP_OVERHEAD;
                out.commit(to, PacketClass::Rtcp, start);
                stats.rtcp.sender_reports_sent += sent.0 + now_batch.len() as u64;
                stats.rtcp.receiver_reports_sent += sent.1;
            } else {
                out.abandon(start);
            }
            first = false;
            rest = later;
        }
        size
    }
}

/// Whether a report from `from` comes at least [`MIN_REPORT_GAP`] after the last one
/// accepted (recording it when it does).
fn report_allowed(st: &mut State, from: SessionId, now: Instant) -> bool {
    let Some(leg) = st.sessions.get_mut(&from).map(|s| &mut s.rtcp) else {
        return false;
    };
    if leg
        .last_input
        .is_some_and(|t| now.saturating_duration_since(t) < MIN_REPORT_GAP)
    {
        st.stats.suppress("report_flood");
        return false;
    }
    leg.last_input = Some(now);
    true
}

/// An SR from session `from` (whose SSRC is `own`).
pub(super) fn on_sender_report(
    st: &mut State,
    now: Instant,
    from: SessionId,
    ssrc: u32,
    info: SenderInfo,
    blocks: &[ReceptionReport],
) {
    // An SR speaks for one of the session's own streams (a link owns many).
    if st.owner_of(ssrc) != Some(from) {
        st.stats.drop("sr_ssrc_mismatch");
        return;
    }
    if !report_allowed(st, from, now) {
        return;
    }
    st.stats.rtcp.sender_reports_received += 1;
    let stream = st
        .sessions
        .get(&from)
        .and_then(|s| st.rooms.get_mut(&s.room))
        .and_then(|r| r.streams.get_mut(&ssrc))
        .filter(|stream| stream.owner == from);
    match stream {
        None => st.stats.suppress("sr_without_stream"),
        Some(_) if info.ntp_time == 0 => st.stats.suppress("sr_absurd"),
        Some(stream) => {
            stream.reception.sender_report(info.ntp_time, now);
            stream.sender_clock = Some(SenderClock {
                ntp: info.ntp_time,
                rtp: info.rtp_time,
                at: now,
            });
        }
    }
    on_report_blocks(st, now, from, blocks);
}

/// An RR from session `from` (whose SSRC is `own`).
pub(super) fn on_receiver_report(
    st: &mut State,
    now: Instant,
    from: SessionId,
    ssrc: u32,
    blocks: &[ReceptionReport],
) {
    if st.owner_of(ssrc) != Some(from) {
        st.stats.drop("rr_ssrc_mismatch");
        return;
    }
    if !report_allowed(st, from, now) {
        return;
    }
    st.stats.rtcp.receiver_reports_received += 1;
    on_report_blocks(st, now, from, blocks);
}

/// Report blocks from `from` about what the relay sends it: its round-trip time.
fn on_report_blocks(st: &mut State, now: Instant, from: SessionId, blocks: &[ReceptionReport]) {
    let at = ntp::compact(st.wallclock(now).ntp(now));
    for b in blocks {
        let Some(sent) = st.out.sent.of(from).and_then(|m| m.get(&b.ssrc)) else {
            st.stats.suppress("rr_unknown_source");
            continue;
        };
        if b.last_sender_report == 0 {
            // No SR received yet: nothing to measure.
            continue;
        }
        let Some(sent_at) = sent.sr_sent_at(b.last_sender_report) else {
            st.stats.suppress("rr_unknown_lsr");
            continue;
        };
        let units = at.wrapping_sub(sent_at).wrapping_sub(b.delay);
        let rtt = ntp::compact_to_duration(units);
        if units > 0x7fff_ffff || rtt > MAX_RTT {
            st.stats.suppress("rr_absurd");
            continue;
        }
        record_rtt(st, from, rtt);
    }
}

fn record_rtt(st: &mut State, from: SessionId, rtt: Duration) {
    if let Some(s) = st.sessions.get_mut(&from) {
        s.rtcp.rtt = Some(s.rtcp.rtt.map_or(rtt, |srtt| (srtt * 7 + rtt) / 8));
    }
    st.stats.record(StatEvent::Rtt { rtt });
}

/// An SDES from `from`: its own CNAME is kept for the relay's SRs of its stream.
pub(super) fn on_sdes(st: &mut State, from: SessionId, own: u32, chunks: &[SdesChunk]) {
    let Some(leg) = st.sessions.get_mut(&from).map(|s| &mut s.rtcp) else {
        return;
    };
    for c in chunks.iter().filter(|c| c.ssrc == own) {
        if let Some(cname) = &c.cname
            && leg.cname.as_deref() != Some(&cname[..])
        {
            leg.cname = Some(cname.to_vec().into_boxed_slice());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> IntervalInput {
        IntervalInput {
            members: 2,
            senders: 1,
            we_sent: true,
            session_bps: SESSION_BW_FLOOR_BPS,
            avg_size: 100.0,
            initial: false,
            min: Duration::from_secs(5),
        }
    }

    #[test]
    fn interval_is_the_minimum_randomised_on_a_thin_leg() {
        let i = input();
        let lo = rtcp_interval(&i, 0.0).as_secs_f64();
        let hi = rtcp_interval(&i, 0.999_999).as_secs_f64();
        assert!((lo - 2.5 / COMPENSATION).abs() < 1e-6, "{lo}");
        assert!((hi - 7.5 / COMPENSATION).abs() < 1e-4, "{hi}");
        let first = IntervalInput { initial: true, ..i };
        assert!((rtcp_interval(&first, 0.5).as_secs_f64() - 2.5 / COMPENSATION).abs() < 1e-6);
    }

    #[test]
    fn interval_grows_with_members_and_shrinks_with_bandwidth() {
        // 200 members, 200 senders, 1200-byte compounds at 64 kbit/s: 200 * 1200 / 400 B/s.
        let crowded = IntervalInput {
            members: 200,
            senders: 200,
            avg_size: 1200.0,
            ..input()
        };
        let t = rtcp_interval(&crowded, 0.5).as_secs_f64();
        assert!((t - 600.0 / COMPENSATION).abs() < 1e-3, "{t}");
        let fast = IntervalInput {
            session_bps: 64_000_000.0,
            ..crowded
        };
        assert!((rtcp_interval(&fast, 0.5).as_secs_f64() - 5.0 / COMPENSATION).abs() < 1e-6);
    }
}
