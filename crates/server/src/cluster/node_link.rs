//! One QUIC link to another node of the cluster: its set-up (both sides prove they hold
//! the cluster's secret) and the loop that carries the link protocol's frames between
//! this node's shards and the peer's, in the wire format of [`super::wire`].
//!
//! Authentication needs no certificate authority: each side sends a [`Hello`] whose
//! proof is an HMAC, under a key derived from the cluster's token secret and key prefix,
//! of keying material exported from this very TLS session (RFC 5705) and of the side's
//! role. A node without the secret cannot make a proof, and a proof taken from one
//! connection is worthless on another (a relay in the middle holds two TLS sessions with
//! different material), so the certificates themselves need not be checked.

use super::wire::{self, Control, DATAGRAM_HEADER, Datagram, Hello, PROOF_LEN};
use crate::transport::link::{Frame, LinkNet, Outbound, Packet, Peer};
use bytes::{BufMut, BytesMut};
use prometheus::IntCounterVec;
use ring::hmac;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often an idle link sends a keep-alive.
pub const KEEP_ALIVE: Duration = Duration::from_millis(100);

/// How long a link may hear nothing before it is lost: a dead peer is noticed within
/// this, well under a second.
pub const IDLE_TIMEOUT: Duration = Duration::from_millis(600);

/// How long the Hellos may take.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// Frames waiting for a link's QUIC connection before the shards' packets are dropped.
pub const OUTBOUND_DEPTH: usize = 4096;

/// The label of the keying material a proof covers.
const EXPORTER_LABEL: &[u8] = b"EXPORTER-gsrelay-link";

/// Application error codes a link is closed with.
pub mod code {
    /// The peer's proof did not verify.
    pub const AUTH: u32 = 1;
    /// The peer broke the link protocol.
    pub const PROTOCOL: u32 = 2;
    /// The peer left the directory.
    pub const EXPIRED: u32 = 3;
    /// A newer link to the same node took its place, or one already existed.
    pub const REPLACED: u32 = 4;
    /// This node is stopping.
    pub const SHUTDOWN: u32 = 5;
}

/// Which side of a link a node is: the proof covers it, so a proof cannot be reflected.
#[derive(Debug, Clone, Copy)]
pub enum Role {
    /// The side that connected.
    Dialer,
    /// The side that accepted.
    Acceptor,
}

/// The cluster's link key.
#[derive(Debug)]
pub struct LinkKey(hmac::Key);

impl LinkKey {
    /// The key of a cluster with token secret `secret` and key prefix `prefix`: clusters
    /// sharing a secret but not a prefix do not link either.
    pub fn new(secret: &[u8], prefix: &str) -> Self {
        let root = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let mut label = b"gsrelay cluster link key\0".to_vec();
        label.extend_from_slice(prefix.as_bytes());
        let derived = hmac::sign(&root, &label);
        Self(hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()))
    }

    fn message(role: Role, material: &[u8]) -> Vec<u8> {
        let mut m = vec![match role {
            Role::Dialer => b'd',
            Role::Acceptor => b'a',
        }];
        m.extend_from_slice(material);
        m
    }

    /// The proof `role` sends over a connection with keying material `material`.
    pub fn proof(&self, role: Role, material: &[u8]) -> [u8; PROOF_LEN] {
        let tag = hmac::sign(&self.0, &Self::message(role, material));
        let mut proof = [0; PROOF_LEN];
        proof.copy_from_slice(tag.as_ref());
        proof
    }

    /// Whether `proof` is `role`'s over `material` (in constant time).
    pub fn verify(&self, role: Role, material: &[u8], proof: &[u8]) -> bool {
        hmac::verify(&self.0, &Self::message(role, material), proof).is_ok()
    }
}

/// Why a link did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The connection failed or timed out.
    #[error("connection: {0}")]
    Connection(String),
    /// The peer's proof did not verify: another cluster, or a wrong secret.
    #[error("the peer is not of this cluster (its proof did not verify)")]
    Auth,
    /// The peer broke the protocol.
    #[error("protocol: {0}")]
    Protocol(&'static str),
}

