//! The WebRTC port as a shard's [`Port`]: datagrams from the port's reader, each handed to
//! its session's peer connection, the peer connections' deadlines, and the core's packets
//! as data-channel messages.

use super::demux::{Kind, classify};
use super::{Inbound, WebRtcPort};
use crate::metrics::export::StatsExporter;
use crate::transport::port::{Core, Port, RECV_BATCH};
use gsrelay_core::relay::{SessionId, Transmit};
use rtc::sansio::Protocol;
use rtc::shared::TaggedBytesMut;
use std::cmp::Reverse;
use std::time::Instant;

/// Peer-connection deadlines handled per wake-up, so a stack that keeps asking for the
/// past cannot hold the shard.
const TIMERS_PER_WAKE: usize = 1024;

impl Port for WebRtcPort {
    type Input = Inbound;

    /// The next datagram; never, once the reader is gone.
    async fn next(&mut self) -> Inbound {
        self.inbox.recv().await
    }

    /// Handles `first` and whatever else the inbox holds, up to [`RECV_BATCH`] datagrams.
    fn receive(&mut self, now: Instant, first: Inbound, core: &mut impl Core) {
        self.packets += self.datagram(now, first, core);
        for _ in 1..RECV_BATCH {
            let Some(d) = self.inbox.try_recv() else {
                break;
            };
            self.packets += self.datagram(now, d, core);
        }
    }

    fn observe_latency(&mut self, seconds: f64) {
        for _ in 0..std::mem::take(&mut self.packets) {
            self.counters.latency.observe(seconds);
        }
    }

    fn queue(&mut self, now: Instant, t: &Transmit<'_>, _stats: &mut StatsExporter) {
        self.send(now, t);
    }

    /// Sends the datagrams of every session sent to since the last call.
    async fn send_queued(&mut self, _: &mut [u8], _: &mut StatsExporter) {
        self.send_dirty();
    }

    fn forget(&mut self, id: SessionId) {
        self.forget_peer(id);
    }

    /// The earliest peer-connection deadline (possibly a stale one: an early wake-up).
    fn next_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Runs the peer connections whose deadline has come.
    fn handle_timeout(&mut self, now: Instant, core: &mut impl Core) {
        for _ in 0..TIMERS_PER_WAKE {
            let Some(&Reverse((t, id))) = self.timers.peek() else {
                break;
            };
            if t > now {
                break;
            }
            self.timers.pop();
            // Out of the map while the port drives it (put back unless it closed).
            let Some(mut peer) = self.peers.remove(&id) else {
                continue;
            };
            if peer.deadline != Some(t) {
                self.peers.insert(id, peer);
                continue;
            }
            peer.deadline = None;
            let _ = peer.pc.handle_timeout(now);
            let closed = self.drive(now, id, &mut peer, None, core).closed;
            self.peers.insert(id, peer);
            if closed {
                self.leave(now, id, core);
            }
        }
    }
}

impl WebRtcPort {
    /// One datagram to its session's peer connection; the packets it gave the core.
    fn datagram(&mut self, now: Instant, (from, data): Inbound, core: &mut impl Core) -> u32 {
        let (id, checked) = match classify(&data) {
            Ok(Kind::Stun(ufrag)) => {
                let id = std::str::from_utf8(ufrag)
                    .ok()
                    .and_then(|u| self.by_ufrag.get(u));
                (id.copied(), Some(from))
            }
            Ok(_) => (self.by_addr.get(&from).copied(), None),
            Err(reason) => {
                self.metrics.drop(reason);
                return 0;
            }
        };
        // Out of the map while the port drives it (put back before it may be forgotten).
        let Some((id, mut peer)) = id.and_then(|id| self.peers.remove(&id).map(|p| (id, p))) else {
            let reason = if checked.is_some() {
                "webrtc_unknown_username"
            } else {
                "webrtc_unknown_address"
            };
            self.metrics.drop(reason);
            return 0;
        };
        let context = peer.context(from);
        let _ = peer.pc.handle_read(TaggedBytesMut {
            now,
            transport: context,
            message: data,
        });
        let driven = self.drive(now, id, &mut peer, checked, core);
        self.peers.insert(id, peer);
        if driven.closed {
            self.leave(now, id, core);
        }
        driven.packets
    }

    /// A session whose peer connection failed or closed leaves the room.
    fn leave(&mut self, now: Instant, id: SessionId, core: &mut impl Core) {
        tracing::debug!(session = id, "WebRTC connection gone: session leaves");
        self.forget_peer(id);
        core.leave(now, id);
    }
}
