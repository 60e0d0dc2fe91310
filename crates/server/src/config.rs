//! `gsrelay serve` configuration: a TOML file, flags and `GSRELAY_*` environment
//! variables, with precedence flag > environment > file > built-in default.
//!
//! [`ServeConfig`] is the resolved configuration [`crate::server::start`] takes; it is
//! also the file's schema (top-level keys plus a `[relay]` table holding [`RelayConfig`]
//! and an `[http]` table holding [`HttpLimits`]), and an unknown key anywhere in the file
//! is an error naming it.
//! [`ServeArgs`] is the command line; [`ServeArgs::resolve`] merges the layers. Clap
//! resolves flag over environment itself, so every flag is an `Option` without a clap
//! default: `None` means "neither flag nor variable given, let the file decide".

use crate::control::cors::AllowedOrigins;
use crate::control::limits::HttpLimits;
use crate::control::token::{DEFAULT_MAX_TTL_SECS, MIN_SECRET_LEN};
use crate::control::webhooks::{self, WebhookConfig};
use anyhow::Context;
use clap::{Args, ValueEnum};
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

/// Sessions a shard takes before a room spreads to another. A dense room's cost grows
/// with the square of its sessions: at 20 Hz, 500 sessions need about 1.3 cores
/// (0.26 µs per delivered update, `docs/benchmarks.md`), so 250 keep a shard near a
/// third of one.
const DEFAULT_SHARD_SPILL: usize = 250;

/// The directory's key prefix unless configured.
const DEFAULT_REDIS_PREFIX: &str = "gsrelay";

/// Default [`ServeConfig::node_spill_sessions`].
const DEFAULT_NODE_SPILL: usize = 2000;

/// Socket buffer asked for by default: room for bursts. How long a datagram may wait
/// in it is bounded by [`DEFAULT_UDP_MAX_QUEUE_DELAY_MS`], not by its size, which holds
/// hundreds of milliseconds of a saturated shard's input.
const DEFAULT_UDP_BUFFER: usize = 4 << 20;

/// Default [`ServeConfig::udp_max_queue_delay_ms`]: a few milliseconds, above the
/// time a shard takes for one receive batch (64 datagrams of a room of a few dozen
/// subscribers: 2–3 ms on the bench machine), so that nothing is shed below
/// saturation, and far below the hundreds of milliseconds a full 4 MiB buffer queues.
const DEFAULT_UDP_MAX_QUEUE_DELAY_MS: u64 = 5;