impl OpenError {
    /// The metrics' reason for a refused link.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Connection(_) => None,
            Self::Auth => Some("auth"),
            Self::Protocol(_) => Some("protocol"),
        }
    }
}

/// A connection's failure as an [`OpenError`].
fn connection(e: impl std::fmt::Display) -> OpenError {
    OpenError::Connection(e.to_string())
}

/// What this node says in its Hello, but the proof.
#[derive(Debug, Clone)]
pub struct Me {
    /// Its name.
    pub node: String,
    /// Its shards' SSRCs.
    pub ssrcs: Vec<u32>,
}

/// An authenticated link, before its frames flow.
#[derive(Debug)]
pub struct Opened {
    /// The connection.
    pub conn: quinn::Connection,
    /// The stream control frames go out on.
    pub send: quinn::SendStream,
    /// The stream the peer's control frames come in on.
    pub recv: quinn::RecvStream,
    /// What the peer said of itself.
    pub peer: Hello,
}

/// Exchanges Hellos on a new connection's stream: the dialer speaks first, and the
/// acceptor answers only a dialer whose proof verified.
async fn hello(
    conn: quinn::Connection,
    (mut send, mut recv): (quinn::SendStream, quinn::RecvStream),
    role: Role,
    me: &Me,
    key: &LinkKey,
) -> Result<Opened, OpenError> {
    let mut material = [0u8; 32];
    conn.export_keying_material(&mut material, EXPORTER_LABEL, b"")
        .map_err(|_| OpenError::Protocol("no keying material"))?;
    let own = Control::Hello(Hello {
        node: me.node.clone(),
        ssrcs: me.ssrcs.clone(),
        proof: key.proof(role, &material),
    });
    let mut out = Vec::new();
    wire::write_control(&own, &mut out).map_err(|e| OpenError::Protocol(e.reason()))?;
    let (peer_role, speaks_first) = match role {
        Role::Dialer => (Role::Acceptor, true),
        Role::Acceptor => (Role::Dialer, false),
    };
    if speaks_first {
        write(&mut send, &out).await?;
    }
    let peer = match read_frame(&mut recv).await {
        Ok(Control::Hello(h)) => h,
        Ok(_) => return Err(OpenError::Protocol("the first frame is not a Hello")),
        Err(ReadError::Wire(e)) => return Err(OpenError::Protocol(e.reason())),
        Err(ReadError::Stream(e)) => return Err(OpenError::Connection(e)),
    };
    if !key.verify(peer_role, &material, &peer.proof) {
        conn.close(code::AUTH.into(), b"proof");
        return Err(OpenError::Auth);
    }
    if !speaks_first {
        write(&mut send, &out).await?;
    }
    Ok(Opened {
        conn,
        send,
        recv,
        peer,
    })
}

async fn write(send: &mut quinn::SendStream, bytes: &[u8]) -> Result<(), OpenError> {
    send.write_all(bytes).await.map_err(connection)
}

/// Connects to the node at `addr` and authenticates both ways.
pub async fn dial(
    endpoint: &quinn::Endpoint,
    config: quinn::ClientConfig,
    addr: std::net::SocketAddr,
    me: &Me,
    key: &LinkKey,
) -> Result<Opened, OpenError> {
    let open = async {
        let connecting = endpoint
            .connect_with(config, addr, "gsrelay-link")
            .map_err(connection)?;
        let conn = connecting.await.map_err(connection)?;
        let streams = conn.open_bi().await.map_err(connection)?;
        hello(conn, streams, Role::Dialer, me, key).await
    };
    in_time(open).await
}

/// Accepts a node's connection and authenticates both ways.
pub async fn accept(
    incoming: quinn::Incoming,
    me: &Me,
    key: &LinkKey,
) -> Result<Opened, OpenError> {
    let open = async {
        let conn = incoming.await.map_err(connection)?;
        let streams = conn.accept_bi().await.map_err(connection)?;
        hello(conn, streams, Role::Acceptor, me, key).await
    };
    in_time(open).await
}

