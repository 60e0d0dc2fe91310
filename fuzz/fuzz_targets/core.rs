//! The relay core (`relay::Relay`) driven with simulated time by an arbitrary sequence of
//! inputs: joins (clients and links) and leaves, interest changes with arbitrary interests
//! (either delivery mode), paths and send budgets; RTP packets, mostly
//! well-formed game-state payloads built from the input (so the fuzzer reaches the store,
//! areas, pacing and prediction) and some raw bytes; RTCP feedback (FIR, PLI, NACK, TMMBR,
//! BYE, reports) built from the input's fields, and raw RTCP; a link's containers naming
//! any SSRC; time steps, timeouts and the ends of input batches.
//!
//! After every step: no panic; every packet the relay sends parses (RTP payloads in the
//! receiver's dialect, RTCP compounds); the bytes sent to any one session stay within
//! [`max_bytes_per_subscriber_per_step`]; no stream stores more than
//! `max_objects_per_stream` objects; the session, room, stream and cached-object gauges
//! match the relay's state.
//!
//! Every input reaches the core through [`World::drive`], so a change of the core's input
//! API is adapted there alone.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use gsrelay_server::internal::Metrics;
use gsrelay_server::internal::StatsExporter;
use gsrelay_core::rtp::rtcp::{self, FirEntry, SenderInfo, TmmbEntry};
use gsrelay_core::rtp::{PacketClass, RtpHeader, RtpPacket};
use gsrelay_core::wire::json::Hex;
use gsrelay_core::wire::{self, Dialect, ObjectKind, container};
use gsrelay_core::{
    Area, handover, Delivery, Event, Filter, Input, Interest, JoinRequest, PredictionGate, RateTier, Relay,
    RelayConfig, Reply, Sends, SessionId, TypeSel,
};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// RTP fixed header, written before every payload the relay builds.
const RTP_HEADER: usize = 12;
/// An RTCP BYE for one SSRC.
const BYE: usize = 8;
/// Rooms the sessions are spread over.
const ROOMS: [&str; 2] = ["r0", "r1"];

/// The most bytes one subscriber may be sent in one step, from the configuration alone.
///
/// A room's state is at most `max_sessions_per_room` streams of `max_objects_per_stream`
/// objects, each object at most one datagram's payload and at worst alone in a packet with
/// its own RTP header: `room_state`. In one step a subscriber is sent at most:
/// - one forwarded packet (the input was a packet from another session), or, when the
///   input was a link's packet, one per sender it carried, whose payloads together are
///   at most that one datagram;
/// - what the relay makes itself (snapshot objects, repairs, objects entering its area and
///   their followers). The feedback budget (docs/relay.md, "Feedback budget") answers a
///   stream's snapshot once per `snapshot_interval` and repairs an object once per
///   interval, whatever one datagram asks, and pending updates are coalesced per object:
///   so at most the room's state once as pending updates and once as repairs. (Before the
///   budget the bound was `max_packet_bytes / 8` snapshots of the room: one per FIR entry.)
///   The relay-made pacer would cap this further at its burst, but a subscriber's own
///   bandwidth cap may allow bursts larger than the room;
/// - a BYE per stream that ends.
fn max_bytes_per_subscriber_per_step(cfg: &RelayConfig) -> usize {
    let streams = cfg.max_sessions_per_room;
    let room_state = streams * cfg.max_objects_per_stream * (RTP_HEADER + cfg.max_packet_bytes);
    let forwarded = streams * RTP_HEADER + cfg.max_packet_bytes;
    forwarded + 2 * room_state + streams * BYE
}

/// The relay's configuration, small enough that limits are reached.
#[derive(Debug, Arbitrary)]
struct Config {
    budget: Budget,
    max_objects_per_stream: u8,
    subscriber_cap: Option<Cap>,
}

#[derive(Debug, Arbitrary)]
enum Budget {
    Small,
    Medium,
    Default,
}

#[derive(Debug, Arbitrary)]
enum Cap {
    Narrow,
    Medium,
    Wide,
}

