//! The QUIC endpoint's accept loop and its connection tasks: handshake, the protocol the
//! connection's ALPN names (for WebTransport, the HTTP/3 CONNECT first), session token,
//! then inbound datagrams and streams as events for the relay task; a writer task per
//! connection carries the session's unidirectional stream.
//!
//! Both protocols go through `web-transport-quinn`'s [`Session`]: an HTTP/3 one for
//! WebTransport, [`Session::raw`] for RoQ, whose streams and codes are quinn's own.

use super::{Attached, Certificates, Protocol, QuicEvent, Token};
use crate::metrics::Metrics;
use crate::transport::webtransport;
use bytes::{Bytes, BytesMut};
use gsrelay_core::relay::format_session_id;
use gsrelay_core::roq::{self, FrameError, StreamReader};
use gsrelay_net::quic::{DATAGRAM_BUFFER, transport_config, udp_socket};
use quinn::{Endpoint, Incoming, VarInt};
use rustls::crypto::CryptoProvider;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use web_transport_quinn::{RecvStream, SendStream, Session, SessionError, WebTransportError};

/// Application error codes the relay closes a connection (or stops a stream) with; the
/// RoQ draft's codes where one fits (§ Error codes), the relay's own above 0x1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    /// ROQ_NO_ERROR: the session left or the relay stopped.
    NoError = 0x00,
    /// ROQ_PACKET_ERROR: a stream frame was empty or larger than the packet limit.
    PacketError = 0x03,
    /// ROQ_UNKNOWN_FLOW_ID: a stream named a flow the session does not have.
    UnknownFlowId = 0x06,
    /// The session token is unknown, already used, or for another relay.
    TokenInvalid = 0x1001,
    /// The session token has expired.
    TokenExpired = 0x1002,
    /// No token arrived in time.
    TokenTimeout = 0x1003,
    /// The relay removed the session (timeout, leave, a defect in its room).
    SessionClosed = 0x1004,
}

impl ErrorCode {
    /// As a QUIC varint.
    pub fn varint(self) -> VarInt {
        VarInt::from_u32(self.code())
    }

    /// As an application code of a session or stream (over WebTransport, the library
    /// maps it into HTTP/3's space).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The code that closes a connection refused for `outcome`.
    fn for_outcome(outcome: &str) -> Self {
        match outcome {
            "token_expired" => Self::TokenExpired,
            "token_timeout" => Self::TokenTimeout,
            _ => Self::TokenInvalid,
        }
    }
}

/// The status line that tells a refused peer why, for a connection `outcome`.
fn refusal_line(outcome: &str) -> String {
    let why = match outcome {
        "token_invalid" => "the session token is unknown, already used, or for another relay",
        "token_expired" => "the session token has expired; join again",
        "token_wrong_protocol" => "the session token was issued for another transport",
        "relay_stopped" => "the relay is stopping",
        _ => "the session was refused",
    };
    format!("{outcome}: {why}\n")
}

/// The longest token line read (32 hex digits and a line end, with room to spare).
const MAX_TOKEN_LINE: usize = 128;

/// How long a handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a peer has to close its token stream, or a refused one to read its status
/// line before the connection closes.
const LINGER: Duration = Duration::from_secs(1);

/// How often a connection's datagram size and send budget are looked at.
const PATH_POLL: Duration = Duration::from_millis(100);

/// Frames that may wait for a session's unidirectional stream before more are dropped.
const STREAM_DEPTH: usize = 1024;

/// The send rate a session is paced to while more than half of [`STREAM_DEPTH`] waits for
/// its stream (a peer that does not read, or reads slowly): the core then sends it the
/// latest state of each object at this rate instead of queueing every update.
const BACKLOGGED_BPS: u64 = 64_000;

/// Limits of the accept side.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub token_timeout: Duration,
    pub max_pending: usize,
}

/// The relay tasks' inboxes, indexed by [`Token::shard`].
pub(super) type Router = Arc<[mpsc::Sender<QuicEvent>]>;

/// A server endpoint on `bind` offering every [`Protocol`]'s ALPN, serving the current
/// certificate of `certs`, datagrams on, large socket buffers.
pub(super) fn endpoint(
    bind: SocketAddr,
    certs: Arc<Certificates>,
    provider: Arc<CryptoProvider>,
) -> io::Result<Endpoint> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    tls.alpn_protocols = Protocol::ALL
        .iter()
        .map(|p| p.alpn().as_bytes().to_vec())
        .collect();
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(io::Error::other)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport_config()));
    let socket = udp_socket(bind)?;
    Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}

