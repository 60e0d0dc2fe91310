//! The client's QUIC link, RTP over QUIC or WebTransport: connects with the answer's ALPN
//! (`roq`, or `h3` followed by the WebTransport CONNECT), pins the relay's certificate by
//! its SHA-256 fingerprint, presents the session token, then sends RTP and RTCP as
//! DATAGRAM frames (a unidirectional stream for what does not fit) and receives from both.
//! Both go through `web-transport-quinn`'s [`Session`] (raw for RoQ), which adds and
//! strips WebTransport's stream and datagram headers.

use super::ClientError;
use bytes::{Bytes, BytesMut};
use gsrelay_core::join::QuicAnswer;
use gsrelay_core::roq::webtransport;
use gsrelay_core::roq::{self, StreamReader};
use gsrelay_net::quic::{Protocol, fingerprint, transport_config, udp_socket};
use quinn::Endpoint;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use web_transport_quinn::{SendStream, Session, SessionError, WebTransportError};

/// Packets received and not yet read before more are dropped.
const INBOX_DEPTH: usize = 1 << 16;

/// Largest packet accepted on a stream.
const MAX_PACKET: usize = 65_535;

/// A session carried over QUIC.
#[derive(Debug)]
pub(super) struct QuicLink {
    endpoint: Endpoint,
    conn: Session,
    flow_id: u64,
    inbox: mpsc::Receiver<Bytes>,
    /// Opened on the first packet too large for a datagram.
    stream: Option<SendStream>,
    reader: JoinHandle<()>,
    out: Vec<u8>,
}

impl Drop for QuicLink {
    fn drop(&mut self) {
        self.reader.abort();
        self.conn.close(0, b"client gone");
    }
}

impl QuicLink {
    /// The relay's address on this connection.
    pub(super) fn remote_address(&self) -> SocketAddr {
        self.conn.remote_address()
    }

    /// Connects to the relay and attaches to the session `answer` names.
    pub(super) async fn connect(answer: &QuicAnswer) -> Result<Self, ClientError> {
        let local: SocketAddr = if answer.addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let endpoint = Endpoint::new(
            quinn::EndpointConfig::default(),
            None,
            udp_socket(local)?,
            Arc::new(quinn::TokioRuntime),
        )?;
        let protocol = Protocol::from_alpn(answer.alpn.as_bytes())
            .ok_or_else(|| ClientError::Quic(format!("unknown ALPN {:?}", answer.alpn)))?;
        let quic = |e: &dyn std::fmt::Display| ClientError::Quic(e.to_string());
        let conn = endpoint
            .connect_with(
                client_config_for(&answer.cert_sha256, protocol)?,
                answer.addr,
                "localhost",
            )
            .map_err(|e| quic(&e))?
            .await
            .map_err(|e| quic(&e))?;
        let conn = match protocol {
            Protocol::Roq => Session::raw(conn),
            Protocol::WebTransport => {
                let url = webtransport::url(&answer.addr.to_string());
                let url = url::Url::parse(&url).map_err(|e| quic(&e))?;
                Session::connect(conn, url).await.map_err(|e| quic(&e))?
            }
        };
        attach(&conn, &answer.session_token).await?;
        let (tx, inbox) = mpsc::channel(INBOX_DEPTH);
        let reader = tokio::spawn(receive(conn.clone(), answer.flow_id, tx));
        Ok(Self {
            endpoint,
            conn,
            flow_id: answer.flow_id,
            inbox,
            stream: None,
            reader,
            out: Vec::with_capacity(1500),
        })
    }

    /// Sends one packet: a DATAGRAM frame when it fits, else a frame on the client's
    /// unidirectional stream.
    pub(super) async fn send(&mut self, packet: &[u8]) -> Result<(), ClientError> {
        let len = roq::varint_len(self.flow_id) + packet.len();
        if len <= self.conn.max_datagram_size() {
            self.out.clear();
            roq::write_varint(self.flow_id, &mut self.out);
            self.out.extend_from_slice(packet);
            return self
                .conn
                .send_datagram(Bytes::copy_from_slice(&self.out))
                .map_err(|e| ClientError::Quic(e.to_string()));
        }
        if self.stream.is_none() {
            let mut s = self
                .conn
                .open_uni()
                .await
                .map_err(|e| ClientError::Quic(e.to_string()))?;
            self.out.clear();
            roq::write_varint(self.flow_id, &mut self.out);
            s.write_all(&self.out)
                .await
                .map_err(|e| ClientError::Quic(e.to_string()))?;
            self.stream = Some(s);
        }
        self.out.clear();
        roq::write_varint(packet.len() as u64, &mut self.out);
        self.out.extend_from_slice(packet);
        let Some(s) = &mut self.stream else {
            return Ok(());
        };
        s.write_all(&self.out)
            .await
            .map_err(|e| ClientError::Quic(e.to_string()))
    }

