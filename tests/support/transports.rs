//! Rust [`Client`]s of a whole relay joined over each transport, and the forwarding checks
//! the transport tests share.

use super::moving_head;
use super::server::{ALL, PUBLISH, SUBSCRIBE, base, now, start, token, token_as};
use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::rtp::RtcpItem;
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::Object;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a packet that must come may take.
pub const WAIT: Duration = Duration::from_secs(5);

/// How a test client carries its session.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Over {
    Udp,
    Quic,
    WebTransport,
    WebRtc,
}

/// A client of `server` in `room` with `rights`, joined over `over`.
pub async fn join(server: &Server, room: &str, rights: Rights, over: Over) -> Client {
    let opts = JoinOptions {
        quic: over == Over::Quic,
        webtransport: over == Over::WebTransport,
        webrtc: over == Over::WebRtc,
        ..JoinOptions::default()
    };
    let mut c = Client::join(&base(server), &token(room, rights), room, opts)
        .await
        .unwrap();
    if over == Over::Udp {
        // A UDP session's address is latched by its first packet.
        c.send_rr().await.unwrap();
    }
    c
}

/// `identity` joined to `room` over UDP with `rights`, its address latched.
pub async fn player(server: &Server, room: &str, identity: &str, rights: Rights) -> Client {
    let t = token_as(room, identity, rights, now(), 600);
    let mut c = Client::join(&base(server), &t, room, JoinOptions::default())
        .await
        .unwrap();
    c.send_rr().await.unwrap();
    c
}

/// The next RTP packet `c` receives (RTCP skipped): SSRC, sequence number, objects.
pub async fn next_objects(c: &mut Client) -> (u32, u16, Vec<Object>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtp {
                ssrc, seq, payload, ..
            }) => {
                let objects = gsrelay::wire::decode(&payload, c.dialect()).unwrap();
                return (ssrc, seq, objects);
            }
            Some(Received::Rtcp(_)) => continue,
            None => panic!("no RTP within {WAIT:?}"),
        }
    }
}

/// Publishes until `subscriber` receives (a UDP subscriber's address is latched by its
/// first packet, which the publisher's may overtake), then until nothing is in flight.
pub async fn until_flowing(publisher: &mut Client, subscriber: &mut Client) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "nothing flows");
        publisher
            .send_objects(&[moving_head(999, 0.0)])
            .await
            .unwrap();
        if let Some(Received::Rtp { .. }) =
            subscriber.recv(Duration::from_millis(100)).await.unwrap()
        {
            break;
        }
    }
    while subscriber
        .recv(Duration::from_millis(200))
        .await
        .unwrap()
        .is_some()
    {}
}

/// Publishes ten updates and asserts `subscriber` gets them in order, from the
/// publisher's SSRC, with consecutive sequence numbers.
pub async fn assert_forwarded(publisher: &mut Client, subscriber: &mut Client) {
    until_flowing(publisher, subscriber).await;
    let mut last_seq = None;
    for i in 0..10u64 {
        let object = moving_head(7, i as f32);
        publisher
            .send_objects(std::slice::from_ref(&object))
            .await
            .unwrap();
        let (ssrc, seq, objects) = next_objects(subscriber).await;
        assert_eq!(ssrc, publisher.ssrc());
        assert_eq!(objects, vec![object]);
        if let Some(prev) = last_seq {
            assert_eq!(seq, u16::wrapping_add(prev, 1), "consecutive numbering");
        }
        last_seq = Some(seq);
    }
}

/// A UDP publisher sends `count` objects before a subscriber over `over` joins; asks for
/// a snapshot (FIR) and asserts every one of them arrives, from the publisher's SSRC.
pub async fn assert_late_joiner_gets_the_snapshot(over: Over, count: u64) {
    let server = start().await;
    let mut publisher = join(&server, "snap", PUBLISH, Over::Udp).await;
    let objects: Vec<Object> = (0..count).map(|id| moving_head(id, id as f32)).collect();
    for chunk in objects.chunks(10) {
        publisher.send_objects(chunk).await.unwrap();
    }
    // The relay has cached them once a subscriber joining now sees them in its snapshot.
    let mut late = join(&server, "snap", SUBSCRIBE, over).await;
    let relay_ssrc = late.relay_ssrc();
    late.send_fir(relay_ssrc).await.unwrap();
    let mut seen = BTreeSet::new();
    while seen.len() < objects.len() {
        let (ssrc, _, got) = next_objects(&mut late).await;
        assert_eq!(ssrc, publisher.ssrc());
        for o in got {
            if let Object::Head1(h) = o {
                seen.insert(h.id);
            }
        }
    }
    assert_eq!(seen.len(), objects.len(), "every cached object arrived");
    server.shutdown().await.unwrap();
}

/// A publisher over `over` forwards to a UDP subscriber, then its client is dropped
/// (its connection closed): asserts the subscriber gets a BYE for its SSRC.
pub async fn assert_closing_sends_bye(over: Over) {
    let server = start().await;
    let mut publisher = join(&server, "bye", PUBLISH, over).await;
    let mut subscriber = join(&server, "bye", SUBSCRIBE, Over::Udp).await;
    assert_forwarded(&mut publisher, &mut subscriber).await;
    let ssrc = publisher.ssrc();
    drop(publisher);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match subscriber.recv(left).await.unwrap() {
            Some(Received::Rtcp(items))
                if items
                    .iter()
                    .any(|i| matches!(i, RtcpItem::Bye { ssrcs } if ssrcs.contains(&ssrc))) =>
            {
                break;
            }
            Some(_) => continue,
            None => panic!("no BYE for the closed {over:?} publisher within {WAIT:?}"),
        }
    }
    server.shutdown().await.unwrap();
}

/// POSTs `body` to join `room` with a token for it with every right.
pub async fn post_join(server: &Server, room: &str, body: serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/rooms/{room}/sessions", base(server)))
        .bearer_auth(token(room, ALL))
        .json(&body)
        .send()
        .await
        .unwrap()
}