/// Everything `gsrelay serve` needs, fully resolved.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// HTTP API, `/metrics`, `/healthz` and `/readyz` (TCP; port 0 picks a free port).
    pub http_addr: SocketAddr,
    /// RTP/RTCP with rtcp-mux (UDP; port 0 picks a free port).
    pub rtp_addr: SocketAddr,
    /// RTP over QUIC and WebTransport (UDP; port 0 picks a free port).
    pub quic_addr: SocketAddr,
    /// Relay shards (threads, each owning its rooms, sessions and UDP socket); 0 means
    /// one per core this process may use (its CPU affinity and cgroup quota).
    pub shards: usize,
    /// A shard's load, in sessions of all its rooms, from which a room's new sessions go
    /// to another shard, which then holds a replica of the room joined by links
    /// (`docs/relay.md`, "Links"); a room whose sessions fit one shard stays on one.
    pub shard_spill_sessions: usize,
    /// Receive buffer of each shard's UDP socket, bytes (0: the kernel's default); the
    /// kernel caps it at `net.core.rmem_max`.
    pub udp_recv_buffer_bytes: usize,
    /// Send buffer of each shard's UDP socket, bytes (0: the kernel's default); the kernel
    /// caps it at `net.core.wmem_max`.
    pub udp_send_buffer_bytes: usize,
    /// Longest an RTP packet may wait in a shard's UDP receive queue, from the kernel's
    /// receive time to the relay's read, in milliseconds; an older one is dropped as
    /// `stale` before decryption (0: never; `docs/relay.md`, "Drop, don't queue").
    pub udp_max_queue_delay_ms: u64,
    /// The QUIC address put in join answers instead of the bound one.
    pub quic_advertise_addr: Option<SocketAddr>,
    /// PEM certificate chain for QUIC; without it (and [`Self::quic_key`]) a
    /// self-signed certificate is generated at start.
    pub quic_cert: Option<PathBuf>,
    /// PEM private key of [`Self::quic_cert`].
    pub quic_key: Option<PathBuf>,
    /// WebRTC data channels, every peer on this one port (UDP; port 0 picks a free port).
    pub webrtc_addr: SocketAddr,
    /// The address offered to WebRTC peers as the relay's ICE candidate instead of the
    /// bound one.
    pub webrtc_advertise_addr: Option<SocketAddr>,
    /// The RTP address put in join answers instead of the bound one (NAT, Kubernetes
    /// Service).
    pub rtp_advertise_addr: Option<SocketAddr>,
    /// Token-signing secret (at least 16 bytes); `None` generates a random dev secret.
    pub token_secret: Option<String>,
    /// Longest token lifetime (`exp - iat`) accepted, in seconds.
    pub token_max_ttl_secs: u64,
    /// Accept plain, unencrypted RTP from sessions that ask for it (lab interop only).
    pub insecure_plain_rtp: bool,
    /// SRTP profile for joins that do not name one.
    pub srtp_profile: SrtpProfile,
    /// Log format.
    pub log_format: LogFormat,
    /// How long a graceful drain waits for sessions to leave before stopping, in seconds.
    pub drain_grace_secs: u64,
    /// How long a room closed through the API refuses joins, in seconds.
    pub room_closed_secs: u64,
    /// The cluster's room directory in Redis (`redis://host:port/db`); `None`: one node,
    /// its directory in process.
    pub redis_url: Option<String>,
    /// Prefix of the directory's keys, shared by a cluster's nodes.
    pub redis_prefix: String,
    /// This node's name in the directory, unique in the cluster; `None`: the host name
    /// and the HTTP port.
    pub node_name: Option<String>,
    /// The QUIC endpoint for links between nodes (UDP), bound only in a cluster
    /// (`redis_url` set).
    pub link_addr: SocketAddr,
    /// The link address other nodes dial instead of the bound one (a pod's IP).
    pub link_advertise_addr: Option<SocketAddr>,
    /// The HTTP address other nodes forward joins and session requests to instead of the
    /// bound one (a pod's IP).
    pub http_advertise_addr: Option<SocketAddr>,
    /// A node's load, in sessions of all its rooms, from which a room's new sessions go
    /// to another node of the cluster, which then holds a replica of the room.
    pub node_spill_sessions: usize,
    /// Where webhooks go (`docs/webhooks.md`): `http` or `https` URLs, each sent every
    /// event; empty: no webhooks.
    pub webhook_urls: Vec<String>,
    /// The webhooks' signing key (at least 16 bytes); `None`: the token secret.
    pub webhook_key: Option<String>,
    /// Events each webhook URL's queue holds; more are dropped and counted.
    pub webhook_queue: usize,
    /// Seconds one webhook request may take, connecting included.
    pub webhook_timeout_secs: u64,
    /// Attempts per webhook and URL before it is given up on (counted failed).
    pub webhook_attempts: u32,
    /// The relay core's limits and timings (`[relay]` in the file).
    pub relay: RelayConfig,
    /// The HTTP API's limits (`[http]` in the file).
    pub http: HttpLimits,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            http_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
            rtp_addr: SocketAddr::from(([0, 0, 0, 0], 5004)),
            quic_addr: SocketAddr::from(([0, 0, 0, 0], 4433)),
            shards: 0,
            shard_spill_sessions: DEFAULT_SHARD_SPILL,
            udp_recv_buffer_bytes: DEFAULT_UDP_BUFFER,
            udp_send_buffer_bytes: DEFAULT_UDP_BUFFER,
            udp_max_queue_delay_ms: DEFAULT_UDP_MAX_QUEUE_DELAY_MS,
            quic_advertise_addr: None,
            quic_cert: None,
            quic_key: None,
            webrtc_addr: SocketAddr::from(([0, 0, 0, 0], 8445)),
            webrtc_advertise_addr: None,
            rtp_advertise_addr: None,
            token_secret: None,
            token_max_ttl_secs: DEFAULT_MAX_TTL_SECS,
            insecure_plain_rtp: false,
            srtp_profile: SrtpProfile::default(),
            log_format: LogFormat::default(),
            drain_grace_secs: 30,
            room_closed_secs: crate::control::rooms::DEFAULT_CLOSED_SECS,
            redis_url: None,
            redis_prefix: DEFAULT_REDIS_PREFIX.into(),
            node_name: None,
            link_addr: SocketAddr::from(([0, 0, 0, 0], 7100)),
            link_advertise_addr: None,
            http_advertise_addr: None,
            node_spill_sessions: DEFAULT_NODE_SPILL,
            webhook_urls: Vec::new(),
            webhook_key: None,
            webhook_queue: webhooks::DEFAULT_QUEUE,
            webhook_timeout_secs: webhooks::DEFAULT_TIMEOUT_SECS,
            webhook_attempts: webhooks::DEFAULT_ATTEMPTS,
            relay: RelayConfig::default(),
            http: HttpLimits::default(),
        }
    }
}

