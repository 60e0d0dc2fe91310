//! Incoming datagrams read in batches with `recvmmsg` (Linux): one syscall fills the
//! slots of one reused buffer, cut in equal slots, one datagram each, allocating nothing
//! ([`super::mmsg`]).

use super::mmsg::{self, MAX_DATAGRAMS, Received};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// A reusable buffer for one `recvmmsg` call. The default holds nothing and allocates
/// nothing: a placeholder while the real one is lent out.
#[derive(Default)]
pub struct RecvBatch {
    buf: Vec<u8>,
    slot: usize,
    got: Vec<Received>,
}

/// A datagram of the last batch.
pub enum Datagram<'a> {
    /// Its bytes (mutable: SRTP is removed in place) and its source.
    Whole(&'a mut [u8], SocketAddr),
    /// Larger than a slot (so larger than any packet the relay accepts), or without a
    /// source address: dropped.
    Unusable,
}

impl RecvBatch {
    /// Room for `slots` datagrams (at most [`MAX_DATAGRAMS`]) of up to `slot` bytes each.
    pub fn new(slots: usize, slot: usize) -> Self {
        let (slots, slot) = (slots.clamp(1, MAX_DATAGRAMS), slot.max(1));
        Self {
            buf: vec![0; slots * slot],
            slot,
            got: Vec::with_capacity(slots),
        }
    }

    /// Reads what the socket holds, up to as many datagrams as it has slots, without
    /// waiting; `WouldBlock` when there is nothing. Returns how many were read.
    pub fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let Self { buf, slot, got } = self;
        socket.try_io(Interest::READABLE, || {
            mmsg::recv(socket.as_raw_fd(), buf, *slot, got)
        })
    }

    /// Datagram `i` of the last [`RecvBatch::recv`].
    pub fn datagram(&mut self, i: usize) -> Datagram<'_> {
        let Some(g) = self.got.get(i).copied() else {
            return Datagram::Unusable;
        };
        let start = i * self.slot;
        match (g.truncated, g.from, self.buf.get_mut(start..start + g.len)) {
            (false, Some(from), Some(bytes)) => Datagram::Whole(bytes, from),
            _ => Datagram::Unusable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_several_datagrams_in_one_call_and_flags_oversized_ones() {
        let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = rx.local_addr().unwrap();
        for i in 0..5u8 {
            tx.send_to(&[i; 10], to).await.unwrap();
        }
        tx.send_to(&[9; 100], to).await.unwrap();
        let mut batch = RecvBatch::new(8, 64);
        let mut seen = Vec::new();
        while seen.len() < 6 {
            rx.readable().await.unwrap();
            let n = match batch.recv(&rx) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            };
            for i in 0..n {
                seen.push(match batch.datagram(i) {
                    Datagram::Whole(bytes, from) => {
                        assert_eq!(from, tx.local_addr().unwrap());
                        Some(bytes.to_vec())
                    }
                    Datagram::Unusable => None,
                });
            }
        }
        for (i, d) in seen.iter().take(5).enumerate() {
            assert_eq!(d.as_deref(), Some(&[i as u8; 10][..]));
        }
        assert!(
            seen[5].is_none(),
            "a datagram larger than its slot is refused"
        );
    }
}
