//! Hostile clients against a whole relay on loopback, over HTTP and SRTP: a subscriber
//! token must not stop the relay, feedback must not turn the relay into an amplifier, a
//! large snapshot must fit a default receive buffer, and a stopped relay must fail its
//! probes.

mod support;

use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::internal::command::RelayHandle;
use gsrelay::internal::shards::Shards;
use gsrelay::serve::Server;
use gsrelay::wire::{Dialect, Object};
use serde_json::json;
use std::time::Duration;
use support::head;
use support::server::{PUBLISH, SUBSCRIBE, base, serve_api, start, token};

/// How long to listen after the last packet before calling a burst over.
const QUIET: Duration = Duration::from_millis(700);

async fn join(server: &Server, room: &str, sub: bool) -> Client {
    let rights = if sub { SUBSCRIBE } else { PUBLISH };
    let mut c = Client::join(
        &base(server),
        &token(room, rights),
        room,
        JoinOptions::default(),
    )
    .await
    .unwrap();
    c.send_rr().await.unwrap();
    c
}

/// Publishes `n` Head1 objects, 20 per packet, 10 packets per millisecond at most so the
/// relay's own receive buffer (a debug build on a shared machine) keeps up.
async fn publish(p: &mut Client, n: u64) {
    let objs: Vec<Object> = (0..n).map(|i| head(i, i as f32)).collect();
    for (i, chunk) in objs.chunks(20).enumerate() {
        p.send_objects(chunk).await.unwrap();
        if i % 10 == 9 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Receives until the relay has been quiet for [`QUIET`]: (RTP payload bytes, objects).
async fn drain(c: &mut Client) -> (usize, usize) {
    let (mut bytes, mut objects) = (0, 0);
    while let Some(got) = c.recv(QUIET).await.unwrap() {
        if let Received::Rtp { payload, .. } = got {
            bytes += payload.len() + 12;
            objects += gsrelay::wire::objects(&payload, Dialect::Draft01).count();
        }
    }
    (bytes, objects)
}

#[tokio::test]
async fn a_subscriber_token_cannot_stop_the_relay_with_an_absurd_rate() {
    let server = start().await;
    for rate in [1e-30, 1e-19] {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/rooms/a/sessions", base(&server)))
            .bearer_auth(token("a", SUBSCRIBE))
            .json(&json!({"transport":"rtp","interest":{"area":{"radius":10},"rates":[{"max_hz":rate}]}}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 422);
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_interest");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("interest.rates[0].max_hz") && msg.contains("between 0.01 and 1000"),
            "{msg}"
        );
    }
    // Every room still flows.
    let mut p = join(&server, "b", false).await;
    let mut s = join(&server, "b", true).await;
    p.send_objects(&[head(1, 1.0)]).await.unwrap();
    let got = s.recv_objects(Duration::from_secs(5)).await.unwrap();
    assert_eq!(got.map(|(_, o)| o), Some(vec![head(1, 1.0)]));
    let ready = reqwest::get(format!("{}/readyz", base(&server)))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

/// The two tests that measure bursts at a client take turns: on a two-core machine one
/// test's burst starves the other's client of CPU, and a starved client's socket
/// overflows, which is not what either test is about.
static BURSTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_subscriber_flooding_feedback_is_not_amplified() {
    let _turn = BURSTS.lock().await;
    let server = start().await;
    let mut s = join(&server, "r", true).await;
    let mut p = join(&server, "r", false).await;
    publish(&mut p, 400).await;
    let (live, objects) = drain(&mut s).await;
    assert_eq!(objects, 400);
    let relay = s.relay_ssrc();
    let stream = p.ssrc();

    // 20 datagrams: PLIs naming the relay, FIRs, NACKs with full bitmasks over the
    // sequence numbers the subscriber received.
    let lost: Vec<u16> = (0..17).collect();
    for i in 0..20 {
        match i % 3 {
            0 => s.send_pli(relay).await.unwrap(),
            1 => s.send_fir(relay).await.unwrap(),
            _ => s.send_nack(stream, &lost).await.unwrap(),
        }
    }
    let (got, _) = drain(&mut s).await;
    // One snapshot now, one when the interval ends, one repair of each object: about
    // three times the room, not hundreds.
    assert!(
        got <= 3 * live + 3_000,
        "20 feedback datagrams drew {got} B; the room is {live} B"
    );
}

#[tokio::test]
async fn a_late_joiner_with_a_default_receive_buffer_gets_a_10000_object_snapshot() {
    let _turn = BURSTS.lock().await;
    let server = start().await;
    let mut p = join(&server, "r", false).await;
    publish(&mut p, 10_000).await;
    // The publisher's 500 packets must be in the store before the joiner asks.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info = server.handle.room_info("r".into()).await.unwrap().unwrap();
        if info.streams.first().map(|s| s.objects) == Some(10_000) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "store never filled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut s = join(&server, "r", true).await;
    s.send_fir(s.relay_ssrc()).await.unwrap();
    let (_, objects) = drain(&mut s).await;
    assert_eq!(objects, 10_000, "every object of the snapshot arrives");
}

#[tokio::test]
async fn a_stopped_relay_fails_both_probes() {
    let (handle, commands) = RelayHandle::channel(1);
    drop(commands);
    let url = serve_api(Shards::single(handle)).await;
    for probe in ["healthz", "readyz"] {
        let resp = reqwest::get(format!("{url}/{probe}")).await.unwrap();
        assert_eq!(resp.status(), 503, "{probe}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "relay_stopped");
    }
}
