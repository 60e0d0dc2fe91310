//! Outgoing datagrams, sent with as few syscalls and as little kernel work per datagram as
//! their destinations allow (on Linux; elsewhere one call per datagram, `super::sys`):
//!
//! - Datagrams to different destinations go together in `sendmmsg` calls (a fan-out sends
//!   one datagram per subscriber, each to a different address).
//! - Several datagrams to one destination (an aggregated flush that filled more than one
//!   packet, a per-stream fan-out of a whole receive batch) go as one UDP GSO super-buffer
//!   (`UDP_SEGMENT`, Linux 4.18+): the kernel walks its UDP/IP path once for the buffer
//!   and cuts it into datagrams at the segment size, so its cost follows the buffers, not
//!   the datagrams. A super-buffer's segments must all be the segment size but the last,
//!   which may be shorter, so each destination's datagrams are cut into runs of one size
//!   (plus one shorter tail); a run of one goes by `sendmmsg`.
//!
//! The datagrams are not copied: the batch holds their places in a buffer the caller
//! keeps (the core's output, where the transport protected them in place) and hands to
//! [`SendBatch::flush`].
//!
//! Each destination's datagrams leave in the order they were queued; datagrams to
//! different destinations may be reordered among themselves. Support is probed once per
//! batch (`getsockopt(UDP_SEGMENT)`); if the kernel then refuses a super-buffer (`EIO`: the
//! route's device cannot checksum it; `EINVAL`), GSO is switched off for the batch's life
//! and that buffer's datagrams go one by one.

use super::sys;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Datagrams per `sendmmsg` call.
pub const SEND_BATCH: usize = sys::MAX_DATAGRAMS;

/// Segments per GSO super-buffer (the kernel's `UDP_MAX_SEGMENTS` before Linux 6.9).
const GSO_MAX_SEGMENTS: usize = 64;

/// Bytes per GSO super-buffer: one UDP datagram's worth, with room for the headers.
const GSO_MAX_BYTES: usize = 65_000;

/// Datagrams waiting to be sent: their places in the caller's buffer.
#[derive(Default)]
pub struct SendBatch {
    items: Vec<Item>,
    /// The send plan, rebuilt by each flush: item indexes by destination, in queue order
    /// within one destination, and the runs cut from them.
    order: Vec<u32>,
    keyed: Vec<(u64, u32)>,
    runs: Vec<Run>,
    gso: Gso,
}

/// One queued datagram.
struct Item {
    to: SocketAddr,
    /// Sort key: equal for equal destinations (exact for IPv4).
    key: u64,
    addr: sys::Dest,
    start: usize,
    end: usize,
}

impl Item {
    fn len(&self) -> usize {
        self.end - self.start
    }
}

/// Datagrams sent in one go: `order[first..first + count]`, as one GSO super-buffer of
/// `segment`-byte segments when `count > 1`.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: usize,
    count: usize,
    segment: usize,
}

/// Whether the socket takes GSO super-buffers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Gso {
    #[default]
    Unknown,
    On,
    Off,
}

/// What one flush sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams sent.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Sent {
    fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }
}