impl Config {
    fn relay_config(&self) -> RelayConfig {
        RelayConfig {
            payload_budget: match self.budget {
                Budget::Small => 200,
                Budget::Medium => 500,
                Budget::Default => 1200,
            },
            max_sessions_per_room: 6,
            max_objects_per_stream: usize::from(self.max_objects_per_stream % 64) + 1,
            object_ttl: Duration::from_secs(3),
            stream_timeout: Duration::from_secs(2),
            session_timeout: Duration::from_secs(5),
            subscriber_max_bitrate_bps: self.subscriber_cap.as_ref().map(|c| match c {
                Cap::Narrow => 8_000,
                Cap::Medium => 64_000,
                Cap::Wide => 1_000_000,
            }),
            ..RelayConfig::default()
        }
    }
}

/// A float: mostly small steps near the origin (areas, grid cells and tiers meet), or
/// any bit pattern.
#[derive(Debug, Clone, Copy)]
struct F(f32);

impl<'a> Arbitrary<'a> for F {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(F(if u.ratio(7, 8)? {
            f32::from(i8::arbitrary(u)?) / 4.0
        } else {
            f32::from_bits(u.arbitrary()?)
        }))
    }
}

fn xyz(v: [F; 3]) -> [f32; 3] {
    v.map(|f| f.0)
}

/// A session, a stream or the relay, by position in what the run has seen.
#[derive(Debug, Clone, Copy, Arbitrary)]
enum Ssrc {
    /// The SSRC of the n-th session joined.
    Member(u8),
    /// The relay's own SSRC (a FIR for it asks for every stream).
    Relay,
    /// The room stream of the n-th session joined (0 when it has none).
    Room(u8),
    Raw(u32),
}

#[derive(Debug, Arbitrary)]
enum Type {
    Tag(u8),
    Kind(u8),
    Name(String),
}

#[derive(Debug, Arbitrary)]
struct FuzzFilter<T> {
    allow: Option<Vec<T>>,
    deny: Vec<T>,
}

#[derive(Debug, Arbitrary)]
struct FuzzArea {
    center: Option<[F; 3]>,
    avatar: Option<u8>,
    radius: Option<F>,
    exit_radius: Option<F>,
    half_extents: Option<[F; 3]>,
    exit_half_extents: Option<[F; 3]>,
}

#[derive(Debug, Arbitrary)]
struct FuzzInterest {
    echo: bool,
    streams: FuzzFilter<Ssrc>,
    types: FuzzFilter<Type>,
    area: Option<FuzzArea>,
    rates: Vec<(Option<F>, Option<F>)>,
    max_bitrate_bps: Option<u32>,
    prediction: Option<[F; 4]>,
    /// Aggregated delivery with this `max_delay_ms` (the default when `None`); per-stream
    /// when absent.
    aggregated: Option<Option<u16>>,
}

/// One object of a published payload.
#[derive(Debug, Arbitrary)]
enum Obj {
    Head {
        id: u8,
        at: [F; 3],
        v: [F; 3],
        ipd: Option<F>,
    },
    Hand {
        id: u8,
        left: bool,
        at: [F; 3],
    },
    Object1 {
        id: u8,
        at: [F; 3],
        parent: Option<u8>,
        active: bool,
    },
    Object2 {
        id: u8,
        at: [F; 3],
        parent: Option<u8>,
    },
    SixDof {
        id: u8,
        at: [F; 3],
        rot: [F; 3],
    },
    Control {
        id: u8,
        buttons: i64,
    },
    Ipd(F),
    Unknown {
        tag: u16,
        data: Vec<u8>,
    },
    /// An objectID far from the small ones the others use.
    FarId {
        id: u64,
        at: [F; 3],
    },
}

/// How a packet's sequence number follows the sender's last one.
#[derive(Debug, Clone, Copy, Arbitrary)]
enum Seq {
    Next,
    Duplicate,
    Back(u8),
    Ahead(u16),
}

