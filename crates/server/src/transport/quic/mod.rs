//! The relay's QUIC endpoint on quinn, the QUIC port of the relay task
//! ([`super::shard`]). One endpoint, one UDP port, two protocols told apart by the ALPN
//! each connection negotiates ([`Protocol`]): RTP over QUIC (RoQ,
//! draft-ietf-avtcore-rtp-over-quic, ALPN `roq`) and WebTransport over HTTP/3 (ALPN
//! `h3`, [`super::webtransport`]). Both carry the same RoQ framing; after the HTTP/3
//! CONNECT a WebTransport session is handled exactly as a RoQ connection.
//!
//! - `conn`: the endpoint's accept loop and one task per connection. A connection
//!   proves its session with the single-use token of its join on a bidirectional stream,
//!   then its datagrams and unidirectional streams become [`QuicEvent`]s for the relay
//!   task that owns the session (found from the token), over a bounded channel: when the
//!   channel is full a packet is dropped and counted (`quic_inbound_full`), never queued.
//! - `port`: the relay task's side: tokens, each QUIC session's connection, and the
//!   sending of the core's packets (DATAGRAM frames when they fit, else the session's
//!   unidirectional stream).
//! - [`cert`]: the certificate, configured or generated and rotated.
//!
//! QUIC encrypts, so there is no SRTP here; the certificate is the relay's own (generated
//! at start unless `--quic-cert`/`--quic-key` name one) and clients pin it by the
//! SHA-256 fingerprint the join answer carries.

pub mod cert;
mod conn;
mod port;

pub use cert::{CertSource, Certificates, self_signed};
pub use conn::ErrorCode;
pub use gsrelay_core::roq::ALPN;
pub use gsrelay_net::quic::{Protocol, fingerprint, transport_config, udp_socket};
pub(super) use port::{Peer, QuicPort};

use crate::metrics::Metrics;
use bytes::Bytes;
use gsrelay_core::relay::SessionId;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use web_transport_quinn::Session;

/// Events a relay task's QUIC inbox may hold before packets are dropped.
const INBOX_DEPTH: usize = 4096;

/// How the QUIC transport runs.
#[derive(Debug, Clone)]
pub struct QuicConfig {
    /// UDP address to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Address clients are told to connect to (behind NAT / a Kubernetes Service).
    pub advertise: Option<SocketAddr>,
    /// PEM certificate chain and private key; `None` generates a self-signed certificate.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// How long each generated certificate is valid; it is replaced at half of it.
    pub cert_lifetime: Duration,
    /// How long a session token is valid after its join.
    pub token_ttl: Duration,
    /// How long a connection has, from its handshake on, to present its token.
    pub token_timeout: Duration,
    /// Connections that may be between their first packet and their token at once; more
    /// are refused (a flood of connections without tokens costs the relay this much).
    pub max_pending: usize,
}

impl QuicConfig {
    /// The defaults for `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            advertise: None,
            cert: None,
            cert_lifetime: cert::DEFAULT_LIFETIME,
            token_ttl: Duration::from_secs(30),
            token_timeout: Duration::from_secs(5),
            max_pending: 256,
        }
    }
}

/// What a bound QUIC endpoint is.
#[derive(Debug, Clone)]
pub struct QuicInfo {
    /// The bound address.
    pub local_addr: SocketAddr,
    /// SHA-256 of its certificate (DER) at start, lowercase hex.
    pub cert_sha256: String,
    /// Whether the certificate was generated (and is rotated) by the relay.
    pub self_signed: bool,
    /// The certificate now, and its rotation.
    pub certs: Arc<Certificates>,
}

/// A session token: 16 random bytes, the first naming the relay task that owns the
/// session, spelled as 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token([u8; 16]);

impl Token {
    fn generate(shard: u8) -> io::Result<Self> {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).map_err(|e| io::Error::other(e.to_string()))?;
        b[0] = shard;
        Ok(Self(b))
    }

    /// The relay task that issued it.
    pub fn shard(&self) -> u8 {
        self.0[0]
    }

    /// Parses the hex form; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let mut b = [0u8; 16];
        hex::decode_to_slice(s, &mut b).ok()?;
        s.bytes()
            .all(|c| !c.is_ascii_uppercase())
            .then_some(Self(b))
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

