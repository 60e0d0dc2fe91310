//! Outgoing datagrams gathered into `sendmmsg` calls (Linux): a fan-out sends one datagram
//! per subscriber, each to a different address, so one syscall for many destinations is
//! what helps (GSO only batches datagrams to one destination). Uses nix's safe wrapper.

use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage, sendmmsg};
use std::convert::Infallible;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Datagrams per `sendmmsg` call.
pub const SEND_BATCH: usize = 64;

/// Datagrams waiting to be sent, in one reused buffer.
#[derive(Default)]
pub struct SendBatch {
    arena: Vec<u8>,
    items: Vec<(SockaddrStorage, usize, usize)>,
}

/// What one flush sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams sent.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl SendBatch {
    /// Queues one datagram.
    pub fn push(&mut self, to: SocketAddr, bytes: &[u8]) {
        let Ok(()) = self.push_sealed(to, bytes, 0, |_, len| Ok::<_, Infallible>(len));
    }

    /// Queues one datagram that `seal` finishes in place (SRTP protection): it gets
    /// `bytes` copied into the arena followed by `room` spare bytes, and the length of
    /// `bytes`, and returns the datagram's final length (at most `bytes.len() + room`).
    /// When `seal` fails nothing is queued. Once the arena has grown to its working size
    /// this allocates nothing.
    pub fn push_sealed<E>(
        &mut self,
        to: SocketAddr,
        bytes: &[u8],
        room: usize,
        seal: impl FnOnce(&mut [u8], usize) -> Result<usize, E>,
    ) -> Result<(), E> {
        let start = self.arena.len();
        self.arena.extend_from_slice(bytes);
        self.arena.resize(self.arena.len() + room, 0);
        let slot = self.arena.get_mut(start..).unwrap_or_default();
        let sealed = seal(slot, bytes.len());
        match sealed {
            Ok(len) => {
                let end = start + len.min(bytes.len() + room);
                self.arena.truncate(end);
                self.items.push((SockaddrStorage::from(to), start, end));
            }
            Err(_) => self.arena.truncate(start),
        }
        sealed.map(drop)
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Sends everything queued, waiting for the socket when its buffer is full. A datagram
    /// the kernel refuses (an ICMP error from a gone subscriber) is dropped, not retried.
    pub async fn flush(&mut self, socket: &UdpSocket) -> Sent {
        let mut sent = Sent::default();
        let mut done = 0;
        while done < self.items.len() {
            let end = (done + SEND_BATCH).min(self.items.len());
            let chunk = self.items.get(done..end).unwrap_or_default();
            let attempt = socket.try_io(Interest::WRITABLE, || {
                send_chunk(socket, &self.arena, chunk)
            });
            match attempt {
                Ok(n) => {
                    for (_, s, e) in chunk.iter().take(n) {
                        sent.packets += 1;
                        sent.bytes += (e - s) as u64;
                    }
                    done += n.max(1);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if socket.writable().await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "UDP send failed");
                    done += 1;
                }
            }
        }
        self.items.clear();
        self.arena.clear();
        sent
    }
}

/// One `sendmmsg` of up to [`SEND_BATCH`] datagrams; returns how many the kernel took.
/// The headers are built per call: they hold raw pointers, so they may not live across
/// an await in the relay task (one allocation per batch, not per datagram).
fn send_chunk(
    socket: &UdpSocket,
    arena: &[u8],
    chunk: &[(SockaddrStorage, usize, usize)],
) -> io::Result<usize> {
    let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(chunk.len(), None);
    let slices: Vec<[IoSlice<'_>; 1]> = chunk
        .iter()
        .map(|(_, s, e)| [IoSlice::new(arena.get(*s..*e).unwrap_or_default())])
        .collect();
    let addrs: Vec<Option<SockaddrStorage>> = chunk.iter().map(|(a, _, _)| Some(*a)).collect();
    let cmsgs: [ControlMessage<'_>; 0] = [];
    match sendmmsg(
        socket.as_raw_fd(),
        &mut headers,
        &slices,
        &addrs,
        cmsgs,
        MsgFlags::empty(),
    ) {
        Ok(results) => Ok(results.count()),
        Err(Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
        Err(Errno::EINTR) => Ok(0),
        Err(e) => Err(io::Error::from(e)),
    }
}
