//! What a bench run does: rooms, clients, objects, rates, timings and security, from a
//! TOML file and/or flags. [`Scenario::default`] is the documented default scenario.

use anyhow::{Context, bail};
use gsrelay_core::relay::Interest;
use gsrelay_core::rtp::SrtpProfile;
use gsrelay_core::wire::{
    GameControl1, Hand2, Head1, Loc2, Mesh1, Object, Object2, Rot2, Stick, TexCoord, Texture, Vec3,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Upper bounds that keep a bench run bounded in count and time.
pub mod limits {
    /// Rooms.
    pub const ROOMS: usize = 64;
    /// Clients of each role in one room.
    pub const CLIENTS_PER_ROOM: usize = 2_000;
    /// Live objects per publisher.
    pub const OBJECTS: usize = 1_000;
    /// Cached-only objects per publisher.
    pub const STATIC_OBJECTS: usize = 10_000;
    /// Update rate, Hz.
    pub const RATE_HZ: f64 = 10_000.0;
    /// Warm-up plus measurement, seconds.
    pub const SECONDS: f64 = 600.0;
}

/// How clients protect their RTP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// SRTP with per-session keys from the join answer.
    #[default]
    Srtp,
    /// Plain RTP (the in-process relay then runs with `--insecure-plain-rtp`).
    Plain,
}

/// Which transport the bench clients use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BenchTransport {
    /// RTP over UDP (SRTP unless `security` is plain).
    #[default]
    Udp,
    /// RTP over QUIC for every client.
    Quic,
    /// Publishers over QUIC, subscribers over UDP: every packet crosses transports.
    Mixed,
    /// WebTransport for every client, as browsers connect (the Rust client speaks it).
    #[value(name = "webtransport")]
    WebTransport,
    /// A WebRTC data channel for every client (the Rust client's `rtc` peer connection).
    #[value(name = "webrtc")]
    WebRtc,
}

impl BenchTransport {
    /// Whether a client in `role` (publisher or not) joins over QUIC.
    pub fn quic(self, publisher: bool) -> bool {
        match self {
            Self::Udp | Self::WebRtc => false,
            Self::Quic => true,
            Self::Mixed => publisher,
            Self::WebTransport => false,
        }
    }

    /// Whether every client joins over WebTransport.
    pub fn webtransport(self) -> bool {
        self == Self::WebTransport
    }

    /// Whether every client joins over WebRTC.
    pub fn webrtc(self) -> bool {
        self == Self::WebRtc
    }
}

/// Relative weights of the object types in each publisher's live set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mix {
    /// Head1 (with IPD).
    pub head1: u32,
    /// Hand2 (the largest object, ~230 bytes).
    pub hand2: u32,
    /// Object2.
    pub object2: u32,
    /// GameControl1.
    pub game_control1: u32,
    /// A small Mesh1 (one textured triangle).
    pub mesh1: u32,
}

impl Default for Mix {
    /// One head, two hands, a controller, a small mesh and 15 generic objects in 20.
    fn default() -> Self {
        Self {
            head1: 1,
            hand2: 2,
            object2: 15,
            game_control1: 1,
            mesh1: 1,
        }
    }
}

/// Which object types exist; the order `Mix` weights are laid out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Head1,
    Hand2,
    Object2,
    GameControl1,
    Mesh1,
}

impl Mix {
    /// The kind of every object slot, weights laid out in order and repeated.
    fn pattern(&self) -> Vec<Kind> {
        [
            (Kind::Head1, self.head1),
            (Kind::Hand2, self.hand2),
            (Kind::Object2, self.object2),
            (Kind::GameControl1, self.game_control1),
            (Kind::Mesh1, self.mesh1),
        ]
        .into_iter()
        .flat_map(|(k, w)| std::iter::repeat_n(k, w as usize))
        .collect()
    }
}

