//! `gsrelay serve` configuration: a TOML file, flags and `GSRELAY_*` environment
//! variables, with precedence flag > environment > file > built-in default.
//!
//! [`ServeConfig`] is the resolved configuration [`crate::server::start`] takes; it is
//! also the file's schema (top-level keys plus a `[relay]` table holding [`RelayConfig`]
//! and an `[http]` table holding [`HttpLimits`]), and an unknown key anywhere in the file
//! is an error naming it. [`ServeArgs`] is the command line; [`ServeArgs::resolve`]
//! merges the layers. Clap resolves flag over environment itself, so every flag is an
//! `Option` without a clap default: `None` means "neither flag nor variable given, let
//! the file decide".
//!
//! # One declaration per setting
//!
//! Every setting is declared once, in the [`settings!`](declare::settings) invocation
//! below. A top-level setting is a line
//!
//! ```text
//! /// What it does: the field's documentation and the flag's help.
//! name: Type = default, unset "...", from_flag f, debug g, arg(clap attributes);
//! ```
//!
//! from which the macro makes the field `name` of [`ServeConfig`] (file key `name`; with
//! no `= default` the field is an `Option<Type>`, `None` by default, and `unset` says what
//! that means), its place in `Default` and `Debug` (`debug g` shows `g(&field)` instead
//! of the value: secrets), the flag `--name` with the variable `GSRELAY_NAME` and a help
//! ending in the default, its merge in [`ServeArgs::apply`] (through `from_flag f` when
//! the flag's value needs turning into the field's), and its row of [`settings`]. Lines
//! are grouped in `section "Heading" { ... }` blocks, the headings of `--help`. A
//! `table` declares the keys of `[relay]` or `[http]`, structs with their own defaults
//! and serde derives; a key with a type has a flag (`--http-` and the key for `[http]`),
//! one without is set in the file alone; a field of the struct left undeclared does not
//! compile.
//!
//! Why a `macro_rules!` over the structs, rather than per-subsystem structs deriving both
//! clap's `Args` and serde's `Deserialize`, or a layered-config crate (figment, config):
//!
//! - The thing repeated was the declaration, not the layering: clap already puts a flag
//!   over its variable and serde already reads the file, so merging is one `if let` per
//!   setting, which the macro writes. Figment or config would replace those two with
//!   their own layering, yet still need the struct, the clap flags and the reference
//!   written apart; they would also change the file's error messages and could not
//!   spell `GSRELAY_HTTP_HEADER_TIMEOUT` for `[http] header_timeout` without mapping each.
//! - Deriving clap and serde on shared per-subsystem structs needs `Option` fields for
//!   "not given" in both layers, and still a separate default and reference row per
//!   setting; it would also nest [`ServeConfig`], which the tests, the bench and library
//!   users build as a flat struct literal.
//! - The macro keeps [`ServeConfig`]'s shape and expands to clap's and serde's own
//!   derives, so parsing, help, variables and file errors stay theirs; no new dependency
//!   and no proc-macro crate.
//!
//! `tests/configuration_doc.rs` compares [`settings`] with `docs/configuration.md`'s
//! table, row by row.

mod declare;
#[cfg(test)]
mod tests;

pub use declare::{Setting, SettingDefault};

use crate::control::cors::AllowedOrigins;
use crate::control::limits::HttpLimits;
use crate::control::recordings::RecordingConfig;
use crate::control::rooms::DEFAULT_CLOSED_SECS;
use crate::control::token::{DEFAULT_MAX_TTL_SECS, MIN_SECRET_LEN};
use crate::control::webhooks::{self, WebhookConfig};
use crate::record::writer::Layout;
use anyhow::Context;
use clap::{Arg, Args, ValueEnum};
use declare::settings;
use gsrelay_core::relay::RelayConfig;
use gsrelay_core::rtp::SrtpProfile;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How logs are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Socket buffer asked for by default, receive and send: room for bursts. How long a
/// datagram may wait in it is bounded by `udp_max_queue_delay_ms`, not by its size, which
/// holds hundreds of milliseconds of a saturated shard's input.
const DEFAULT_UDP_BUFFER: usize = 4 << 20;

/// Any address of the host, on `port`.
const fn any_on(port: u16) -> SocketAddr {
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port)
}