impl fmt::Debug for ServeConfig {
    // Hand-written so the token secret never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeConfig")
            .field("http_addr", &self.http_addr)
            .field("rtp_addr", &self.rtp_addr)
            .field("quic_addr", &self.quic_addr)
            .field("shards", &self.shards)
            .field("shard_spill_sessions", &self.shard_spill_sessions)
            .field("udp_recv_buffer_bytes", &self.udp_recv_buffer_bytes)
            .field("udp_send_buffer_bytes", &self.udp_send_buffer_bytes)
            .field("udp_max_queue_delay_ms", &self.udp_max_queue_delay_ms)
            .field("quic_advertise_addr", &self.quic_advertise_addr)
            .field("quic_cert", &self.quic_cert)
            .field("quic_key", &self.quic_key)
            .field("webrtc_addr", &self.webrtc_addr)
            .field("webrtc_advertise_addr", &self.webrtc_advertise_addr)
            .field("rtp_advertise_addr", &self.rtp_advertise_addr)
            .field(
                "token_secret",
                &self.token_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("token_max_ttl_secs", &self.token_max_ttl_secs)
            .field("insecure_plain_rtp", &self.insecure_plain_rtp)
            .field("srtp_profile", &self.srtp_profile)
            .field("log_format", &self.log_format)
            .field("drain_grace_secs", &self.drain_grace_secs)
            .field("room_closed_secs", &self.room_closed_secs)
            // A Redis URL may hold a password.
            .field("redis_url", &self.redis_url.as_ref().map(|_| "<set>"))
            .field("redis_prefix", &self.redis_prefix)
            .field("node_name", &self.node_name)
            .field("link_addr", &self.link_addr)
            .field("link_advertise_addr", &self.link_advertise_addr)
            .field("http_advertise_addr", &self.http_advertise_addr)
            .field("node_spill_sessions", &self.node_spill_sessions)
            // Only the origins: a receiver's path or query may hold a credential.
            .field(
                "webhook_urls",
                &self
                    .webhook_urls
                    .iter()
                    .map(|u| {
                        url::Url::parse(u).map_or_else(
                            |_| "<unparsed>".to_owned(),
                            |u| u.origin().ascii_serialization(),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
            .field(
                "webhook_key",
                &self.webhook_key.as_ref().map(|_| "<redacted>"),
            )
            .field("webhook_queue", &self.webhook_queue)
            .field("webhook_timeout_secs", &self.webhook_timeout_secs)
            .field("webhook_attempts", &self.webhook_attempts)
            .field("relay", &self.relay)
            .field("http", &self.http)
            .finish()
    }
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

/// Command-line flags of `gsrelay serve`; each also reads a `GSRELAY_*` variable.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// TOML configuration file (same keys as the flags, with `_`; relay limits under
    /// `[relay]`, HTTP limits under `[http]` without the `http_` prefix). Flags and
    /// environment variables override it.
    #[arg(long, env = "GSRELAY_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// HTTP API / metrics / health address [default: 0.0.0.0:8080].
    #[arg(long, env = "GSRELAY_HTTP_ADDR", value_name = "ADDR")]
    pub http_addr: Option<SocketAddr>,
    /// RTP/RTCP (rtcp-mux) UDP address [default: 0.0.0.0:5004].
    #[arg(long, env = "GSRELAY_RTP_ADDR", value_name = "ADDR")]
    pub rtp_addr: Option<SocketAddr>,
    /// RTP over QUIC (RoQ) and WebTransport UDP address [default: 0.0.0.0:4433].
    #[arg(long, env = "GSRELAY_QUIC_ADDR", value_name = "ADDR")]
    pub quic_addr: Option<SocketAddr>,
    /// Relay shards, one thread each; shard k binds the RTP port plus k [default: 0, one
    /// per core this process may use].
    #[arg(long, env = "GSRELAY_SHARDS", value_name = "N")]
    pub shards: Option<usize>,
    /// Sessions on a shard (all rooms) from which a room's new sessions go to another
    /// shard, which holds a linked replica of the room [default: 250].
    #[arg(long, env = "GSRELAY_SHARD_SPILL_SESSIONS", value_name = "N")]
    pub shard_spill_sessions: Option<usize>,
    /// UDP receive buffer per shard, bytes; 0 keeps the kernel's default, which caps it
    /// at net.core.rmem_max [default: 4194304].
    #[arg(long, env = "GSRELAY_UDP_RECV_BUFFER_BYTES", value_name = "BYTES")]
    pub udp_recv_buffer_bytes: Option<usize>,
    /// UDP send buffer per shard, bytes; 0 keeps the kernel's default, which caps it at
    /// net.core.wmem_max [default: 4194304].
    #[arg(long, env = "GSRELAY_UDP_SEND_BUFFER_BYTES", value_name = "BYTES")]
    pub udp_send_buffer_bytes: Option<usize>,
    /// Longest an RTP packet may wait in a shard's UDP receive queue, milliseconds; older
    /// ones are dropped as stale before decryption, 0 never drops [default: 5].
    #[arg(long, env = "GSRELAY_UDP_MAX_QUEUE_DELAY_MS", value_name = "MS")]
    pub udp_max_queue_delay_ms: Option<u64>,
    /// QUIC address told to clients instead of the bound one (behind NAT or a Service).
    #[arg(long, env = "GSRELAY_QUIC_ADVERTISE_ADDR", value_name = "ADDR")]
    pub quic_advertise_addr: Option<SocketAddr>,
    /// PEM certificate chain for QUIC and WebTransport, used as is (browsers then verify it
    /// by their web PKI) [default: one generated at start and replaced every 6 days].
    #[arg(
        long,
        env = "GSRELAY_QUIC_CERT",
        value_name = "FILE",
        requires = "quic_key"
    )]
    pub quic_cert: Option<PathBuf>,
    /// PEM private key for `--quic-cert`.
    #[arg(
        long,
        env = "GSRELAY_QUIC_KEY",
        value_name = "FILE",
        requires = "quic_cert"
    )]
    pub quic_key: Option<PathBuf>,
    /// WebRTC data-channel UDP address, one port for every peer [default: 0.0.0.0:8445].
    #[arg(long, env = "GSRELAY_WEBRTC_ADDR", value_name = "ADDR")]
    pub webrtc_addr: Option<SocketAddr>,
    /// Address offered to WebRTC peers as the relay's ICE candidate instead of the bound
    /// one (behind NAT or a Service).
    #[arg(long, env = "GSRELAY_WEBRTC_ADVERTISE_ADDR", value_name = "ADDR")]
    pub webrtc_advertise_addr: Option<SocketAddr>,
    /// RTP address told to clients instead of the bound one (behind NAT or a Service).
    #[arg(long, env = "GSRELAY_RTP_ADVERTISE_ADDR", value_name = "ADDR")]
    pub rtp_advertise_addr: Option<SocketAddr>,
    /// Token-signing secret, at least 16 bytes. Without one a random dev secret is
    /// generated and printed with an example token.
    #[arg(
        long,
        env = "GSRELAY_TOKEN_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub token_secret: Option<String>,
    /// Longest token lifetime (exp - iat) accepted, seconds [default: 86400].
    #[arg(long, env = "GSRELAY_TOKEN_MAX_TTL_SECS", value_name = "SECS")]
    pub token_max_ttl_secs: Option<u64>,
    /// Accept unencrypted RTP from sessions that ask for `"srtp_profile":"none"`. For lab
    /// interop only: anyone on the path can read and forge such streams.
    /// `--insecure-plain-rtp=false` switches off a file's `true` (also yes/no, on/off, 1/0).
    #[arg(
        long,
        env = "GSRELAY_INSECURE_PLAIN_RTP",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub insecure_plain_rtp: Option<bool>,
    /// SRTP profile for joins that name none [default: AES_CM_128_HMAC_SHA1_80].
    #[arg(long, env = "GSRELAY_SRTP_PROFILE", value_name = "PROFILE", value_parser = parse_profile)]
    pub srtp_profile: Option<SrtpProfile>,
    /// Log format [default: text].
    #[arg(long, env = "GSRELAY_LOG_FORMAT", value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Seconds a graceful drain waits for sessions to leave [default: 30].
    #[arg(long, env = "GSRELAY_DRAIN_GRACE_SECS", value_name = "SECS")]
    pub drain_grace_secs: Option<u64>,
    /// Seconds a room closed through the API refuses joins [default: 60].
    #[arg(long, env = "GSRELAY_ROOM_CLOSED_SECS", value_name = "SECS")]
    pub room_closed_secs: Option<u64>,
    /// The cluster's room directory in Redis, `redis://host:port/db` [default: none, one
    /// node with its directory in process].
    #[arg(long, env = "GSRELAY_REDIS_URL", value_name = "URL")]
    pub redis_url: Option<String>,
    /// Prefix of the directory's keys, shared by a cluster's nodes [default: gsrelay].
    #[arg(long, env = "GSRELAY_REDIS_PREFIX", value_name = "PREFIX")]
    pub redis_prefix: Option<String>,
    /// This node's name in the directory, unique in the cluster [default: the host name
    /// and the HTTP port].
    #[arg(long, env = "GSRELAY_NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
    /// UDP address of the QUIC endpoint for links between a cluster's nodes, bound only
    /// with --redis-url [default: 0.0.0.0:7100].
    #[arg(long, env = "GSRELAY_LINK_ADDR", value_name = "ADDR")]
    pub link_addr: Option<SocketAddr>,
    /// Link address other nodes dial instead of the bound one (a pod's IP).
    #[arg(long, env = "GSRELAY_LINK_ADVERTISE_ADDR", value_name = "ADDR")]
    pub link_advertise_addr: Option<SocketAddr>,
    /// HTTP address other nodes forward joins and session requests to instead of the
    /// bound one (a pod's IP).
    #[arg(long, env = "GSRELAY_HTTP_ADVERTISE_ADDR", value_name = "ADDR")]
    pub http_advertise_addr: Option<SocketAddr>,
    /// Sessions on a node (all rooms) from which a room's new sessions go to another node
    /// of the cluster, which then holds a linked replica of the room [default: 2000].
    #[arg(long, env = "GSRELAY_NODE_SPILL_SESSIONS", value_name = "N")]
    pub node_spill_sessions: Option<usize>,
    /// Webhook receivers, comma-separated http(s) URLs, each sent every room, participant
    /// and stream event (docs/webhooks.md); an empty value for none [default: none].
    #[arg(
        long,
        env = "GSRELAY_WEBHOOK_URLS",
        value_name = "URLS",
        value_delimiter = ','
    )]
    pub webhook_urls: Option<Vec<String>>,
    /// Key signing the webhooks (HS256), at least 16 bytes [default: the token secret].
    #[arg(
        long,
        env = "GSRELAY_WEBHOOK_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub webhook_key: Option<String>,
    /// Webhooks each URL's queue holds; more are dropped and counted [default: 1024].
    #[arg(long, env = "GSRELAY_WEBHOOK_QUEUE", value_name = "N")]
    pub webhook_queue: Option<usize>,
    /// Seconds one webhook request may take, connecting included [default: 5].
    #[arg(long, env = "GSRELAY_WEBHOOK_TIMEOUT_SECS", value_name = "SECS")]
    pub webhook_timeout_secs: Option<u64>,
    /// Attempts per webhook and URL before it is given up on [default: 6].
    #[arg(long, env = "GSRELAY_WEBHOOK_ATTEMPTS", value_name = "N")]
    pub webhook_attempts: Option<u32>,
    /// Largest RTP payload the relay builds itself, bytes [default: 1200].
    #[arg(long, env = "GSRELAY_PAYLOAD_BUDGET", value_name = "BYTES")]
    pub payload_budget: Option<usize>,
    /// Largest datagram accepted from a client, bytes [default: 1500].
    #[arg(long, env = "GSRELAY_MAX_PACKET_BYTES", value_name = "BYTES")]
    pub max_packet_bytes: Option<usize>,
    /// Sessions a room may hold [default: 200].
    #[arg(long, env = "GSRELAY_MAX_SESSIONS_PER_ROOM", value_name = "N")]
    pub max_sessions_per_room: Option<usize>,
    /// Rooms the relay may hold at once [default: 5000].
    #[arg(long, env = "GSRELAY_MAX_ROOMS", value_name = "N")]
    pub max_rooms: Option<usize>,
    /// Sessions the relay may hold at once, all rooms together [default: 10000].
    #[arg(long, env = "GSRELAY_MAX_SESSIONS", value_name = "N")]
    pub max_sessions: Option<usize>,
    /// Objects one stream may keep in the store [default: 10000].
    #[arg(long, env = "GSRELAY_MAX_OBJECTS_PER_STREAM", value_name = "N")]
    pub max_objects_per_stream: Option<usize>,
    /// Packets per second a session may send, sustained [default: 2000].
    #[arg(long, env = "GSRELAY_MAX_PACKETS_PER_SEC", value_name = "N")]
    pub max_packets_per_sec: Option<u32>,
    /// Seconds an object lives without refresh [default: 30].
    #[arg(long, env = "GSRELAY_OBJECT_TTL", value_name = "SECS", value_parser = parse_secs)]
    pub object_ttl: Option<Duration>,
    /// Seconds of silence that end a stream [default: 15].
    #[arg(long, env = "GSRELAY_STREAM_TIMEOUT", value_name = "SECS", value_parser = parse_secs)]
    pub stream_timeout: Option<Duration>,
    /// Seconds of silence that remove a session [default: 60].
    #[arg(long, env = "GSRELAY_SESSION_TIMEOUT", value_name = "SECS", value_parser = parse_secs)]
    pub session_timeout: Option<Duration>,
    /// Minimum seconds between FIRs passed on to one sender [default: 0.5].
    #[arg(long, env = "GSRELAY_FIR_FORWARD_INTERVAL", value_name = "SECS", value_parser = parse_secs)]
    pub fir_forward_interval: Option<Duration>,
    /// Seconds between expiry sweeps [default: 0.25].
    #[arg(long, env = "GSRELAY_SWEEP_INTERVAL", value_name = "SECS", value_parser = parse_secs)]
    pub sweep_interval: Option<Duration>,
    /// Seconds within which a subscriber gets at most one snapshot per stream and one
    /// repair per object [default: 0.5].
    #[arg(long, env = "GSRELAY_SNAPSHOT_INTERVAL", value_name = "SECS", value_parser = parse_secs)]
    pub snapshot_interval: Option<Duration>,
    /// Rate of relay-made sends (snapshots, repairs) to an uncapped subscriber, bit/s
    /// [default: 200000000].
    #[arg(long, env = "GSRELAY_RELAY_SEND_BITRATE_BPS", value_name = "BPS")]
    pub relay_send_bitrate_bps: Option<u64>,
    /// Largest burst of relay-made sends, bytes [default: 49152].
    #[arg(long, env = "GSRELAY_RELAY_SEND_BURST_BYTES", value_name = "BYTES")]
    pub relay_send_burst_bytes: Option<usize>,
    /// Ceiling on bytes queued for sending between two drains of the output
    /// [default: 16777216].
    #[arg(long, env = "GSRELAY_MAX_OUTBOX_BYTES", value_name = "BYTES")]
    pub max_outbox_bytes: Option<usize>,
    /// Seconds a client has to send a whole request head [default: 10].
    #[arg(long, env = "GSRELAY_HTTP_HEADER_TIMEOUT", value_name = "SECS", value_parser = parse_secs)]
    pub http_header_timeout: Option<Duration>,
    /// Seconds a client has to send a whole request body [default: 10].
    #[arg(long, env = "GSRELAY_HTTP_BODY_TIMEOUT", value_name = "SECS", value_parser = parse_secs)]
    pub http_body_timeout: Option<Duration>,
    /// Seconds a kept-alive connection may sit idle [default: 75].
    #[arg(long, env = "GSRELAY_HTTP_IDLE_TIMEOUT", value_name = "SECS", value_parser = parse_secs)]
    pub http_idle_timeout: Option<Duration>,
    /// /v1 requests handled at once; more get 503 [default: 256].
    #[arg(long, env = "GSRELAY_HTTP_MAX_IN_FLIGHT", value_name = "N")]
    pub http_max_in_flight: Option<usize>,
    /// Joins and interest changes per second per identity, sustained [default: 5].
    #[arg(long, env = "GSRELAY_HTTP_RATE_PER_SEC", value_name = "N")]
    pub http_rate_per_sec: Option<f64>,
    /// Joins and interest changes one identity may make in a burst [default: 20].
    #[arg(long, env = "GSRELAY_HTTP_RATE_BURST", value_name = "N")]
    pub http_rate_burst: Option<u32>,
    /// Origins whose pages may call the API and import the JavaScript client (CORS),
    /// comma-separated `scheme://host[:port]`; `*` for any, an empty value for none
    /// [default: *].
    #[arg(
        long,
        env = "GSRELAY_HTTP_CORS_ALLOWED_ORIGINS",
        value_name = "ORIGINS",
        value_delimiter = ','
    )]
    pub http_cors_allowed_origins: Option<Vec<String>>,
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