/// `open`, or a timeout past [`HELLO_TIMEOUT`].
async fn in_time(
    open: impl std::future::Future<Output = Result<Opened, OpenError>>,
) -> Result<Opened, OpenError> {
    tokio::time::timeout(HELLO_TIMEOUT, open)
        .await
        .map_err(|_| connection("timed out"))?
}

/// Why a control frame could not be read.
enum ReadError {
    Stream(String),
    Wire(wire::WireError),
}

/// Reads one control frame.
async fn read_frame(recv: &mut quinn::RecvStream) -> Result<Control, ReadError> {
    let mut prefix = [0u8; 2];
    recv.read_exact(&mut prefix)
        .await
        .map_err(|e| ReadError::Stream(e.to_string()))?;
    let len = wire::control_len(prefix).map_err(ReadError::Wire)?;
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body)
        .await
        .map_err(|e| ReadError::Stream(e.to_string()))?;
    wire::read_control(&body).map_err(ReadError::Wire)
}

/// How a running link ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The peer went silent past [`IDLE_TIMEOUT`].
    Silent,
    /// The peer closed it, or its connection failed otherwise.
    Closed,
    /// This node closed it (the peer expired, was replaced, or this node stops).
    Local,
    /// The peer broke the protocol; this node closed it.
    Protocol(&'static str),
}

impl Ended {
    fn of(e: &quinn::ConnectionError) -> Self {
        match e {
            quinn::ConnectionError::TimedOut => Self::Silent,
            quinn::ConnectionError::LocallyClosed => Self::Local,
            _ => Self::Closed,
        }
    }
}

/// What a running link needs: its number, the shards' inboxes, and the drop counter.
pub struct Running {
    /// The number this node gave the link (its replicas' `Peer::node`).
    pub id: u16,
    /// This node's shards.
    pub net: Arc<LinkNet>,
    /// `gsrelay_dropped_packets_total`, by reason.
    pub dropped: IntCounterVec,
}

/// Carries frames both ways until the link ends: the shards' frames out (packets as
/// datagrams, the rest on the stream), the peer's frames in to the shard each names.
pub async fn run(opened: Opened, running: Running, outbound: mpsc::Receiver<Outbound>) -> Ended {
    let Opened {
        conn, send, recv, ..
    } = opened;
    let ended = tokio::select! {
        e = send_loop(&conn, send, outbound, &running) => e,
        e = control_loop(&conn, recv, &running) => e,
        e = datagram_loop(&conn, &running) => e,
    };
    if let Ended::Protocol(why) = ended {
        conn.close(code::PROTOCOL.into(), why.as_bytes());
    }
    ended
}

/// Sends the shards' frames to the peer.
async fn send_loop(
    conn: &quinn::Connection,
    mut send: quinn::SendStream,
    mut outbound: mpsc::Receiver<Outbound>,
    running: &Running,
) -> Ended {
    let mut control = Vec::new();
    while let Some(Outbound { to_shard, frame }) = outbound.recv().await {
        let frame = match frame {
            Frame::Packet(p) => {
                if let Err(e) = send_packet(conn, to_shard, &p) {
                    match e {
                        quinn::SendDatagramError::ConnectionLost(e) => return Ended::of(&e),
                        _ => running.dropped.with_label_values(&["link_oversized"]).inc(),
                    }
                }
                continue;
            }
            Frame::Open {
                from,
                session,
                room,
            } => Control::Open {
                from_shard: from.shard,
                to_shard,
                session,
                room: room.to_string(),
            },
            Frame::Close { from, session } => Control::Close {
                from_shard: from.shard,
                to_shard,
                session,
            },
            Frame::Refuse { to } => Control::Refuse {
                to_shard,
                session: to,
            },
            // Not a frame for a peer: the cluster tells this node's own shards.
            Frame::NodeLost(_) => continue,
        };
        control.clear();
        if wire::write_control(&frame, &mut control).is_err() {
            continue;
        }
        if send.write_all(&control).await.is_err() {
            return conn.close_reason().map_or(Ended::Closed, |e| Ended::of(&e));
        }
    }
    Ended::Local
}

