//! One datagram per system call, through `socket2` on the socket tokio owns: what systems
//! without `sendmmsg`/`recvmmsg` get. No GSO (the probe says no, so the batch never asks
//! for a super-buffer), no GRO, no kernel receive times or drop counts.

use super::{MAX_DATAGRAMS, Received};
use socket2::{MaybeUninitSlice, SockRef};
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// A destination, as the caller gave it.
pub type Dest = SocketAddr;

/// `to` as a [`Dest`].
pub fn dest(to: SocketAddr) -> Dest {
    to
}

/// GSO is not offered here.
pub fn probe_gso(_socket: &UdpSocket) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Never asked: without GSO no super-buffer is sent.
pub fn gso_refused(_e: &io::Error) -> bool {
    false
}

/// GRO is not offered here: every read is one datagram.
pub fn enable_gro(_socket: &UdpSocket) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Sends up to [`MAX_DATAGRAMS`] datagrams, one call each, without waiting; returns how
/// many the system took. An error on the first is returned (`WouldBlock` included); one
/// after some were sent ends the call, as `sendmmsg` does, so the caller retries it.
pub fn send<'a>(
    socket: &UdpSocket,
    datagrams: impl Iterator<Item = (&'a [u8], &'a Dest)>,
) -> io::Result<usize> {
    let sock = SockRef::from(socket);
    let mut sent = 0;
    for (bytes, to) in datagrams.take(MAX_DATAGRAMS) {
        match sock.send_to(bytes, &(*to).into()) {
            Ok(_) => sent += 1,
            Err(e) if sent == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(sent)
}

/// Never called: [`probe_gso`] says no.
pub fn send_segmented<'a>(
    _socket: &UdpSocket,
    _segments: impl Iterator<Item = &'a [u8]>,
    _to: &Dest,
    _segment: u16,
) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Reads up to one datagram per `slot`-byte slot of `buf` without waiting, into `got`;
/// `WouldBlock` when there was none. A datagram longer than its slot is marked truncated.
pub fn recv(
    socket: &UdpSocket,
    buf: &mut [u8],
    slot: usize,
    got: &mut Vec<Received>,
) -> io::Result<usize> {
    got.clear();
    let sock = SockRef::from(socket);
    for chunk in buf.chunks_exact_mut(slot.max(1)).take(MAX_DATAGRAMS) {
        // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and the view only
        // lets the call write initialised bytes into memory that is already initialised;
        // nothing here reads it as uninitialised or writes uninitialised bytes through it.
        let view = unsafe { &mut *(std::ptr::from_mut::<[u8]>(chunk) as *mut [MaybeUninit<u8>]) };
        match sock.recv_from_vectored(&mut [MaybeUninitSlice::new(view)]) {
            Ok((len, flags, from)) => got.push(Received {
                len: len.min(slot),
                from: from.as_socket(),
                truncated: flags.is_truncated(),
                arrived: None,
                drops: None,
                segment: None,
            }),
            Err(e) if got.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(got.len())
}
