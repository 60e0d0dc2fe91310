//! What each session was sent, per SSRC: the packet and octet counts of the relay's
//! Sender Reports (RFC 3550 §6.4.1), and the SRs sent for that SSRC, which the session's
//! reception reports refer back to (LSR) for its round-trip time.
//!
//! Counted where the outbox queues an RTP packet for sending, so every path (forwarding,
//! snapshots, NACK repairs under fresh sequence numbers, aggregated packets from
//! `relay_ssrc`) is counted once, as sent. Two map lookups per packet and no allocation
//! once a (session, SSRC) pair has been seen.

use super::api::SessionId;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// SRs remembered per (session, SSRC): a report block may name the one before the last.
const SR_MEMORY: usize = 2;

/// One SSRC as one session received it from the relay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    /// RTP packets sent (wrapping, as the SR field).
    pub packets: u32,
    /// RTP payload octets sent (wrapping, as the SR field).
    pub octets: u32,
    /// Packets sent as of the last report (whether it sent since).
    pub packets_at_report: u32,
    /// Octets sent as of the last report (the leg's bandwidth).
    pub octets_at_report: u32,
    /// The last SRs for this SSRC: (compact NTP time it carried, compact relay wall-clock
    /// time it was sent).
    srs: [(u32, u32); SR_MEMORY],
    /// Per packet, for congestion feedback: kept only for sessions that send it.
    history: Option<Box<History>>,
}

/// Packets remembered per (session, SSRC) for congestion feedback.
pub const HISTORY: usize = 512;

/// Recent packets by sequence number (modulo [`HISTORY`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    slots: [Option<Packet>; HISTORY],
}

/// One packet sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Its sequence number.
    pub seq: u16,
    /// Its size in octets (RTP header and payload).
    pub size: usize,
    /// When it was queued.
    pub at: Instant,
    /// Whether feedback already reported on it (each packet counts once).
    pub reported: bool,
}

impl History {
    /// The packet sent under `seq`, if still remembered.
    pub fn get_mut(&mut self, seq: u16) -> Option<&mut Packet> {
        self.slots
            .get_mut(usize::from(seq) % HISTORY)?
            .as_mut()
            .filter(|p| p.seq == seq)
    }
}

impl Sent {
    /// Records an SR carrying NTP time `lsr` (compact) sent at relay time `at` (compact).
    pub fn sr_sent(&mut self, lsr: u32, at: u32) {
        self.srs.rotate_right(1);
        self.srs[0] = (lsr, at);
        self.packets_at_report = self.packets;
        self.octets_at_report = self.octets;
    }

    /// When (compact relay time) the SR that carried `lsr` was sent, if remembered.
    pub fn sr_sent_at(&self, lsr: u32) -> Option<u32> {
        self.srs
            .iter()
            .find(|(l, at)| *l == lsr && *at != 0)
            .map(|(_, at)| *at)
    }

    /// Its packet history, when its session sends congestion feedback.
    pub fn history(&mut self) -> Option<&mut History> {
        self.history.as_deref_mut()
    }

    /// Whether it sent since the last report.
    pub fn sent_since_report(&self) -> bool {
        self.packets != self.packets_at_report
    }
}

/// Per session, per SSRC.
#[derive(Debug, Default)]
pub struct Ledger {
    sessions: HashMap<SessionId, HashMap<u32, Sent>>,
    /// Sessions whose packets are remembered one by one (they send congestion feedback).
    tracked: HashSet<SessionId>,
}

/// One RTP packet queued for sending.
#[derive(Debug, Clone, Copy)]
pub struct Queued {
    /// Its SSRC.
    pub ssrc: u32,
    /// Its sequence number.
    pub seq: u16,
    /// Payload octets.
    pub payload: usize,
    /// Whole packet octets.
    pub size: usize,
}

impl Ledger {
    /// Counts an RTP packet queued at `now`.
    pub fn count(&mut self, to: SessionId, p: Queued, now: Instant) {
        let s = self
            .sessions
            .entry(to)
            .or_default()
            .entry(p.ssrc)
            .or_default();
        s.packets = s.packets.wrapping_add(1);
        // The SR octet count wraps modulo 2^32 (RFC 3550 §6.4.1).
        s.octets = s.octets.wrapping_add(p.payload as u32);
        if s.history.is_none() && !self.tracked.is_empty() && self.tracked.contains(&to) {
            s.history = Some(Box::new(History {
                slots: [None; HISTORY],
            }));
        }
        if let Some(slot) = s
            .history
            .as_deref_mut()
            .and_then(|h| h.slots.get_mut(usize::from(p.seq) % HISTORY))
        {
            *slot = Some(Packet {
                seq: p.seq,
                size: p.size,
                at: now,
                reported: false,
            });
        }
    }

    /// Remembers `to`'s packets one by one from now on (it sends congestion feedback).
    pub fn track(&mut self, to: SessionId) {
        self.tracked.insert(to);
    }

    /// What a session was sent, per SSRC.
    pub fn of(&self, to: SessionId) -> Option<&HashMap<u32, Sent>> {
        self.sessions.get(&to)
    }

    /// What a session was sent of one SSRC, to record an SR in.
    pub fn get_mut(&mut self, to: SessionId, ssrc: u32) -> Option<&mut Sent> {
        self.sessions.get_mut(&to)?.get_mut(&ssrc)
    }

    /// Gives back the tables' spare capacity (a table never shrinks by itself).
    pub fn shrink_to_fit(&mut self) {
        self.sessions.shrink_to_fit();
        self.tracked.shrink_to_fit();
    }

    /// Forgets a session that left.
    pub fn forget_session(&mut self, to: SessionId) {
        self.sessions.remove(&to);
        self.tracked.remove(&to);
    }

    /// Forgets a stream that ended, for one session.
    pub fn forget_stream(&mut self, to: SessionId, ssrc: u32) {
        if let Some(m) = self.sessions.get_mut(&to) {
            m.remove(&ssrc);
        }
    }
}
