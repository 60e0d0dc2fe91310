//! The WebRTC transport without a browser: the Rust client's peer connection (`rtc`,
//! full ICE, offerer) against a relay started in process, beside UDP/SRTP clients in the
//! same room; and bad input: offers the relay cannot answer, STUN for nobody, messages
//! past the relay's size, and a peer that stops reading.

mod support;

use gsrelay::client::{Client, WebRtcPeer};
use gsrelay::serve::Server;
use gsrelay::wire::Object;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;
use support::head;
use support::server::{ALL, PUBLISH, SUBSCRIBE, base, start, token};
use support::transports::{Over, join, post_join};
use tokio::net::UdpSocket;

const WAIT: Duration = Duration::from_secs(10);

/// Publishes `x` from `from` until `to` receives it from `from`'s stream.
async fn reaches(from: &mut Client, to: &mut Client, x: f32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        from.send_objects(&[head(1, x)]).await.unwrap();
        while let Some((ssrc, objects)) = to.recv_objects(Duration::from_millis(100)).await.unwrap()
        {
            let got = objects
                .iter()
                .any(|o| matches!(o, Object::Head1(h) if h.location.x == x));
            if ssrc == from.ssrc() && got {
                return;
            }
        }
    }
    panic!("x = {x} from {} never arrived", from.ssrc());
}

fn dropped(server: &Server, reason: &str) -> u64 {
    server.metrics.dropped.with_label_values(&[reason]).get()
}

