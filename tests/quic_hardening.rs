//! Bad input on the QUIC transport: garbage datagrams, unknown flow identifiers, a
//! connection that never presents its token, wrong and reused tokens (told why on the
//! token's stream), oversized stream frames, a flood of connections without tokens. Each
//! is refused or dropped, counted by reason, and leaves a healthy session in the same
//! room untouched.

mod support;

use gsrelay::RelayConfig;
use gsrelay::client::{Client, quic_client_config};
use gsrelay::internal::command::{JoinAnswer, TransportRequest};
use gsrelay::internal::quic::{ErrorCode, QuicConfig};
use gsrelay::internal::roq;
use gsrelay::wire::{Dialect, Head1, Object};
use quinn::{ConnectionError, Endpoint, VarInt};
use std::time::Duration;
use support::quic_relay::{Harness, WAIT, assert_attached, assert_flows, eventually, loopback};

const TOKEN_TIMEOUT: Duration = Duration::from_millis(500);
const MAX_PENDING: usize = 4;

async fn relay() -> Harness {
    let quic = QuicConfig {
        token_timeout: TOKEN_TIMEOUT,
        max_pending: MAX_PENDING,
        ..QuicConfig::new(loopback())
    };
    Harness::start(RelayConfig::default(), quic).await
}

impl Harness {
    async fn quic_answer(&self, room: &str, publish: bool) -> JoinAnswer {
        self.answer(room, publish, TransportRequest::Quic).await
    }

    async fn quic_client(&self, room: &str, publish: bool) -> Client {
        self.client(room, publish, TransportRequest::Quic).await
    }

    fn outcome(&self, outcome: &str) -> u64 {
        self.metrics
            .quic_connections
            .with_label_values(&[outcome])
            .get()
    }

    /// A raw connection to the relay (certificate pinned), with its endpoint.
    async fn connect(&self) -> (Endpoint, quinn::Connection) {
        let info = &self.quic.info;
        let ep = Endpoint::client(loopback()).unwrap();
        let conn = ep
            .connect_with(
                quic_client_config(&info.cert_sha256).unwrap(),
                info.local_addr,
                "localhost",
            )
            .unwrap()
            .await
            .unwrap();
        (ep, conn)
    }
}

/// Writes `token` on a new bidirectional stream; the status line, if one comes.
async fn present(conn: &quinn::Connection, token: &str) -> Option<String> {
    let (mut send, mut recv) = conn.open_bi().await.ok()?;
    send.write_all(format!("{token}\n").as_bytes()).await.ok()?;
    send.finish().ok()?;
    let line = recv.read_to_end(256).await.ok()?;
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// The application error code the relay closed `conn` with.
async fn closed_with(conn: &quinn::Connection) -> VarInt {
    match tokio::time::timeout(WAIT, conn.closed()).await.unwrap() {
        ConnectionError::ApplicationClosed(close) => close.error_code,
        other => panic!("expected an application close, got {other}"),
    }
}

/// A publisher and subscriber in `room` with a flow between them.
async fn healthy_pair(h: &Harness, room: &str) -> (Client, Client) {
    let publisher = h.quic_client(room, true).await;
    let subscriber = h.quic_client(room, false).await;
    (publisher, subscriber)
}

#[tokio::test]
async fn garbage_datagrams_and_unknown_flows_are_dropped_and_counted() {
    let h = relay().await;
    let (mut publisher, mut subscriber) = healthy_pair(&h, "room").await;
    let attacker = h.quic_answer("room", true).await;
    let q = attacker.quic().cloned().unwrap();
    let (_ep, conn) = h.connect().await;
    assert_attached(present(&conn, &q.session_token).await);

    // A varint announcing 8 bytes with 2 present; the right flow with nothing after it;
    // another flow; the right flow with bytes that are not RTP.
    conn.send_datagram(vec![0xc0, 1].into()).unwrap();
    let mut empty = Vec::new();
    roq::write_varint(q.flow_id, &mut empty);
    conn.send_datagram(empty.clone().into()).unwrap();
    let mut other = Vec::new();
    roq::write_varint(q.flow_id + 1, &mut other);
    other.extend_from_slice(&[0x80; 20]);
    conn.send_datagram(other.into()).unwrap();
    let mut not_rtp = empty;
    not_rtp.extend_from_slice(&[0x00; 20]);
    conn.send_datagram(not_rtp.into()).unwrap();

    eventually("malformed datagrams counted", || {
        h.dropped("roq_malformed") >= 2
            && h.dropped("roq_unknown_flow") >= 1
            && h.dropped("not_rtp") >= 1
    })
    .await;
    assert_flows(&mut publisher, &mut subscriber, 1.0).await;
    assert!(conn.close_reason().is_none(), "dropping is not closing");
}

#[tokio::test]
async fn wrong_reused_and_missing_tokens_close_the_connection_with_their_code() {
    let h = relay().await;
    let (mut publisher, mut subscriber) = healthy_pair(&h, "room").await;
    let invalid =
        Some("token_invalid: the session token is unknown, already used, or for another relay\n");

    // Each refusal is told on the token's stream, then the connection closes with its code.
    let (_ep, wrong) = h.connect().await;
    assert_eq!(present(&wrong, &"0".repeat(32)).await.as_deref(), invalid);
    assert_eq!(closed_with(&wrong).await, ErrorCode::TokenInvalid.varint());
    let (_ep2, garbage) = h.connect().await;
    assert_eq!(present(&garbage, "not a token").await.as_deref(), invalid);
    assert_eq!(
        closed_with(&garbage).await,
        ErrorCode::TokenInvalid.varint()
    );

    let q = h.quic_answer("room", false).await.quic().cloned().unwrap();
    let (_ep3, first) = h.connect().await;
    assert_attached(present(&first, &q.session_token).await);
    let (_ep4, again) = h.connect().await;
    assert_eq!(present(&again, &q.session_token).await.as_deref(), invalid);
    assert_eq!(closed_with(&again).await, ErrorCode::TokenInvalid.varint());
    assert!(
        first.close_reason().is_none(),
        "the first use stays attached"
    );

    let (_ep5, silent) = h.connect().await;
    assert_eq!(closed_with(&silent).await, ErrorCode::TokenTimeout.varint());

    assert_eq!(h.outcome("token_invalid"), 3);
    assert_eq!(h.outcome("token_timeout"), 1);
    assert_flows(&mut publisher, &mut subscriber, 2.0).await;
}

#[tokio::test]
async fn an_oversized_stream_frame_stops_the_stream_and_is_counted() {
    let h = relay().await;
    let (mut publisher, mut subscriber) = healthy_pair(&h, "room").await;
    let q = h.quic_answer("room", true).await.quic().cloned().unwrap();
    let (_ep, conn) = h.connect().await;
    assert_attached(present(&conn, &q.session_token).await);

    let mut stream = conn.open_uni().await.unwrap();
    let mut head = Vec::new();
    roq::write_varint(q.flow_id, &mut head);
    roq::write_varint(1 << 20, &mut head);
    stream.write_all(&head).await.unwrap();
    stream.write_all(&[0x80; 4096]).await.unwrap();
    let stopped = tokio::time::timeout(WAIT, stream.stopped())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stopped, Some(ErrorCode::PacketError.varint()));
    assert_eq!(h.dropped("roq_oversized_frame"), 1);
    assert!(conn.close_reason().is_none(), "only the stream is refused");
    assert_flows(&mut publisher, &mut subscriber, 3.0).await;
}

