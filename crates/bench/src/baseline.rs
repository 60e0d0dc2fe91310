//! The baseline: a plain UDP reflector doing the relay's fan-out with no parsing, no
//! crypto and no state beyond room membership — the physical reference for this
//! machine.
//!
//! It runs on one OS thread (named `gsr-baseline`, so its CPU time can be read per
//! thread) and moves datagrams with `recvmmsg`/`sendmmsg` through `nix`'s safe
//! wrappers: batched syscalls, no `unsafe` here, and no extra runtime. (`quinn-udp`
//! batches too, but its send batching is GSO, which needs one destination per batch;
//! fan-out sends every datagram to a different address, which is what `sendmmsg` does.)
//!
//! Protocol: a client first sends a hello, `GSRB`, a role byte (`P`ublisher or
//! `S`ubscriber) and a room index (u32, big endian); a subscriber then receives every datagram any
//! publisher of its room sends, untouched.

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, MsgFlags, MultiHeaders, SockaddrIn, recvmmsg, sendmmsg};
use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Hello prefix.
pub const HELLO: &[u8; 4] = b"GSRB";

/// Datagrams per `recvmmsg` / `sendmmsg` call.
const BATCH: usize = 64;

/// Largest datagram handled.
const MAX_DATAGRAM: usize = 2048;

/// How often the thread looks at the stop flag when idle.
const POLL: Duration = Duration::from_millis(50);

/// Name of the reflector's thread.
pub const THREAD_NAME: &str = "gsr-baseline";

/// The role a hello declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends datagrams to be reflected.
    Publisher,
    /// Receives the room's datagrams.
    Subscriber,
}

/// The hello datagram for `role` in `room`.
pub fn hello(role: Role, room: u32) -> Vec<u8> {
    let mut h = HELLO.to_vec();
    h.push(match role {
        Role::Publisher => b'P',
        Role::Subscriber => b'S',
    });
    h.extend_from_slice(&room.to_be_bytes());
    h
}

/// A running reflector.
#[derive(Debug)]
pub struct Reflector {
    /// Where clients send.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<anyhow::Result<()>>,
}

impl Reflector {
    /// Binds on loopback and starts the reflector thread.
    pub fn start() -> anyhow::Result<Self> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        socket.set_read_timeout(Some(POLL))?;
        let addr = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || reflect(socket, &s))
            .context("spawning the reflector thread")?;
        Ok(Self { addr, stop, thread })
    }

    /// Stops the thread and reports its error, if it had one.
    pub fn stop(self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => anyhow::bail!("the reflector thread panicked"),
        }
    }
}

/// Room membership.
#[derive(Default)]
struct Rooms {
    /// Publisher address → room.
    publishers: HashMap<SocketAddrV4, u32>,
    /// Room → subscriber addresses.
    subscribers: HashMap<u32, Vec<SockaddrIn>>,
}

impl Rooms {
    /// Registers a hello; anything else that is not from a publisher is ignored.
    fn hello(&mut self, from: SocketAddrV4, data: &[u8]) {
        let Some(rest) = data.strip_prefix(HELLO.as_slice()) else {
            return;
        };
        let [role, a, b, c, d] = rest else { return };
        let room = u32::from_be_bytes([*a, *b, *c, *d]);
        match role {
            b'P' => {
                self.publishers.insert(from, room);
            }
            b'S' => {
                let subs = self.subscribers.entry(room).or_default();
                let addr = SockaddrIn::from(from);
                // Hellos are repeated in case one is lost: register once.
                if !subs.contains(&addr) {
                    subs.push(addr);
                }
            }
            _ => {}
        }
    }
}

fn reflect(socket: UdpSocket, stop: &AtomicBool) -> anyhow::Result<()> {
    let fd = socket.as_raw_fd();
    let mut rooms = Rooms::default();
    let mut bufs = vec![[0u8; MAX_DATAGRAM]; BATCH];
    let mut recv_hdrs = MultiHeaders::<SockaddrIn>::preallocate(BATCH, None);
    let mut send_hdrs = MultiHeaders::<SockaddrIn>::preallocate(BATCH, None);
    // (buffer index, length, destination) of each datagram to send.
    let mut out: Vec<(usize, usize, SockaddrIn)> = Vec::with_capacity(BATCH * 8);
    while !stop.load(Ordering::Relaxed) {
        let got: Vec<(usize, Option<SockaddrIn>)> = {
            let mut iovs: Vec<[IoSliceMut<'_>; 1]> = bufs
                .iter_mut()
                .map(|b| [IoSliceMut::new(&mut b[..])])
                .collect();
            match recvmmsg(
                fd,
                &mut recv_hdrs,
                iovs.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) {
                Ok(msgs) => msgs.map(|m| (m.bytes, m.address)).collect(),
                Err(Errno::EAGAIN | Errno::EINTR) => continue,
                Err(e) => return Err(e).context("recvmmsg"),
            }
        };
        out.clear();
        for (i, (len, from)) in got.into_iter().enumerate() {
            let Some(from) = from.map(SocketAddrV4::from) else {
                continue;
            };
            let data = bufs.get(i).and_then(|b| b.get(..len)).unwrap_or_default();
            match rooms.publishers.get(&from) {
                Some(room) => {
                    for to in rooms.subscribers.get(room).into_iter().flatten() {
                        out.push((i, len, *to));
                    }
                }
                None => rooms.hello(from, data),
            }
        }
        for chunk in out.chunks(BATCH) {
            let mut done = 0;
            while done < chunk.len() {
                let rest = chunk.get(done..).unwrap_or_default();
                let slices: Vec<[IoSlice<'_>; 1]> = rest
                    .iter()
                    .map(|(i, len, _)| {
                        [IoSlice::new(
                            bufs.get(*i).and_then(|b| b.get(..*len)).unwrap_or_default(),
                        )]
                    })
                    .collect();
                let addrs: Vec<Option<SockaddrIn>> =
                    rest.iter().map(|(_, _, a)| Some(*a)).collect();
                let cmsgs: [ControlMessage<'_>; 0] = [];
                match sendmmsg(
                    fd,
                    &mut send_hdrs,
                    &slices,
                    &addrs,
                    cmsgs,
                    MsgFlags::empty(),
                ) {
                    Ok(results) => {
                        let n = results.count();
                        // A send error on one datagram ends the batch early: skip it
                        // like a drop rather than retry forever.
                        done += n.max(1);
                    }
                    Err(Errno::EINTR | Errno::EAGAIN) => {}
                    // A subscriber gone away (ECONNREFUSED from ICMP) is a drop.
                    Err(_) => done += 1,
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflects_to_the_rooms_subscribers() {
        let r = Reflector::start().unwrap();
        let t = Duration::from_secs(2);
        let sock = |room, role| {
            let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            s.set_read_timeout(Some(t)).unwrap();
            s.connect(r.addr).unwrap();
            s.send(&hello(role, room)).unwrap();
            s
        };
        let sub = sock(1, Role::Subscriber);
        let other = sock(2, Role::Subscriber);
        let publisher = sock(1, Role::Publisher);
        // The hellos are handled asynchronously: resend until the reflector forwards.
        sub.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0u8; 64];
        let n = (0..100)
            .find_map(|_| {
                publisher.send(b"state").unwrap();
                sub.recv(&mut buf).ok()
            })
            .expect("the reflector forwards within 100 tries");
        assert_eq!(&buf[..n], b"state");
        other
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        assert!(other.recv(&mut buf).is_err(), "other room got it");
        r.stop().unwrap();
    }
}