impl ServeArgs {
    /// Merges the file named by `--config` (if any) under these flags.
    pub fn resolve(&self) -> anyhow::Result<ServeConfig> {
        let base = match &self.config {
            Some(path) => ServeConfig::from_file(path)?,
            None => ServeConfig::default(),
        };
        Ok(self.apply(base))
    }

    /// Overrides `cfg` with every flag or variable that was given.
    pub fn apply(&self, mut cfg: ServeConfig) -> ServeConfig {
        fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
            if let Some(v) = value {
                *slot = v.clone();
            }
        }
        set(&mut cfg.http_addr, &self.http_addr);
        set(&mut cfg.rtp_addr, &self.rtp_addr);
        set(&mut cfg.quic_addr, &self.quic_addr);
        set(&mut cfg.webrtc_addr, &self.webrtc_addr);
        if self.webrtc_advertise_addr.is_some() {
            cfg.webrtc_advertise_addr = self.webrtc_advertise_addr;
        }
        set(&mut cfg.shards, &self.shards);
        set(&mut cfg.shard_spill_sessions, &self.shard_spill_sessions);
        set(&mut cfg.udp_recv_buffer_bytes, &self.udp_recv_buffer_bytes);
        set(&mut cfg.udp_send_buffer_bytes, &self.udp_send_buffer_bytes);
        set(
            &mut cfg.udp_max_queue_delay_ms,
            &self.udp_max_queue_delay_ms,
        );
        if self.quic_advertise_addr.is_some() {
            cfg.quic_advertise_addr = self.quic_advertise_addr;
        }
        if self.quic_cert.is_some() {
            cfg.quic_cert.clone_from(&self.quic_cert);
            cfg.quic_key.clone_from(&self.quic_key);
        }
        if self.rtp_advertise_addr.is_some() {
            cfg.rtp_advertise_addr = self.rtp_advertise_addr;
        }
        if self.token_secret.is_some() {
            cfg.token_secret.clone_from(&self.token_secret);
        }
        set(&mut cfg.token_max_ttl_secs, &self.token_max_ttl_secs);
        set(&mut cfg.insecure_plain_rtp, &self.insecure_plain_rtp);
        set(&mut cfg.srtp_profile, &self.srtp_profile);
        set(&mut cfg.log_format, &self.log_format);
        set(&mut cfg.drain_grace_secs, &self.drain_grace_secs);
        set(&mut cfg.room_closed_secs, &self.room_closed_secs);
        if self.redis_url.is_some() {
            cfg.redis_url.clone_from(&self.redis_url);
        }
        set(&mut cfg.redis_prefix, &self.redis_prefix);
        if self.node_name.is_some() {
            cfg.node_name.clone_from(&self.node_name);
        }
        set(&mut cfg.link_addr, &self.link_addr);
        if self.link_advertise_addr.is_some() {
            cfg.link_advertise_addr = self.link_advertise_addr;
        }
        if self.http_advertise_addr.is_some() {
            cfg.http_advertise_addr = self.http_advertise_addr;
        }
        set(&mut cfg.node_spill_sessions, &self.node_spill_sessions);
        if let Some(urls) = &self.webhook_urls {
            // `--webhook-urls=` (an empty value) switches a file's URLs off.
            cfg.webhook_urls = urls
                .iter()
                .map(|u| u.trim().to_owned())
                .filter(|u| !u.is_empty())
                .collect();
        }
        if self.webhook_key.is_some() {
            cfg.webhook_key.clone_from(&self.webhook_key);
        }
        set(&mut cfg.webhook_queue, &self.webhook_queue);
        set(&mut cfg.webhook_timeout_secs, &self.webhook_timeout_secs);
        set(&mut cfg.webhook_attempts, &self.webhook_attempts);
        let r = &mut cfg.relay;
        set(&mut r.payload_budget, &self.payload_budget);
        set(&mut r.max_packet_bytes, &self.max_packet_bytes);
        set(&mut r.max_sessions_per_room, &self.max_sessions_per_room);
        set(&mut r.max_rooms, &self.max_rooms);
        set(&mut r.max_sessions, &self.max_sessions);
        set(&mut r.max_objects_per_stream, &self.max_objects_per_stream);
        set(&mut r.max_packets_per_sec, &self.max_packets_per_sec);
        set(&mut r.object_ttl, &self.object_ttl);
        set(&mut r.stream_timeout, &self.stream_timeout);
        set(&mut r.session_timeout, &self.session_timeout);
        set(&mut r.fir_forward_interval, &self.fir_forward_interval);
        set(&mut r.sweep_interval, &self.sweep_interval);
        set(&mut r.snapshot_interval, &self.snapshot_interval);
        set(&mut r.relay_send_bitrate_bps, &self.relay_send_bitrate_bps);
        set(&mut r.relay_send_burst_bytes, &self.relay_send_burst_bytes);
        set(&mut r.max_outbox_bytes, &self.max_outbox_bytes);
        let h = &mut cfg.http;
        set(&mut h.header_timeout, &self.http_header_timeout);
        set(&mut h.body_timeout, &self.http_body_timeout);
        set(&mut h.idle_timeout, &self.http_idle_timeout);
        set(&mut h.max_in_flight, &self.http_max_in_flight);
        set(&mut h.rate_per_sec, &self.http_rate_per_sec);
        set(&mut h.rate_burst, &self.http_rate_burst);
        if let Some(origins) = &self.http_cors_allowed_origins {
            h.cors_allowed_origins = AllowedOrigins::new(origins);
        }
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn args(flags: &[&str]) -> ServeArgs {
        Cmd::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn defaults_match_the_design() {
        let c = ServeConfig::default();
        assert_eq!(c.http_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(c.rtp_addr.to_string(), "0.0.0.0:5004");
        assert_eq!(c.quic_addr.to_string(), "0.0.0.0:4433");
        assert_eq!(c.srtp_profile, SrtpProfile::AesCm128HmacSha1_80);
        assert!(!c.insecure_plain_rtp);
        assert_eq!(ServeConfig::from_toml("").unwrap(), c);
    }

    #[test]
    fn file_sets_keys_and_relay_table() {
        let c = ServeConfig::from_toml(
            r#"
            http_addr = "127.0.0.1:9000"
            srtp_profile = "AEAD_AES_128_GCM"
            log_format = "json"
            insecure_plain_rtp = true
            token_max_ttl_secs = 600
            [relay]
            max_sessions_per_room = 3
            max_rooms = 7
            object_ttl = 2.5
            [http]
            header_timeout = 0.5
            max_in_flight = 4
            cors_allowed_origins = ["https://game.example.com"]
            "#,
        )
        .unwrap();
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:9000");
        assert_eq!(c.srtp_profile, SrtpProfile::AeadAes128Gcm);
        assert_eq!(c.log_format, LogFormat::Json);
        assert!(c.insecure_plain_rtp);
        assert_eq!(c.relay.max_sessions_per_room, 3);
        assert_eq!(c.relay.max_rooms, 7);
        assert_eq!(c.token_max_ttl_secs, 600);
        assert_eq!(c.http.header_timeout, Duration::from_millis(500));
        assert_eq!(c.http.max_in_flight, 4);
        assert_eq!(
            c.http.cors_allowed_origins,
            AllowedOrigins::new(["https://game.example.com"])
        );
        assert_eq!(c.http.body_timeout, HttpLimits::default().body_timeout);
        assert_eq!(c.relay.object_ttl, Duration::from_millis(2500));
        assert_eq!(
            c.relay.payload_budget,
            RelayConfig::default().payload_budget
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let top = ServeConfig::from_toml("http_adr = \"127.0.0.1:1\"").unwrap_err();
        assert!(format!("{top:#}").contains("http_adr"), "{top:#}");
        let relay = ServeConfig::from_toml("[relay]\nmax_sesions = 1").unwrap_err();
        assert!(format!("{relay:#}").contains("max_sesions"), "{relay:#}");
        let http = ServeConfig::from_toml("[http]\nheader_timout = 1").unwrap_err();
        assert!(format!("{http:#}").contains("header_timout"), "{http:#}");
    }

    #[test]
    fn flags_override_the_file() {
        let file = ServeConfig::from_toml(
            "http_addr = \"127.0.0.1:9000\"\nrtp_addr = \"127.0.0.1:9001\"\n[relay]\npayload_budget = 900",
        )
        .unwrap();
        let c = args(&[
            "--http-addr",
            "127.0.0.1:0",
            "--payload-budget",
            "700",
            "--object-ttl",
            "0.5",
            "--insecure-plain-rtp",
            "--max-sessions",
            "9",
            "--http-idle-timeout",
            "2.5",
            "--http-rate-burst",
            "3",
            "--token-max-ttl-secs",
            "60",
        ])
        .apply(file);
        let off = args(&["--insecure-plain-rtp=no"]).apply(ServeConfig {
            insecure_plain_rtp: true,
            ..ServeConfig::default()
        });
        assert!(!off.insecure_plain_rtp);
        let origins = args(&[
            "--http-cors-allowed-origins",
            "https://a.example,http://b:81",
        ]);
        assert_eq!(
            origins
                .apply(ServeConfig::default())
                .http
                .cors_allowed_origins,
            AllowedOrigins::new(["https://a.example", "http://b:81"])
        );
        let none = args(&["--http-cors-allowed-origins="]).apply(ServeConfig::default());
        assert_eq!(
            none.http.cors_allowed_origins,
            AllowedOrigins::new(Vec::<String>::new())
        );
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:0");
        assert_eq!(c.rtp_addr.to_string(), "127.0.0.1:9001", "file kept");
        assert_eq!(c.relay.payload_budget, 700);
        assert_eq!(c.relay.object_ttl, Duration::from_millis(500));
        assert!(c.insecure_plain_rtp);
        assert_eq!(c.relay.max_sessions, 9);
        assert_eq!(c.http.idle_timeout, Duration::from_millis(2500));
        assert_eq!(c.http.rate_burst, 3);
        assert_eq!(c.token_max_ttl_secs, 60);
    }

    #[test]
    fn bad_flag_values_are_refused() {
        let cmd =
            |f: &[&str]| Cmd::try_parse_from(std::iter::once("serve").chain(f.iter().copied()));
        assert!(cmd(&["--srtp-profile", "AES_256"]).is_err());
        assert!(cmd(&["--object-ttl", "-1"]).is_err());
        assert!(cmd(&["--http-addr", "nowhere"]).is_err());
        assert!(cmd(&["--log-format", "xml"]).is_err());
    }

    #[test]
    fn debug_hides_the_secret() {
        let c = ServeConfig {
            token_secret: Some("super-secret-value".into()),
            webhook_key: Some("webhook-secret-value".into()),
            webhook_urls: vec!["https://hooks.example.com/in?auth=hook-credential".into()],
            ..ServeConfig::default()
        };
        let s = format!("{c:?}");
        assert!(!s.contains("super-secret-value"), "{s}");
        assert!(!s.contains("webhook-secret-value"), "{s}");
        assert!(!s.contains("hook-credential"), "{s}");
        assert!(s.contains("https://hooks.example.com"), "{s}");
    }

    const TOKEN_SECRET: &str = "token-secret-0123456789";

    /// The error of `cfg`'s webhook configuration, with its context.
    fn webhook_error(cfg: ServeConfig) -> String {
        format!("{:#}", cfg.webhooks(TOKEN_SECRET).unwrap_err())
    }

    fn with_urls(urls: &[&str]) -> ServeConfig {
        ServeConfig {
            webhook_urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            ..ServeConfig::default()
        }
    }

    #[test]
    fn webhooks_are_off_without_urls_and_sign_with_the_token_secret_by_default() {
        assert!(
            ServeConfig::default()
                .webhooks(TOKEN_SECRET)
                .unwrap()
                .is_none()
        );
        let c = with_urls(&["http://127.0.0.1:9000/hooks", "https://hooks.example.com"])
            .webhooks(TOKEN_SECRET)
            .unwrap()
            .unwrap();
        assert_eq!(c.urls.len(), 2);
        assert_eq!(c.key, TOKEN_SECRET.as_bytes());
        assert_eq!(c.issuer, "gsrelay");
        assert_eq!(c.queue, webhooks::DEFAULT_QUEUE);
        assert_eq!(c.attempts, webhooks::DEFAULT_ATTEMPTS);
        let named = ServeConfig {
            webhook_key: Some("webhook-key-0123456789".into()),
            node_name: Some("node-a".into()),
            ..with_urls(&["http://h"])
        };
        let c = named.webhooks(TOKEN_SECRET).unwrap().unwrap();
        assert_eq!(c.key, b"webhook-key-0123456789");
        assert_eq!(c.issuer, "node-a");
    }

    #[test]
    fn bad_webhook_settings_are_refused_naming_the_key() {
        for (urls, want) in [
            (
                &["ftp://hooks.example.com/in"][..],
                "webhook_urls[0]: scheme \"ftp\"",
            ),
            (
                &["http://ok.example", "hooks.example.com/in"][..],
                "webhook_urls[1]: not a URL",
            ),
            (&["http://"][..], "webhook_urls[0]: not a URL"),
            (&["unix:/run/hooks.sock"][..], "webhook_urls[0]: scheme"),
            (
                &["https://user:pw@hooks.example.com"][..],
                "webhook_urls[0]: a user or password",
            ),
        ] {
            let e = webhook_error(with_urls(urls));
            assert!(e.contains(want), "{urls:?}: {e}");
            assert!(!e.contains("pw@"), "the URL is not repeated: {e}");
        }
        let short = ServeConfig {
            webhook_key: Some("short".into()),
            ..with_urls(&["http://h"])
        };
        assert!(webhook_error(short).contains("webhook_key must be at least 16 bytes"));
        for (cfg, want) in [
            (
                ServeConfig {
                    webhook_queue: 0,
                    ..with_urls(&["http://h"])
                },
                "webhook_queue",
            ),
            (
                ServeConfig {
                    webhook_timeout_secs: 0,
                    ..with_urls(&["http://h"])
                },
                "webhook_timeout_secs",
            ),
            (
                ServeConfig {
                    webhook_attempts: 0,
                    ..with_urls(&["http://h"])
                },
                "webhook_attempts",
            ),
        ] {
            assert!(webhook_error(cfg).contains(want), "{want}");
        }
    }

    #[test]
    fn webhook_settings_come_from_file_flags_and_environment_lists() {
        let file = ServeConfig::from_toml(
            r#"
            webhook_urls = ["http://a.example/hooks"]
            webhook_key = "file-webhook-key-0123"
            webhook_queue = 16
            webhook_timeout_secs = 2
            webhook_attempts = 3
            "#,
        )
        .unwrap();
        assert_eq!(file.webhook_urls, ["http://a.example/hooks"]);
        assert_eq!(file.webhook_queue, 16);
        assert_eq!((file.webhook_timeout_secs, file.webhook_attempts), (2, 3));
        let c = args(&[
            "--webhook-urls",
            "http://b.example/x, https://c.example/y",
            "--webhook-queue",
            "2",
        ])
        .apply(file.clone());
        assert_eq!(
            c.webhook_urls,
            ["http://b.example/x", "https://c.example/y"]
        );
        assert_eq!(c.webhook_queue, 2);
        assert_eq!(c.webhook_key.as_deref(), Some("file-webhook-key-0123"));
        let off = args(&["--webhook-urls="]).apply(file);
        assert!(off.webhook_urls.is_empty());
    }
}