/// What a connection task tells the relay task.
#[derive(Debug)]
pub enum QuicEvent {
    /// A connection presents a session token.
    Attach {
        /// The token.
        token: Token,
        /// What the connection speaks.
        protocol: Protocol,
        /// The connection: a WebTransport session, or a raw one for RoQ (boxed: a
        /// session is large beside the other events).
        conn: Box<Session>,
        /// Where the relay task sends the frames of the session's unidirectional stream.
        stream: mpsc::Sender<Bytes>,
        /// The session, or why not.
        reply: oneshot::Sender<Result<Attached, &'static str>>,
    },
    /// One RTP or RTCP packet (flow identifier removed).
    Packet {
        /// From this session,
        session: SessionId,
        /// over this connection (`Connection::stable_id`).
        conn: usize,
        /// The packet.
        data: Bytes,
    },
    /// The path changed.
    Path {
        /// Session.
        session: SessionId,
        /// Connection.
        conn: usize,
        /// Largest DATAGRAM payload the peer takes now; `None` without datagram support.
        max_datagram: Option<usize>,
        /// Send rate the connection allows when its datagram queue is filling.
        send_bps: Option<u64>,
    },
    /// The connection is gone: the session leaves.
    Closed {
        /// Session.
        session: SessionId,
        /// Connection.
        conn: usize,
    },
}

/// An attached session, as the connection task needs it.
#[derive(Debug, Clone, Copy)]
pub struct Attached {
    /// Session.
    pub session: SessionId,
    /// Its flow identifier.
    pub flow_id: u64,
    /// Largest RTP/RTCP packet accepted from it.
    pub max_packet: usize,
}

/// One shard's share of the QUIC endpoint: its port and the inbox its connections feed.
pub struct QuicShard {
    pub(super) port: QuicPort,
}

/// The bound endpoint; dropping it closes every connection ("relay stopped") and stops
/// the certificate's rotation.
pub struct QuicEndpoint {
    endpoint: quinn::Endpoint,
    rotation: tokio::task::JoinHandle<()>,
    /// What it is: address and certificate.
    pub info: QuicInfo,
}

impl Drop for QuicEndpoint {
    fn drop(&mut self) {
        self.rotation.abort();
        self.endpoint
            .close(ErrorCode::NoError.varint(), b"relay stopped");
    }
}

/// Binds the endpoint and starts its accept loop, which routes each connection to the
/// shard named by its token; answers the endpoint and each of `shards` shards' share
/// (shard `k` at index `k`; at most 256 shards, a token's first byte).
pub fn bind(
    cfg: QuicConfig,
    metrics: &Metrics,
    shards: usize,
) -> io::Result<(QuicEndpoint, Vec<QuicShard>)> {
    if shards == 0 || shards > 256 {
        return Err(io::Error::other("QUIC serves 1 to 256 shards"));
    }
    let source = match &cfg.cert {
        Some((cert, key)) => CertSource::Files(cert.clone(), key.clone()),
        None => CertSource::Generated {
            lifetime: cfg.cert_lifetime,
        },
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = Arc::new(Certificates::new(source, provider.clone())?);
    let endpoint = conn::endpoint(cfg.bind, certs.clone(), provider)?;
    let local_addr = endpoint.local_addr()?;
    let advertised = cfg.advertise.unwrap_or(local_addr);
    let mut inboxes = Vec::with_capacity(shards);
    let mut parts = Vec::with_capacity(shards);
    for k in 0..shards {
        let (tx, events) = mpsc::channel(INBOX_DEPTH);
        inboxes.push(tx);
        let shard = u8::try_from(k).map_err(io::Error::other)?;
        let port = QuicPort::new(
            events,
            shard,
            advertised,
            certs.clone(),
            cfg.token_ttl,
            metrics,
        );
        parts.push(QuicShard { port });
    }
    let limits = conn::Limits {
        token_timeout: cfg.token_timeout,
        max_pending: cfg.max_pending,
    };
    tokio::spawn(conn::accept_loop(
        endpoint.clone(),
        Arc::from(inboxes),
        limits,
        metrics.clone(),
    ));
    let rotation = tokio::spawn(cert::rotate_forever(certs.clone()));
    let info = QuicInfo {
        local_addr,
        cert_sha256: certs.sha256(),
        self_signed: certs.generated(),
        certs,
    };
    Ok((
        QuicEndpoint {
            endpoint,
            rotation,
            info,
        },
        parts,
    ))
}
