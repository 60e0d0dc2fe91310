//! A simulated world around the sans-I/O core: sessions, packets and time, no sockets.
#![allow(dead_code)] // each test file uses a different part of it

pub mod browser;
pub mod cluster;
pub mod ffi;
pub mod libsrtp;
pub mod quic_relay;
pub mod recording;
pub mod redis;
pub mod restart;
pub mod serve;
pub mod server;
pub mod srtp;
pub mod srtp_backend;
pub mod tools;
pub mod transports;

use gsrelay::internal::Metrics;
use gsrelay::internal::StatsExporter;
use gsrelay::rtp::rtcp::{self, FirEntry};
use gsrelay::rtp::{PacketClass, RtpHeader, RtpPacket};
use gsrelay::wire::json::Hex;
use gsrelay::wire::{self, Dialect, Head1, Loc2, Object, Rot2};
use gsrelay::{
    ControlError, Event, Input, Interest, JoinRequest, Joined, Relay, RelayConfig, SessionId,
};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub struct Sent {
    pub to: SessionId,
    pub class: PacketClass,
    pub bytes: Vec<u8>,
}

impl Sent {
    pub fn rtp(&self) -> RtpPacket<'_> {
        RtpPacket::parse(&self.bytes).expect("relay sends valid RTP")
    }
    pub fn objects(&self, d: Dialect) -> Vec<Object> {
        wire::decode(self.rtp().payload(), d).expect("relay sends valid payloads")
    }
}

pub struct World {
    pub relay: Relay,
    metrics: Metrics,
    exporter: StatsExporter,
    pub t0: Instant,
    pub now: Instant,
    seqs: HashMap<u32, u16>,
    /// Whether [`World::sent`] returns the relay's periodic SR/RR compounds too (only
    /// the report tests look at them).
    pub keep_reports: bool,
}

impl World {
    pub fn new() -> Self {
        Self::with(RelayConfig::default())
    }

    pub fn with(cfg: RelayConfig) -> Self {
        Self::seeded(cfg, 7)
    }

    /// A world whose relay draws its SSRCs and ids from `seed` (replicas need their own).
    pub fn seeded(cfg: RelayConfig, seed: u64) -> Self {
        let metrics = Metrics::new();
        let t0 = Instant::now();
        Self {
            relay: Relay::new(cfg, seed),
            exporter: StatsExporter::new(&metrics),
            metrics,
            t0,
            now: t0,
            seqs: Default::default(),
            keep_reports: false,
        }
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.relay.handle_input(self.now, Input::Timeout).unwrap();
    }

    pub fn join(&mut self, room: &str, publish: bool, subscribe: bool) -> Joined {
        self.join_with(JoinRequest {
            room: room.into(),
            identity: "p".into(),
            publish,
            subscribe,
            ..JoinRequest::default()
        })
        .expect("join")
    }

    pub fn join_with(&mut self, req: JoinRequest) -> Result<Joined, ControlError> {
        self.relay
            .handle_input(self.now, Input::Join(req))
            .map(|r| r.joined().expect("a join answers Joined"))
    }

    /// Publishes objects from a session as one RTP packet with the next sequence number.
    pub fn publish(&mut self, who: &Joined, objects: &[Object]) -> u16 {
        let payload = wire::encode(objects, Dialect::Draft01).unwrap();
        self.publish_raw(who, &payload)
    }

    pub fn publish_raw(&mut self, who: &Joined, payload: &[u8]) -> u16 {
        let seq = self.seqs.entry(who.ssrc).or_insert(1000);
        *seq = seq.wrapping_add(1);
        let seq = *seq;
        self.publish_seq(who, seq, payload);
        seq
    }

    /// Publishes a payload under a chosen sequence number (reordering, duplicates).
    pub fn publish_seq(&mut self, who: &Joined, seq: u16, payload: &[u8]) {
        let ts = (self.now - self.t0).as_millis() as u32 * 90;
        let mut pkt = Vec::new();
        let header = RtpHeader {
            marker: false,
            payload_type: 96,
            sequence_number: seq,
            timestamp: ts,
            ssrc: who.ssrc,
            csrcs: &[],
            extension: None,
        };
        header.append_to(&mut pkt).unwrap();
        pkt.extend_from_slice(payload);
        self.relay
            .handle_input(
                self.now,
                Input::Rtp {
                    from: who.session,
                    packet: &pkt,
                },
            )
            .unwrap();
    }

