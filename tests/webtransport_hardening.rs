//! Bad input on WebTransport, from a Rust WebTransport client (`web-transport-quinn`, as
//! a browser speaks it): sessions without a token, with a wrong, reused or RoQ token, a
//! CONNECT to another path, oversized datagrams, datagrams of another flow or session, a
//! session that never reads. Each is refused with a status line or dropped, counted by
//! reason, and costs a healthy session in the same room nothing. And the generated
//! certificate's rotation.

mod support;

use gsrelay::RelayConfig;
use gsrelay::client::{Client, quic_client_config_for};
use gsrelay::internal::command::{QuicAnswer, TransportRequest};
use gsrelay::internal::quic::{self, Protocol, QuicConfig};
use gsrelay::internal::{roq, webtransport};
use gsrelay::wire::{Dialect, Object};
use quinn::Endpoint;
use std::sync::Arc;
use std::time::Duration;
use support::head;
use support::quic_relay::{
    Harness, WAIT, assert_attached, assert_flows, eventually, loopback, next_update,
};
use web_transport_quinn::Session;

const TOKEN_TIMEOUT: Duration = Duration::from_millis(500);
/// Largest packet the relay takes from a client here: datagrams fit larger ones.
const MAX_PACKET: usize = 400;
const INVALID: &str =
    "token_invalid: the session token is unknown, already used, or for another relay\n";

async fn relay_with(cert_lifetime: Option<Duration>) -> Harness {
    let cfg = RelayConfig {
        max_packet_bytes: MAX_PACKET,
        ..RelayConfig::default()
    };
    let mut quic = QuicConfig {
        token_timeout: TOKEN_TIMEOUT,
        ..QuicConfig::new(loopback())
    };
    if let Some(lifetime) = cert_lifetime {
        quic.cert_lifetime = lifetime;
    }
    Harness::start(cfg, quic).await
}

async fn relay() -> Harness {
    relay_with(None).await
}

impl Harness {
    async fn wt_answer(&self, room: &str, publish: bool) -> QuicAnswer {
        let answer = self
            .answer(room, publish, TransportRequest::WebTransport)
            .await;
        answer.quic().cloned().unwrap()
    }

    async fn wt_client(&self, room: &str, publish: bool) -> Client {
        self.client(room, publish, TransportRequest::WebTransport)
            .await
    }

    fn outcome(&self, outcome: &str) -> u64 {
        self.metrics
            .webtransport_sessions
            .with_label_values(&[outcome])
            .get()
    }