#[derive(Debug, Arbitrary)]
enum Fb {
    Fir(Vec<(Ssrc, u8)>),
    Pli(Ssrc),
    /// Losses counted back from the last sequence number the sender of the NACK received
    /// on that stream, so they name packets the relay did send.
    Nack(Ssrc, Vec<u8>),
    Tmmbr(Vec<(Ssrc, u64, u16)>),
    Tmmbn(Vec<(Ssrc, u64)>),
    Bye(Vec<Ssrc>),
    /// An ownership message (any subtype: requests, releases and the relay-only kinds)
    /// naming objects of streams by position.
    Ownership(u8, Vec<(Ssrc, u8)>),
    Rr,
    Sr,
    Sdes(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum Op {
    Join {
        room: bool,
        publish: bool,
        subscribe: bool,
        ssrc: Option<Ssrc>,
        require_ssrc: bool,
        gse: bool,
        interest: FuzzInterest,
        /// 0: a client; 1: a link (containers only); 2: both.
        sends: u8,
        /// Ask for a room stream.
        room_stream: bool,
        /// 0: a session; 1: a recorder; 2: a replay (`docs/recording.md`).
        kind: u8,
    },
    Leave(u8),
    /// A recorder's checkpoint (any session: a non-recorder is ignored).
    Checkpoint(u8),
    SetInterest(u8, FuzzInterest),
    Publish {
        who: u8,
        seq: Seq,
        marker: bool,
        foreign_ssrc: Option<Ssrc>,
        objects: Vec<Obj>,
    },
    PublishRaw {
        who: u8,
        seq: Seq,
        payload: Vec<u8>,
    },
    RtpBytes(u8, Vec<u8>),
    /// A link's packet: one container per sender (any SSRC: its own, another
    /// session's, the relay's, a new one).
    PublishContainers {
        who: u8,
        seq: Seq,
        senders: Vec<(Ssrc, Vec<Obj>)>,
    },
    /// The session's path as its transport measures it.
    Path {
        who: u8,
        max_packet: u16,
        send_kbps: Option<u16>,
    },
    /// A send budget from the session's transport.
    SendBudget {
        who: u8,
        kbps: Option<u16>,
    },
    /// The end of a batch of inputs.
    BatchEnd,
    Rtcp {
        who: u8,
        foreign_sender: Option<Ssrc>,
        feedback: Vec<Fb>,
    },
    RtcpBytes(u8, Vec<u8>),
    Advance(u16),
    /// Jump to the relay's next wake-up.
    Timeout,
}

#[derive(Debug, Arbitrary)]
struct Run {
    config: Config,
    ops: Vec<Op>,
}

/// A session the run joined (kept after it leaves: later ops on it are refused).
struct Member {
    id: SessionId,
    ssrc: u32,
    room_ssrc: Option<u32>,
    dialect: Dialect,
    seq: u16,
    ts: u32,
}

struct World {
    relay: Relay,
    metrics: Metrics,
    exporter: StatsExporter,
    cfg: RelayConfig,
    bound: usize,
    now: Instant,
    members: Vec<Member>,
    /// The last RTP sequence number each session received on each stream.
    received: HashMap<(SessionId, u32), u16>,
    /// The room stream the last join answered, if any.
    last_room_ssrc: Option<u32>,
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Run::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let cfg = input.config.relay_config();
    let metrics = Metrics::new();
    let mut w = World {
        relay: Relay::new(cfg.clone(), 1),
        exporter: StatsExporter::new(&metrics),
        metrics,
        bound: max_bytes_per_subscriber_per_step(&cfg),
        cfg,
        now: Instant::now(),
        members: Vec::new(),
        received: HashMap::new(),
        last_room_ssrc: None,
    };
    for op in input.ops {
        w.step(op);
        w.check();
    }
});

impl World {
    fn member(&self, who: u8) -> Option<&Member> {
        self.members
            .get(usize::from(who) % self.members.len().max(1))
    }