/// One bench scenario. Counts are per room (publishers, subscribers, late joiners) or per
/// publisher (objects); times are seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// A name for the report.
    pub name: String,
    /// Rooms, each with its own publishers and subscribers.
    pub rooms: usize,
    /// Publishers per room.
    pub publishers: usize,
    /// Subscribers per room, joined before publishing starts.
    pub subscribers: usize,
    /// Live objects per publisher, all sent at every update.
    pub objects: usize,
    /// Cached-only objects per publisher: sent once during warm-up (paced) and then only
    /// re-sent every `static_refresh_s`, so a late joiner can get them from the
    /// relay's snapshot only.
    pub static_objects: usize,
    /// Seconds between re-sends of the static objects (keep it under the relay's TTL).
    pub static_refresh_s: f64,
    /// Object type weights of the live objects (static objects are all Object2).
    pub mix: Mix,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// Largest payload a publisher packs, bytes.
    pub payload_budget: usize,
    /// Measurement window, seconds.
    pub duration_s: f64,
    /// Warm-up before the window, seconds.
    pub warmup_s: f64,
    /// Late joiners per room: subscribers that join mid-run and send a FIR.
    pub late_joiners: usize,
    /// When the late joiners join, seconds after publishing starts.
    pub late_join_at_s: f64,
    /// Subscribers' interest (default: everything but their own stream). Loss is
    /// computed assuming every publisher's stream is admitted.
    pub interest: Option<Interest>,
    /// Slow subscribers per room: they join with a bandwidth cap of
    /// `slow_max_bitrate_bps` and are left out of the other figures, so a run with and one
    /// without them show whether a slow subscriber costs the others anything.
    pub slow_subscribers: usize,
    /// The slow subscribers' cap, bits per second.
    pub slow_max_bitrate_bps: u64,
    /// SRTP or plain RTP (UDP clients).
    pub security: Security,
    /// UDP, QUIC or both.
    pub transport: BenchTransport,
    /// SRTP profile; the relay's default when absent.
    pub srtp_profile: Option<SrtpProfile>,
    /// Seed of every random choice (impairment, positions, send phases).
    pub seed: u64,
    /// When in each period the publishers send.
    pub send_phases: SendPhases,
    /// Subscribers send RFC 8888 congestion feedback (every 50 ms), so the relay paces
    /// each to its path; the bench object is then state (objectID 999 999), coalesced
    /// like the rest, and its latency is the freshness of what subscribers hold.
    pub congestion_feedback: bool,
    /// Subscribers per room that decode every update and time it (the latency figures
    /// come from them only); the others count updates and check sequence numbers
    /// without timing anything, so that a room of thousands can be driven from the
    /// relay's own cores. `None`: every subscriber decodes and times.
    pub observers: Option<usize>,
}

/// When in each update period the publishers send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendPhases {
    /// All at the same instant: the worst burst for the target (and the historical
    /// default, so earlier figures stay comparable).
    #[default]
    Aligned,
    /// Each publisher at its own random offset within the period, as real players are.
    Random,
}

impl Default for Scenario {
    /// The documented default: 1 room, 4 publishers × 20 objects at 30 Hz, 8
    /// subscribers, 10 s after 2 s of warm-up, 2 late joiners at 5 s, SRTP.
    fn default() -> Self {
        Self {
            name: "default".into(),
            rooms: 1,
            publishers: 4,
            subscribers: 8,
            objects: 20,
            static_objects: 0,
            static_refresh_s: 10.0,
            mix: Mix::default(),
            rate_hz: 30.0,
            payload_budget: 1100,
            duration_s: 10.0,
            warmup_s: 2.0,
            late_joiners: 2,
            late_join_at_s: 5.0,
            interest: None,
            slow_subscribers: 0,
            slow_max_bitrate_bps: 16_000,
            security: Security::Srtp,
            transport: BenchTransport::Udp,
            srtp_profile: None,
            seed: 1,
            send_phases: SendPhases::Aligned,
            congestion_feedback: false,
            observers: None,
        }
    }
}

/// First byte of the bench object's body: not a valid VarUInt, so the object has no
/// objectID and the relay forwards it live without caching it (a per-packet timestamp is
/// no state worth keeping).
pub const BENCH_NO_ID: u8 = 0xff;

/// The bench object's body start when subscribers send congestion feedback: objectID
/// 999 999 as a VarUInt, so the relay caches it and, pacing a subscriber to its path,
/// coalesces it like any state: each stamp that arrives is then the newest one, and its
/// age is the freshness of what the subscriber holds.
pub const BENCH_STATE_ID: [u8; 3] = [0xcf, 0x42, 0x3f];

/// Observers per room of the dense-room preset.
pub const DENSE_OBSERVERS: usize = 4;

/// First objectID of the static objects.
pub const STATIC_ID_BASE: u64 = 1_000_000;

/// The one room a run that kills relays keeps busy: `publishers` (who also subscribe),
/// `subscribers`, and no late joiners.
pub struct ChurnRoom {
    /// The run's name.
    pub name: &'static str,
    /// Publishers.
    pub publishers: usize,
    /// Subscribers.
    pub subscribers: usize,
    /// Live objects per publisher.
    pub objects: usize,
    /// Static objects per publisher.
    pub static_objects: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// SRTP or plain RTP.
    pub security: Security,
}

