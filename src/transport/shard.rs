//! The relay task, shared by every transport: one tokio task owns the [`Relay`] core and
//! each session's link, and hosts the ports that feed it (UDP+SRTP always, QUIC when
//! enabled). It waits on every input at once (UDP datagrams, QUIC events, control
//! [`Command`]s, the core's next timeout); after each batch of inputs it drains the core's
//! output and hands each packet to the port of its session's link.
//!
//! The core has exactly one owner, so it needs no lock. The relay runs one such task per
//! shard ([`super::shards`]), rooms pinned to a task: nothing here is global, and the
//! shared QUIC endpoint finds the owning task of a connection from its session token
//! ([`super::quic::Token::shard`]). After each input the task exports the core's
//! statistics ([`StatsExporter`]).

use super::command::{
    Command, CommandError, JoinAnswer, JoinCommand, RelayHandle, SessionOwner, TransportRequest,
};
use super::guard::guarded;
use super::quic::{self, QuicEvent, QuicPort};
use super::shards::RoomDirectory;
use super::udp::{self, UdpPort};
use super::webrtc::{self, WebRtcPort};
use crate::metrics::Metrics;
use crate::metrics::export::StatsExporter;
use crate::relay::{Event, Input, Relay, SessionId};
use crate::rtp::PacketClass;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// Commands that may wait in the channel before senders block.
const COMMAND_DEPTH: usize = 256;

/// How a session's packets travel.
pub(super) enum Link {
    /// RTP/RTCP over UDP, with SRTP unless plain.
    Udp(udp::Peer),
    /// RTP over QUIC.
    Quic(quic::Peer),
    /// RTP over WebRTC data channels (boxed: a peer connection is large).
    WebRtc(Box<webrtc::Peer>),
}

/// Everything the relay task owns.
pub(super) struct Shard {
    pub(super) relay: Relay,
    pub(super) metrics: Metrics,
    /// Exports the core's statistics after each input.
    pub(super) exporter: StatsExporter,
    pub(super) links: HashMap<SessionId, Link>,
    /// Each session's room, for the directory.
    pub(super) rooms: HashMap<SessionId, Arc<str>>,
    /// The room directory of a sharded relay: told of every session this task forgets.
    pub(super) directory: Option<Arc<RoomDirectory>>,
    pub(super) udp: UdpPort,
    pub(super) quic: Option<QuicPort>,
    pub(super) webrtc: Option<WebRtcPort>,
}

impl Shard {
    /// Spawns the task; it ends when every [`RelayHandle`] is dropped.
    pub(super) fn spawn(
        self,
        quic_events: Option<mpsc::Receiver<QuicEvent>>,
        webrtc_inbox: Option<mpsc::Receiver<webrtc::Inbound>>,
    ) -> (RelayHandle, tokio::task::JoinHandle<()>) {
        let (handle, commands) = RelayHandle::channel(COMMAND_DEPTH);
        let task = self.run(commands, quic_events, webrtc_inbox);
        (handle, tokio::spawn(task))
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut quic_events: Option<mpsc::Receiver<QuicEvent>>,
        mut webrtc_inbox: Option<mpsc::Receiver<webrtc::Inbound>>,
    ) {
        tracing::info!(addr = %self.udp.rtp_addr, "relay task running");
        loop {
            let deadline = self.relay.poll_timeout();
            // Biased, commands first: a join or an interest change waits behind at most
            // one input batch, however saturated the sockets; timers before the sockets
            // so pacing and deadlines are not starved by input.
            tokio::select! {
                biased;
                cmd = commands.recv() => match cmd {
                    Some(cmd) => self.command(cmd).await,
                    None => break,
                },
                () = sleep_until(deadline) => self.timeout().await,
                ready = self.udp.socket.readable() => match ready {
                    Ok(()) => self.receive_batch().await,
                    Err(e) => tracing::warn!(error = %e, "UDP socket not readable"),
                },
                event = recv_some(&mut quic_events) => match (event, quic_events.as_mut()) {
                    (Some(event), Some(rx)) => self.quic_batch(event, rx).await,
                    _ => quic_events = None,
                },
                got = recv_some(&mut webrtc_inbox) => match (got, webrtc_inbox.as_mut()) {
                    (Some(datagram), Some(rx)) => self.webrtc_batch(datagram, rx).await,
                    _ => webrtc_inbox = None,
                },
                () = sleep_until(self.webrtc.as_ref().and_then(WebRtcPort::next_timeout)) => {
                    self.webrtc_timeout().await;
                }
            }
            self.exporter.export(&mut self.relay);
        }
        tracing::info!("relay task stopped: every relay handle dropped");
    }

