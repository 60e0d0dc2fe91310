//! Resume (`docs/api.md`, "Resume"): a client that lost its path takes its session back
//! with the credential of its join's answer. On a live relay the session goes on (same
//! id, SSRC and numbering; the room sees no BYE); after a restart the relay opens one with
//! the same SSRC. A forged, foreign or spent credential is refused and counted.

mod support;

use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::rtp::RtcpItem;
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::moving_head;
use support::server::{PUBLISH, SUBSCRIBE, base, config, metric, now, token, token_as};
use support::transports::{Over, WAIT, assert_forwarded};

async fn start(http: std::net::SocketAddr) -> Server {
    let mut cfg = config(0);
    cfg.http_addr = http;
    gsrelay::serve::start(cfg).await.unwrap()
}

async fn join(server: &Server, rights: Rights, over: Over) -> Client {
    let opts = JoinOptions {
        quic: over == Over::Quic,
        webtransport: over == Over::WebTransport,
        webrtc: over == Over::WebRtc,
        ..JoinOptions::default()
    };
    let mut c = Client::join(&base(server), &token("r", rights), "r", opts)
        .await
        .unwrap();
    if over == Over::Udp {
        c.send_rr().await.unwrap();
    }
    c
}

/// The next RTP packet `c` receives: its SSRC and sequence number; fails on a BYE.
async fn next_rtp(c: &mut Client) -> (u32, u16) {
    loop {
        match c.recv(WAIT).await.unwrap() {
            Some(Received::Rtp { ssrc, seq, .. }) => return (ssrc, seq),
            Some(Received::Rtcp(items)) => assert!(
                !items.iter().any(|i| matches!(i, RtcpItem::Bye { .. })),
                "a BYE: {items:?}"
            ),
            None => panic!("no RTP within {WAIT:?}"),
        }
    }
}

async fn resumes_a_live_session(over: Over) {
    let server = start("127.0.0.1:0".parse().unwrap()).await;
    let mut publisher = join(&server, PUBLISH, over).await;
    let mut sub = join(&server, SUBSCRIBE, Over::Udp).await;
    assert_forwarded(&mut publisher, &mut sub).await;
    publisher
        .send_objects(&[moving_head(1, 1.0)])
        .await
        .unwrap();
    let (_, before) = next_rtp(&mut sub).await;
    let (session, ssrc) = (publisher.session(), publisher.ssrc());
    publisher.resume().await.unwrap();
    assert_eq!(
        (publisher.session(), publisher.ssrc()),
        (session, ssrc),
        "{over:?}"
    );
    if over == Over::Udp {
        publisher.send_rr().await.unwrap();
    }
    publisher
        .send_objects(&[moving_head(1, 2.0)])
        .await
        .unwrap();
    assert_eq!(
        next_rtp(&mut sub).await,
        (ssrc, before.wrapping_add(1)),
        "{over:?}: the stream goes on, numbered on"
    );
    // The subscriber resumes too, and goes on receiving.
    let sub_session = sub.session();
    sub.resume().await.unwrap();
    assert_eq!(sub.session(), sub_session);
    sub.send_rr().await.unwrap();
    assert_forwarded(&mut publisher, &mut sub).await;
    assert_eq!(
        metric(
            &server,
            "gsrelay_joins_refused_total{reason=\"resume_stale\"}"
        )
        .await,
        Some(0.0)
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_udp_client_resumes_its_session_and_nobody_sees_a_bye() {
    resumes_a_live_session(Over::Udp).await;
}

#[tokio::test]
async fn a_quic_client_resumes_its_session_and_nobody_sees_a_bye() {
    resumes_a_live_session(Over::Quic).await;
}

#[tokio::test]
async fn a_webtransport_client_resumes_its_session_and_nobody_sees_a_bye() {
    resumes_a_live_session(Over::WebTransport).await;
}

#[tokio::test]
async fn a_webrtc_client_resumes_its_session_and_nobody_sees_a_bye() {
    resumes_a_live_session(Over::WebRtc).await;
}

async fn post_resume(server: &Server, token: &str, credential: &str) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/rooms/r/sessions", base(server)))
        .bearer_auth(token)
        .json(&json!({"transport": "rtp", "resume": credential}))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn forged_foreign_and_spent_credentials_are_refused_and_counted() {
    let server = start("127.0.0.1:0".parse().unwrap()).await;
    let mut c = join(&server, PUBLISH, Over::Udp).await;
    let spent = c.resume_credential().unwrap().to_owned();
    c.resume().await.unwrap();
    let own = token("r", PUBLISH);
    // Spent: the session moved on to the next generation.
    let (status, body) = post_resume(&server, &own, &spent).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("resume_stale"))
    );
    // Forged: one character changed.
    let current = c.resume_credential().unwrap().to_owned();
    let mut forged = current.clone().into_bytes();
    let i = forged.len() - 5;
    forged[i] = if forged[i] == b'a' { b'b' } else { b'a' };
    let (status, body) = post_resume(&server, &own, std::str::from_utf8(&forged).unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("resume_invalid"))
    );
    // Another identity's token with this credential, and an access token as a credential.
    let mallory = token_as("r", "mallory", PUBLISH, now(), 600);
    let (status, _) = post_resume(&server, &mallory, &current).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = post_resume(&server, &own, &own).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        metric(
            &server,
            "gsrelay_joins_refused_total{reason=\"resume_invalid\"}"
        )
        .await,
        Some(3.0)
    );
    assert_eq!(
        metric(
            &server,
            "gsrelay_joins_refused_total{reason=\"resume_stale\"}"
        )
        .await,
        Some(1.0)
    );
    // The session is untouched by all of it: its current credential still resumes it.
    let session = c.session();
    c.resume().await.unwrap();
    assert_eq!(c.session(), session);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_resumes_with_its_ssrc_after_the_relay_restarted_once_only() {
    let x = start("127.0.0.1:0".parse().unwrap()).await;
    let http = x.http_addr;
    let mut publisher = join(&x, PUBLISH, Over::Udp).await;
    let ssrc = publisher.ssrc();
    let credential = publisher.resume_credential().unwrap().to_owned();
    x.shutdown().await.unwrap();
    let y = start(http).await;
    publisher.resume().await.unwrap();
    assert_eq!(publisher.ssrc(), ssrc, "the same SSRC on the new relay");
    let mut sub = join(&y, SUBSCRIBE, Over::Udp).await;
    assert_forwarded(&mut publisher, &mut sub).await;
    // The credential the restart found is spent: its SSRC is taken now.
    let (status, body) = post_resume(&y, &token("r", PUBLISH), &credential).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("resume_stale"))
    );
    y.shutdown().await.unwrap();
}
