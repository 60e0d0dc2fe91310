//! Broadcast-delayed mirrors (`docs/recording.md`, "Broadcast delay") on a whole relay over
//! loopback: a live room played into a mirror room a delay later, which spectators join
//! and in which nothing is newer than now minus the delay.

mod support;

use gsrelay::client::{Client, Received};
use gsrelay::rtp::RtcpItem;
use gsrelay::serve::Server;
use gsrelay::wire::{self, Dialect, Object};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::moving_head;
use support::recording::{TempDir, call, relay_admin, start};
use support::server::{ADMIN, PUBLISH, PUBLISH_SUBSCRIBE, SUBSCRIBE, base, token};
use support::transports::{WAIT, player, until_flowing};

const DELAY: Duration = Duration::from_millis(1500);

async fn put(server: &Server, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .put(format!("{}{path}", base(server)))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Reads `c` until it has head 7 at `x`, noting when each head 7 state arrived; panics
/// after `wait`.
async fn until_x(c: &mut Client, x: f32, wait: Duration, got: &mut HashMap<u32, Instant>) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtp { payload, .. }) => {
                for o in wire::decode(&payload, Dialect::Draft01).unwrap() {
                    if let Object::Head1(h) = o
                        && h.id == 7
                    {
                        got.entry(h.location.x.to_bits())
                            .or_insert_with(Instant::now);
                        if h.location.x == x {
                            return;
                        }
                    }
                }
            }
            Some(_) => {}
            None => panic!("no head at {x} within {wait:?}; got {:?}", got.len()),
        }
    }
}