impl ChurnRoom {
    /// Its scenario, checked.
    pub fn scenario(self) -> anyhow::Result<Scenario> {
        let s = Scenario {
            name: self.name.into(),
            publishers: self.publishers,
            subscribers: self.subscribers,
            objects: self.objects,
            static_objects: self.static_objects,
            rate_hz: self.rate_hz,
            late_joiners: 0,
            late_join_at_s: 0.0,
            security: self.security,
            ..Scenario::default()
        };
        s.validate()?;
        Ok(s)
    }
}

impl Scenario {
    /// Turns this into the dense-room preset: `players` players in one room, each
    /// publishing one avatar (a Head1) at 20 Hz at a random phase and subscribing to
    /// everyone (one publishing and one subscribing session per player), no late joiners.
    /// Times, security, seed and interest are kept.
    pub fn make_dense(&mut self, players: usize) {
        self.name = format!("dense-{players}");
        self.rooms = 1;
        self.publishers = players;
        self.subscribers = players;
        self.objects = 1;
        self.static_objects = 0;
        self.mix = Mix {
            head1: 1,
            hand2: 0,
            object2: 0,
            game_control1: 0,
            mesh1: 0,
        };
        self.rate_hz = 20.0;
        self.late_joiners = 0;
        self.send_phases = SendPhases::Random;
        self.observers = Some(DENSE_OBSERVERS);
    }

    /// Whether subscriber `n` of a room (counted from 0, regular ones first) decodes and
    /// times every update.
    pub fn observes(&self, n: usize) -> bool {
        self.observers.is_none_or(|k| n < k)
    }

    /// Where in the period publisher `n` of `room` sends (zero when aligned).
    pub fn send_phase(&self, room: usize, n: usize) -> Duration {
        match self.send_phases {
            SendPhases::Aligned => Duration::ZERO,
            SendPhases::Random => {
                let key = self.seed ^ ((room as u64) << 32 | n as u64).wrapping_mul(0x9e37);
                self.period().mul_f64(super::impair::Rng::new(key).unit())
            }
        }
    }

    /// Reads a TOML scenario file; absent keys take the defaults.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading scenario {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("scenario {}", path.display()))
    }

    /// Refuses scenarios that make no sense or exceed [`limits`].
    pub fn validate(&self) -> anyhow::Result<()> {
        let secs = |v: f64| v.is_finite() && v >= 0.0;
        if !(1..=limits::ROOMS).contains(&self.rooms) {
            bail!("rooms must be 1..={}", limits::ROOMS);
        }
        for (what, n) in [
            ("publishers", self.publishers),
            ("subscribers", self.subscribers),
            ("late_joiners", self.late_joiners),
            ("slow_subscribers", self.slow_subscribers),
        ] {
            if n > limits::CLIENTS_PER_ROOM {
                bail!("{what} must be at most {}", limits::CLIENTS_PER_ROOM);
            }
        }
        if self.slow_max_bitrate_bps == 0 {
            bail!("slow_max_bitrate_bps must be positive");
        }
        if self.publishers == 0 || self.subscribers + self.late_joiners == 0 {
            bail!("a scenario needs at least one publisher and one subscriber per room");
        }
        if self.objects > limits::OBJECTS || self.static_objects > limits::STATIC_OBJECTS {
            bail!(
                "objects must be at most {}, static_objects at most {}",
                limits::OBJECTS,
                limits::STATIC_OBJECTS
            );
        }
        if self.objects > 0 && self.mix.pattern().is_empty() {
            bail!("the object mix has no weight");
        }
        if !(self.rate_hz > 0.0 && self.rate_hz <= limits::RATE_HZ) {
            bail!("rate_hz must be in (0, {}]", limits::RATE_HZ);
        }
        if !(secs(self.duration_s) && self.duration_s > 0.0 && secs(self.warmup_s))
            || self.duration_s + self.warmup_s > limits::SECONDS
        {
            bail!(
                "duration_s must be > 0, warmup_s >= 0, together at most {} s",
                limits::SECONDS
            );
        }
        if self.late_joiners > 0
            && (!secs(self.late_join_at_s) || self.late_join_at_s > self.warmup_s + self.duration_s)
        {
            bail!("late_join_at_s must fall within warm-up plus duration");
        }
        if !(secs(self.static_refresh_s) && self.static_refresh_s >= 1.0) {
            bail!("static_refresh_s must be at least 1");
        }
        if !(200..=1400).contains(&self.payload_budget) {
            bail!("payload_budget must be 200..=1400 bytes");
        }
        Ok(())
    }

    /// The time between two updates of one publisher.
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.rate_hz)
    }

    /// Publisher `p`'s live objects (ids 1..=objects), positions spread by `p`.
    pub fn live_objects(&self, p: usize) -> Vec<Object> {
        let pattern = self.mix.pattern();
        (0..self.objects)
            .filter_map(|i| {
                let kind = *pattern.get(i % pattern.len().max(1))?;
                Some(make(kind, i as u64 + 1, p as f32 + i as f32 * 0.1))
            })
            .collect()
    }

    /// Publisher `p`'s static objects (ids from [`STATIC_ID_BASE`]).
    pub fn static_objects(&self, p: usize) -> Vec<Object> {
        (0..self.static_objects)
            .map(|i| {
                make(
                    Kind::Object2,
                    STATIC_ID_BASE + i as u64,
                    p as f32 + i as f32 * 0.01,
                )
            })
            .collect()
    }
}

