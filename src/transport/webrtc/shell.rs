//! The relay task's WebRTC inputs: datagrams from the port's reader, each handed to its
//! session's peer connection, and the peer connections' deadlines.

use super::demux::{Kind, classify};
use super::{Inbound, WebRtcPort};
use crate::metrics::Metrics;
use crate::relay::{Input, Relay, SessionId};
use crate::transport::guard::guarded;
use crate::transport::shard::{Link, Shard};
use crate::transport::udp::RECV_BATCH;
use rtc::sansio::Protocol;
use rtc::shared::TaggedBytesMut;
use std::cmp::Reverse;
use std::collections::HashMap;
use std::time::Instant;
use tokio::sync::mpsc;

/// Peer-connection deadlines handled per wake-up, so a stack that keeps asking for the
/// past cannot hold the relay task.
const TIMERS_PER_WAKE: usize = 1024;

/// A shard's WebRTC port and the other fields of the shard that drive its peer
/// connections, borrowed apart.
struct Parts<'a> {
    port: &'a mut WebRtcPort,
    links: &'a mut HashMap<SessionId, Link>,
    relay: &'a mut Relay,
    metrics: &'a Metrics,
}

impl Shard {
    /// Handles `first` and whatever else the WebRTC inbox holds, up to [`RECV_BATCH`]
    /// datagrams, then sends what they produced.
    pub(in crate::transport) async fn webrtc_batch(
        &mut self,
        first: Inbound,
        inbox: &mut mpsc::Receiver<Inbound>,
    ) {
        let now = Instant::now();
        let mut packets = self.webrtc_datagram(now, first);
        for _ in 1..RECV_BATCH {
            match inbox.try_recv() {
                Ok(d) => packets += self.webrtc_datagram(now, d),
                Err(_) => break,
            }
        }
        self.end_batch(now).await;
        if let Some(port) = &self.webrtc {
            let latency = now.elapsed().as_secs_f64();
            for _ in 0..packets {
                port.counters.latency.observe(latency);
            }
        }
    }

    /// One datagram to its session's peer connection; the packets it gave the core.
    fn webrtc_datagram(&mut self, now: Instant, (from, data): Inbound) -> u32 {
        let Some(parts) = self.webrtc_parts() else {
            return 0;
        };
        let (id, checked) = match classify(&data) {
            Ok(Kind::Stun(ufrag)) => {
                let id = std::str::from_utf8(ufrag)
                    .ok()
                    .and_then(|u| parts.port.by_ufrag.get(u));
                (id.copied(), Some(from))
            }
            Ok(_) => (parts.port.by_addr.get(&from).copied(), None),
            Err(reason) => {
                parts.metrics.drop(reason);
                return 0;
            }
        };
        let peer = id.and_then(|id| parts.links.get_mut(&id).map(|l| (id, l)));
        let Some((id, Link::WebRtc(peer))) = peer else {
            let reason = if checked.is_some() {
                "webrtc_unknown_username"
            } else {
                "webrtc_unknown_address"
            };
            parts.metrics.drop(reason);
            return 0;
        };
        let context = peer.context(from);
        let _ = peer.pc.handle_read(TaggedBytesMut {
            now,
            transport: context,
            message: data,
        });
        let driven = parts
            .port
            .drive(now, id, peer, checked, parts.relay, parts.metrics);
        if driven.closed {
            self.webrtc_leave(now, id);
        }
        driven.packets
    }

    /// Runs the peer connections whose deadline has come, then sends what they produced.
    pub(in crate::transport) async fn webrtc_timeout(&mut self) {
        let now = Instant::now();
        let mut closed = Vec::new();
        {
            let Some(parts) = self.webrtc_parts() else {
                return;
            };
            let Parts {
                port,
                links,
                relay,
                metrics,
            } = parts;
            for _ in 0..TIMERS_PER_WAKE {
                let Some(&Reverse((t, id))) = port.timers.peek() else {
                    break;
                };
                if t > now {
                    break;
                }
                port.timers.pop();
                let Some(Link::WebRtc(peer)) = links.get_mut(&id) else {
                    continue;
                };
                if peer.deadline != Some(t) {
                    continue;
                }
                peer.deadline = None;
                let _ = peer.pc.handle_timeout(now);
                if port.drive(now, id, peer, None, relay, metrics).closed {
                    closed.push(id);
                }
            }
        }
        for id in closed {
            self.webrtc_leave(now, id);
        }
        self.end_batch(now).await;
    }

    /// The port and what its peer connections are driven with, borrowed apart; `None`
    /// when the shard runs no WebRTC port.
    fn webrtc_parts(&mut self) -> Option<Parts<'_>> {
        let Self {
            relay,
            links,
            webrtc,
            metrics,
            ..
        } = self;
        Some(Parts {
            port: webrtc.as_mut()?,
            links,
            relay,
            metrics,
        })
    }

    /// A session whose peer connection failed or closed leaves the room.
    fn webrtc_leave(&mut self, now: Instant, id: SessionId) {
        tracing::debug!(session = id, "WebRTC connection gone: session leaves");
        guarded(&mut self.relay, &self.metrics, "command", now, |r| {
            r.handle_input(now, Input::Leave(id))
        });
        self.unlink(id);
    }
}
