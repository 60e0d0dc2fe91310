//! Batched reception for receivers that count what arrives rather than keep it: one
//! `recvmmsg` brings every datagram the socket holds, SRTP is removed in place, and each
//! RTP packet's stream, sequence number and payload are lent to the caller, allocating
//! nothing per packet. A bench driving thousands of receivers on the relay's own cores
//! needs this: one system call and one task wake-up per batch, not per packet. The
//! client's UDP socket has GRO on (`gsrelay_net::udp::recv::enable_gro`), so one read may
//! bring a whole train of datagrams the relay sent as one GSO buffer: they are cut apart
//! here.

use super::feedback::Arrivals;
use super::liveness::Liveness;
use super::objects::note_ownership;
use super::{Client, ClientError, Link, Received, is_report, note_refused, open};
use gsrelay_core::rtp::rtcp::SenderInfo;
use gsrelay_core::rtp::srtp::SrtpSession;
use gsrelay_core::rtp::{PacketClass, RtcpItem, RtpPacket, classify};
use gsrelay_net::udp::recv::{Datagram, RecvBatch};
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;

impl Client {
    /// Waits up to `timeout` for datagrams, reads one batch of them into `batch` (made by
    /// `RecvBatch::coalescing`: a read may hold a train of datagrams), and calls
    /// `f(ssrc, seq, payload)` for each RTP packet in it; returns how many (0 on
    /// timeout). Datagrams that fail to unprotect or parse count in
    /// [`rejected`](Self::rejected); the relay's sender reports are kept for
    /// [`sender_report`](Self::sender_report) as [`recv`](Self::recv) keeps them, and
    /// other RTCP is dropped; whatever authenticates counts as heard from the relay
    /// ([`is_silent`](Self::is_silent)). Over QUIC or WebRTC this is
    /// [`recv`](Self::recv), one packet at a time.
    pub async fn recv_batch(
        &mut self,
        batch: &mut RecvBatch,
        timeout: Duration,
        f: impl FnMut(u32, u16, &[u8]),
    ) -> Result<usize, ClientError> {
        self.recv_batch_with(batch, timeout, f, |_| {}).await
    }

    /// [`recv_batch`](Self::recv_batch), and `g(items)` for each RTCP compound other than
    /// the relay's periodic reports (a BYE, the relay's ownership notices, feedback), after
    /// the client has taken note of it as [`recv`](Self::recv) does (its
    /// [`ended_by_relay`](Self::ended_by_relay) and [`holds`](Self::holds)). Returns the
    /// RTP packets and such compounds it handed over (0 on timeout).
    pub async fn recv_batch_with(
        &mut self,
        batch: &mut RecvBatch,
        timeout: Duration,
        mut f: impl FnMut(u32, u16, &[u8]),
        mut g: impl FnMut(&[RtcpItem]),
    ) -> Result<usize, ClientError> {
        if !matches!(self.link, Link::Udp { .. }) {
            return Ok(match self.recv(timeout).await? {
                Some(Received::Rtp {
                    ssrc, seq, payload, ..
                }) => {
                    f(ssrc, seq, &payload);
                    1
                }
                Some(Received::Rtcp(items)) => {
                    g(&items);
                    1
                }
                None => 0,
            });
        }
        let relay_ssrc = self.joined.relay_ssrc;
        let Self {
            link: Link::Udp { socket, srtp },
            rejected,
            arrivals,
            sender_reports,
            liveness,
            ended_by_relay,
            holds,
            ..
        } = self
        else {
            return Ok(0);
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let n = batch
                .read_until(socket, deadline)
                .await
                .inspect_err(|e| note_refused(liveness, e))?;
            if n == 0 {
                return Ok(0);
            }
            // One clock read per batch: the liveness watch needs no finer time.
            let mut taker = Taker {
                srtp,
                rejected,
                arrivals,
                sender_reports,
                liveness,
                now: Instant::now(),
                other: &mut |items: &[RtcpItem]| {
                    *ended_by_relay |= items.iter().any(
                        |i| matches!(i, RtcpItem::Bye { ssrcs } if ssrcs.contains(&relay_ssrc)),
                    );
                    note_ownership(holds, items);
                    g(items);
                },
            };
            let mut rtp = 0;
            for i in 0..n {
                let segment = batch.segment(i);
                let Datagram::Whole(bytes, _) = batch.datagram(i) else {
                    *taker.rejected += 1;
                    continue;
                };
                let step = segment.unwrap_or(bytes.len()).max(1);
                for datagram in bytes.chunks_mut(step) {
                    rtp += usize::from(taker.take(datagram, &mut f));
                }
            }
            if rtp > 0 {
                return Ok(rtp);
            }
        }
    }
}