#[tokio::test]
async fn a_mirror_plays_its_room_a_delay_late_and_nothing_newer() {
    let tmp = TempDir::new("mirror");
    let server = start(&tmp.0, &[]).await;
    let mut alice = player(&server, "live", "alice", PUBLISH).await;
    let mut bob = player(&server, "live", "bob", SUBSCRIBE).await;
    until_flowing(&mut alice, &mut bob).await;
    let mut sent: HashMap<u32, Instant> = HashMap::new();
    let mut seen_live = HashMap::new();
    alice.send_objects(&[moving_head(7, 1.0)]).await.unwrap();
    sent.insert(1.0f32.to_bits(), Instant::now());
    until_x(&mut bob, 1.0, WAIT, &mut seen_live).await;

    let admin = relay_admin();
    let body = json!({"room": "live-delayed", "delay_ms": DELAY.as_millis() as u64});
    // Before the request: the mirror starts, and takes the room's state, after this.
    let started = Instant::now();
    let (status, view) = put(&server, "/v1/rooms/live/mirror", &admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    assert_eq!(
        (view["mirror"].as_str(), view["delay_ms"].as_u64()),
        (Some("live-delayed"), Some(1500))
    );

    // Spectators watch; nobody may publish into the mirror.
    let mut spectator = player(&server, "live-delayed", "carol", SUBSCRIBE).await;
    let t = token("live-delayed", PUBLISH_SUBSCRIBE);
    let refused = Client::join(&base(&server), &t, "live-delayed", Default::default()).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("room_read_only")));

    for i in 0..10 {
        let x = 100.0 + i as f32;
        alice.send_objects(&[moving_head(7, x)]).await.unwrap();
        sent.insert(x.to_bits(), Instant::now());
        until_x(&mut bob, x, WAIT, &mut seen_live).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The room as the mirror began (x = 1) comes first, a delay after the start, then
    // every update, each at least the delay after it was sent.
    let mut seen = HashMap::new();
    until_x(&mut spectator, 109.0, WAIT + DELAY, &mut seen).await;
    let first = seen[&1.0f32.to_bits()];
    assert!(
        first.duration_since(started) >= DELAY,
        "the first state came early"
    );
    for i in 0..10 {
        let x = (100.0 + i as f32).to_bits();
        let (at, when) = (sent[&x], seen[&x]);
        assert!(
            when.duration_since(at) >= DELAY,
            "update {i} came {:?} after it was sent",
            when.duration_since(at)
        );
    }
    // Live players got each long before.
    assert!(seen_live[&109.0f32.to_bits()] < seen[&109.0f32.to_bits()]);

    // A late spectator gets the mirror's room (x = 109 at most), never the live one.
    alice.send_objects(&[moving_head(7, 500.0)]).await.unwrap();
    sent.insert(500.0f32.to_bits(), Instant::now());
    let mut late = player(&server, "live-delayed", "dave", SUBSCRIBE).await;
    late.send_fir(late.relay_ssrc()).await.unwrap();
    let mut got = HashMap::new();
    until_x(&mut late, 109.0, WAIT, &mut got).await;
    assert!(
        !got.contains_key(&500.0f32.to_bits()),
        "a state newer than the delay"
    );

    // The mirror room says what it is.
    let (_, info) = call(&server, Method::GET, "/v1/rooms/live-delayed", &admin).await;
    assert_eq!(info["delayed"], json!({"source": "live", "delay_ms": 1500}));
    let (status, view) = call(&server, Method::GET, "/v1/rooms/live/mirror", &admin).await;
    assert_eq!(
        (status, view["mirror"].as_str()),
        (StatusCode::OK, Some("live-delayed"))
    );

    // Stopped: the spectators see its stream end.
    let (status, _) = call(&server, Method::DELETE, "/v1/rooms/live/mirror", &admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match spectator.recv(left).await.unwrap() {
            Some(Received::Rtcp(items))
                if items.iter().any(|i| matches!(i, RtcpItem::Bye { .. })) =>
            {
                break;
            }
            Some(_) => {}
            None => panic!("no BYE after the mirror stopped"),
        }
    }
    let (status, _) = call(&server, Method::GET, "/v1/rooms/live/mirror", &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_mirror_requests_get_clear_errors() {
    let tmp = TempDir::new("mirror-bad");
    let server = start(&tmp.0, &[]).await;
    // Joined rooms exist: a's source, b's a live room a mirror may not take.
    let _alice = player(&server, "a", "alice", PUBLISH).await;
    let _bob = player(&server, "b", "bob", PUBLISH_SUBSCRIBE).await;
    let admin = relay_admin();
    let code = |v: &Value| v["error"]["code"].as_str().map(str::to_string);
    let cases = [
        (
            "/v1/rooms/nothing/mirror",
            json!({"room": "m", "delay_ms": 5000}),
            StatusCode::NOT_FOUND,
            "room_not_found",
        ),
        (
            "/v1/rooms/a/mirror",
            json!({"room": "b", "delay_ms": 5000}),
            StatusCode::CONFLICT,
            "room_live",
        ),
        (
            "/v1/rooms/a/mirror",
            json!({"room": "m", "delay_ms": 10}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_delay",
        ),
        (
            "/v1/rooms/a/mirror",
            json!({"room": "m", "delay_ms": 3_600_000}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_delay",
        ),
        (
            "/v1/rooms/a/mirror",
            json!({"room": "a", "delay_ms": 5000}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            "/v1/rooms/a/mirror",
            json!({"room": "bad room", "delay_ms": 5000}),
            StatusCode::BAD_REQUEST,
            "invalid_room",
        ),
        (
            "/v1/rooms/a/mirror",
            json!({"room": "m"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
    ];
    for (path, body, want, want_code) in cases {
        let (status, answer) = put(&server, path, &admin, body.clone()).await;
        assert_eq!(
            (status, code(&answer).as_deref()),
            (want, Some(want_code)),
            "{path} {body}: {answer}"
        );
    }
    let (status, _) = put(
        &server,
        "/v1/rooms/a/mirror",
        &token("a", ADMIN),
        json!({"room": "m", "delay_ms": 5000}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "an admin of the source only");
    let (status, _) = put(
        &server,
        "/v1/rooms/a/mirror",
        &admin,
        json!({"room": "m", "delay_ms": 5000}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, answer) = put(
        &server,
        "/v1/rooms/a/mirror",
        &admin,
        json!({"room": "m2", "delay_ms": 5000}),
    )
    .await;
    assert_eq!(
        (status, code(&answer).as_deref()),
        (StatusCode::CONFLICT, Some("already_mirrored"))
    );
    let (status, answer) = call(&server, Method::DELETE, "/v1/rooms/b/mirror", &admin).await;
    assert_eq!(
        (status, code(&answer).as_deref()),
        (StatusCode::NOT_FOUND, Some("no_mirror"))
    );
}