/// Sends one packet as a datagram.
fn send_packet(
    conn: &quinn::Connection,
    to_shard: u16,
    p: &Packet,
) -> Result<(), quinn::SendDatagramError> {
    let header = Datagram {
        from_shard: p.from.shard,
        to_shard,
        session: p.session,
        class: p.class,
    };
    let mut head = [0u8; DATAGRAM_HEADER];
    wire::write_datagram_header(&header, &mut head);
    let bytes = p.bytes();
    let mut buf = BytesMut::with_capacity(DATAGRAM_HEADER + bytes.len());
    buf.put_slice(&head);
    buf.put_slice(bytes);
    conn.send_datagram(buf.freeze())
}

/// Hands the peer's control frames to the shards they name.
async fn control_loop(
    conn: &quinn::Connection,
    mut recv: quinn::RecvStream,
    running: &Running,
) -> Ended {
    loop {
        let frame = match read_frame(&mut recv).await {
            Ok(f) => f,
            Err(ReadError::Wire(e)) => {
                running.dropped.with_label_values(&[e.reason()]).inc();
                return Ended::Protocol(e.reason());
            }
            Err(ReadError::Stream(_)) => {
                return conn.close_reason().map_or(Ended::Closed, |e| Ended::of(&e));
            }
        };
        let peer = |shard| Peer {
            node: running.id,
            shard,
        };
        let (to, frame) = match frame {
            Control::Hello(_) => return Ended::Protocol("a second Hello"),
            Control::Open {
                from_shard,
                to_shard,
                session,
                room,
            } => (
                to_shard,
                Frame::Open {
                    from: peer(from_shard),
                    session,
                    room: Arc::from(room),
                },
            ),
            Control::Close {
                from_shard,
                to_shard,
                session,
            } => (
                to_shard,
                Frame::Close {
                    from: peer(from_shard),
                    session,
                },
            ),
            Control::Refuse { to_shard, session } => (to_shard, Frame::Refuse { to: session }),
        };
        // Control frames are few and must not be lost: wait for room in the inbox. A
        // shard that does not exist or has stopped costs only its own frames.
        let delivered = match running.net.inbox(usize::from(to)) {
            Some(inbox) => inbox.send(frame).await.is_ok(),
            None => false,
        };
        if !delivered {
            running.dropped.with_label_values(&["link_no_shard"]).inc();
        }
    }
}

/// Hands the peer's datagrams to the shards they name; garbage is dropped and counted.
async fn datagram_loop(conn: &quinn::Connection, running: &Running) -> Ended {
    let full = running.dropped.with_label_values(&["link_full"]);
    loop {
        let bytes = match conn.read_datagram().await {
            Ok(b) => b,
            Err(e) => return Ended::of(&e),
        };
        let (d, packet) = match wire::read_datagram(&bytes) {
            Ok(parsed) => parsed,
            Err(e) => {
                running.dropped.with_label_values(&[e.reason()]).inc();
                continue;
            }
        };
        let from = Peer {
            node: running.id,
            shard: d.from_shard,
        };
        let Some(packet) = Packet::new(from, d.session, d.class, packet) else {
            running.dropped.with_label_values(&["link_oversized"]).inc();
            continue;
        };
        let Some(inbox) = running.net.inbox(usize::from(d.to_shard)) else {
            running.dropped.with_label_values(&["link_no_shard"]).inc();
            continue;
        };
        if inbox.try_send(Frame::Packet(packet)).is_err() {
            full.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_verifies_only_for_its_key_role_and_material() {
        let key = LinkKey::new(b"a secret of the cluster", "gsrelay");
        let material = [3u8; 32];
        let proof = key.proof(Role::Dialer, &material);
        assert!(key.verify(Role::Dialer, &material, &proof));
        assert!(!key.verify(Role::Acceptor, &material, &proof), "reflected");
        assert!(!key.verify(Role::Dialer, &[4u8; 32], &proof), "replayed");
        let other = LinkKey::new(b"another cluster's secret", "gsrelay");
        assert!(!other.verify(Role::Dialer, &material, &proof));
        let other_prefix = LinkKey::new(b"a secret of the cluster", "other");
        assert!(!other_prefix.verify(Role::Dialer, &material, &proof));
    }
}