/// Datagrams read but not yet handed out, for [`Client::recv`]: one read may bring
/// several that the kernel coalesced (UDP GRO).
pub(super) struct Inbox {
    batch: RecvBatch,
    /// The next datagram's start in the read, its end, and the datagrams' size.
    at: usize,
    len: usize,
    step: usize,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("left", &self.len.saturating_sub(self.at))
            .finish_non_exhaustive()
    }
}

impl Default for Inbox {
    fn default() -> Self {
        Self {
            batch: RecvBatch::coalescing(1),
            at: 0,
            len: 0,
            step: 1,
        }
    }
}

impl Inbox {
    /// The next datagram, reading the socket when none is left; `None` at `deadline`. A
    /// read the kernel cut short gives an empty datagram, which no parser takes.
    pub(super) async fn next(
        &mut self,
        socket: &UdpSocket,
        deadline: tokio::time::Instant,
    ) -> io::Result<Option<&mut [u8]>> {
        if self.at >= self.len {
            if self.batch.read_until(socket, deadline).await? == 0 {
                return Ok(None);
            }
            let len = match self.batch.datagram(0) {
                Datagram::Whole(bytes, _) => bytes.len(),
                Datagram::Unusable => 0,
            };
            (self.at, self.len) = (0, len);
            self.step = self.batch.segment(0).unwrap_or(len).max(1);
        }
        let (from, to) = (self.at, (self.at + self.step).min(self.len));
        self.at = to.max(self.at + 1);
        Ok(Some(match self.batch.datagram(0) {
            Datagram::Whole(bytes, _) => bytes.get_mut(from..to).unwrap_or_default(),
            Datagram::Unusable => Default::default(),
        }))
    }
}

/// What taking one datagram in a batch updates.
struct Taker<'a> {
    srtp: &'a mut Option<Box<SrtpSession>>,
    rejected: &'a mut u64,
    arrivals: &'a mut Option<Arrivals>,
    sender_reports: &'a mut HashMap<u32, (SenderInfo, Instant)>,
    liveness: &'a mut Liveness,
    now: Instant,
    /// What to do with a compound that is not a periodic report.
    other: &'a mut dyn FnMut(&[RtcpItem]),
}

impl Taker<'_> {
    /// Takes one datagram: an RTP packet goes to `f` and a compound that is not a report to
    /// `other` (true); reports are consumed.
    fn take(&mut self, bytes: &mut [u8], f: &mut impl FnMut(u32, u16, &[u8])) -> bool {
        match classify(bytes) {
            PacketClass::Rtp => {}
            // Rare (one report a second or so): the allocating path is fine.
            PacketClass::Rtcp => {
                match open(self.srtp, bytes) {
                    Ok(Received::Rtcp(items)) => {
                        let report = is_report(&items);
                        self.liveness.heard(self.now, report);
                        if !report {
                            (self.other)(&items);
                            return true;
                        }
                        for item in items {
                            if let RtcpItem::SenderReport { ssrc, info, .. } = item {
                                self.sender_reports.insert(ssrc, (info, self.now));
                            }
                        }
                    }
                    Ok(Received::Rtp { .. }) => {}
                    Err(_) => *self.rejected += 1,
                }
                return false;
            }
            PacketClass::Other => return false,
        }
        let len = match self.srtp.as_mut().map(|s| s.unprotect_rtp(bytes)) {
            Some(Ok(len)) => len,
            Some(Err(_)) => {
                *self.rejected += 1;
                return false;
            }
            None => bytes.len(),
        };
        let Ok(p) = RtpPacket::parse(bytes.get(..len).unwrap_or_default()) else {
            *self.rejected += 1;
            return false;
        };
        self.liveness.heard(self.now, false);
        if let Some(a) = self.arrivals {
            a.record(p.ssrc(), p.sequence_number(), Instant::now());
        }
        f(p.ssrc(), p.sequence_number(), p.payload());
        true
    }
}