settings! {
    section "Addresses" {
        /// HTTP API, `/metrics`, `/healthz` and `/readyz` (TCP; port 0: any free port).
        http_addr: SocketAddr = any_on(8080), arg(value_name = "ADDR");
        /// RTP/RTCP with rtcp-mux, UDP, of shard 0; shard k binds the port plus k (port 0:
        /// any free port for each).
        rtp_addr: SocketAddr = any_on(5004), arg(value_name = "ADDR");
        /// The RTP address put in join answers instead of the bound one (NAT, Kubernetes
        /// Service).
        rtp_advertise_addr: SocketAddr, unset "the bound address", arg(value_name = "ADDR");
        /// RTP over QUIC (RoQ) and WebTransport, UDP, one endpoint for every shard (port 0:
        /// any free port).
        quic_addr: SocketAddr = any_on(4433), arg(value_name = "ADDR");
        /// The QUIC address put in join answers instead of the bound one (NAT, Kubernetes
        /// Service).
        quic_advertise_addr: SocketAddr, unset "the bound address", arg(value_name = "ADDR");
        /// PEM certificate chain for QUIC and WebTransport, used as is: browsers verify it by
        /// their web PKI. Given with `quic_key`, or neither.
        quic_cert: PathBuf,
            unset "a certificate generated at start (ECDSA P-256, valid 12 days, replaced every 6)",
            arg(value_name = "FILE", requires = "quic_key");
        /// PEM private key of `quic_cert`.
        quic_key: PathBuf,
            unset "the generated certificate's key",
            arg(value_name = "FILE", requires = "quic_cert");
        /// WebRTC data channels, UDP, one port for every peer and every shard (port 0: any
        /// free port).
        webrtc_addr: SocketAddr = any_on(8445), arg(value_name = "ADDR");
        /// The address offered to WebRTC peers as the relay's ICE candidate instead of the
        /// bound one (NAT, Kubernetes: the pod's address).
        webrtc_advertise_addr: SocketAddr,
            unset "the bound address (for `0.0.0.0`: the address the client used for the API)",
            arg(value_name = "ADDR");
    }
    section "Shards" {
        /// Relay shards, one thread and one UDP port each; 0: one per core this process may
        /// use (its CPU affinity and cgroup quota).
        shards: usize = 0, arg(value_name = "N");
        // A dense room's cost grows with the square of its sessions: at 20 Hz, 500 sessions
        // need about 1.3 cores (0.26 µs per delivered update, docs/benchmarks.md), so 250
        // keep a shard near a third of one.
        /// A shard's load, in sessions of all its rooms, from which a room's new sessions go
        /// to another shard, which then holds a replica of the room joined by links
        /// (`docs/relay.md`, "Links"); a room whose sessions fit one shard stays on one.
        shard_spill_sessions: usize = 250, arg(value_name = "N");
        /// Receive buffer of each shard's UDP socket, bytes (0: the kernel's default); the
        /// kernel caps it at `net.core.rmem_max`.
        udp_recv_buffer_bytes: usize = DEFAULT_UDP_BUFFER, arg(value_name = "BYTES");
        /// Send buffer of each shard's UDP socket, bytes (0: the kernel's default); the
        /// kernel caps it at `net.core.wmem_max`.
        udp_send_buffer_bytes: usize = DEFAULT_UDP_BUFFER, arg(value_name = "BYTES");
        // A few milliseconds: above the time a shard takes for one receive batch (64
        // datagrams of a room of a few dozen subscribers: 2-3 ms on the bench machine), so
        // that nothing is shed below saturation, and far below the hundreds of milliseconds
        // a full 4 MiB buffer queues.
        /// Longest an RTP packet may wait in a shard's UDP receive queue, from the kernel's
        /// receive time to the relay's read, in milliseconds; an older one is dropped as
        /// `stale` before decryption when a newer packet of its stream was read with it
        /// (0: never; `docs/relay.md`, "Drop, don't queue").
        udp_max_queue_delay_ms: u64 = 5, arg(value_name = "MS");
    }
    section "Security" {
        /// Token-signing secret, at least 16 bytes; without one, a random dev secret is
        /// generated and printed with an example token.
        token_secret: String,
            unset "random per run, printed",
            debug redacted,
            arg(value_name = "SECRET", hide_env_values = true);
        /// Longest token lifetime (`exp - iat`) accepted, in whole seconds.
        token_max_ttl_secs: u64 = DEFAULT_MAX_TTL_SECS, arg(value_name = "SECS");
        /// Accept plain, unencrypted RTP from sessions that ask for it
        /// (`"srtp_profile":"none"`): lab interop only, since anyone on the path can read
        /// and forge such streams. `--insecure-plain-rtp=false` switches off a file's
        /// `true` (also yes/no, on/off, 1/0).
        insecure_plain_rtp: bool = false,
            arg(
                value_name = "BOOL",
                num_args = 0..=1,
                require_equals = true,
                default_missing_value = "true",
                value_parser = clap::builder::BoolishValueParser::new()
            );
        /// SRTP profile for joins that name none: `AES_CM_128_HMAC_SHA1_80` or
        /// `AEAD_AES_128_GCM`.
        srtp_profile: SrtpProfile = SrtpProfile::default(),
            arg(value_name = "PROFILE", value_parser = parse_profile);
    }
    section "Operation" {
        /// Log format: `text`, or `json` for log collectors (logs go to stderr).
        log_format: LogFormat = LogFormat::default(), arg(value_name = "FORMAT");
        /// How long a graceful drain waits for sessions to leave before stopping, in whole
        /// seconds.
        drain_grace_secs: u64 = 30, arg(value_name = "SECS");
        /// How long a room closed through the API refuses joins, in whole seconds.
        room_closed_secs: u64 = DEFAULT_CLOSED_SECS, arg(value_name = "SECS");
    }
    section "Cluster" {
        /// The cluster's room directory in Redis (`redis://host:port/db`); without it, one
        /// node with its directory in process.
        redis_url: String, debug set_or_not, arg(value_name = "URL");
        /// Prefix of the directory's keys, shared by a cluster's nodes.
        redis_prefix: String = "gsrelay".into(), arg(value_name = "PREFIX");
        /// This node's name in the directory, unique in the cluster.
        node_name: String,
            unset "`HOST:PORT`, the host name and the HTTP port",
            arg(value_name = "NAME");
        /// The UDP address of the QUIC endpoint for links between a cluster's nodes, bound
        /// only with `redis_url`.
        link_addr: SocketAddr = any_on(7100), arg(value_name = "ADDR");
        /// The link address other nodes dial instead of the bound one (a pod's IP).
        link_advertise_addr: SocketAddr,
            unset "the bound address (loopback for `0.0.0.0`)",
            arg(value_name = "ADDR");
        /// The HTTP address other nodes forward joins and session requests to instead of
        /// the bound one (a pod's IP).
        http_advertise_addr: SocketAddr,
            unset "the bound address (loopback for `0.0.0.0`)",
            arg(value_name = "ADDR");
        /// A node's load, in sessions of all its rooms, from which a room's new sessions go
        /// to another node of the cluster, which then holds a replica of the room.
        node_spill_sessions: usize = 2000, arg(value_name = "N");
    }
    section "Webhooks" {
        /// Where webhooks go (`docs/webhooks.md`): `http` or `https` URLs, each sent every
        /// room, participant and stream event. Flag and variable take a comma-separated
        /// list, an empty value for none.
        webhook_urls: Vec<String> = Vec::new(),
            from_flag trimmed_list,
            debug origins_only,
            arg(value_name = "URLS", value_delimiter = ',');
        /// The webhooks' signing key (HS256), at least 16 bytes.
        webhook_key: String,
            unset "the token secret",
            debug redacted,
            arg(value_name = "KEY", hide_env_values = true);
        /// Events each webhook URL's queue holds; more are dropped and counted.
        webhook_queue: usize = webhooks::DEFAULT_QUEUE, arg(value_name = "N");
        /// Seconds one webhook request may take, connecting included.
        webhook_timeout_secs: u64 = webhooks::DEFAULT_TIMEOUT_SECS, arg(value_name = "SECS");
        /// Attempts per webhook and URL before it is given up on (counted failed).
        webhook_attempts: u32 = webhooks::DEFAULT_ATTEMPTS, arg(value_name = "N");
    }
    section "Recording" {
        /// Where room recordings are kept (`docs/recording.md`), one directory each; made
        /// when the first recording starts.
        recording_dir: PathBuf = PathBuf::from("recordings"), arg(value_name = "DIR");
        /// Rooms recorded from their first join: names or patterns (`*` any run of
        /// characters, `?` one). Flag and variable take a comma-separated list.
        record_rooms: Vec<String> = Vec::new(),
            from_flag trimmed_list,
            arg(value_name = "PATTERNS", value_delimiter = ',');
        /// Seconds between a recording's checkpoints (the room's whole state): a seek
        /// replays at most this much from the nearest one.
        recording_checkpoint_secs: u64 = 10, arg(value_name = "SECS");
        /// A recording's segment file is closed at the first checkpoint after it is this
        /// many seconds old...
        recording_segment_secs: u64 = 60, arg(value_name = "SECS");
        /// ...or holds this many bytes.
        recording_segment_bytes: u64 = 256 << 20, arg(value_name = "BYTES");
        /// Gzip closed segments (Wireshark reads them as they are); costs the writer
        /// thread CPU, never the relay's.
        recording_compress: bool = false,
            arg(
                value_name = "BOOL",
                num_args = 0..=1,
                require_equals = true,
                default_missing_value = "true",
                value_parser = clap::builder::BoolishValueParser::new()
            );
        /// A file holding the recordings' key, 64 hexadecimal digits (32 bytes): closed
        /// segments are then encrypted at rest with AES-256-GCM (`.pcapng.enc`); the
        /// relay decrypts them for downloads and replays.
        recording_key_file: PathBuf,
            unset "none: segments are written in the clear",
            arg(value_name = "FILE");
        /// Stopped recordings older than this many seconds are deleted (0: kept).
        recording_max_age_secs: u64 = 0, arg(value_name = "SECS");
        /// The oldest stopped recordings are deleted while all of them hold more than this
        /// many bytes (0: no limit).
        recording_max_bytes: u64 = 0, arg(value_name = "BYTES");
    }
    table "Relay limits" relay: RelayConfig, RelayArgs, flags "" {
        /// Largest RTP payload the relay builds itself (snapshots, repairs), bytes.
        payload_budget: usize, arg(value_name = "BYTES");
        /// Largest datagram accepted from a client, bytes.
        max_packet_bytes: usize, arg(value_name = "BYTES");
        /// Sessions a room may hold.
        max_sessions_per_room: usize, arg(value_name = "N");
        /// Sessions the relay may hold at once, all rooms together.
        max_sessions: usize, arg(value_name = "N");
        /// Rooms the relay may hold at once.
        max_rooms: usize, arg(value_name = "N");
        /// Objects one stream may keep in the store.
        max_objects_per_stream: usize, arg(value_name = "N");
        /// Packets per second a session may send (RTP and RTCP), sustained.
        max_packets_per_sec: u32, arg(value_name = "N");
        /// Seconds an object lives without refresh.
        object_ttl: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Seconds of silence that end a stream.
        stream_timeout: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Seconds of silence that remove a session.
        session_timeout: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Least seconds between FIRs passed on to one sender.
        fir_forward_interval: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Bandwidth cap of every subscriber, bit/s, unless its interest or its TMMBR asks
        /// for less.
        subscriber_max_bitrate_bps;
        /// Seconds between expiry sweeps.
        sweep_interval: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Seconds within which a subscriber gets at most one snapshot per stream and one
        /// repair per object.
        snapshot_interval: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Rate of relay-made sends (snapshots, repairs) to a subscriber without a bandwidth
        /// cap, bit/s.
        relay_send_bitrate_bps: u64, arg(value_name = "BPS");
        /// Largest burst of relay-made sends, bytes.
        relay_send_burst_bytes: usize, arg(value_name = "BYTES");
        /// Ceiling on bytes queued for sending between two drains of the output.
        max_outbox_bytes: usize, arg(value_name = "BYTES");
        /// Least seconds between the relay's RTCP reports to one session (RFC 3550 `Tmin`).
        rtcp_min_interval;
        /// Seconds after which a room object not updated expires.
        room_object_ttl;
        /// Room objects one room may hold together.
        max_room_objects;
        /// Seconds during which an object that changed hands is refused to a further
        /// request.
        handover_guard;
        /// Objects of other streams one session may hold at once.
        max_held_objects;
        /// Seconds between the whole-state refreshes a replica sends each link.
        link_refresh;
    }
    table "HTTP API limits" http: HttpLimits, HttpArgs, flags "http_" {
        /// Seconds a client has to send a whole request head.
        header_timeout: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Seconds a client has to send a whole request body.
        body_timeout: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// Seconds a kept-alive connection may sit idle.
        idle_timeout: Duration, arg(value_name = "SECS", value_parser = parse_secs);
        /// `/v1` requests handled at once; more get 503.
        max_in_flight: usize, arg(value_name = "N");
        /// Joins and interest changes per second per identity, sustained.
        rate_per_sec: f64, arg(value_name = "N");
        /// Joins and interest changes one identity may make in a burst.
        rate_burst: u32, arg(value_name = "N");
        /// Origins whose pages may call the API and import the JavaScript client (CORS),
        /// `scheme://host[:port]`, or `*` for any. Flag and variable take a comma-separated
        /// list, an empty value for none.
        cors_allowed_origins: Vec<String>,
            from_flag AllowedOrigins::new,
            arg(value_name = "ORIGINS", value_delimiter = ',');
    }
}