/// Waits until the `reason` drop count reaches `at_least`.
async fn dropped_reaches(server: &Server, reason: &str, at_least: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while dropped(server, reason) < at_least {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{reason}: {} drops, expected {at_least}",
            dropped(server, reason)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn webrtc_and_udp_clients_reach_each_other() {
    let server = start().await;
    let mut web = join(&server, "mixed", ALL, Over::WebRtc).await;
    let mut udp = join(&server, "mixed", ALL, Over::Udp).await;
    reaches(&mut web, &mut udp, 1.5).await;
    reaches(&mut udp, &mut web, 2.5).await;
    assert!(
        server
            .metrics
            .packets
            .with_label_values(&["webrtc", "in"])
            .get()
            > 0
            && server
                .metrics
                .packets
                .with_label_values(&["webrtc", "out"])
                .get()
                > 0
    );
    let connected = server
        .metrics
        .webrtc_connections
        .with_label_values(&["connected"]);
    assert_eq!(connected.get(), 1);
    web.leave().await.unwrap();
}

/// Joins the room "offers" with `body`: the answer's status and JSON.
async fn post_offer(server: &Server, body: Value) -> (StatusCode, Value) {
    let resp = post_join(server, "offers", body).await;
    (resp.status(), resp.json().await.unwrap())
}

#[tokio::test]
async fn offers_the_relay_cannot_answer_are_refused_with_a_clear_422() {
    let server = start().await;
    let data = WebRtcPeer::offer().unwrap().offer_sdp().unwrap();
    let audio_only = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n\
        m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:abcd\r\n\
        a=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=setup:actpass\r\na=mid:0\r\n\
        a=rtpmap:111 opus/48000/2\r\n";
    let cases = [
        (
            json!({"transport": "webrtc", "sdp_offer": "not sdp at all"}),
            "invalid_sdp_offer",
            "not a valid SDP offer",
        ),
        (
            json!({"transport": "webrtc", "sdp_offer": ""}),
            "invalid_sdp_offer",
            "empty",
        ),
        (
            json!({"transport": "webrtc", "sdp_offer": audio_only}),
            "no_data_channel",
            "m=application",
        ),
        (
            json!({"transport": "webrtc"}),
            "invalid_request",
            "sdp_offer",
        ),
        (
            json!({"transport": "rtp", "sdp_offer": data}),
            "invalid_request",
            "only a WebRTC join",
        ),
        (
            json!({"transport": "webrtc", "sdp_offer": data, "srtp_profile": "AEAD_AES_128_GCM"}),
            "invalid_request",
            "srtp_profile",
        ),
    ];
    for (body, code, says) in cases {
        let (status, answer) = post_offer(&server, body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    // Nothing was joined: the room does not exist.
    let info = reqwest::Client::new()
        .get(format!("{}/v1/rooms/offers", base(&server)))
        .bearer_auth(token("offers", ALL))
        .send()
        .await
        .unwrap();
    assert_eq!(info.status(), StatusCode::NOT_FOUND);
    // And a good offer still joins.
    let (status, answer) =
        post_offer(&server, json!({"transport": "webrtc", "sdp_offer": data})).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let sdp = answer["webrtc"]["sdp_answer"].as_str().unwrap();
    assert!(
        sdp.contains("a=ice-lite") && sdp.contains("typ host"),
        "{sdp}"
    );
    assert_eq!(answer["webrtc"]["channel"], "gsrelay");
    assert!(answer.get("rtp").is_none(), "{answer}");
    // Joined, never connected, left: counted so, for the operator to see.
    let id = answer["session_id"].as_str().unwrap();
    let left = reqwest::Client::new()
        .delete(format!("{}/v1/sessions/{id}", base(&server)))
        .bearer_auth(token("offers", ALL))
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), StatusCode::NO_CONTENT);
    let never = server
        .metrics
        .webrtc_connections
        .with_label_values(&["never_connected"]);
    assert_eq!(never.get(), 1);
}

#[tokio::test]
async fn an_unspecified_bind_offers_the_api_host_or_says_it_cannot() {
    let server = gsrelay::serve::start(gsrelay::serve::ServeConfig {
        webrtc_addr: "0.0.0.0:0".parse().unwrap(),
        ..support::server::config(1)
    })
    .await
    .unwrap();
    let offer = WebRtcPeer::offer().unwrap().offer_sdp().unwrap();
    let join_as = |host: &'static str| {
        let (url, offer) = (base(&server), offer.clone());
        async move {
            let resp = reqwest::Client::new()
                .post(format!("{url}/v1/rooms/any/sessions"))
                .header(reqwest::header::HOST, host)
                .bearer_auth(token("any", ALL))
                .json(&json!({"transport": "webrtc", "sdp_offer": offer}))
                .send()
                .await
                .unwrap();
            (resp.status(), resp.json::<Value>().await.unwrap())
        }
    };
    let (status, answer) = join_as("127.0.0.1").await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let port = server.webrtc_addr.port();
    assert_eq!(answer["webrtc"]["addr"], format!("127.0.0.1:{port}"));
    let sdp = answer["webrtc"]["sdp_answer"].as_str().unwrap();
    assert!(sdp.contains(&format!("127.0.0.1 {port} typ host")), "{sdp}");
    let (status, answer) = join_as("relay.example").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(answer["error"]["code"], "webrtc_address_unknown");
}

/// A STUN binding request whose USERNAME is `username` (routing needs no integrity).
fn binding(username: &str) -> Vec<u8> {
    let pad = username.len().next_multiple_of(4);
    let mut m = vec![0x00, 0x01];
    m.extend_from_slice(&u16::try_from(4 + pad).unwrap().to_be_bytes());
    m.extend_from_slice(&[0x21, 0x12, 0xa4, 0x42]);
    m.extend_from_slice(&[9; 12]);
    m.extend_from_slice(&[0x00, 0x06]);
    m.extend_from_slice(&u16::try_from(username.len()).unwrap().to_be_bytes());
    m.extend_from_slice(username.as_bytes());
    m.resize(24 + pad, 0);
    m
}

#[tokio::test]
async fn stun_for_nobody_and_strangers_datagrams_are_dropped_and_counted() {
    let server = start().await;
    // A live WebRTC session in another room: none of this may reach it or stop it.
    let mut web = join(&server, "live", ALL, Over::WebRtc).await;
    let mut udp = join(&server, "live", ALL, Over::Udp).await;
    let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port: SocketAddr = server.webrtc_addr;
    let before = dropped(&server, "webrtc_unknown_username");
    let before_addr = dropped(&server, "webrtc_unknown_address");
    let before_stun = dropped(&server, "webrtc_malformed_stun");
    // A relay-shaped ufrag for shard 0 that was never issued, one naming no shard, one
    // naming a shard the relay does not run.
    for username in ["00aaaaaaaaaaaaaa:x", "nobody:x", "ffaaaaaaaaaaaaaa:x"] {
        stranger.send_to(&binding(username), port).await.unwrap();
    }
    // DTLS from an address no check passed from, and a truncated STUN header.
    stranger
        .send_to(&[22, 0xfe, 0xfd, 0, 0, 0], port)
        .await
        .unwrap();
    stranger.send_to(&[0, 1, 0, 0, 0x21], port).await.unwrap();
    dropped_reaches(&server, "webrtc_unknown_username", before + 3).await;
    dropped_reaches(&server, "webrtc_unknown_address", before_addr + 1).await;
    dropped_reaches(&server, "webrtc_malformed_stun", before_stun + 1).await;
    let mut buf = [0u8; 1500];
    let answered = tokio::time::timeout(Duration::from_millis(300), stranger.recv(&mut buf)).await;
    assert!(answered.is_err(), "the relay answered a stranger");
    reaches(&mut web, &mut udp, 3.5).await;
    reaches(&mut udp, &mut web, 4.5).await;
}

/// A WebRTC session joined by hand: its peer and SSRC, and the answer's packet limit.
async fn bare_peer(server: &Server, room: &str) -> (WebRtcPeer, u32, usize) {
    let mut peer = WebRtcPeer::offer().unwrap();
    let body = json!({"transport": "webrtc", "sdp_offer": peer.offer_sdp().unwrap()});
    let resp = post_join(server, room, body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let answer: Value = resp.json().await.unwrap();
    let relay: SocketAddr = answer["webrtc"]["addr"].as_str().unwrap().parse().unwrap();
    let sdp = answer["webrtc"]["sdp_answer"].as_str().unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    peer.accept(relay, sdp, deadline).await.unwrap();
    let limit = answer["webrtc"]["max_message_size"].as_u64().unwrap() as usize;
    (peer, answer["ssrc"].as_u64().unwrap() as u32, limit)
}

/// A minimal RTP packet of `ssrc` with `payload`.
fn rtp(ssrc: u32, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x80, 96];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 1]);
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