impl SendBatch {
    /// Queues the datagram at `at` in the buffer [`SendBatch::flush`] will be given.
    pub fn push(&mut self, to: SocketAddr, at: Range<usize>) {
        self.items.push(Item {
            to,
            key: dest_key(to),
            addr: sys::dest(to),
            start: at.start,
            end: at.end,
        });
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Sends everything queued, whose bytes are in `buf`, waiting for the socket when its
    /// buffer is full. A datagram the kernel refuses (an ICMP error from a gone
    /// subscriber) is dropped, not retried; one outside `buf` is sent empty.
    pub async fn flush(&mut self, socket: &UdpSocket, buf: &[u8]) -> Sent {
        if self.gso == Gso::Unknown {
            self.gso = probe_gso(socket);
        }
        self.plan();
        let mut sent = Sent::default();
        let mut at = 0;
        while at < self.runs.len() {
            let attempt = match self.runs[at] {
                run if run.count > 1 => self.send_gso(socket, buf, at, &mut sent),
                _ => self.send_singles(socket, buf, at, &mut sent),
            };
            match attempt {
                Ok(runs) => at += runs,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if socket.writable().await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "UDP send failed");
                    at += 1;
                }
            }
        }
        self.items.clear();
        sent
    }

    /// Cuts the queue into runs: with GSO, each destination's datagrams (in queue order)
    /// into runs of one size plus at most one shorter tail; without, one run per datagram.
    fn plan(&mut self) {
        let Self {
            items,
            order,
            keyed,
            runs,
            gso,
            ..
        } = self;
        order.clear();
        runs.clear();
        if *gso != Gso::On {
            order.extend(0..items.len() as u32);
            runs.extend((0..items.len()).map(|first| Run {
                first,
                count: 1,
                segment: 0,
            }));
            return;
        }
        // By destination key, then queue position: each destination's datagrams end up
        // together and in order (a key two destinations share only splits their runs).
        keyed.clear();
        keyed.extend(items.iter().zip(0..).map(|(item, i)| (item.key, i)));
        keyed.sort_unstable();
        order.extend(keyed.iter().map(|(_, i)| *i));
        let item = |i: u32| &items[i as usize];
        let mut first = 0;
        while let Some(&head) = order.get(first) {
            let (to, segment) = (item(head).to, item(head).len());
            let most = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / segment.max(1));
            let fits = |n: usize, same: &dyn Fn(usize) -> bool| {
                n < most
                    && order
                        .get(first + n)
                        .is_some_and(|&i| item(i).to == to && same(item(i).len()))
            };
            let mut count = 1;
            while fits(count, &|len| len == segment) {
                count += 1;
            }
            if fits(count, &|len| 0 < len && len < segment) {
                count += 1;
            }
            runs.push(Run {
                first,
                count,
                segment,
            });
            first += count;
        }
    }

    /// Sends run `at` as a GSO super-buffer; returns the runs done (1). A refusal that
    /// means the kernel or route cannot do GSO turns it off and leaves this run's and the
    /// later runs' datagrams to go one at a time (0 runs done).
    fn send_gso(
        &mut self,
        socket: &UdpSocket,
        buf: &[u8],
        at: usize,
        sent: &mut Sent,
    ) -> io::Result<usize> {
        let Run {
            first,
            count,
            segment,
        } = self.runs[at];
        let group = self.order.get(first..first + count).unwrap_or_default();
        let attempt = socket.try_io(Interest::WRITABLE, || {
            send_super(socket, buf, &self.items, group, segment)
        });
        match attempt {
            Ok(()) => {
                for &i in group {
                    sent.add(self.items[i as usize].len());
                }
                Ok(1)
            }
            Err(e) if sys::gso_refused(&e) => {
                tracing::warn!(error = %e, "UDP GSO refused; sending datagrams one by one");
                self.gso = Gso::Off;
                // This run and every later one go datagram by datagram (once per socket).
                let rest: Vec<Run> = self.runs.drain(at..).collect();
                let singles = rest.iter().flat_map(|r| r.first..r.first + r.count);
                self.runs.extend(singles.map(|first| Run {
                    first,
                    count: 1,
                    segment: 0,
                }));
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends the single-datagram runs from `at` on (up to [`SEND_BATCH`]) in one
    /// `sendmmsg`; returns how many the kernel took (at least 1, so a refused datagram is
    /// skipped).
    fn send_singles(
        &self,
        socket: &UdpSocket,
        buf: &[u8],
        at: usize,
        sent: &mut Sent,
    ) -> io::Result<usize> {
        let chunk = self.runs[at..]
            .iter()
            .take(SEND_BATCH)
            .take_while(|r| r.count == 1)
            .filter_map(|r| self.order.get(r.first))
            .filter_map(|&i| self.items.get(i as usize));
        let datagrams = chunk.clone().map(|item| {
            (
                buf.get(item.start..item.end).unwrap_or_default(),
                &item.addr,
            )
        });
        let taken = socket.try_io(Interest::WRITABLE, || sys::send(socket, datagrams.clone()))?;
        chunk.take(taken).for_each(|item| sent.add(item.len()));
        Ok(taken.max(1))
    }
}

/// A destination's sort key.
fn dest_key(to: SocketAddr) -> u64 {
    let port = u64::from(to.port());
    match to {
        SocketAddr::V4(a) => u64::from(a.ip().to_bits()) << 16 | port,
        SocketAddr::V6(a) => {
            let ip = a.ip().to_bits();
            (ip as u64) ^ ((ip >> 64) as u64) ^ port.rotate_left(48)
        }
    }
}

/// Whether the socket takes GSO super-buffers.
fn probe_gso(socket: &UdpSocket) -> Gso {
    match sys::probe_gso(socket) {
        Ok(()) => Gso::On,
        Err(e) => {
            tracing::info!(error = %e, "UDP GSO not available; sending datagrams one by one");
            Gso::Off
        }
    }
}

/// One `sendmsg` of a GSO super-buffer: the datagrams `group` (indexes into `items`), all
/// to the first one's destination, cut by the kernel at `segment` bytes.
fn send_super(
    socket: &UdpSocket,
    buf: &[u8],
    items: &[Item],
    group: &[u32],
    segment: usize,
) -> io::Result<()> {
    let Some(head) = group.first().and_then(|&i| items.get(i as usize)) else {
        return Ok(());
    };
    let segment =
        u16::try_from(segment).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let segments = group
        .iter()
        .take(GSO_MAX_SEGMENTS)
        .filter_map(|&i| items.get(i as usize))
        .map(|item| buf.get(item.start..item.end).unwrap_or_default());
    sys::send_segmented(socket, segments, &head.addr, segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Appends `bytes` to `buf` and queues them.
    fn put(batch: &mut SendBatch, buf: &mut Vec<u8>, to: SocketAddr, bytes: &[u8]) {
        let start = buf.len();
        buf.extend_from_slice(bytes);
        batch.push(to, start..buf.len());
    }

    /// The runs planned for datagrams of `sizes`, each to the port given beside it, as
    /// (port, sizes) per run.
    fn plan(queue: &[(u16, usize)]) -> Vec<(u16, Vec<usize>)> {
        let mut b = SendBatch {
            gso: Gso::On,
            ..SendBatch::default()
        };
        for &(port, size) in queue {
            b.push(addr(port), 0..size);
        }
        b.plan();
        b.runs
            .iter()
            .map(|r| {
                let items = &b.order[r.first..r.first + r.count];
                let port = b.items[items[0] as usize].to.port();
                let sizes = items.iter().map(|&i| b.items[i as usize].len());
                (port, sizes.collect())
            })
            .collect()
    }

    #[test]
    fn runs_are_one_size_with_a_shorter_tail_per_destination_in_queue_order() {
        let queue = [
            (1, 100),
            (2, 50),
            (1, 100),
            (2, 60),
            (1, 80),
            (1, 100),
            (1, 120),
        ];
        assert_eq!(
            plan(&queue),
            vec![
                (1, vec![100, 100, 80]),
                (1, vec![100]),
                (1, vec![120]),
                (2, vec![50]),
                (2, vec![60]),
            ]
        );
    }

    #[test]
    fn runs_stop_at_the_segment_and_byte_limits() {
        let many = vec![(1, 10); GSO_MAX_SEGMENTS + 1];
        let runs = plan(&many);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].1.len(), GSO_MAX_SEGMENTS);
        let big = vec![(1, 20_000); 4];
        let counts: Vec<usize> = plan(&big).iter().map(|r| r.1.len()).collect();
        assert_eq!(counts, vec![3, 1]);
    }

    /// A kernel that refuses a super-buffer (here `EINVAL`: the sending socket turned
    /// UDP checksums off, which GSO needs) gets the datagrams one by one, and GSO stays
    /// off for the socket.
    #[cfg(all(target_os = "linux", not(feature = "portable")))]
    #[tokio::test]
    async fn a_refused_super_buffer_falls_back_to_single_datagrams() {
        let sender = UdpSocket::bind(addr(0)).await.unwrap();
        let one: nix::libc::c_int = 1;
        // SAFETY: the fd is the live socket above; `one` outlives the call and its size
        // is the length passed.
        let rc = unsafe {
            nix::libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&sender),
                nix::libc::SOL_SOCKET,
                nix::libc::SO_NO_CHECK,
                (&raw const one).cast(),
                std::mem::size_of_val(&one) as nix::libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "SO_NO_CHECK: {}", io::Error::last_os_error());
        let receiver = UdpSocket::bind(addr(0)).await.unwrap();
        let to = receiver.local_addr().unwrap();
        let (mut batch, mut buf) = (SendBatch::default(), Vec::new());
        let datagrams: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100]).collect();
        for d in &datagrams {
            put(&mut batch, &mut buf, to, d);
        }
        assert_eq!(batch.flush(&sender, &buf).await.packets, 5);
        assert_eq!(batch.gso, Gso::Off);
        let mut buf = [0u8; 2048];
        for d in &datagrams {
            let got =
                tokio::time::timeout(std::time::Duration::from_secs(5), receiver.recv(&mut buf));
            let len = got.await.unwrap().unwrap();
            assert_eq!(&buf[..len], &d[..]);
        }
    }

    /// A run of one size goes as one super-buffer, and a receiver with UDP GRO takes it
    /// in one read that tells the segment size: the datagrams come apart as they were
    /// queued, the shorter tail included.
    #[cfg(all(target_os = "linux", not(feature = "portable")))]
    #[tokio::test]
    async fn a_run_arrives_in_one_read_at_a_receiver_with_gro() {
        use super::super::recv::{Datagram, RecvBatch, enable_gro};
        let sender = UdpSocket::bind(addr(0)).await.unwrap();
        let receiver = UdpSocket::bind(addr(0)).await.unwrap();
        enable_gro(&receiver).unwrap();
        let to = receiver.local_addr().unwrap();
        let mut datagrams: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 300]).collect();
        datagrams.push(vec![6; 120]);
        let (mut batch, mut buf) = (SendBatch::default(), Vec::new());
        for d in &datagrams {
            put(&mut batch, &mut buf, to, d);
        }
        assert_eq!(batch.flush(&sender, &buf).await.packets, 7);
        assert_eq!(batch.gso, Gso::On, "loopback takes super-buffers");
        let mut reads = RecvBatch::coalescing(4);
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < datagrams.len() {
            let n = reads.read_until(&receiver, deadline).await.unwrap();
            assert!(n > 0, "the datagrams arrive");
            for i in 0..n {
                let segment = reads.segment(i);
                let Datagram::Whole(bytes, _) = reads.datagram(i) else {
                    panic!("a coalesced read fits its slot");
                };
                assert_eq!(segment, Some(300), "one read, cut at the segment size");
                got.extend(bytes.chunks(300).map(<[u8]>::to_vec));
            }
        }
        assert_eq!(got, datagrams);
    }

    /// Over real loopback sockets: each receiver gets its datagrams whole and in order,
    /// whether they went in a super-buffer or by `sendmmsg`.
    #[tokio::test]
    async fn every_destination_receives_its_datagrams_in_order() {
        let sender = UdpSocket::bind(addr(0)).await.unwrap();
        let a = UdpSocket::bind(addr(0)).await.unwrap();
        let b = UdpSocket::bind(addr(0)).await.unwrap();
        let (to_a, to_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let datagram = |tag: u8, len: usize| vec![tag; len];
        let for_a: Vec<Vec<u8>> = (0..10u8).map(|i| datagram(i, 300)).collect();
        let for_b = vec![datagram(100, 200), datagram(101, 150), datagram(102, 400)];
        let (mut batch, mut buf) = (SendBatch::default(), Vec::new());
        for (i, d) in for_a.iter().enumerate() {
            put(&mut batch, &mut buf, to_a, d);
            if let Some(d) = for_b.get(i) {
                put(&mut batch, &mut buf, to_b, d);
            }
        }
        let sent = batch.flush(&sender, &buf).await;
        assert_eq!(sent.packets, 13);
        assert_eq!(sent.bytes, 10 * 300 + 200 + 150 + 400);
        for (socket, expected) in [(&a, &for_a), (&b, &for_b)] {
            let mut buf = [0u8; 2048];
            for d in expected {
                let got =
                    tokio::time::timeout(std::time::Duration::from_secs(5), socket.recv(&mut buf));
                let len = got.await.unwrap().unwrap();
                assert_eq!(&buf[..len], &d[..]);
            }
        }
    }
}