/// Accepts connections until the endpoint closes; each gets its own task. Beyond
/// `max_pending` connections without a token yet, new ones are refused.
pub(super) async fn accept_loop(
    endpoint: Endpoint,
    router: Router,
    limits: Limits,
    metrics: Metrics,
) {
    let pending = Arc::new(Semaphore::new(limits.max_pending));
    while let Some(incoming) = endpoint.accept().await {
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            count(&metrics, None, "refused_pending");
            incoming.refuse();
            continue;
        };
        tokio::spawn(serve(
            incoming,
            permit,
            router.clone(),
            limits,
            metrics.clone(),
        ));
    }
}

/// Counts a connection's `outcome`: under its protocol's counter once the handshake has
/// named one, else (refused before or in the handshake) under the QUIC one.
fn count(metrics: &Metrics, protocol: Option<Protocol>, outcome: &str) {
    let counter = match protocol {
        Some(Protocol::WebTransport) => &metrics.webtransport_sessions,
        Some(Protocol::Roq) | None => &metrics.quic_connections,
    };
    counter.with_label_values(&[outcome]).inc();
}

/// One connection: handshake, token, then its session's traffic until it closes.
async fn serve(
    incoming: Incoming,
    permit: OwnedSemaphorePermit,
    router: Router,
    limits: Limits,
    metrics: Metrics,
) {
    let conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, incoming).await {
        Ok(Ok(conn)) => conn,
        _ => return count(&metrics, None, "handshake_failed"),
    };
    // rustls refuses a client offering none of the endpoint's ALPNs in the handshake.
    let Some(protocol) = negotiated(&conn) else {
        conn.close(ErrorCode::TokenInvalid.varint(), b"no ALPN");
        return count(&metrics, None, "handshake_failed");
    };
    let admit = tokio::time::timeout(limits.token_timeout, admit(conn.clone(), protocol, &router));
    let Admitted {
        session,
        attached,
        frames,
        backlog,
        inbox,
    } = match admit.await {
        Ok(Ok(admitted)) => admitted,
        Ok(Err(refusal)) => {
            count(&metrics, Some(protocol), refusal.outcome);
            return refusal.tell(&conn).await;
        }
        Err(_) => {
            count(&metrics, Some(protocol), "token_timeout");
            conn.close(ErrorCode::TokenTimeout.varint(), b"token_timeout");
            return;
        }
    };
    drop(permit);
    count(&metrics, Some(protocol), "attached");
    tracing::debug!(
        session = %format_session_id(attached.session),
        addr = %conn.remote_address(),
        alpn = protocol.alpn(),
        "QUIC connection attached"
    );
    tokio::spawn(write_stream(session.clone(), attached.flow_id, frames));
    let link = Link {
        session,
        protocol,
        attached,
        backlog,
        inbox,
        metrics,
    };
    link.run().await;
}

/// The protocol the handshake negotiated.
fn negotiated(conn: &quinn::Connection) -> Option<Protocol> {
    let data = conn.handshake_data()?;
    let data = data
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?;
    Protocol::from_alpn(&data.protocol?)
}

/// An admitted connection.
struct Admitted {
    session: Session,
    /// What the relay task attached.
    attached: Attached,
    /// The frames for its unidirectional stream (its writer task's).
    frames: mpsc::Receiver<Bytes>,
    /// The relay task's end of `frames`, to see how many wait.
    backlog: mpsc::WeakSender<Bytes>,
    /// The relay task's inbox.
    inbox: mpsc::Sender<QuicEvent>,
}

/// Why a connection was not admitted, and the stream to tell it on if it opened one.
struct Refusal {
    outcome: &'static str,
    status: Option<(Session, SendStream)>,
}

impl Refusal {
    fn early(outcome: &'static str) -> Self {
        Self {
            outcome,
            status: None,
        }
    }

    /// Writes the status line (if the peer opened a stream for it) and closes the
    /// connection with the outcome's code once the peer has closed it or after
    /// [`LINGER`].
    async fn tell(self, conn: &quinn::Connection) {
        let code = ErrorCode::for_outcome(self.outcome);
        let Some((session, mut status)) = self.status else {
            if self.outcome == "wrong_path" {
                // The 404 is on its way: let the peer read it and close first.
                let _ = tokio::time::timeout(LINGER, conn.closed()).await;
            }
            return conn.close(code.varint(), self.outcome.as_bytes());
        };
        let line = refusal_line(self.outcome);
        if status.write_all(line.as_bytes()).await.is_ok() && status.finish().is_ok() {
            // Done when the peer, having read the line, closes. Closing first would race
            // its read: a browser discards stream data it has received but not yet handed
            // to the page once the session closes under it ("Connection lost").
            let _ = tokio::time::timeout(LINGER, conn.closed()).await;
        }
        session.close(code.code(), self.outcome.as_bytes());
    }
}

