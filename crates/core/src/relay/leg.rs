//! One relay–session RTCP leg's state: when its next report is due, what flowed on it
//! since the last, its round-trip time and CNAME. The scheduling and the reports
//! themselves are [`super::reports`]'.

use std::time::{Duration, Instant};

/// The first compound's size guess (RFC 3550 A.7 `avg_rtcp_size` start).
pub(super) const FIRST_SIZE_GUESS: f64 = 100.0;

/// One session's RTCP state.
#[derive(Debug, Clone)]
pub struct RtcpLeg {
    /// When its next report is due.
    pub(super) next: Instant,
    /// Whether no report was sent yet.
    pub(super) initial: bool,
    /// Average compound size, octets with UDP/IP headers.
    pub(super) avg_size: f64,
    /// When its last report was sent.
    pub(super) last_report: Instant,
    /// RTP octets received from it since the last report.
    pub(super) octets_in: u64,
    /// Whether it sent RTP since the last report.
    pub(super) published: bool,
    /// When its last SR or RR was accepted.
    pub(super) last_input: Option<Instant>,
    pub(super) rtt: Option<Duration>,
    /// Its CNAME, from its SDES.
    pub(super) cname: Option<Box<[u8]>>,
}

impl RtcpLeg {
    /// A leg whose first report is not scheduled yet.
    pub fn new(now: Instant) -> Self {
        Self {
            next: now,
            initial: true,
            avg_size: FIRST_SIZE_GUESS,
            last_report: now,
            octets_in: 0,
            published: false,
            last_input: None,
            rtt: None,
            cname: None,
        }
    }

    /// Counts an RTP packet received from the session.
    pub fn received(&mut self, len: usize) {
        self.octets_in += len as u64;
        self.published = true;
    }

    /// Its smoothed round-trip time (RFC 6298 gain 1/8), once measured.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }
}
