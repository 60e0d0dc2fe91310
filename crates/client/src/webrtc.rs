//! The client's WebRTC link: a full-ICE peer connection on `rtc`, the offerer, with one
//! data channel as a browser opens it (label `gsrelay`, unordered, no retransmissions),
//! driven on the client's own UDP socket. Each message is one RTP or RTCP packet.
//!
//! [`WebRtcPeer`] is public so that a test can play a peer that does what no browser
//! would (send past the relay's message size, stop reading).

use super::ClientError;
use bytes::BytesMut;
use gsrelay_core::join::CHANNEL_LABEL;
use rtc::data_channel::{RTCDataChannelId, RTCDataChannelInit};
use rtc::peer_connection::event::{RTCDataChannelEvent, RTCPeerConnectionEvent};
use rtc::peer_connection::message::RTCMessage;
use rtc::peer_connection::sdp::RTCSessionDescription;
use rtc::peer_connection::state::RTCPeerConnectionState;
use rtc::peer_connection::transport::{CandidateConfig, CandidateHostConfig, RTCIceCandidate};
use rtc::peer_connection::{RTCPeerConnection, RTCPeerConnectionBuilder};
use rtc::sansio::Protocol;
use rtc::shared::{TaggedBytesMut, TransportContext, TransportProtocol};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::net::UdpSocket;
use tokio::time::Instant;

/// A WebRTC peer connection to the relay on its own UDP socket.
pub struct WebRtcPeer {
    pc: Box<RTCPeerConnection>,
    channel: RTCDataChannelId,
    socket: Option<UdpSocket>,
    local: SocketAddr,
    open: bool,
    closed: bool,
    /// Messages received, not read yet.
    inbox: VecDeque<BytesMut>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for WebRtcPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebRtcPeer")
            .field("local", &self.local)
            .field("open", &self.open)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

fn rtc_error(e: impl std::fmt::Display) -> ClientError {
    ClientError::WebRtc(e.to_string())
}

impl WebRtcPeer {
    /// A peer connection with its data channel and its offer made.
    pub fn offer() -> Result<Self, ClientError> {
        let now = std::time::Instant::now();
        let mut pc = RTCPeerConnectionBuilder::new()
            .build(now)
            .map_err(rtc_error)?;
        let init = RTCDataChannelInit {
            ordered: false,
            max_retransmits: Some(0),
            ..RTCDataChannelInit::default()
        };
        let channel = pc
            .create_data_channel(CHANNEL_LABEL, Some(init))
            .map_err(rtc_error)?
            .id();
        let offer = pc.create_offer(None).map_err(rtc_error)?;
        pc.set_local_description(now, offer).map_err(rtc_error)?;
        Ok(Self {
            pc: Box::new(pc),
            channel,
            socket: None,
            local: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            open: false,
            closed: false,
            inbox: VecDeque::new(),
            buf: vec![0; 65_535],
        })
    }

    /// The offer to join with.
    pub fn offer_sdp(&self) -> Result<String, ClientError> {
        self.pc
            .local_description()
            .map(|d| d.sdp)
            .ok_or_else(|| rtc_error("no local description"))
    }

    /// Applies the relay's answer, whose candidate is `relay`, and waits until the data
    /// channel is open or `deadline` passes.
    pub async fn accept(
        &mut self,
        relay: SocketAddr,
        sdp_answer: &str,
        deadline: Instant,
    ) -> Result<(), ClientError> {
        let any = match relay {
            SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        };
        let socket = UdpSocket::bind(any).await?;
        // Connected, so the local address is the one the relay sees: the host candidate.
        socket.connect(relay).await?;
        self.local = socket.local_addr()?;
        self.socket = Some(socket);
        let host = CandidateHostConfig {
            base_config: CandidateConfig {
                network: "udp".to_owned(),
                address: self.local.ip().to_string(),
                port: self.local.port(),
                component: 1,
                ..CandidateConfig::default()
            },
            ..CandidateHostConfig::default()
        }
        .new_candidate_host()
        .map_err(rtc_error)?;
        let candidate = RTCIceCandidate::from(&host).to_json().map_err(rtc_error)?;
        self.pc.add_local_candidate(candidate).map_err(rtc_error)?;
        let answer = RTCSessionDescription::answer(sdp_answer.to_owned()).map_err(rtc_error)?;
        self.pc
            .set_remote_description(std::time::Instant::now(), answer)
            .map_err(rtc_error)?;
        while !self.open {
            if self.closed {
                return Err(rtc_error("the connection closed while opening"));
            }
            if !self.step(deadline).await? {
                return Err(rtc_error("the data channel did not open in time"));
            }
        }
        Ok(())
    }

