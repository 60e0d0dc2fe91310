//! Batched reception for receivers that count what arrives rather than keep it: one
//! `recvmmsg` brings every datagram the socket holds, SRTP is removed in place, and each
//! RTP packet's stream, sequence number and payload are lent to the caller, allocating
//! nothing per packet. A bench driving thousands of receivers on the relay's own cores
//! needs this: one system call and one task wake-up per batch, not per packet.

use super::{Client, ClientError, Link, Received, is_report, note_refused, open};
use crate::rtp::{PacketClass, RtcpItem, RtpPacket, classify};
use crate::transport::recv::{Datagram, RecvBatch};
use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;

/// Waits until `deadline` for `socket` to hold datagrams and reads one batch of them into
/// `batch`; returns how many (0 at the deadline).
pub async fn read_batch(
    socket: &UdpSocket,
    batch: &mut RecvBatch,
    deadline: tokio::time::Instant,
) -> io::Result<usize> {
    loop {
        match tokio::time::timeout_at(deadline, socket.readable()).await {
            Ok(ready) => ready?,
            Err(_elapsed) => return Ok(0),
        }
        match batch.recv(socket) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Client {
    /// Waits up to `timeout` for datagrams, reads one batch of them into `batch`, and
    /// calls `f(ssrc, seq, payload)` for each RTP packet in it; returns how many (0 on
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
        mut f: impl FnMut(u32, u16, &[u8]),
    ) -> Result<usize, ClientError> {
        if !matches!(self.link, Link::Udp { .. }) {
            return Ok(match self.recv(timeout).await? {
                Some(Received::Rtp {
                    ssrc, seq, payload, ..
                }) => {
                    f(ssrc, seq, &payload);
                    1
                }
                _ => 0,
            });
        }
        let Self {
            link: Link::Udp { socket, srtp },
            rejected,
            arrivals,
            sender_reports,
            liveness,
            ..
        } = self
        else {
            return Ok(0);
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let n = read_batch(socket, batch, deadline)
                .await
                .inspect_err(|e| note_refused(liveness, e))?;
            if n == 0 {
                return Ok(0);
            }
            // One clock read per batch: the liveness watch needs no finer time.
            let now = Instant::now();
            let mut rtp = 0;
            for i in 0..n {
                let Datagram::Whole(bytes, _) = batch.datagram(i) else {
                    *rejected += 1;
                    continue;
                };
                match classify(bytes) {
                    PacketClass::Rtp => {}
                    // Rare (one report a second or so): the allocating path is fine.
                    PacketClass::Rtcp => {
                        match open(srtp, bytes) {
                            Ok(Received::Rtcp(items)) => {
                                liveness.heard(now, is_report(&items));
                                for item in items {
                                    if let RtcpItem::SenderReport { ssrc, info, .. } = item {
                                        sender_reports.insert(ssrc, (info, now));
                                    }
                                }
                            }
                            Ok(Received::Rtp { .. }) => {}
                            Err(_) => *rejected += 1,
                        }
                        continue;
                    }
                    PacketClass::Other => continue,
                }
                let len = match srtp.as_mut().map(|s| s.unprotect_rtp(bytes)) {
                    Some(Ok(len)) => len,
                    Some(Err(_)) => {
                        *rejected += 1;
                        continue;
                    }
                    None => bytes.len(),
                };
                let Ok(p) = RtpPacket::parse(bytes.get(..len).unwrap_or_default()) else {
                    *rejected += 1;
                    continue;
                };
                liveness.heard(now, false);
                if let Some(a) = arrivals {
                    a.record(p.ssrc(), p.sequence_number(), Instant::now());
                }
                f(p.ssrc(), p.sequence_number(), p.payload());
                rtp += 1;
            }
            if rtp > 0 {
                return Ok(rtp);
            }
        }
    }
}