    /// After a batch of inputs: sends the aggregated packets the batch completed
    /// (`max_delay_ms: 0`), everything queued, and forgets sessions the core removed.
    pub(super) async fn end_batch(&mut self, now: Instant) {
        guarded(&mut self.relay, &self.metrics, "aggregate", now, |r| {
            let _ = r.handle_input(now, Input::BatchEnd);
        });
        self.flush().await;
        self.forget_closed();
    }

    /// Sends everything the core has queued, each packet by its session's link.
    pub(super) async fn flush(&mut self) {
        let Self {
            relay,
            links,
            udp,
            quic,
            webrtc,
            metrics,
            exporter,
            ..
        } = self;
        let now = Instant::now();
        while let Some(t) = relay.poll_transmit() {
            match links.get_mut(&t.session) {
                Some(Link::Udp(peer)) => udp.queue(peer, &t, exporter),
                Some(Link::Quic(peer)) => {
                    if let Some(port) = quic.as_mut() {
                        port.send(peer, &t, metrics);
                    }
                }
                Some(Link::WebRtc(peer)) => {
                    if let Some(port) = webrtc.as_mut() {
                        port.send(now, peer, &t, metrics);
                    }
                }
                None => {}
            }
        }
        udp.send_queued().await;
        if let Some(port) = webrtc.as_mut() {
            port.send_queued(links);
        }
    }

    /// Runs the core's timers, sends what they produce and forgets removed sessions.
    async fn timeout(&mut self) {
        let now = Instant::now();
        guarded(&mut self.relay, &self.metrics, "timeout", now, |r| {
            let _ = r.handle_input(now, Input::Timeout);
        });
        self.flush().await;
        self.forget_closed();
    }

    /// Takes the core's events: forgets the links of sessions it removed by itself, and
    /// hands its measurements to the exporter.
    pub(super) fn forget_closed(&mut self) {
        while let Some(e) = self.relay.poll_event() {
            match e {
                Event::SessionClosed(id) => self.unlink(id),
                Event::Stat(s) => self.exporter.observe(s),
            }
        }
    }

    /// Drops a session's link (closing its QUIC or WebRTC connection, if any) and tells
    /// the directory.
    pub(super) fn unlink(&mut self, id: SessionId) {
        match (
            self.links.remove(&id),
            self.quic.as_mut(),
            self.webrtc.as_mut(),
        ) {
            (Some(Link::Quic(peer)), Some(port), _) => port.forget(peer),
            (Some(Link::WebRtc(peer)), _, Some(port)) => port.forget(id, *peer),
            _ => {}
        }
        if let (Some(room), Some(dir)) = (self.rooms.remove(&id), &self.directory) {
            dir.release(&room);
        }
    }

