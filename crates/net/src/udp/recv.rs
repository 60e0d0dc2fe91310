//! Incoming datagrams read in batches with `recvmmsg` (Linux): one syscall fills the
//! slots of one reused buffer, cut in equal slots, one datagram each, allocating nothing
//! (`super::sys`). On a socket with UDP GRO ([`enable_gro`]) a slot may hold several
//! datagrams of one sender, back to back ([`RecvBatch::segment`]); a batch made by
//! [`RecvBatch::coalescing`] has slots large enough for them.

use super::sys::{self, MAX_DATAGRAMS, Received};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// The most a read of a socket with UDP GRO returns at once: a whole UDP datagram's
/// worth, what the kernel coalesces at most.
pub const COALESCED_MAX: usize = 65_536;

/// Lets the kernel coalesce datagrams of one sender that arrive together into one read
/// (`UDP_GRO`, Linux 5.0+); on loopback a sender's GSO buffer then arrives whole, never
/// cut into datagrams. Read such a socket only with a [`RecvBatch::coalescing`] batch.
/// Fails where the system has no GRO (`Unsupported`): reads there are one datagram each.
pub fn enable_gro(socket: &UdpSocket) -> io::Result<()> {
    sys::enable_gro(socket)
}

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
    /// Room for `slots` datagrams (at most [`super::MAX_DATAGRAMS`]) of up to `slot` bytes each.
    pub fn new(slots: usize, slot: usize) -> Self {
        let (slots, slot) = (slots.clamp(1, MAX_DATAGRAMS), slot.max(1));
        Self {
            buf: vec![0; slots * slot],
            slot,
            got: Vec::with_capacity(slots),
        }
    }

    /// Room for `slots` reads of a socket with UDP GRO, each up to [`COALESCED_MAX`]
    /// bytes. The buffer's pages are touched only as far as reads fill them.
    pub fn coalescing(slots: usize) -> Self {
        Self::new(slots, COALESCED_MAX)
    }

    /// Reads what the socket holds, up to as many datagrams as it has slots, without
    /// waiting; `WouldBlock` when there is nothing. Returns how many were read.
    pub fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let Self { buf, slot, got } = self;
        socket.try_io(Interest::READABLE, || sys::recv(socket, buf, *slot, got))
    }

    /// Waits until `deadline` for `socket` to hold datagrams and reads one batch of them;
    /// returns how many (0 at the deadline).
    pub async fn read_until(
        &mut self,
        socket: &UdpSocket,
        deadline: tokio::time::Instant,
    ) -> io::Result<usize> {
        loop {
            match tokio::time::timeout_at(deadline, socket.readable()).await {
                Ok(ready) => ready?,
                Err(_elapsed) => return Ok(0),
            }
            match self.recv(socket) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
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

    /// Datagram `i` of the last batch to read only, as [`RecvBatch::datagram`] gives it
    /// (`None` where that gives [`Datagram::Unusable`]): a look at the whole batch before
    /// any of it is handled.
    pub fn peek(&self, i: usize) -> Option<(&[u8], SocketAddr)> {
        let g = self.got.get(i)?;
        let start = i * self.slot;
        match (g.truncated, g.from) {
            (false, Some(from)) => Some((self.buf.get(start..start + g.len)?, from)),
            _ => None,
        }
    }

    /// The size of the datagrams the kernel coalesced into read `i` (UDP GRO): each of
    /// them is that long but the last, which may be shorter. `None` for a single one.
    pub fn segment(&self, i: usize) -> Option<usize> {
        self.got.get(i)?.segment.map(usize::from)
    }

    /// When the kernel received datagram `i` of the last batch, since the Unix epoch,
    /// if the socket stamps what it receives (`SO_TIMESTAMPNS`).
    pub fn arrived(&self, i: usize) -> Option<Duration> {
        self.got.get(i)?.arrived
    }

    /// The socket's count of datagrams it dropped, as of the last datagram of the batch
    /// that carried one (`SO_RXQ_OVFL`): `None` when none did (the option is off, or
    /// the socket has dropped nothing yet).
    pub fn socket_drops(&self) -> Option<u32> {
        self.got.iter().rev().find_map(|g| g.drops)
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

    #[cfg(all(target_os = "linux", not(feature = "portable")))]
    #[tokio::test]
    async fn reads_the_kernels_receive_time_and_drop_count() {
        use nix::sys::socket::{setsockopt, sockopt};
        use std::time::{SystemTime, UNIX_EPOCH};
        let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = rx.local_addr().unwrap();
        let mut batch = RecvBatch::new(8, 64);
        // Without the options: neither.
        tx.send_to(&[1; 10], to).await.unwrap();
        rx.readable().await.unwrap();
        assert_eq!(batch.recv(&rx).unwrap(), 1);
        assert_eq!((batch.arrived(0), batch.socket_drops()), (None, None));

        setsockopt(&rx, sockopt::ReceiveTimestampns, &true).unwrap();
        setsockopt(&rx, sockopt::RxqOvfl, &1).unwrap();
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        tx.send_to(&[2; 10], to).await.unwrap();
        rx.readable().await.unwrap();
        assert_eq!(batch.recv(&rx).unwrap(), 1);
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let arrived = batch.arrived(0).expect("a receive time");
        // The kernel's clock is the one SystemTime reads; a microsecond of rounding aside.
        let slack = std::time::Duration::from_micros(1);
        assert!(before <= arrived + slack && arrived <= after + slack);
        // Nothing dropped yet: the kernel sends no count.
        assert_eq!(batch.socket_drops(), None);
    }
}
