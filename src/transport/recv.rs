//! Incoming datagrams read in batches with `recvmmsg` (Linux): one syscall brings up to
//! [`RecvBatch::slots`] datagrams into one reused buffer, cut in equal slots. Uses nix's
//! safe wrapper, as the send side does.

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// One datagram read into a slot.
#[derive(Debug, Clone, Copy)]
struct Got {
    len: usize,
    from: Option<SocketAddr>,
    /// Longer than its slot: the kernel cut it.
    truncated: bool,
}

/// A reusable buffer for one `recvmmsg` call.
pub struct RecvBatch {
    buf: Vec<u8>,
    slot: usize,
    got: Vec<Got>,
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
    /// Room for `slots` datagrams of up to `slot` bytes each.
    pub fn new(slots: usize, slot: usize) -> Self {
        let (slots, slot) = (slots.max(1), slot.max(1));
        Self {
            buf: vec![0; slots * slot],
            slot,
            got: Vec::with_capacity(slots),
        }
    }

    /// How many datagrams one call reads at most.
    pub fn slots(&self) -> usize {
        self.buf.len() / self.slot
    }

    /// Reads what the socket holds, up to [`RecvBatch::slots`] datagrams, without
    /// waiting; `WouldBlock` when there is nothing. Returns how many were read.
    pub fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let Self { buf, slot, got } = self;
        socket.try_io(Interest::READABLE, || recv_into(socket, buf, *slot, got))
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

/// One `recvmmsg` into the slots of `buf`. The headers hold raw pointers into `buf`, so
/// they are built per call and never live across an await (one allocation per batch).
fn recv_into(
    socket: &UdpSocket,
    buf: &mut [u8],
    slot: usize,
    got: &mut Vec<Got>,
) -> io::Result<usize> {
    got.clear();
    let n = buf.len() / slot;
    let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(n, None);
    let mut slices: Vec<[IoSliceMut<'_>; 1]> = buf
        .chunks_exact_mut(slot)
        .map(|c| [IoSliceMut::new(c)])
        .collect();
    let flags = MsgFlags::MSG_DONTWAIT;
    match recvmmsg(socket.as_raw_fd(), &mut headers, &mut slices, flags, None) {
        Ok(results) => {
            for r in results {
                got.push(Got {
                    len: r.bytes.min(slot),
                    from: r.address.and_then(socket_addr),
                    truncated: r.flags.contains(MsgFlags::MSG_TRUNC),
                });
            }
            Ok(got.len())
        }
        Err(Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
        Err(Errno::EINTR) => Ok(0),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// The IP address in a socket address the kernel wrote.
fn socket_addr(a: SockaddrStorage) -> Option<SocketAddr> {
    a.as_sockaddr_in()
        .map(|v4| SocketAddr::V4((*v4).into()))
        .or_else(|| a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into())))
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