    fn ssrc(&self, s: Ssrc) -> u32 {
        match s {
            Ssrc::Member(n) => self.member(n).map_or(0, |m| m.ssrc),
            Ssrc::Relay => self.relay.relay_ssrc(),
            Ssrc::Room(n) => self.member(n).and_then(|m| m.room_ssrc).unwrap_or(0),
            Ssrc::Raw(v) => v,
        }
    }

    /// Gives the core one input at `now`: the run's only way in. A join answers the new
    /// session and its SSRC; the other inputs' outcomes show in what the core sends.
    fn drive(&mut self, input: Input<'_>) -> Option<(SessionId, u32)> {
        match self.relay.handle_input(self.now, input) {
            Ok(Reply::Joined(j)) => {
                self.last_room_ssrc = j.room_ssrc;
                Some((j.session, j.ssrc))
            }
            _ => None,
        }
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Join {
                room,
                publish,
                subscribe,
                ssrc,
                require_ssrc,
                gse,
                interest,
                sends,
                room_stream,
                kind,
            } => {
                let dialect = if gse { Dialect::Gse } else { Dialect::Draft01 };
                let sends = match sends % 3 {
                    0 => Sends::Streams,
                    1 => Sends::Containers,
                    _ => Sends::Both,
                };
                let req = JoinRequest {
                    room: ROOMS[usize::from(room)].into(),
                    identity: "fuzz".into(),
                    publish,
                    subscribe,
                    ssrc: ssrc.map(|s| self.ssrc(s)),
                    require_ssrc,
                    dialect,
                    interest: self.interest(interest),
                    sends,
                    room_stream,
                    recorder: kind % 3 == 1,
                    replay: kind % 3 == 2,
                    ..Default::default()
                };
                if let Some((id, ssrc)) = self.drive(Input::Join(req)) {
                    let room_ssrc = self.last_room_ssrc.take();
                    self.members.push(Member {
                        id,
                        ssrc,
                        room_ssrc,
                        dialect,
                        seq: 0,
                        ts: 0,
                    });
                }
            }
            Op::Checkpoint(who) => {
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::Checkpoint(id));
                }
            }
            Op::Leave(who) => {
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::Leave(id));
                }
            }
            Op::SetInterest(who, interest) => {
                let interest = self.interest(interest);
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::SetInterest {
                        session: id,
                        interest,
                    });
                }
            }
            Op::Publish {
                who,
                seq,
                marker,
                foreign_ssrc,
                objects,
            } => {
                let Some(dialect) = self.member(who).map(|m| m.dialect) else {
                    return;
                };
                let payload = payload(&objects, dialect);
                let ssrc = foreign_ssrc.map(|s| self.ssrc(s));
                self.publish(who, seq, marker, ssrc, &payload);
            }
            Op::PublishRaw { who, seq, payload } => self.publish(who, seq, false, None, &payload),
            Op::PublishContainers { who, seq, senders } => {
                let Some(dialect) = self.member(who).map(|m| m.dialect) else {
                    return;
                };
                let mut out = Vec::new();
                for (ssrc, objects) in &senders {
                    let body = payload(objects, dialect);
                    container::write_header(&mut out, self.ssrc(*ssrc), body.len());
                    out.extend_from_slice(&body);
                }
                self.publish(who, seq, false, None, &out);
            }
            Op::Path {
                who,
                max_packet,
                send_kbps,
            } => {
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::SetPath {
                        session: id,
                        max_packet: usize::from(max_packet),
                        send_bps: send_kbps.map(|k| u64::from(k) * 1000),
                    });
                }
            }
            Op::SendBudget { who, kbps } => {
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::SetSendBudget {
                        session: id,
                        bps: kbps.map(|k| u64::from(k) * 1000),
                    });
                }
            }
            Op::BatchEnd => {
                self.drive(Input::BatchEnd);
            }
            Op::RtpBytes(who, bytes) => {
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::Rtp {
                        from: id,
                        packet: &bytes,
                    });
                }
            }
            Op::Rtcp {
                who,
                foreign_sender,
                feedback,
            } => self.feedback(who, foreign_sender, &feedback),
            Op::RtcpBytes(who, bytes) => {
                if let Some(id) = self.member(who).map(|m| m.id) {
                    self.drive(Input::Rtcp {
                        from: id,
                        packet: &bytes,
                    });
                }
            }
            Op::Advance(ms) => {
                self.now += Duration::from_millis(u64::from(ms));
                self.drive(Input::Timeout);
            }
            Op::Timeout => {
                if let Some(at) = self.relay.poll_timeout() {
                    self.now = self.now.max(at);
                    self.drive(Input::Timeout);
                }
            }
        }
    }

    fn publish(&mut self, who: u8, seq: Seq, marker: bool, ssrc: Option<u32>, payload: &[u8]) {
        let n = usize::from(who) % self.members.len().max(1);
        let Some(m) = self.members.get_mut(n) else {
            return;
        };
        m.seq = match seq {
            Seq::Next => m.seq.wrapping_add(1),
            Seq::Duplicate => m.seq,
            Seq::Back(d) => m.seq.wrapping_sub(u16::from(d)),
            Seq::Ahead(d) => m.seq.wrapping_add(d),
        };
        m.ts = m.ts.wrapping_add(3000);
        let header = RtpHeader {
            marker,
            payload_type: 96,
            sequence_number: m.seq,
            timestamp: m.ts,
            ssrc: ssrc.unwrap_or(m.ssrc),
            csrcs: &[],
            extension: None,
        };
        let mut packet = Vec::with_capacity(RTP_HEADER + payload.len());
        header
            .append_to(&mut packet)
            .expect("a plain header writes");
        packet.extend_from_slice(payload);
        let id = m.id;
        self.drive(Input::Rtp {
            from: id,
            packet: &packet,
        });
    }

    fn feedback(&mut self, who: u8, foreign_sender: Option<Ssrc>, feedback: &[Fb]) {
        let Some((id, own)) = self.member(who).map(|m| (m.id, m.ssrc)) else {
            return;
        };
        let sender = foreign_sender.map_or(own, |s| self.ssrc(s));
        let mut packet = Vec::new();
        for fb in feedback {
            // A request the writers refuse (no entries, too many) is left out.
            let _ = match fb {
                Fb::Fir(entries) => {
                    let entries: Vec<FirEntry> = entries
                        .iter()
                        .map(|&(s, n)| FirEntry {
                            ssrc: self.ssrc(s),
                            sequence_number: n,
                        })
                        .collect();
                    rtcp::write_fir(&mut packet, sender, &entries)
                }
                Fb::Pli(s) => rtcp::write_pli(&mut packet, sender, self.ssrc(*s)),
                Fb::Nack(s, back) => {
                    let media = self.ssrc(*s);
                    let last = self.received.get(&(id, media)).copied().unwrap_or(0);
                    let lost: Vec<u16> = back
                        .iter()
                        .map(|b| last.wrapping_sub(u16::from(*b)))
                        .collect();
                    rtcp::write_nack(&mut packet, sender, media, &lost)
                }
                Fb::Tmmbr(entries) => {
                    let entries: Vec<TmmbEntry> = entries
                        .iter()
                        .map(|&(s, bitrate_bps, overhead)| TmmbEntry {
                            ssrc: self.ssrc(s),
                            bitrate_bps,
                            overhead: overhead & 0x1ff,
                        })
                        .collect();
                    rtcp::write_tmmbr(&mut packet, sender, &entries)
                }
                Fb::Tmmbn(entries) => {
                    let entries: Vec<TmmbEntry> = entries
                        .iter()
                        .map(|&(s, bitrate_bps)| TmmbEntry {
                            ssrc: self.ssrc(s),
                            bitrate_bps,
                            overhead: 0,
                        })
                        .collect();
                    rtcp::write_tmmbn(&mut packet, sender, &entries)
                }
                Fb::Bye(ssrcs) => {
                    let ssrcs: Vec<u32> = ssrcs.iter().map(|s| self.ssrc(*s)).collect();
                    rtcp::write_bye(&mut packet, &ssrcs)
                }
                Fb::Ownership(subtype, objects) => {
                    let entries: Vec<handover::Entry> = objects
                        .iter()
                        .map(|&(s, o)| handover::Entry::new(self.ssrc(s), u64::from(o)))
                        .collect();
                    let mut data = Vec::new();
                    handover::encode(&entries, &mut data);
                    rtcp::write_app(&mut packet, subtype & 31, sender, handover::NAME, &data)
                }
                Fb::Rr => rtcp::write_rr(&mut packet, sender, &[]),
                Fb::Sr => rtcp::write_sr(&mut packet, sender, SenderInfo::default(), &[]),
                Fb::Sdes(cname) => rtcp::write_sdes_cname(&mut packet, sender, cname),
            };
        }
        if !packet.is_empty() {
            self.drive(Input::Rtcp {
                from: id,
                packet: &packet,
            });
        }
    }

    fn interest(&self, i: FuzzInterest) -> Interest {
        let ssrcs = |f: FuzzFilter<Ssrc>| Filter {
            allow: f
                .allow
                .map(|v| v.into_iter().map(|s| self.ssrc(s)).collect()),
            deny: f.deny.into_iter().map(|s| self.ssrc(s)).collect(),
        };
        let types = |f: FuzzFilter<Type>| Filter {
            allow: f.allow.map(|v| v.into_iter().map(type_sel).collect()),
            deny: f.deny.into_iter().map(type_sel).collect(),
        };
        Interest {
            echo: i.echo,
            streams: ssrcs(i.streams),
            types: types(i.types),
            area: i.area.map(|a| Area {
                center: a.center.map(xyz),
                avatar: a.avatar.map(u64::from),
                radius: a.radius.map(|f| f.0),
                exit_radius: a.exit_radius.map(|f| f.0),
                half_extents: a.half_extents.map(xyz),
                exit_half_extents: a.exit_half_extents.map(xyz),
                ..Default::default()
            }),
            rates: i
                .rates
                .into_iter()
                .map(|(within, max_hz)| RateTier {
                    within: within.map(|f| f.0),
                    max_hz: max_hz.map(|f| f.0),
                })
                .collect(),
            max_bitrate_bps: i.max_bitrate_bps.map(u64::from),
            prediction: i.prediction.map(|[a, b, c, d]| PredictionGate {
                tolerance: a.0,
                tolerance_per_meter: b.0,
                rotation_tolerance_deg: c.0,
                heartbeat_hz: d.0,
                ..Default::default()
            }),
            delivery: i.aggregated.map_or_else(Delivery::default, |ms| {
                Delivery::aggregated(ms.map(u32::from))
            }),
            // A field added to the library's types keeps its default here.
            ..Default::default()
        }
    }

    /// Drains what the relay sent in this step and checks the invariants.
    fn check(&mut self) {
        let mut sent: HashMap<SessionId, usize> = HashMap::new();
        while let Some(t) = self.relay.poll_transmit() {
            *sent.entry(t.session).or_default() += t.bytes.len();
            match t.class {
                PacketClass::Rtp => {
                    let p = RtpPacket::parse(t.bytes).expect("the relay sends valid RTP");
                    let to = self.members.iter().find(|m| m.id == t.session);
                    let dialect = to.map_or(Dialect::Draft01, |m| m.dialect);
                    if let Err(e) = wire::validate(p.payload(), dialect) {
                        panic!("the relay sent an invalid {dialect} payload: {e}");
                    }
                    self.received
                        .insert((t.session, p.ssrc()), p.sequence_number());
                }
                PacketClass::Rtcp => {
                    rtcp::parse_compound(t.bytes).expect("the relay sends valid RTCP");
                }
                PacketClass::Other => panic!("the relay sent a packet that is neither"),
            }
        }
        for (to, bytes) in sent {
            assert!(
                bytes <= self.bound,
                "session {to} was sent {bytes} bytes in one step (bound {})",
                self.bound
            );
        }
        while let Some(e) = self.relay.poll_event() {
            if let Event::Stat(s) = e {
                self.exporter.observe(s);
            }
        }
        let (mut rooms, mut streams, mut objects) = (0, 0, 0);
        for info in ROOMS.iter().filter_map(|r| self.relay.room_info(r)) {
            rooms += 1;
            for s in &info.streams {
                assert!(
                    s.objects <= self.cfg.max_objects_per_stream,
                    "stream {} stores {} objects (limit {})",
                    s.ssrc,
                    s.objects,
                    self.cfg.max_objects_per_stream
                );
                streams += 1;
                objects += s.objects;
            }
        }
        self.exporter.export(&mut self.relay);
        let m = &self.metrics;
        assert_eq!(m.sessions.get(), self.relay.session_count() as i64);
        assert_eq!(m.rooms.get(), rooms);
        assert_eq!(m.streams.get(), streams);
        assert_eq!(m.cached_objects.get(), objects as i64);
    }
}

