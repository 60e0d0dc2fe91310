//! `sendmmsg` and `recvmmsg` (Linux) on headers held on the stack: a call allocates
//! nothing. (nix's wrappers allocate their header arrays on every call, which made two
//! heap allocations per receive batch and one per send batch: per packet at low load.)
//!
//! The headers hold raw pointers into the caller's buffers, so they live only for the
//! call and never across an await.

use super::{MAX_DATAGRAMS, Received};
use nix::errno::Errno;
use nix::sys::socket::{SockaddrLike, SockaddrStorage, getsockopt, setsockopt, sockopt};
use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tokio::net::UdpSocket;

/// A destination in the form the kernel reads, converted once per queued datagram.
pub type Dest = SockaddrStorage;

/// `to` as a [`Dest`].
pub fn dest(to: SocketAddr) -> Dest {
    SockaddrStorage::from(to)
}

/// Whether the kernel knows `UDP_SEGMENT` (GSO) on this socket.
pub fn probe_gso(socket: &UdpSocket) -> io::Result<()> {
    getsockopt(socket, sockopt::UdpGsoSegment)
        .map(drop)
        .map_err(io::Error::from)
}

/// Whether a refused super-buffer means GSO cannot work here: `EIO` (the route's device
/// cannot checksum segments) or `EINVAL` (segment size or count out of the kernel's range).
pub fn gso_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::EIO as i32) || e.kind() == io::ErrorKind::InvalidInput
}

/// Lets the kernel coalesce datagrams of one sender that arrive together into one read
/// (`UDP_GRO`, Linux 5.0+).
pub fn enable_gro(socket: &UdpSocket) -> io::Result<()> {
    setsockopt(socket, sockopt::UdpGroSegment, &true).map_err(io::Error::from)
}

/// Room for one datagram's control messages: a `timespec` (`SCM_TIMESTAMPNS`), a u32
/// (`SO_RXQ_OVFL`) and an int (`UDP_GRO`), each with its header, which take 32 + 24 + 24
/// bytes on 64-bit Linux. A message that does not fit is cut by the kernel
/// (`MSG_CTRUNC`) and ignored, never misread. `u64` words keep it aligned as `cmsghdr`
/// wants.
type Control = [u64; 10];

/// An unused I/O vector slot.
const NO_IOV: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// An all-zero message header: null pointers and zero lengths.
fn empty_header() -> libc::mmsghdr {
    // SAFETY: `mmsghdr` is a C struct of integers and raw pointers, for which all-zero
    // bytes are a valid value (null pointers, zero lengths and flags).
    unsafe { std::mem::zeroed() }
}

/// Sends up to [`MAX_DATAGRAMS`] of `datagrams` with one `sendmmsg`; returns how many
/// the kernel took (the first ones). `WouldBlock` when the socket's buffer is full.
pub fn send<'a>(
    socket: &UdpSocket,
    datagrams: impl Iterator<Item = (&'a [u8], &'a SockaddrStorage)>,
) -> io::Result<usize> {
    let mut iov = [NO_IOV; MAX_DATAGRAMS];
    let mut headers = [empty_header(); MAX_DATAGRAMS];
    let mut n = 0;
    for (bytes, to) in datagrams.take(MAX_DATAGRAMS) {
        iov[n] = libc::iovec {
            // The kernel only reads through it (sendmmsg).
            iov_base: bytes.as_ptr().cast_mut().cast(),
            iov_len: bytes.len(),
        };
        let h = &mut headers[n].msg_hdr;
        h.msg_name = to.as_ptr().cast_mut().cast();
        h.msg_namelen = to.len();
        n += 1;
    }
    for (h, v) in headers.iter_mut().zip(iov.iter_mut()).take(n) {
        h.msg_hdr.msg_iov = v;
        h.msg_hdr.msg_iovlen = 1;
    }
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: the first `n` headers point at `n` iovecs and addresses that outlive the
    // call, each iovec at a live slice of its length; the kernel reads them and writes
    // only the headers' `msg_len`. `n` ≤ MAX_DATAGRAMS fits a `c_uint`.
    let sent = unsafe {
        libc::sendmmsg(
            socket.as_raw_fd(),
            headers.as_mut_ptr(),
            n as libc::c_uint,
            0,
        )
    };
    result(sent)
}

