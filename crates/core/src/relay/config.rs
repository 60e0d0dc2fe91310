//! Relay limits and timings, with defaults that suit a laptop and a small deployment.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Everything the core needs to know that is not an input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelayConfig {
    /// Largest RTP payload the relay builds itself (snapshots, repairs), in bytes.
    pub payload_budget: usize,
    /// Largest datagram accepted from a client, in bytes.
    pub max_packet_bytes: usize,
    /// Sessions a room may hold.
    pub max_sessions_per_room: usize,
    /// Rooms the relay may hold at once; a join that would open one more is refused.
    pub max_rooms: usize,
    /// Sessions the relay may hold at once, all rooms together.
    pub max_sessions: usize,
    /// Objects one stream may keep in the store.
    pub max_objects_per_stream: usize,
    /// Packets per second a session may send (RTP and RTCP), sustained.
    pub max_packets_per_sec: u32,
    /// An object not refreshed for this long is dropped from the store.
    #[serde(with = "secs")]
    pub object_ttl: Duration,
    /// A stream silent for this long ends (BYE to its subscribers).
    #[serde(with = "secs")]
    pub stream_timeout: Duration,
    /// A session that sends nothing at all for this long is removed.
    #[serde(with = "secs")]
    pub session_timeout: Duration,
    /// Minimum interval between FIRs the relay passes on to one sender.
    #[serde(with = "secs")]
    pub fir_forward_interval: Duration,
    /// Bandwidth cap per subscriber in bits per second, unless its interest or TMMBR asks
    /// for less; none by default.
    pub subscriber_max_bitrate_bps: Option<u64>,
    /// How often expiry is checked.
    #[serde(with = "secs")]
    pub sweep_interval: Duration,
    /// A subscriber gets at most one snapshot per stream, and one repair per object, in
    /// this interval, whatever feedback it sends; later requests wait for its end.
    #[serde(with = "secs")]
    pub snapshot_interval: Duration,
    /// Rate at which the relay sends a subscriber with no bandwidth cap what it makes
    /// itself (snapshots, repairs, objects entering its area), in bits per second.
    pub relay_send_bitrate_bps: u64,
    /// The most of that the relay sends in one burst, in bytes: small enough that a
    /// kernel's default receive buffer (208 KiB) holds it.
    pub relay_send_burst_bytes: usize,
    /// Ceiling on the bytes queued for sending until the shell next drains the output
    /// (after each batch of inputs); beyond it packets are dropped (`outbox_full`) rather
    /// than buffered. The shell's send arena holds at most this much plus SRTP tags.
    pub max_outbox_bytes: usize,
    /// The least interval between the relay's RTCP reports to one session (RFC 3550
    /// §6.2 `Tmin`; the first report waits half of it). Longer on busy legs.
    #[serde(with = "secs")]
    pub rtcp_min_interval: Duration,
    /// How often a replica sends each link the whole state its own sessions published
    /// (`docs/relay.md`, "Links"): what a link lost, or what its peer's interest left
    /// out, reaches the peer within this interval.
    #[serde(with = "secs")]
    pub link_refresh: Duration,
    /// An object of a room stream not updated for this long expires (room objects are
    /// not subject to `object_ttl`; `docs/relay.md`, "Room objects and ownership").
    #[serde(with = "secs")]
    pub room_object_ttl: Duration,
    /// Objects the room streams of one room may hold together; a packet that would add
    /// more is dropped (`room_objects_full`).
    pub max_room_objects: usize,
    /// An object that changed hands is refused to a further request for this long
    /// (`contended`): of requests racing for one object, the first wins.
    #[serde(with = "secs")]
    pub handover_guard: Duration,
    /// Objects of other streams one session may hold at once.
    pub max_held_objects: usize,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            payload_budget: 1200,
            max_packet_bytes: 1500,
            max_sessions_per_room: 200,
            max_rooms: 5_000,
            max_sessions: 10_000,
            max_objects_per_stream: 10_000,
            max_packets_per_sec: 2000,
            object_ttl: Duration::from_secs(30),
            stream_timeout: Duration::from_secs(15),
            session_timeout: Duration::from_secs(60),
            fir_forward_interval: Duration::from_millis(500),
            subscriber_max_bitrate_bps: None,
            sweep_interval: Duration::from_millis(250),
            snapshot_interval: Duration::from_millis(500),
            relay_send_bitrate_bps: 200_000_000,
            relay_send_burst_bytes: 48 * 1024,
            max_outbox_bytes: 16 << 20,
            rtcp_min_interval: Duration::from_secs(5),
            link_refresh: Duration::from_secs(1),
            room_object_ttl: Duration::from_secs(600),
            max_room_objects: 1024,
            handover_guard: Duration::from_millis(200),
            max_held_objects: 64,
        }
    }
}

/// Durations as (fractional) seconds in config files.
pub mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Writes `d` as seconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    /// Reads seconds, refusing what is not a finite, non-negative number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}