fn type_sel(t: Type) -> TypeSel {
    match t {
        Type::Tag(tag) => TypeSel::Tag(u64::from(tag)),
        Type::Kind(k) => {
            let kinds = ObjectKind::ALL;
            TypeSel::Name(kinds[usize::from(k) % kinds.len()].name().into())
        }
        Type::Name(n) => TypeSel::Name(n),
    }
}

/// The objects encoded in `dialect`, each on its own (one the dialect cannot express, or
/// whose fields it refuses, is left out): the payload is their concatenation.
fn payload(objects: &[Obj], dialect: Dialect) -> Vec<u8> {
    let mut out = Vec::new();
    for o in objects {
        if let Ok(bytes) = wire::encode(&[object(o)], dialect) {
            out.extend_from_slice(&bytes);
        }
    }
    out
}

fn loc(at: [F; 3], v: [F; 3]) -> wire::Loc2 {
    let ([x, y, z], [vx, vy, vz]) = (xyz(at), xyz(v));
    wire::Loc2 {
        x,
        y,
        z,
        vx,
        vy,
        vz,
    }
}

fn object(o: &Obj) -> wire::Object {
    use wire::Object as O;
    let still = [F(0.0); 3];
    match *o {
        Obj::Head { id, at, v, ipd } => O::Head1(wire::Head1 {
            id: u64::from(id),
            location: loc(at, v),
            ipd: ipd.map(|f| f.0),
            ..Default::default()
        }),
        Obj::Hand { id, left, at } => O::Hand1(wire::Hand1 {
            id: u64::from(id),
            left,
            location: loc(at, still),
            ..Default::default()
        }),
        Obj::Object1 {
            id,
            at,
            parent,
            active,
        } => {
            let [x, y, z] = xyz(at);
            O::Object1(wire::Object1 {
                id: u64::from(id),
                position: wire::Vec3 { x, y, z },
                parent: parent.map(u64::from),
                active,
                ..Default::default()
            })
        }
        Obj::Object2 { id, at, parent } => O::Object2(wire::Object2 {
            id: u64::from(id),
            location: loc(at, still),
            parent: parent.map(u64::from),
            ..Default::default()
        }),
        Obj::SixDof { id, at, rot } => {
            let [ei, ej, ek] = xyz(rot);
            O::SixDof1(wire::SixDof1 {
                id: u64::from(id),
                location: loc(at, still),
                rotation: wire::Rot2 {
                    ei,
                    ej,
                    ek,
                    ..Default::default()
                },
                ..Default::default()
            })
        }
        Obj::Control { id, buttons } => O::GameControl1(wire::GameControl1 {
            id: u64::from(id),
            buttons,
            ..Default::default()
        }),
        Obj::Ipd(f) => O::HeadIpd1(wire::HeadIpd1 {
            ipd: f.0,
            ..Default::default()
        }),
        Obj::Unknown { tag, ref data } => O::Unknown(wire::Unknown {
            tag: u64::from(tag),
            data: Hex(data.clone()),
        }),
        Obj::FarId { id, at } => O::Head1(wire::Head1 {
            id,
            location: loc(at, still),
            ..Default::default()
        }),
    }
}