    pub fn rtcp(&mut self, who: &Joined, write: impl FnOnce(&mut Vec<u8>)) {
        let mut pkt = Vec::new();
        write(&mut pkt);
        self.relay
            .handle_input(
                self.now,
                Input::Rtcp {
                    from: who.session,
                    packet: &pkt,
                },
            )
            .unwrap();
    }

    pub fn fir(&mut self, who: &Joined, media: u32, seq: u8) {
        self.rtcp(who, |b| {
            rtcp::write_fir(
                b,
                who.ssrc,
                &[FirEntry {
                    ssrc: media,
                    sequence_number: seq,
                }],
            )
            .unwrap();
        });
    }

    pub fn sent(&mut self) -> Vec<Sent> {
        let mut v = Vec::new();
        while let Some(t) = self.relay.poll_transmit() {
            let report = matches!(t.bytes.get(1), Some(&(rtcp::PT_SR | rtcp::PT_RR)));
            if t.class == PacketClass::Rtcp && report && !self.keep_reports {
                continue;
            }
            v.push(Sent {
                to: t.session,
                class: t.class,
                bytes: t.bytes.to_vec(),
            });
        }
        v
    }

    pub fn dropped(&self, reason: &str) -> u64 {
        self.relay.stats().dropped.get(reason)
    }

    /// Feedback the core ignored or put off, by reason.
    pub fn suppressed(&self, reason: &str) -> u64 {
        self.relay.stats().suppressed.get(reason)
    }

    /// The Prometheus metrics, with what the core counted so far exported into them as a
    /// shell does after each input (its measurements included).
    pub fn metrics(&mut self) -> &Metrics {
        while let Some(e) = self.relay.poll_event() {
            if let Event::Stat(s) = e {
                self.exporter.observe(s);
            }
        }
        self.exporter.export(&mut self.relay);
        &self.metrics
    }

    /// Hands the core one control input now.
    pub fn control(&mut self, input: Input<'_>) -> Result<(), ControlError> {
        self.relay.handle_input(self.now, input).map(|_| ())
    }

    pub fn leave(&mut self, session: SessionId) -> Result<(), ControlError> {
        self.control(Input::Leave(session))
    }

    pub fn set_interest(
        &mut self,
        session: SessionId,
        interest: Interest,
    ) -> Result<(), ControlError> {
        self.control(Input::SetInterest { session, interest })
    }

    pub fn set_path(&mut self, session: SessionId, max_packet: usize, send_bps: Option<u64>) {
        self.control(Input::SetPath {
            session,
            max_packet,
            send_bps,
        })
        .unwrap();
    }

    pub fn set_send_budget(
        &mut self,
        session: SessionId,
        bps: Option<u64>,
    ) -> Result<(), ControlError> {
        self.control(Input::SetSendBudget { session, bps })
    }

    /// Ends a batch of inputs (aggregated packets due now go).
    pub fn end_batch(&mut self) {
        self.control(Input::BatchEnd).unwrap();
    }

    /// Hands the core raw bytes as an RTP packet from `from`.
    pub fn rtp_from(&mut self, from: SessionId, packet: &[u8]) {
        self.control(Input::Rtp { from, packet }).unwrap();
    }

    /// Hands the core raw bytes as an RTCP packet from `from`.
    pub fn rtcp_from(&mut self, from: SessionId, packet: &[u8]) {
        self.control(Input::Rtcp { from, packet }).unwrap();
    }

    /// The SSRCs of the streams room `room` holds, in order.
    pub fn streams(&self, room: &str) -> Vec<u32> {
        let info = self.relay.room_info(room).expect("room");
        info.streams.iter().map(|s| s.ssrc).collect()
    }

    /// The events the core reported since the last call.
    pub fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.relay.poll_event()).collect()
    }
}

pub fn head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 1,
        location: Loc2 {
            x,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

/// A Head1 with every field of the draft set (velocity, rotation), so a codec or peer
/// that drops any of them shows.
pub fn moving_head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 100,
        location: Loc2 {
            x,
            y: 1.5,
            z: -2.25,
            vx: 0.5,
            vy: -0.25,
            vz: 0.0,
        },
        rotation: Rot2 {
            si: 0.5,
            sj: 0.0,
            sk: -0.5,
            ei: 0.25,
            ej: 0.125,
            ek: 0.0,
        },
        ipd: None,
        extra: Hex::default(),
    })
}

pub fn x_of(o: &Object) -> f32 {
    o.position().expect("has a position")[0]
}
