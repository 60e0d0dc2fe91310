//! RTP over QUIC (RoQ, draft-ietf-avtcore-rtp-over-quic) on quinn: the QUIC port of the
//! relay task ([`super::shard`]).
//!
//! - [`conn`]: the endpoint's accept loop and one task per connection. A connection
//!   proves its session with the single-use token of its join on a bidirectional stream,
//!   then its datagrams and unidirectional streams become [`QuicEvent`]s for the relay
//!   task that owns the session (found from the token), over a bounded channel: when the
//!   channel is full a packet is dropped and counted (`quic_inbound_full`), never queued.
//! - [`port`]: the relay task's side: tokens, each QUIC session's connection, and the
//!   sending of the core's packets (DATAGRAM frames when they fit, else the session's
//!   unidirectional stream).
//!
//! QUIC encrypts, so there is no SRTP here; the certificate is the relay's own (generated
//! at start unless `--quic-cert`/`--quic-key` name one) and clients pin it by the
//! SHA-256 fingerprint the join answer carries.

mod conn;
mod port;

pub use conn::{ErrorCode, transport_config, udp_socket};
pub(super) use port::{Peer, QuicPort};

use crate::metrics::Metrics;
use crate::relay::SessionId;
use bytes::Bytes;
use quinn::Connection;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The ALPN of RTP over QUIC.
pub const ALPN: &str = "roq";

/// Events a relay task's QUIC inbox may hold before packets are dropped.
const INBOX_DEPTH: usize = 4096;

/// Socket buffer asked for the endpoint (the kernel may grant less).
const SOCKET_BUFFER: usize = 8 << 20;

/// How the QUIC transport runs.
#[derive(Debug, Clone)]
pub struct QuicConfig {
    /// UDP address to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Address clients are told to connect to (behind NAT / a Kubernetes Service).
    pub advertise: Option<SocketAddr>,
    /// PEM certificate chain and private key; `None` generates a self-signed certificate.
    pub cert: Option<(PathBuf, PathBuf)>,
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
    /// SHA-256 of its certificate (DER), lowercase hex.
    pub cert_sha256: String,
    /// Whether the certificate was generated at start.
    pub self_signed: bool,
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
        /// The connection.
        conn: Connection,
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
    pub(super) events: mpsc::Receiver<QuicEvent>,
}

/// The bound endpoint; dropping it closes every connection ("relay stopped").
pub struct QuicEndpoint {
    endpoint: quinn::Endpoint,
    /// What it is: address and certificate.
    pub info: QuicInfo,
}

impl Drop for QuicEndpoint {
    fn drop(&mut self) {
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
    let (chain, key, self_signed) = load_or_make_cert(&cfg)?;
    let leaf = chain
        .first()
        .ok_or_else(|| io::Error::other("the certificate file holds no certificate"))?;
    let cert_sha256 = fingerprint(leaf);
    let endpoint = conn::endpoint(cfg.bind, chain, key)?;
    let local_addr = endpoint.local_addr()?;
    let advertised = cfg.advertise.unwrap_or(local_addr);
    let mut inboxes = Vec::with_capacity(shards);
    let mut parts = Vec::with_capacity(shards);
    for k in 0..shards {
        let (tx, events) = mpsc::channel(INBOX_DEPTH);
        inboxes.push(tx);
        let shard = u8::try_from(k).map_err(io::Error::other)?;
        let port = QuicPort::new(
            shard,
            advertised,
            cert_sha256.clone(),
            cfg.token_ttl,
            metrics,
        );
        parts.push(QuicShard { port, events });
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
    let info = QuicInfo {
        local_addr,
        cert_sha256,
        self_signed,
    };
    Ok((QuicEndpoint { endpoint, info }, parts))
}

/// The configured certificate chain and key, or a self-signed pair made now.
fn load_or_make_cert(
    cfg: &QuicConfig,
) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, bool)> {
    match &cfg.cert {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| io::Error::other(format!("{}: {e}", cert.display())))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| io::Error::other(format!("{}: {e}", key.display())))?;
            Ok((chain, key, false))
        }
        None => {
            let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                .map_err(io::Error::other)?;
            let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
            Ok((vec![made.cert.der().clone()], key.into(), true))
        }
    }
}

/// SHA-256 of a certificate's DER, lowercase hex.
pub fn fingerprint(cert: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, cert))
}