    async fn command(&mut self, cmd: Command) {
        let now = Instant::now();
        let metrics = self.metrics.clone();
        let fault = || CommandError::Internal;
        match cmd {
            Command::Join(join, reply) => {
                let answer = self.join(join);
                let _ = reply.send(answer);
            }
            Command::Leave(id, reply) => {
                let result = guarded(&mut self.relay, &metrics, "command", now, |r| {
                    r.handle_input(now, Input::Leave(id)).map(|_| ())
                })
                .ok_or_else(fault)
                .and_then(|r| r.map_err(CommandError::from));
                self.unlink(id);
                // The BYEs for its stream go to the others now, not at the next input.
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::SetInterest(id, interest, reply) => {
                let result = guarded(&mut self.relay, &metrics, "command", now, |r| {
                    r.handle_input(
                        now,
                        Input::SetInterest {
                            session: id,
                            interest,
                        },
                    )
                    .map(|_| ())
                })
                .ok_or_else(fault)
                .and_then(|r| r.map_err(CommandError::from));
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::SessionOwner(id, reply) => {
                let owner = self.relay.session(id).map(|s| SessionOwner {
                    room: s.room.to_string(),
                    identity: s.identity.clone(),
                });
                let _ = reply.send(owner);
            }
            Command::RoomInfo(room, reply) => {
                let _ = reply.send(self.relay.room_info(&room));
            }
            Command::Drain(reply) => {
                let _ = self.relay.handle_input(now, Input::SetDraining(true));
                let _ = reply.send(self.relay.session_count());
            }
        }
    }

    /// Prepares the session's link (keys or token), then joins it to the core.
    fn join(&mut self, cmd: JoinCommand) -> Result<JoinAnswer, CommandError> {
        let mut webrtc = None;
        let (link, srtp) = match cmd.transport {
            TransportRequest::Rtp(profile) => {
                let (peer, keys) = self.udp.new_link(profile)?;
                (Link::Udp(peer), keys)
            }
            TransportRequest::Quic => (self.quic_link(quic::Protocol::Roq)?, None),
            TransportRequest::WebTransport => (self.quic_link(quic::Protocol::WebTransport)?, None),
            TransportRequest::WebRtc(offer) => {
                let port = self.webrtc.as_mut().ok_or(CommandError::WebRtcDisabled)?;
                let (peer, answer) = port.new_link(&offer)?;
                webrtc = Some(answer);
                (Link::WebRtc(Box::new(peer)), None)
            }
        };
        let now = Instant::now();
        let room: Arc<str> = Arc::from(cmd.request.room.as_str());
        let joined = guarded(&mut self.relay, &self.metrics, "command", now, |r| {
            r.handle_input(now, Input::Join(cmd.request))
        })
        .ok_or(CommandError::Internal)??
        .joined()
        .ok_or(CommandError::Internal)?;
        self.rooms.insert(joined.session, room);
        let mut link = link;
        let quic = match (&mut link, self.quic.as_mut()) {
            (Link::Quic(peer), Some(port)) => Some(port.register(joined.session, peer)),
            _ => None,
        };
        if let (Link::WebRtc(peer), Some(port)) = (&mut link, self.webrtc.as_mut()) {
            port.register(joined.session, peer);
            guarded(&mut self.relay, &self.metrics, "path", now, |r| {
                let path = Input::SetPath {
                    session: joined.session,
                    max_packet: webrtc::MAX_SEND_PACKET,
                    send_bps: None,
                };
                let _ = r.handle_input(now, path);
            });
        }
        self.links.insert(joined.session, link);
        Ok(JoinAnswer {
            joined,
            rtp_addr: self.udp.rtp_addr,
            srtp,
            quic,
            webrtc,
        })
    }
}

/// Hands one plaintext packet from session `id` to the core.
pub(super) fn deliver(
    relay: &mut Relay,
    metrics: &Metrics,
    now: Instant,
    id: SessionId,
    class: PacketClass,
    plain: &[u8],
) {
    let rtp = class == PacketClass::Rtp;
    let place = if rtp { "rtp" } else { "rtcp" };
    guarded(relay, metrics, place, now, |r| {
        let input = if rtp {
            Input::Rtp {
                from: id,
                packet: plain,
            }
        } else {
            Input::Rtcp {
                from: id,
                packet: plain,
            }
        };
        let _ = r.handle_input(now, input);
    });
}

/// Receives from `rx` when there is one; otherwise never completes.
async fn recv_some<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