fn loc(x: f32) -> Loc2 {
    Loc2 {
        x,
        y: 1.6,
        z: -2.0,
        vx: 0.1,
        vy: 0.0,
        vz: 0.2,
    }
}

fn make(kind: Kind, id: u64, x: f32) -> Object {
    let rotation = Rot2 {
        si: 0.0,
        sj: 0.38,
        sk: 0.0,
        ..Rot2::default()
    };
    match kind {
        Kind::Head1 => Object::Head1(Head1 {
            id,
            time: 1,
            location: loc(x),
            rotation,
            ipd: Some(0.064),
            ..Head1::default()
        }),
        Kind::Hand2 => Object::Hand2(Box::new(Hand2 {
            id,
            time: 1,
            left: id.is_multiple_of(2),
            location: loc(x),
            rotation,
            ..Hand2::default()
        })),
        Kind::Object2 => Object::Object2(Object2 {
            id,
            time: 1,
            location: loc(x),
            rotation,
            scale: Loc2 {
                x: 1.0,
                y: 1.0,
                z: 1.0,
                ..Loc2::default()
            },
            active: true,
            ..Object2::default()
        }),
        Kind::GameControl1 => Object::GameControl1(GameControl1 {
            id,
            time: 1,
            buttons: 5,
            buttons_time: 1,
            left: Stick { x: 0.5, y: -0.25 },
            right: Stick::default(),
            ..GameControl1::default()
        }),
        Kind::Mesh1 => Object::Mesh1(Mesh1 {
            id,
            texture: Some(Texture::Url("t.png".into())),
            vertices: vec![
                Vec3 { x, y: 0.0, z: 0.0 },
                Vec3 {
                    x: x + 1.0,
                    y: 0.0,
                    z: 0.0,
                },
                Vec3 { x, y: 1.0, z: 0.0 },
            ],
            normals: vec![
                Vec3 {
                    x: 0.0,
                    y: 0.0,
                    z: 1.0
                };
                3
            ],
            textures: vec![
                TexCoord::Float { u: 0.0, v: 0.0 },
                TexCoord::Float { u: 1.0, v: 0.0 },
                TexCoord::Float { u: 0.0, v: 1.0 },
            ],
            triangles: vec![0, 1, 2],
            ..Mesh1::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsrelay_core::wire::{self, Dialect};

    #[test]
    fn default_is_valid_and_encodes() {
        let s = Scenario::default();
        s.validate().unwrap();
        let objects = s.live_objects(0);
        assert_eq!(objects.len(), 20);
        let payload = wire::encode(&objects, Dialect::Draft01).unwrap();
        assert_eq!(wire::validate(&payload, Dialect::Draft01).unwrap(), 20);
    }

    #[test]
    fn toml_overrides_and_rejects_unknown_keys() {
        let s: Scenario =
            toml::from_str("rooms = 2\nsecurity = \"plain\"\n[mix]\nhand2 = 0").unwrap();
        assert_eq!(s.rooms, 2);
        assert_eq!(s.security, Security::Plain);
        assert_eq!(s.mix.hand2, 0);
        assert!(toml::from_str::<Scenario>("romos = 2").is_err());
        let bad = Scenario {
            rate_hz: 0.0,
            ..Scenario::default()
        };
        assert!(bad.validate().is_err());
    }
}
