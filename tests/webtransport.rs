//! WebTransport end to end with a Rust client (`web-transport-quinn`, as a browser speaks
//! it): a whole relay from `server::start` on loopback port 0, [`Client`]s joining through
//! the HTTP API with `"transport":"webtransport"`, in rooms shared with UDP/SRTP and RoQ
//! clients. The browser's own runs are in `tests/web_webtransport.rs`.

mod support;

use serde_json::{Value, json};
use support::server::{PUBLISH, SUBSCRIBE, start};
use support::transports::{
    Over, assert_closing_sends_bye, assert_forwarded, assert_late_joiner_gets_the_snapshot, join,
    post_join,
};

#[tokio::test]
async fn a_webtransport_publisher_reaches_udp_and_quic_subscribers_and_the_reverse() {
    let server = start().await;
    let mut wt_pub = join(&server, "mixed", PUBLISH, Over::WebTransport).await;
    let mut udp_sub = join(&server, "mixed", SUBSCRIBE, Over::Udp).await;
    assert_forwarded(&mut wt_pub, &mut udp_sub).await;
    let mut quic_sub = join(&server, "mixed", SUBSCRIBE, Over::Quic).await;
    assert_forwarded(&mut wt_pub, &mut quic_sub).await;

    let mut udp_pub = join(&server, "mixed2", PUBLISH, Over::Udp).await;
    let mut wt_sub = join(&server, "mixed2", SUBSCRIBE, Over::WebTransport).await;
    assert_forwarded(&mut udp_pub, &mut wt_sub).await;

    // Each protocol on the shared endpoint is timed and counted under its own label.
    let timed = server.metrics.latency("webtransport").get_sample_count();
    assert!(timed >= 10, "{timed} WebTransport forwarding latencies");
    let count = |dir: &str| {
        server
            .metrics
            .packets
            .with_label_values(&["webtransport", dir])
            .get()
    };
    assert!(count("in") >= 20 && count("out") >= 10);
    let attached = |m: &prometheus::IntCounterVec| m.with_label_values(&["attached"]).get();
    assert_eq!(attached(&server.metrics.webtransport_sessions), 2);
    assert_eq!(attached(&server.metrics.quic_connections), 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_late_webtransport_joiner_gets_the_whole_snapshot() {
    assert_late_joiner_gets_the_snapshot(Over::WebTransport, 1000).await;
}

#[tokio::test]
async fn a_webtransport_join_answers_the_documented_object() {
    let server = start().await;
    let resp = post_join(&server, "contract", json!({"transport": "webtransport"})).await;
    assert_eq!(resp.status(), 201);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["rtp"], Value::Null, "no rtp object");
    assert_eq!(answer["quic"], Value::Null, "no quic object");
    let w = &answer["webtransport"];
    let url = format!("https://{}/webtransport", server.quic.local_addr);
    assert_eq!(w["url"], url.as_str());
    let fp = w["cert_sha256"].as_str().unwrap();
    assert_eq!(fp, server.quic.certs.sha256());
    assert!(fp.len() == 64 && fp.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
    assert!(w["flow_id"].as_u64().is_some());
    assert_eq!(w["session_token"].as_str().unwrap().len(), 32);

    let with_srtp = json!({"transport": "webtransport", "srtp_profile": "AEAD_AES_128_GCM"});
    let refused = post_join(&server, "contract", with_srtp).await;
    assert_eq!(refused.status(), 422);
    let unknown = post_join(&server, "contract", json!({"transport": "carrier-pigeon"})).await;
    assert_eq!(unknown.status(), 422);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_transport");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"webtransport\""), "{message}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn closing_the_webtransport_session_leaves() {
    assert_closing_sends_bye(Over::WebTransport).await;
}