    /// The peer's socket (connected to the relay's candidate once the answer is in).
    pub fn socket(&self) -> std::io::Result<&UdpSocket> {
        self.socket
            .as_ref()
            .ok_or_else(|| std::io::Error::other("no answer yet"))
    }

    /// Sends one message, first taking in whatever has arrived (acknowledgements, checks)
    /// and running due timers, so that a client that only sends keeps its connection.
    pub async fn send(&mut self, packet: &[u8]) -> Result<(), ClientError> {
        self.pump()?;
        let now = std::time::Instant::now();
        let mut dc = self
            .pc
            .data_channel(self.channel)
            .ok_or_else(|| rtc_error("the data channel is gone"))?;
        dc.send(now, BytesMut::from(packet)).map_err(rtc_error)?;
        self.flush().await
    }

    /// Whether the connection failed or closed (ICE consent lost, or the relay closed it).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The next message, or `None` when none arrives before `deadline`.
    pub async fn recv(&mut self, deadline: Instant) -> Result<Option<BytesMut>, ClientError> {
        loop {
            if let Some(m) = self.inbox.pop_front() {
                return Ok(Some(m));
            }
            if self.closed {
                return Err(rtc_error("the connection closed"));
            }
            if !self.step(deadline).await? {
                return Ok(None);
            }
        }
    }

    /// Feeds every datagram already received and the timer if it is due, without waiting.
    fn pump(&mut self) -> Result<(), ClientError> {
        let socket = self
            .socket
            .as_ref()
            .ok_or_else(|| rtc_error("no answer yet"))?;
        loop {
            let (n, from) = match socket.try_recv_from(&mut self.buf) {
                Ok(got) => got,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            };
            let message = BytesMut::from(self.buf.get(..n).unwrap_or_default());
            let transport = self.context(from);
            let now = std::time::Instant::now();
            self.pc
                .handle_read(TaggedBytesMut {
                    now,
                    transport,
                    message,
                })
                .map_err(rtc_error)?;
        }
        let now = std::time::Instant::now();
        if self.pc.poll_timeout().is_some_and(|t| t <= now) {
            self.pc.handle_timeout(now).map_err(rtc_error)?;
        }
        self.take_events();
        Ok(())
    }

    fn context(&self, from: SocketAddr) -> TransportContext {
        TransportContext {
            local_addr: self.local,
            peer_addr: from,
            transport_protocol: TransportProtocol::UDP,
            ecn: None,
        }
    }

    /// Waits for one datagram or timer, and feeds it; false once `deadline` has passed.
    async fn step(&mut self, deadline: Instant) -> Result<bool, ClientError> {
        let socket = self
            .socket
            .as_ref()
            .ok_or_else(|| rtc_error("no answer yet"))?;
        let timer = self
            .pc
            .poll_timeout()
            .map_or(deadline, |t| Instant::from_std(t).min(deadline));
        tokio::select! {
            got = socket.recv_from(&mut self.buf) => {
                let (n, from) = got?;
                let message = BytesMut::from(self.buf.get(..n).unwrap_or_default());
                let transport = self.context(from);
                let now = std::time::Instant::now();
                self.pc
                    .handle_read(TaggedBytesMut { now, transport, message })
                    .map_err(rtc_error)?;
            }
            () = tokio::time::sleep_until(timer) => {
                if timer >= deadline {
                    return Ok(false);
                }
                self.pc
                    .handle_timeout(std::time::Instant::now())
                    .map_err(rtc_error)?;
            }
        }
        self.take_events();
        self.flush().await?;
        Ok(true)
    }

    /// Notes the channel opening and the connection closing; queues received messages.
    fn take_events(&mut self) {
        while let Some(event) = self.pc.poll_event() {
            match event {
                RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnOpen(id))
                    if id == self.channel =>
                {
                    self.open = true;
                }
                RTCPeerConnectionEvent::OnConnectionStateChangeEvent(
                    RTCPeerConnectionState::Failed | RTCPeerConnectionState::Closed,
                ) => self.closed = true,
                _ => {}
            }
        }
        while let Some(m) = self.pc.poll_read() {
            if let RTCMessage::DataChannelMessage(_, msg) = m.message {
                self.inbox.push_back(msg.data);
            }
        }
    }

    /// Sends what the peer connection has for the network.
    async fn flush(&mut self) -> Result<(), ClientError> {
        let socket = self
            .socket
            .as_ref()
            .ok_or_else(|| rtc_error("no answer yet"))?;
        while let Some(w) = self.pc.poll_write() {
            socket.send_to(&w.message, w.transport.peer_addr).await?;
        }
        Ok(())
    }
}
