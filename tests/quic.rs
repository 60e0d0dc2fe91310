//! RTP over QUIC end to end: a whole relay from `server::start` on loopback port 0, Rust
//! [`Client`]s joining through the HTTP API with `"transport":"quic"`, in rooms shared
//! with UDP/SRTP clients.

mod support;

use serde_json::{Value, json};
use support::server::{ALL, PUBLISH, SUBSCRIBE, base, start, token};
use support::transports::{
    Over, assert_closing_sends_bye, assert_forwarded, assert_late_joiner_gets_the_snapshot, join,
    post_join,
};

#[tokio::test]
async fn a_quic_publisher_reaches_udp_subscribers_and_the_reverse() {
    let server = start().await;
    let mut quic_pub = join(&server, "mixed", PUBLISH, Over::Quic).await;
    let mut udp_sub = join(&server, "mixed", SUBSCRIBE, Over::Udp).await;
    assert_forwarded(&mut quic_pub, &mut udp_sub).await;

    let mut udp_pub = join(&server, "mixed2", PUBLISH, Over::Udp).await;
    let mut quic_sub = join(&server, "mixed2", SUBSCRIBE, Over::Quic).await;
    assert_forwarded(&mut udp_pub, &mut quic_sub).await;

    let mut quic_sub2 = join(&server, "mixed", SUBSCRIBE, Over::Quic).await;
    assert_forwarded(&mut quic_pub, &mut quic_sub2).await;
    // Each transport times what it forwarded, under its own label.
    for transport in ["quic", "udp"] {
        let timed = server.metrics.latency(transport).get_sample_count();
        assert!(timed >= 10, "{transport}: {timed} forwarding latencies");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_late_quic_joiner_gets_the_snapshot_a_udp_publisher_left() {
    assert_late_joiner_gets_the_snapshot(Over::Quic, 200).await;
}

#[tokio::test]
async fn a_quic_join_answers_the_documented_quic_object() {
    let server = start().await;
    let resp = post_join(&server, "contract", json!({"transport": "quic"})).await;
    assert_eq!(resp.status(), 201);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["rtp"], Value::Null, "no rtp object over QUIC");
    let q = &answer["quic"];
    assert_eq!(q["addr"], server.quic.local_addr.to_string());
    assert_eq!(q["alpn"], "roq");
    let fp = q["cert_sha256"].as_str().unwrap();
    assert_eq!(fp, server.quic.cert_sha256);
    assert!(fp.len() == 64 && fp.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
    assert!(q["flow_id"].as_u64().is_some());
    let tok = q["session_token"].as_str().unwrap();
    assert_eq!(tok.len(), 32);

    let with_srtp = json!({"transport": "quic", "srtp_profile": "AES_CM_128_HMAC_SHA1_80"});
    let refused = post_join(&server, "contract", with_srtp).await;
    assert_eq!(refused.status(), 422);

    // A token for another room gets no session, hence no QUIC session token.
    let other_room = reqwest::Client::new()
        .post(format!("{}/v1/rooms/elsewhere/sessions", base(&server)))
        .bearer_auth(token("contract", ALL))
        .json(&json!({"transport": "quic"}))
        .send()
        .await
        .unwrap();
    assert_eq!(other_room.status(), 403);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_quic_subscriber_keeps_its_session_across_an_address_change() {
    let server = start().await;
    let mut publisher = join(&server, "move", PUBLISH, Over::Quic).await;
    let mut subscriber = join(&server, "move", SUBSCRIBE, Over::Quic).await;
    assert_forwarded(&mut publisher, &mut subscriber).await;
    let before = subscriber.local_addr().unwrap();
    subscriber.rebind().unwrap();
    let after = subscriber.local_addr().unwrap();
    assert_ne!(before, after, "the endpoint moved to a new socket");
    // The relay only learns the new path from a packet sent on it.
    subscriber.send_rr().await.unwrap();
    assert_forwarded(&mut publisher, &mut subscriber).await;
    assert!(subscriber.quic_close_reason().is_none());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn closing_the_quic_connection_leaves_the_session() {
    assert_closing_sends_bye(Over::Quic).await;
}