/// Sends `segments` to `to` as one UDP GSO super-buffer (`UDP_SEGMENT`): the kernel cuts
/// it into datagrams of `segment` bytes (the last may be shorter). At most
/// [`MAX_DATAGRAMS`] segments are sent; the caller keeps within the kernel's limits.
pub fn send_segmented<'a>(
    socket: &UdpSocket,
    segments: impl Iterator<Item = &'a [u8]>,
    to: &SockaddrStorage,
    segment: u16,
) -> io::Result<()> {
    let mut iov = [NO_IOV; MAX_DATAGRAMS];
    let mut n = 0;
    for (v, bytes) in iov.iter_mut().zip(segments) {
        // The kernel only reads through it (sendmsg).
        v.iov_base = bytes.as_ptr().cast_mut().cast();
        v.iov_len = bytes.len();
        n += 1;
    }
    // Room for one control message of a u16, aligned as `cmsghdr` wants.
    let mut control = [0u64; 4];
    let mut msg = empty_header().msg_hdr;
    msg.msg_name = to.as_ptr().cast_mut().cast();
    msg.msg_namelen = to.len();
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = n;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as libc::c_uint) } as usize;
    debug_assert!(msg.msg_controllen <= size_of_val(&control));
    // SAFETY: `msg_control` points at `control`, zeroed, 8-byte aligned and at least
    // `msg_controllen` bytes long, so CMSG_FIRSTHDR returns a header inside it with room
    // for a u16 after it (CMSG_SPACE of a u16); writes stay within `control`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as libc::c_uint) as usize;
        libc::CMSG_DATA(cmsg).cast::<u16>().write_unaligned(segment);
    }
    // SAFETY: `msg` points at `n` iovecs over live slices, the destination and the control
    // buffer, all of which outlive the call; the kernel only reads them.
    let sent = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads up to [`MAX_DATAGRAMS`] datagrams into the `slot`-byte slots of `buf` with one