    /// The next packet, or `None` once the connection is gone.
    pub(super) async fn recv(&mut self) -> Option<Bytes> {
        self.inbox.recv().await
    }

    /// The endpoint's local address.
    pub(super) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Moves the connection to a new local socket (QUIC connection migration).
    pub(super) fn rebind(&self) -> std::io::Result<()> {
        let local = self.endpoint.local_addr()?;
        self.endpoint
            .rebind(udp_socket(SocketAddr::new(local.ip(), 0))?)
    }

    /// How the connection ended, if it has.
    pub(super) fn close_reason(&self) -> Option<quinn::ConnectionError> {
        quinn::Connection::close_reason(&self.conn)
    }
}

/// Presents the session token on a bidirectional stream and checks the status line.
async fn attach(conn: &Session, token: &str) -> Result<(), ClientError> {
    let quic = |e: &dyn std::fmt::Display| ClientError::Quic(e.to_string());
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| quic(&e))?;
    send.write_all(format!("{token}\n").as_bytes())
        .await
        .map_err(|e| quic(&e))?;
    send.finish().map_err(|e| quic(&e))?;
    let line = recv.read_to_end(256).await.map_err(|e| quic(&e))?;
    match line.strip_prefix(b"OK ") {
        Some(_) => Ok(()),
        None => Err(ClientError::Quic(format!(
            "the relay refused the session token: {}",
            String::from_utf8_lossy(&line)
        ))),
    }
}

/// Reads datagrams and relay-opened streams into `tx` until the connection closes.
async fn receive(conn: Session, flow_id: u64, tx: mpsc::Sender<Bytes>) {
    loop {
        tokio::select! {
            got = conn.read_datagram() => match got {
                Ok(d) => {
                    if let Some((flow, packet)) = roq::split_datagram(&d)
                        && flow == flow_id
                        && !packet.is_empty()
                    {
                        let _ = tx.try_send(d.slice(d.len() - packet.len()..));
                    }
                }
                Err(SessionError::WebTransportError(WebTransportError::UnknownSession)) => {}
                Err(_) => return,
            },
            got = conn.accept_uni() => match got {
                Ok(recv) => {
                    tokio::spawn(read_stream(recv, flow_id, tx.clone()));
                }
                Err(_) => return,
            },
        }
    }
}

/// One relay-opened stream's packets into `tx`.
async fn read_stream(
    mut recv: web_transport_quinn::RecvStream,
    flow_id: u64,
    tx: mpsc::Sender<Bytes>,
) {
    let mut reader = StreamReader::new(MAX_PACKET);
    let mut buf = BytesMut::new();
    while let Ok(Some(chunk)) = recv.read_chunk(MAX_PACKET, true).await {
        buf.extend_from_slice(&chunk.bytes);
        let mut ranges = Vec::new();
        loop {
            match reader.next(&buf) {
                Ok(Some(r)) => ranges.push(r),
                Ok(None) => break,
                Err(_) => return,
            }
        }
        if reader.flow().is_some_and(|f| f != flow_id) {
            return;
        }
        let done = buf.split_to(reader.consumed()).freeze();
        for r in ranges {
            // Stream data is reliable: wait for room rather than drop it.
            if tx.send(done.slice(r)).await.is_err() {
                return;
            }
        }
    }
}

/// A quinn client configuration for the relay: ALPN `roq`, the relay's transport
/// parameters, and exactly the certificate with this SHA-256 fingerprint.
pub fn client_config(cert_sha256: &str) -> Result<quinn::ClientConfig, ClientError> {
    client_config_for(cert_sha256, Protocol::Roq)
}

/// [`client_config`] for `protocol`'s ALPN.
pub fn client_config_for(
    cert_sha256: &str,
    protocol: Protocol,
) -> Result<quinn::ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Pinned {
        sha256: cert_sha256.to_ascii_lowercase(),
        provider: provider.clone(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| ClientError::Quic(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![protocol.alpn().as_bytes().to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| ClientError::Quic(e.to_string()))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport_config()));
    Ok(cfg)
}

/// Accepts the server certificate whose SHA-256 is the pinned one (the join answer's
/// `cert_sha256`); signatures are still checked, so only the key's holder passes.
#[derive(Debug)]
struct Pinned {
    sha256: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if fingerprint(end_entity) == self.sha256 {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