/// A secret as `Debug` shows it: whether it is set, never its value.
fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}

/// A Redis URL as `Debug` shows it: it may hold a password.
fn set_or_not(url: &Option<String>) -> Option<&'static str> {
    url.as_ref().map(|_| "<set>")
}

/// Webhook URLs as `Debug` shows them: their origins only, since a receiver's path or
/// query may hold a credential.
fn origins_only(urls: &[String]) -> Vec<String> {
    urls.iter()
        .map(|u| {
            url::Url::parse(u).map_or_else(
                |_| "<unparsed>".to_owned(),
                |u| u.origin().ascii_serialization(),
            )
        })
        .collect()
}

/// A comma-separated flag's entries, trimmed, blank ones left out: `--webhook-urls=` (an
/// empty value) switches a file's URLs off.
fn trimmed_list(list: Vec<String>) -> Vec<String> {
    list.iter()
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

fn parse_profile(s: &str) -> Result<SrtpProfile, String> {
    s.parse().map_err(|_| {
        let names: Vec<_> = SrtpProfile::ALL.iter().map(|p| p.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|e| format!("not a number of seconds: {e}"))?;
    Duration::try_from_secs_f64(v).map_err(|e| e.to_string())
}

/// Every setting of `gsrelay serve` in the order of its declaration, `--config` first:
/// what `docs/configuration.md`'s reference lists, row by row. The flags and variables
/// are read back from the command line clap builds, so they are the ones it parses.
pub fn settings() -> Vec<Setting> {
    let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
    let arg = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id() == id)
            .unwrap_or_else(|| panic!("no flag {id}"))
    };
    let config = arg("config");
    let first = Setting {
        key: None,
        flag: Some(flag_usage(config)),
        env: env_var(config),
        default: SettingDefault::Unset("none".into()),
        help: config
            .get_help()
            .map(ToString::to_string)
            .unwrap_or_default(),
    };
    let declared = declared().into_iter().map(|d| {
        let flag = d.flag.map(arg);
        Setting {
            key: Some(match d.table {
                Some(table) => format!("[{table}] {}", d.key),
                None => d.key.to_owned(),
            }),
            flag: flag.map(flag_usage),
            env: flag.and_then(env_var),
            default: d.default,
            help: declare::doc_text(d.doc),
        }
    });
    std::iter::once(first).chain(declared).collect()
}

/// `--name`, or `--name[=VALUE]` when the value may be left out.
fn flag_usage(arg: &Arg) -> String {
    let long = arg.get_long().unwrap_or_default();
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    match arg.get_value_names() {
        Some([value, ..]) if optional => format!("--{long}[={value}]"),
        _ => format!("--{long}"),
    }
}

fn env_var(arg: &Arg) -> Option<String> {
    arg.get_env().map(|v| v.to_string_lossy().into_owned())
}

impl ServeConfig {
    /// Reads a TOML configuration file; absent keys take their defaults.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        Self::from_toml(&text).with_context(|| format!("config file {}", path.display()))
    }

    /// Parses TOML configuration text; an unknown key is an error naming it.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        Ok(toml::from_str(text)?)
    }

    /// How many shards to run: `shards`, or when 0 the cores this process may use
    /// (`available_parallelism` honours CPU affinity and the cgroup CPU quota).
    pub fn shard_count(&self) -> usize {
        match self.shards {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        }
    }

    /// The drain grace period.
    pub fn drain_grace(&self) -> Duration {
        Duration::from_secs(self.drain_grace_secs)
    }

    /// The recording settings (`docs/recording.md`); nothing is recorded or written
    /// until a recording starts.
    pub fn recording(&self) -> anyhow::Result<RecordingConfig> {
        let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
        let key = match &self.recording_key_file {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("recording_key_file {}", path.display()))?;
                let key = gsrelay_record::Key::from_hex(&text)
                    .with_context(|| format!("recording_key_file {}", path.display()))?;
                Some(key)
            }
        };
        Ok(RecordingConfig {
            dir: self.recording_dir.clone(),
            auto: self.record_rooms.clone(),
            checkpoint: Duration::from_secs(self.recording_checkpoint_secs.max(1)),
            layout: Layout {
                segment_time: Duration::from_secs(self.recording_segment_secs.max(1)),
                segment_bytes: self.recording_segment_bytes.max(1 << 20),
                compress: self.recording_compress,
                key: key.clone(),
            },
            key,
            max_age: secs(self.recording_max_age_secs),
            max_bytes: (self.recording_max_bytes > 0).then_some(self.recording_max_bytes),
        })
    }

    /// The webhooks' configuration, checked: `None` without URLs. The key defaults to
    /// `token_secret` (the one in use, configured or generated). Each error names the key
    /// at fault, and a URL by its place in the list: the URL itself may hold a
    /// credential.
    pub fn webhooks(&self, token_secret: &str) -> anyhow::Result<Option<WebhookConfig>> {
        let key = self.webhook_key.as_deref().unwrap_or(token_secret);
        anyhow::ensure!(
            key.len() >= MIN_SECRET_LEN,
            "webhook_key must be at least {MIN_SECRET_LEN} bytes (it signs the webhooks; \
             without it, the token secret does)"
        );
        anyhow::ensure!(self.webhook_queue > 0, "webhook_queue must be at least 1");
        anyhow::ensure!(
            self.webhook_timeout_secs > 0,
            "webhook_timeout_secs must be at least 1"
        );
        anyhow::ensure!(
            self.webhook_attempts > 0,
            "webhook_attempts must be at least 1"
        );
        let urls = self
            .webhook_urls
            .iter()
            .enumerate()
            .map(|(i, u)| webhook_url(u).with_context(|| format!("webhook_urls[{i}]")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if urls.is_empty() {
            return Ok(None);
        }
        Ok(Some(WebhookConfig {
            urls,
            key: key.as_bytes().to_vec(),
            issuer: self.node_name.clone().unwrap_or_else(|| "gsrelay".into()),
            queue: self.webhook_queue,
            timeout: Duration::from_secs(self.webhook_timeout_secs),
            attempts: self.webhook_attempts,
            first_backoff: webhooks::FIRST_BACKOFF,
        }))
    }
}

/// A webhook receiver's URL: absolute, `http` or `https`, with a host and no user or
/// password (the `Authorization` header carries the signature).
fn webhook_url(text: &str) -> anyhow::Result<url::Url> {
    let url = url::Url::parse(text.trim()).map_err(|e| anyhow::anyhow!("not a URL: {e}"))?;
    anyhow::ensure!(
        matches!(url.scheme(), "http" | "https"),
        "scheme {:?}: only http and https are allowed",
        url.scheme()
    );
    anyhow::ensure!(url.host().is_some(), "no host");
    anyhow::ensure!(
        url.username().is_empty() && url.password().is_none(),
        "a user or password in the URL is not allowed: the Authorization header carries \
         the webhook's signature"
    );
    Ok(url)
}

impl ServeArgs {
    /// Merges the file named by `--config` (if any) under these flags.
    pub fn resolve(&self) -> anyhow::Result<ServeConfig> {
        let base = match &self.config {
            Some(path) => ServeConfig::from_file(path)?,
            None => ServeConfig::default(),
        };
        Ok(self.apply(base))
    }
}