/// `recvmmsg`, without waiting; their lengths and sources go to `got` (cleared first).
/// Returns how many were read; `WouldBlock` when there was nothing.
pub fn recv(
    socket: &UdpSocket,
    buf: &mut [u8],
    slot: usize,
    got: &mut Vec<Received>,
) -> io::Result<usize> {
    let fd = socket.as_raw_fd();
    got.clear();
    let mut iov = [NO_IOV; MAX_DATAGRAMS];
    let mut names = [MaybeUninit::<libc::sockaddr_storage>::zeroed(); MAX_DATAGRAMS];
    let mut controls: [Control; MAX_DATAGRAMS] = [[0; 10]; MAX_DATAGRAMS];
    let mut headers = [empty_header(); MAX_DATAGRAMS];
    let mut n = 0;
    for (v, chunk) in iov.iter_mut().zip(buf.chunks_exact_mut(slot.max(1))) {
        v.iov_base = chunk.as_mut_ptr().cast();
        v.iov_len = chunk.len();
        n += 1;
    }
    for (((h, v), name), control) in headers
        .iter_mut()
        .zip(iov.iter_mut())
        .zip(names.iter_mut())
        .zip(controls.iter_mut())
        .take(n)
    {
        h.msg_hdr.msg_iov = v;
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_name = name.as_mut_ptr().cast();
        h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_hdr.msg_control = control.as_mut_ptr().cast();
        h.msg_hdr.msg_controllen = size_of::<Control>();
    }
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: the first `n` headers point at iovecs over disjoint slots of `buf`, at
    // `sockaddr_storage`s and at control buffers, all of which outlive the call and are
    // as long as the lengths given; the kernel writes within those lengths and into the
    // headers. `n` ≤ MAX_DATAGRAMS fits a `c_uint`; a null timeout with MSG_DONTWAIT
    // never blocks.
    let read = unsafe {
        libc::recvmmsg(
            fd,
            headers.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    let read = result(read)?;
    for (h, name) in headers.iter().zip(names.iter()).take(read) {
        let Controls {
            arrived,
            drops,
            segment,
        } = control_messages(&h.msg_hdr);
        got.push(Received {
            len: (h.msg_len as usize).min(slot),
            from: socket_addr(name, h.msg_hdr.msg_namelen),
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            arrived,
            drops,
            segment,
        });
    }
    Ok(read)
}

/// What the control messages of one datagram said (see [`Received`]).
#[derive(Default)]
struct Controls {
    arrived: Option<Duration>,
    drops: Option<u32>,
    segment: Option<u16>,
}

/// The receive time (`SCM_TIMESTAMPNS`), the socket's drop count (`SO_RXQ_OVFL`) and the
/// coalesced segments' size (`UDP_GRO`) among the control messages the kernel wrote for
/// one datagram; the others are skipped.
fn control_messages(msg: &libc::msghdr) -> Controls {
    let mut got = Controls::default();
    // Cut control messages may end in a partial one: read none of them.
    if msg.msg_control.is_null() || msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return got;
    }
    // The end of what the kernel wrote: no header's extent may pass it.
    let end = (msg.msg_control as usize).saturating_add(msg.msg_controllen);
    // SAFETY: `msg` is a header `recvmmsg` filled: `msg_control` points at a live
    // control buffer of ours, aligned for `cmsghdr`, and the kernel set `msg_controllen`
    // to the bytes it wrote there (no more than the buffer's length; `MSG_CTRUNC`
    // otherwise, handled above). CMSG_FIRSTHDR returns the buffer's start only when
    // those bytes hold a whole header, and CMSG_NXTHDR the next header only when the
    // next header itself lies within them, else null, so every header dereferenced is
    // within the bytes written. A header's data is read (unaligned) only when its
    // `cmsg_len` covers the type read and its extent ends by `end`, so every read is
    // within what the kernel wrote.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let data = libc::CMSG_DATA(cmsg);
            let has = |bytes: usize| {
                c.cmsg_len >= libc::CMSG_LEN(bytes as libc::c_uint) as usize
                    && (cmsg as usize).saturating_add(c.cmsg_len) <= end
            };
            match (c.cmsg_level, c.cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) if has(size_of::<libc::timespec>()) => {
                    let ts = data.cast::<libc::timespec>().read_unaligned();
                    got.arrived = u64::try_from(ts.tv_sec)
                        .ok()
                        .zip(u32::try_from(ts.tv_nsec).ok())
                        .filter(|&(_, ns)| ns < 1_000_000_000)
                        .map(|(s, ns)| Duration::new(s, ns));
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if has(size_of::<u32>()) => {
                    got.drops = Some(data.cast::<u32>().read_unaligned());
                }
                (libc::SOL_UDP, libc::UDP_GRO) if has(size_of::<libc::c_int>()) => {
                    let size = data.cast::<libc::c_int>().read_unaligned();
                    got.segment = u16::try_from(size).ok().filter(|s| *s > 0);
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    got
}

/// The count of a `sendmmsg`/`recvmmsg`, or its error (`EAGAIN` as `WouldBlock`, and
/// `EINTR` as nothing done).
fn result(ret: libc::c_int) -> io::Result<usize> {
    match usize::try_from(ret) {
        Ok(n) => Ok(n),
        Err(_) => {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            }
        }
    }
}

/// The IP address the kernel wrote into `name`, if it is one.
fn socket_addr(
    name: &MaybeUninit<libc::sockaddr_storage>,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    // SAFETY: the storage was zeroed before the call and the kernel wrote at most its size,
    // so every byte is initialised.
    let name = unsafe { name.assume_init_ref() };
    let len = len as usize;
    match i32::from(name.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a `sockaddr_in`, which it is large
            // and aligned enough for (that is what `sockaddr_storage` is for).
            let v4 =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            Some(SocketAddrV4::new(ip, u16::from_be(v4.sin_port)).into())
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for `sockaddr_in6`.
            let v6 =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(v6.sin6_addr.s6_addr);
            Some(
                SocketAddrV6::new(
                    ip,
                    u16::from_be(v6.sin6_port),
                    v6.sin6_flowinfo,
                    v6.sin6_scope_id,
                )
                .into(),
            )
        }
        _ => None,
    }
}