#[tokio::test]
async fn a_flood_of_connections_without_tokens_is_bounded_and_passes() {
    let h = relay().await;
    let (mut publisher, mut subscriber) = healthy_pair(&h, "room").await;
    let info = h.quic.info.clone();
    let ep = Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut flood = Vec::new();
    for _ in 0..MAX_PENDING * 3 {
        let connecting = ep
            .connect_with(
                quic_client_config(&info.cert_sha256).unwrap(),
                info.local_addr,
                "localhost",
            )
            .unwrap();
        flood.push(tokio::spawn(connecting));
    }
    let mut refused = 0;
    // Held open: a closed connection would end its wait for a token early.
    let mut open = Vec::new();
    for c in flood {
        match c.await.unwrap() {
            Ok(conn) => open.push(conn),
            Err(_) => refused += 1,
        }
    }
    assert!(
        refused >= MAX_PENDING,
        "beyond the pending limit connections are refused"
    );
    assert_eq!(h.outcome("refused_pending"), refused as u64);
    assert_flows(&mut publisher, &mut subscriber, 4.0).await;
    // Once the flood's token time is up, a real client gets in again.
    eventually("the flood timed out", || {
        h.outcome("token_timeout") == open.len() as u64
    })
    .await;
    let mut late = h.quic_client("room", false).await;
    assert_flows(&mut publisher, &mut late, 5.0).await;
}

#[tokio::test]
async fn a_peer_without_datagram_support_gets_everything_on_a_stream() {
    let h = relay().await;
    let mut publisher = h.quic_client("room", true).await;
    let q = h.quic_answer("room", false).await.quic().cloned().unwrap();
    let info = h.quic.info.clone();
    let mut transport = gsrelay::internal::quic::transport_config();
    transport.datagram_receive_buffer_size(None);
    let mut cfg = quic_client_config(&info.cert_sha256).unwrap();
    cfg.transport_config(std::sync::Arc::new(transport));
    let ep = Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let conn = ep
        .connect_with(cfg, info.local_addr, "localhost")
        .unwrap()
        .await
        .unwrap();
    assert_attached(present(&conn, &q.session_token).await);

    let objects: Vec<Object> = (0..3)
        .map(|id| {
            Object::Head1(Head1 {
                id,
                ..Head1::default()
            })
        })
        .collect();
    for o in &objects {
        publisher
            .send_objects(std::slice::from_ref(o))
            .await
            .unwrap();
    }
    let mut stream = tokio::time::timeout(WAIT, conn.accept_uni())
        .await
        .unwrap()
        .unwrap();
    let mut reader = roq::StreamReader::new(65_535);
    let mut buf = Vec::new();
    let mut got = Vec::new();
    while got.len() < objects.len() {
        let chunk = tokio::time::timeout(WAIT, stream.read_chunk(65_535, true))
            .await
            .unwrap()
            .unwrap()
            .expect("the stream stays open");
        buf.extend_from_slice(&chunk.bytes);
        while let Some(range) = reader.next(&buf).unwrap() {
            let packet = gsrelay::rtp::RtpPacket::parse(&buf[range]).unwrap();
            assert_eq!(packet.ssrc(), publisher.ssrc());
            got.extend(gsrelay::wire::decode(packet.payload(), Dialect::default()).unwrap());
        }
        let n = reader.consumed();
        buf.drain(..n);
    }
    assert_eq!(reader.flow(), Some(q.flow_id));
    assert_eq!(got, objects);
}