    /// A WebTransport session to `path` on the relay (certificate pinned), with
    /// `transport` parameters.
    async fn session_with(
        &self,
        path: &str,
        transport: quinn::TransportConfig,
    ) -> Result<(Endpoint, Session), String> {
        let info = &self.quic.info;
        let mut cfg = quic_client_config_for(&info.certs.sha256(), Protocol::WebTransport)
            .map_err(|e| e.to_string())?;
        cfg.transport_config(Arc::new(transport));
        let ep = Endpoint::client(loopback()).unwrap();
        let conn = ep
            .connect_with(cfg, info.local_addr, "localhost")
            .unwrap()
            .await
            .map_err(|e| e.to_string())?;
        let url = format!("https://{}{path}", info.local_addr);
        let session = Session::connect(conn, url::Url::parse(&url).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        Ok((ep, session))
    }

    async fn session(&self) -> (Endpoint, Session) {
        let transport = quic::transport_config();
        self.session_with(webtransport::PATH, transport)
            .await
            .unwrap()
    }
}

/// Writes `token` on a new bidirectional stream; the status line, if one comes.
async fn present(session: &Session, token: &str) -> Option<String> {
    let (mut send, mut recv) = session.open_bi().await.ok()?;
    send.write_all(format!("{token}\n").as_bytes()).await.ok()?;
    send.finish().ok()?;
    let line = recv.read_to_end(256).await.ok()?;
    Some(String::from_utf8_lossy(&line).into_owned())
}

#[tokio::test]
async fn wrong_reused_missing_and_roq_tokens_are_refused_with_a_status_line_and_counted() {
    let h = relay().await;
    let mut publisher = h.wt_client("room", true).await;
    let mut subscriber = h.wt_client("room", false).await;

    let (_ep, wrong) = h.session().await;
    assert_eq!(
        present(&wrong, &"0".repeat(32)).await.as_deref(),
        Some(INVALID)
    );
    let (_ep, garbage) = h.session().await;
    assert_eq!(
        present(&garbage, "not a token").await.as_deref(),
        Some(INVALID)
    );

    let q = h.wt_answer("room", false).await;
    let (_ep, first) = h.session().await;
    let ok = present(&first, &q.session_token).await.unwrap();
    assert!(ok.starts_with("OK s"), "{ok}");
    let (_ep, again) = h.session().await;
    assert_eq!(
        present(&again, &q.session_token).await.as_deref(),
        Some(INVALID)
    );
    assert!(
        first.close_reason().is_none(),
        "the first use stays attached"
    );

    // A token issued for RoQ does not open a WebTransport session.
    let roq = h.answer("room", false, TransportRequest::Quic).await;
    let (_ep, wrong_protocol) = h.session().await;
    let line = present(&wrong_protocol, &roq.quic().cloned().unwrap().session_token).await;
    assert_eq!(
        line.as_deref(),
        Some("token_wrong_protocol: the session token was issued for another transport\n")
    );

    // A session that never presents one is closed when its time is up.
    let (_ep, silent) = h.session().await;
    tokio::time::timeout(WAIT, silent.closed()).await.unwrap();

    eventually("each refusal counted", || {
        h.outcome("token_invalid") == 3
            && h.outcome("token_wrong_protocol") == 1
            && h.outcome("token_timeout") == 1
    })
    .await;
    assert_eq!(h.outcome("attached"), 3);
    assert_flows(&mut publisher, &mut subscriber, 2.0).await;
}

#[tokio::test]
async fn a_connect_to_another_path_is_refused_with_404_and_counted() {
    let h = relay().await;
    let refused = h
        .session_with("/elsewhere", quic::transport_config())
        .await
        .expect_err("refused");
    assert!(refused.contains("404"), "{refused}");
    eventually("counted", || h.outcome("wrong_path") == 1).await;
}

#[tokio::test]
async fn oversized_datagrams_and_other_flows_and_sessions_are_dropped_and_counted() {
    let h = relay().await;
    let mut publisher = h.wt_client("room", true).await;
    let mut subscriber = h.wt_client("room", false).await;
    assert_flows(&mut publisher, &mut subscriber, 1.0).await;

    let q = h.wt_answer("room", true).await;
    let (_ep, session) = h.session().await;
    assert_attached(present(&session, &q.session_token).await);
    let conn: &quinn::Connection = &session;
    let datagram = |header: &[u8], flow: u64, len: usize| {
        let mut d = header.to_vec();
        roq::write_varint(flow, &mut d);
        // An RTP version-2 header, then padding to `len` bytes of packet.
        d.extend_from_slice(&[0x80, 96]);
        d.resize(d.len() + len - 2, 0);
        bytes::Bytes::from(d)
    };
    let session_header = webtransport::DATAGRAM_HEADER;
    // Larger than the relay takes, yet a datagram the path carries.
    conn.send_datagram(datagram(session_header, q.flow_id, MAX_PACKET + 200))
        .unwrap();
    conn.send_datagram(datagram(session_header, q.flow_id + 1, 100))
        .unwrap();
    // HTTP/3's quarter stream id 1: a session this connection does not have.
    conn.send_datagram(datagram(&[1], q.flow_id, 100)).unwrap();
    eventually("each drop counted", || {
        h.dropped("oversized") == 1
            && h.dropped("roq_unknown_flow") == 1
            && h.dropped("webtransport_unknown_session") == 1
    })
    .await;
    assert!(quinn::Connection::close_reason(&session).is_none());
    assert_flows(&mut publisher, &mut subscriber, 2.0).await;
}

#[tokio::test]
async fn a_session_that_never_reads_is_paced_and_costs_the_others_nothing() {
    let h = relay().await;
    let mut publisher = h.wt_client("room", true).await;
    let mut healthy = h.wt_client("room", false).await;
    assert_flows(&mut publisher, &mut healthy, 0.5).await;

    // No datagrams and a tiny stream window: everything for it queues for one stream that
    // is never read.
    let q = h.wt_answer("room", false).await;
    let mut transport = quic::transport_config();
    transport
        .datagram_receive_buffer_size(None)
        .stream_receive_window(quinn::VarInt::from_u32(2_000))
        .receive_window(quinn::VarInt::from_u32(20_000));
    let (_ep, stalled) = h.session_with(webtransport::PATH, transport).await.unwrap();
    assert_attached(present(&stalled, &q.session_token).await);

    // Updates of ten objects, many times over: the healthy subscriber gets every one, in
    // order; the stalled one is paced to the latest state of each (coalesced).
    let coalesced = h.metrics.pacing.coalesced.get();
    let mut sent = 0u32;
    let deadline = tokio::time::Instant::now() + WAIT * 4;
    while h.metrics.pacing.coalesced.get() == coalesced {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled session was never paced"
        );
        let batch: Vec<Object> = (0..10).map(|id| head(id, sent as f32)).collect();
        publisher.send_objects(&batch).await.unwrap();
        sent += 1;
        assert_eq!(next_update(&mut healthy).await, batch, "update {sent}");
        // At most 1 000 packets a second: the relay's per-session rate limit.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(h.dropped("rate_limited"), 0);
    assert!(quinn::Connection::close_reason(&stalled).is_none());
    assert_flows(&mut publisher, &mut healthy, -1.0).await;
}

#[tokio::test]
async fn the_generated_certificate_rotates_and_new_joins_carry_the_new_one() {
    // Two seconds of life: replaced every second.
    let h = relay_with(Some(Duration::from_secs(2))).await;
    let before = h.wt_answer("room", false).await;
    let (_ep, old) = h.session().await;
    assert_attached(present(&old, &before.session_token).await);
    eventually("rotated", || {
        h.quic.info.certs.sha256() != before.cert_sha256
    })
    .await;
    let answer = h.answer("room", true, TransportRequest::WebTransport).await;
    let after = answer.quic().cloned().unwrap();
    assert_ne!(after.cert_sha256, before.cert_sha256);
    assert_eq!(after.cert_sha256, h.quic.info.certs.sha256());
    assert!(after.self_signed);
    // A client pinning the new hash gets in; the session made before goes on.
    let mut publisher = Client::from_answer(answer, Dialect::default())
        .await
        .unwrap();
    publisher.send_objects(&[head(1, 1.0)]).await.unwrap();
    assert!(quinn::Connection::close_reason(&old).is_none());
}
