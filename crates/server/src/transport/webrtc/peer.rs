//! A WebRTC session's peer connection, as its shard's relay task holds it: made from the
//! client's offer (ICE-lite, one host candidate, the relay's ICE credentials), and the
//! events that change what the relay does with it.

use super::meter::SendMeter;
use super::{OfferError, SCTP_MAX_MESSAGE};
use prometheus::IntCounterVec;
use rtc::data_channel::RTCDataChannelId;
use rtc::peer_connection::configuration::setting_engine::{
    SctpMaxMessageSize, SettingEngineBuilder,
};
use rtc::peer_connection::event::{RTCDataChannelEvent, RTCPeerConnectionEvent};
use rtc::peer_connection::sdp::RTCSessionDescription;
use rtc::peer_connection::state::RTCPeerConnectionState;
use rtc::peer_connection::transport::{
    CandidateConfig, CandidateHostConfig, RTCIceCandidate, RTCIceCandidateInit,
};
use rtc::peer_connection::{RTCPeerConnection, RTCPeerConnectionBuilder};
use rtc::sansio::Protocol;
use rtc::shared::{TransportContext, TransportProtocol};
use std::net::SocketAddr;
use std::time::Instant;

/// SCTP receive window offered to each peer: a few hundred packets in flight, and a bound
/// on what one peer's unread reassembly can hold.
const RECEIVE_WINDOW: u32 = 256 * 1024;

/// A WebRTC session's link: its peer connection and how it is reached.
pub(in crate::transport) struct Peer {
    pub(super) pc: Box<RTCPeerConnection>,
    /// The relay's ICE ufrag for it (the key of STUN routing).
    pub(super) ufrag: String,
    /// Its ICE candidate: the local address every datagram of this session is tagged with.
    pub(super) local: SocketAddr,
    /// Addresses whose connectivity checks passed.
    pub(super) addrs: Vec<SocketAddr>,
    /// The channel the relay sends on: the first the peer opened.
    pub(super) channel: Option<RTCDataChannelId>,
    /// The deadline this session is scheduled at.
    pub(super) deadline: Option<Instant>,
    /// Has messages queued since its datagrams were last taken.
    pub(super) dirty: bool,
    /// Bytes handed to its channel so far.
    pub(super) sent: u64,
    /// Its send budget from its queue.
    pub(super) meter: SendMeter,
    /// Has reached the connected state (DTLS up) once.
    pub(super) connected: bool,
}

impl Peer {
    /// A peer connection answering `offer` with `local` as its one host candidate and the
    /// relay's ICE credentials; and its SDP answer.
    pub(super) fn answer(
        offer: RTCSessionDescription,
        local: SocketAddr,
        ufrag: String,
        password: String,
    ) -> Result<(Self, String), OfferError> {
        let refused = |e: rtc::shared::error::Error| OfferError::Refused(e.to_string());
        let settings = SettingEngineBuilder::new()
            .with_lite(true)
            .with_ice_credentials(ufrag.clone(), password)
            .with_sctp_max_message_size(SctpMaxMessageSize::Bounded(SCTP_MAX_MESSAGE))
            .with_sctp_max_receive_buffer_size(RECEIVE_WINDOW)
            .build();
        let now = Instant::now();
        let mut pc = RTCPeerConnectionBuilder::new()
            .with_setting_engine(settings)
            .build(now)
            .map_err(refused)?;
        pc.set_remote_description(now, offer).map_err(refused)?;
        let host = CandidateHostConfig {
            base_config: CandidateConfig {
                network: "udp".to_owned(),
                address: local.ip().to_string(),
                port: local.port(),
                component: 1,
                ..CandidateConfig::default()
            },
            ..CandidateHostConfig::default()
        }
        .new_candidate_host()
        .map_err(refused)?;
        pc.add_local_candidate(RTCIceCandidate::from(&host).to_json().map_err(refused)?)
            .map_err(refused)?;
        // The only candidate: gathering is complete.
        pc.add_local_candidate(RTCIceCandidateInit::default())
            .map_err(refused)?;
        let answer = pc.create_answer(None).map_err(refused)?;
        pc.set_local_description(now, answer).map_err(refused)?;
        let sdp_answer = pc
            .local_description()
            .map(|d| d.sdp)
            .ok_or_else(|| OfferError::Refused("no local description".to_owned()))?;
        let peer = Self {
            pc: Box::new(pc),
            ufrag,
            local,
            addrs: Vec::new(),
            channel: None,
            deadline: None,
            dirty: false,
            sent: 0,
            meter: SendMeter::default(),
            connected: false,
        };
        Ok((peer, sdp_answer))
    }

    /// A datagram from `from` as the peer connection takes it.
    pub(super) fn context(&self, from: SocketAddr) -> TransportContext {
        TransportContext {
            local_addr: self.local,
            peer_addr: from,
            transport_protocol: TransportProtocol::UDP,
            ecn: None,
        }
    }

    /// Bytes waiting in the send queue of its channel, once it has one.
    pub(super) fn queued(&mut self) -> Option<usize> {
        let ch = self.channel?;
        Some(
            self.pc
                .data_channel(ch)
                .map_or(0, |dc| dc.outstanding_bytes()),
        )
    }

    /// Handles the peer connection's events (session `id`'s), counting how connections
    /// go in `outcomes`; true when it failed or closed.
    pub(super) fn events(&mut self, id: u64, outcomes: &IntCounterVec) -> bool {
        let mut closed = false;
        while let Some(event) = self.pc.poll_event() {
            match event {
                RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnOpen(ch))
                    if self.channel.is_none() =>
                {
                    tracing::debug!(session = id, "WebRTC data channel open");
                    self.channel = Some(ch);
                }
                RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnClose(ch))
                    if self.channel == Some(ch) =>
                {
                    self.channel = None;
                }
                RTCPeerConnectionEvent::OnConnectionStateChangeEvent(state) => {
                    tracing::debug!(session = id, %state, "WebRTC connection state");
                    let outcome = match state {
                        RTCPeerConnectionState::Connected if !self.connected => {
                            self.connected = true;
                            "connected"
                        }
                        RTCPeerConnectionState::Failed => "failed",
                        RTCPeerConnectionState::Closed => "closed",
                        _ => continue,
                    };
                    outcomes.with_label_values(&[outcome]).inc();
                    closed |= outcome != "connected";
                }
                _ => {}
            }
        }
        closed
    }
}