/// Opens the session `protocol` calls for on `conn`, reads the token line from its first
/// bidirectional stream and attaches the connection to the token's session; answers the
/// status line.
async fn admit(
    conn: quinn::Connection,
    protocol: Protocol,
    router: &Router,
) -> Result<Admitted, Refusal> {
    let session = match protocol {
        Protocol::Roq => Session::raw(conn),
        Protocol::WebTransport => webtransport::open(conn).await.map_err(Refusal::early)?,
    };
    let (mut send, mut recv) = session
        .accept_bi()
        .await
        .map_err(|_| Refusal::early("closed_before_token"))?;
    let attached = attach(&session, protocol, &mut recv, router).await;
    tokio::spawn(drain(recv));
    match attached {
        Ok((attached, frames, backlog, inbox)) => {
            let status = format!("OK {}\n", format_session_id(attached.session));
            send.write_all(status.as_bytes())
                .await
                .map_err(|_| Refusal::early("closed_before_token"))?;
            // The status line is all the stream carries; a peer gone by now shows in the link.
            let _ = send.finish();
            Ok(Admitted {
                session,
                attached,
                frames,
                backlog,
                inbox,
            })
        }
        Err(outcome) => Err(Refusal {
            outcome,
            status: Some((session, send)),
        }),
    }
}

/// What [`attach`] answers: the session, its stream's frames and their sender, the inbox.
type Attachment = (
    Attached,
    mpsc::Receiver<Bytes>,
    mpsc::WeakSender<Bytes>,
    mpsc::Sender<QuicEvent>,
);

/// Reads the token line and has the relay task it names attach the session.
async fn attach(
    session: &Session,
    protocol: Protocol,
    recv: &mut RecvStream,
    router: &Router,
) -> Result<Attachment, &'static str> {
    let line = read_line(recv).await?;
    let token = Token::parse(line.trim_end()).ok_or("token_invalid")?;
    let inbox = router
        .get(usize::from(token.shard()))
        .ok_or("token_invalid")?;
    let (stream, frames) = mpsc::channel(STREAM_DEPTH);
    let backlog = stream.downgrade();
    let (reply, answer) = oneshot::channel();
    let attach = QuicEvent::Attach {
        token,
        protocol,
        conn: Box::new(session.clone()),
        stream,
        reply,
    };
    inbox.send(attach).await.map_err(|_| "relay_stopped")?;
    let attached = answer.await.map_err(|_| "relay_stopped")??;
    Ok((attached, frames, backlog, inbox.clone()))
}

/// Reads what follows the token line up to the peer's end of the stream, so that the
/// relay never stops a stream the peer is still closing (a browser's `close()` of its
/// writer fails on the STOP_SENDING that dropping the stream early would send).
async fn drain(mut recv: RecvStream) {
    let _ = tokio::time::timeout(LINGER, recv.read_to_end(MAX_TOKEN_LINE)).await;
}

/// Reads one line (up to [`MAX_TOKEN_LINE`] bytes, ended by `\n` or the stream's end).
async fn read_line(recv: &mut RecvStream) -> Result<String, &'static str> {
    let mut line = Vec::with_capacity(MAX_TOKEN_LINE);
    let mut buf = [0u8; MAX_TOKEN_LINE];
    loop {
        let n = match recv.read(&mut buf).await {
            Ok(Some(n)) => n,
            Ok(None) => break,
            Err(_) => return Err("closed_before_token"),
        };
        line.extend_from_slice(buf.get(..n).unwrap_or_default());
        if line.len() > MAX_TOKEN_LINE {
            return Err("token_invalid");
        }
        if line.contains(&b'\n') {
            break;
        }
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    line.truncate(end);
    String::from_utf8(line).map_err(|_| "token_invalid")
}

/// Writes the frames the relay task sends a session on one unidirectional stream: the
/// flow identifier, then each (length, packet) frame as it comes.
async fn write_stream(session: Session, flow_id: u64, mut frames: mpsc::Receiver<Bytes>) {
    let Some(first) = frames.recv().await else {
        return;
    };
    let Ok(mut stream) = session.open_uni().await else {
        return;
    };
    let mut head = Vec::with_capacity(8);
    roq::write_varint(flow_id, &mut head);
    if stream.write_all(&head).await.is_err() || stream.write_chunk(first).await.is_err() {
        return;
    }
    while let Some(frame) = frames.recv().await {
        if stream.write_chunk(frame).await.is_err() {
            return;
        }
    }
}

/// An attached connection's inbound side.
struct Link {
    session: Session,
    protocol: Protocol,
    attached: Attached,
    /// The relay task's sender of the session's stream frames.
    backlog: mpsc::WeakSender<Bytes>,
    inbox: mpsc::Sender<QuicEvent>,
    metrics: Metrics,
}

