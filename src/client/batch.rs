//! Batched reception for receivers that count what arrives rather than keep it: one
//! `recvmmsg` brings every datagram the socket holds, SRTP is removed in place, and each
//! RTP packet's stream, sequence number and payload are lent to the caller, allocating
//! nothing per packet. A bench driving thousands of receivers on the relay's own cores
//! needs this: one system call and one task wake-up per batch, not per packet.

use super::{Client, ClientError, Link, Received};
use crate::rtp::{PacketClass, RtpPacket, classify};
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
    /// [`rejected`](Self::rejected); RTCP (the relay's reports) is dropped, so
    /// [`sender_report`](Self::sender_report) sees none of it. Over QUIC or WebRTC this
    /// is [`recv`](Self::recv), one packet at a time.
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
            ..
        } = self
        else {
            return Ok(0);
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let n = read_batch(socket, batch, deadline).await?;
            if n == 0 {
                return Ok(0);
            }
            let mut rtp = 0;
            for i in 0..n {
                let Datagram::Whole(bytes, _) = batch.datagram(i) else {
                    *rejected += 1;
                    continue;
                };
                if classify(bytes) != PacketClass::Rtp {
                    continue;
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