#[tokio::test]
async fn messages_past_the_relays_size_are_dropped_and_counted() {
    let server = start().await;
    let mut udp = join(&server, "big", SUBSCRIBE, Over::Udp).await;
    let (mut peer, ssrc, limit) = bare_peer(&server, "big").await;
    let before = dropped(&server, "oversized");
    let huge = rtp(ssrc, 1, &vec![0u8; limit]);
    peer.send(&huge).await.unwrap();
    dropped_reaches(&server, "oversized", before + 1).await;
    // The session goes on: its next packet of ordinary size is forwarded.
    let payload = gsrelay::wire::encode(&[head(1, 6.5)], Default::default()).unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut seq = 2;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no packet after the oversized one"
        );
        peer.send(&rtp(ssrc, seq, &payload)).await.unwrap();
        seq += 1;
        if let Some((from, _)) = udp.recv_objects(Duration::from_millis(100)).await.unwrap() {
            assert_eq!(from, ssrc);
            break;
        }
    }
}

#[tokio::test]
async fn a_peer_that_never_reads_costs_no_other_session() {
    let server = start().await;
    let mut publisher = join(&server, "stall", PUBLISH, Over::Udp).await;
    let mut reader = join(&server, "stall", SUBSCRIBE, Over::Udp).await;
    // Opens its channel, then is never driven again: no SACK, no consent check.
    let stalled = join(&server, "stall", SUBSCRIBE, Over::WebRtc).await;
    let before = dropped(&server, "webrtc_send_buffer_full");
    let coalesced_before = server.metrics.pacing.coalesced.get();
    // Large packets: a few hundred fill the stalled session's send queue.
    let padding = Object::Unknown(gsrelay::wire::Unknown {
        tag: 16384,
        data: gsrelay::wire::json::Hex(vec![7u8; 900]),
    });
    const PACKETS: u32 = 800;
    let mut received = 0;
    for i in 0..PACKETS {
        publisher
            .send_objects(&[head(1, i as f32), padding.clone()])
            .await
            .unwrap();
        // Read as we go, so the reader's socket buffer never decides the outcome.
        while reader.recv_objects(Duration::ZERO).await.unwrap().is_some() {
            received += 1;
        }
        if i % 16 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    while received < PACKETS {
        match reader.recv_objects(Duration::from_secs(2)).await.unwrap() {
            Some(_) => received += 1,
            None => break,
        }
    }
    assert_eq!(received, PACKETS, "the reading subscriber lost packets");
    // The stalled session is capped to its queue's drain rate: the core coalesces its
    // updates, and what still reaches its queue is bounded (256 KiB, then dropped).
    let coalesced = server.metrics.pacing.coalesced.get() - coalesced_before;
    let full = dropped(&server, "webrtc_send_buffer_full") - before;
    assert!(
        coalesced > 0,
        "the stalled peer's updates were not coalesced ({full} dropped with its queue full)"
    );
    let queued = server
        .metrics
        .bytes
        .with_label_values(&["webrtc", "out"])
        .get();
    let offered = u64::from(PACKETS) * 900;
    assert!(
        queued <= 256 * 1024 && queued < offered / 2,
        "{queued} bytes queued for a peer that reads nothing (of {offered} offered)"
    );
    drop(stalled);
}