impl Link {
    /// Passes datagrams and stream packets on until the connection closes, and the path's
    /// changes; then tells the relay task the session is gone.
    async fn run(self) {
        let mut poll = tokio::time::interval(PATH_POLL);
        let mut path = None;
        loop {
            tokio::select! {
                got = self.session.read_datagram() => match got {
                    Ok(d) => self.datagram(d),
                    // An HTTP/3 datagram naming another (or no) session: not fatal.
                    Err(SessionError::WebTransportError(WebTransportError::UnknownSession)) => {
                        self.metrics.drop("webtransport_unknown_session");
                    }
                    Err(_) => break,
                },
                got = self.session.accept_uni() => match got {
                    Ok(recv) => {
                        tokio::spawn(read_stream(recv, self.packets()));
                    }
                    Err(_) => break,
                },
                _ = poll.tick() => self.path(&mut path).await,
            }
        }
        let closed = QuicEvent::Closed {
            session: self.attached.session,
            conn: self.session.stable_id(),
        };
        let _ = self.inbox.send(closed).await;
    }

    /// One DATAGRAM frame: flow identifier and packet.
    fn datagram(&self, d: Bytes) {
        let Some((flow, packet)) = roq::split_datagram(&d) else {
            return self.metrics.drop("roq_malformed");
        };
        if flow != self.attached.flow_id {
            return self.metrics.drop("roq_unknown_flow");
        }
        if packet.is_empty() {
            return self.metrics.drop("roq_malformed");
        }
        let at = d.len() - packet.len();
        self.packets().pass(d.slice(at..));
    }

    /// Reports the datagram size and send budget when either changed.
    async fn path(&self, last: &mut Option<(Option<usize>, Option<u64>)>) {
        let conn: &quinn::Connection = &self.session;
        let max_datagram = self.protocol.max_datagram(conn);
        let backlogged = self
            .backlog
            .upgrade()
            .is_some_and(|s| s.capacity() < STREAM_DEPTH / 2);
        let send_bps = if backlogged {
            Some(BACKLOGGED_BPS)
        } else {
            (conn.datagram_send_buffer_space() < DATAGRAM_BUFFER / 2).then(|| {
                let cwnd = conn.stats().path.cwnd;
                let rtt = conn.rtt().as_secs_f64().max(1e-4);
                (cwnd as f64 * 8.0 / rtt) as u64
            })
        };
        if *last == Some((max_datagram, send_bps)) {
            return;
        }
        *last = Some((max_datagram, send_bps));
        let event = QuicEvent::Path {
            session: self.attached.session,
            conn: self.session.stable_id(),
            max_datagram,
            send_bps,
        };
        let _ = self.inbox.send(event).await;
    }

    fn packets(&self) -> Packets {
        Packets {
            inbox: self.inbox.clone(),
            attached: self.attached,
            conn: self.session.stable_id(),
            metrics: self.metrics.clone(),
        }
    }
}

/// Where a connection's packets go.
struct Packets {
    inbox: mpsc::Sender<QuicEvent>,
    attached: Attached,
    conn: usize,
    metrics: Metrics,
}

impl Packets {
    /// Hands one packet to the relay task, or drops it (counted) when its inbox is full.
    fn pass(&self, data: Bytes) {
        if data.len() > self.attached.max_packet {
            return self.metrics.drop("oversized");
        }
        let event = QuicEvent::Packet {
            session: self.attached.session,
            conn: self.conn,
            data,
        };
        if self.inbox.try_send(event).is_err() {
            self.metrics.drop("quic_inbound_full");
        }
    }
}

/// Reads one peer-opened unidirectional stream: flow identifier, then frames. A stream
/// for another flow, or with an empty or oversized frame, is stopped and counted.
async fn read_stream(mut recv: RecvStream, packets: Packets) {
    let max = packets.attached.max_packet;
    let mut reader = StreamReader::new(max);
    let mut buf = BytesMut::with_capacity(max * 2);
    let mut ranges = Vec::new();
    loop {
        let chunk = match recv.read_chunk(max, true).await {
            Ok(Some(chunk)) => chunk.bytes,
            Ok(None) | Err(_) => return,
        };
        buf.extend_from_slice(&chunk);
        let refused = loop {
            match reader.next(&buf) {
                Ok(Some(range)) => ranges.push(range),
                Ok(None) => break None,
                Err(FrameError::Oversized) => {
                    break Some(("roq_oversized_frame", ErrorCode::PacketError));
                }
                Err(FrameError::Empty) => break Some(("roq_malformed", ErrorCode::PacketError)),
            }
        };
        let refused = refused.or_else(|| {
            reader
                .flow()
                .is_some_and(|f| f != packets.attached.flow_id)
                .then_some(("roq_unknown_flow", ErrorCode::UnknownFlowId))
        });
        if let Some((reason, code)) = refused {
            packets.metrics.drop(reason);
            let _ = recv.stop(code.code());
            return;
        }
        let done = buf.split_to(reader.consumed()).freeze();
        for range in ranges.drain(..) {
            packets.pass(done.slice(range));
        }
    }
}
