//! The server API a game's backend calls (`docs/api.md`, "Server API"), and presence for
//! players, on a whole relay over loopback: real HTTP, real SRTP sessions.

mod support;

use gsrelay::client::{Client, JoinOptions, Presence, PresenceEvent, Received};
use gsrelay::rtp::RtcpItem;
use gsrelay::serve::{self as server, Server};
use gsrelay::token::Tokens;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;
use support::moving_head;
use support::server::{
    ADMIN, PUBLISH, PUBLISH_SUBSCRIBE, SECRET, SUBSCRIBE, base, config, metric, now, token,
    token_as,
};
use support::transports::{WAIT, assert_forwarded, player};

/// A relay-wide admin token (`room: "*"`).
fn relay_admin() -> String {
    Tokens::new(SECRET.as_bytes())
        .unwrap()
        .issue("*", "backend", ADMIN, 600, now())
        .unwrap()
}

async fn start(closed_secs: u64) -> Server {
    let cfg = gsrelay::serve::ServeConfig {
        room_closed_secs: closed_secs,
        ..config(1)
    };
    server::start(cfg).await.unwrap()
}

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

async fn call(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = http()
        .request(method, format!("{}{path}", base(server)))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get(server: &Server, path: &str, token: &str) -> (StatusCode, Value) {
    call(server, reqwest::Method::GET, path, token, None).await
}

async fn delete(server: &Server, path: &str, token: &str) -> (StatusCode, Value) {
    call(server, reqwest::Method::DELETE, path, token, None).await
}

/// Waits for an RTCP BYE naming `ssrc` on `c`.
async fn assert_bye_for(c: &mut Client, ssrc: u32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtcp(items))
                if items
                    .iter()
                    .any(|i| matches!(i, RtcpItem::Bye { ssrcs } if ssrcs.contains(&ssrc))) =>
            {
                return;
            }
            Some(_) => {}
            None => panic!("no BYE for {ssrc} within {WAIT:?}"),
        }
    }
}

#[tokio::test]
async fn a_relay_admin_lists_every_room_with_its_counts() {
    let server = start(60).await;
    let mut alice = player(&server, "arena", "alice", PUBLISH_SUBSCRIBE).await;
    let _bob = player(&server, "arena", "bob", SUBSCRIBE).await;
    let _carol = player(&server, "lobby", "carol", SUBSCRIBE).await;
    alice
        .send_objects(&[moving_head(1, 0.0), moving_head(2, 1.0)])
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let rooms = loop {
        let (status, body) = get(&server, "/v1/rooms", &relay_admin()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let arena = body["rooms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["room"] == "arena")
            .cloned()
            .unwrap();
        if arena["objects"] == 2 {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "objects never counted: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let list = rooms["rooms"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["room"], "arena");
    assert_eq!(list[0]["sessions"], 2);
    assert_eq!(list[0]["participants"], 2);
    assert_eq!(list[0]["streams"], 1);
    assert_eq!(list[1]["room"], "lobby");
    assert_eq!(list[1]["sessions"], 1);
    // A room's admin token is not relay-wide; a player's token is no admin's.
    let (status, body) = get(&server, "/v1/rooms", &token("arena", ADMIN)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "forbidden_room");
    let (status, _) = get(&server, "/v1/rooms", "not-a-token").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The relay-wide token administers any room, but joins none.
    let (status, _) = get(&server, "/v1/rooms/lobby/participants", &relay_admin()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &server,
        reqwest::Method::POST,
        "/v1/rooms/lobby/sessions",
        &relay_admin(),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn closing_a_room_ends_its_sessions_with_a_bye_and_refuses_joins_for_a_while() {
    let server = start(1).await;
    let mut alice = player(&server, "doomed", "alice", PUBLISH_SUBSCRIBE).await;
    let mut bob = player(&server, "doomed", "bob", PUBLISH_SUBSCRIBE).await;
    let admin = token("doomed", ADMIN);
    let (status, _) = delete(&server, "/v1/rooms/doomed", &admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Each session hears from the relay's own SSRC that the relay ended it.
    let (ra, rb) = (alice.relay_ssrc(), bob.relay_ssrc());
    assert_bye_for(&mut alice, ra).await;
    assert_bye_for(&mut bob, rb).await;
    // The clients know the relay ended them, and do not come back by themselves.
    assert!(alice.ended_by_relay() && bob.ended_by_relay());
    // Silent by now, as a gone relay would be: still no rejoin.
    alice.set_silence(Some(Duration::from_millis(1)));
    let deadline = tokio::time::Instant::now() + WAIT;
    while !alice.is_silent(std::time::Instant::now()) {
        assert!(tokio::time::Instant::now() < deadline, "never silent");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!alice.rejoin_if_silent().await.unwrap());
    let (status, _) = get(&server, "/v1/rooms/doomed", &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Joins are refused while it is closed, with how long to wait.
    let resp = http()
        .post(format!("{}/v1/rooms/doomed/sessions", base(&server)))
        .bearer_auth(token("doomed", PUBLISH))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "room_closed");
    // Closing again is harmless.
    let (status, _) = delete(&server, "/v1/rooms/doomed", &admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // After the configured second, the room opens again.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let t = token_as("doomed", "alice", PUBLISH, now(), 600);
        if Client::join(&base(&server), &t, "doomed", JoinOptions::default())
            .await
            .is_ok()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the room never opened again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_removed_participant_cannot_rejoin_with_its_token_but_can_with_a_newer_one() {
    let server = start(60).await;
    let issued = now();
    let t = token_as("keep", "mallory", PUBLISH_SUBSCRIBE, issued, 600);
    let mut mallory = Client::join(&base(&server), &t, "keep", JoinOptions::default())
        .await
        .unwrap();
    mallory.send_rr().await.unwrap();
    let mut bob = player(&server, "keep", "bob", SUBSCRIBE).await;
    assert_forwarded(&mut mallory, &mut bob).await;
    let admin = token("keep", ADMIN);
    let path = "/v1/rooms/keep/participants/mallory";
    let (status, _) = delete(&server, path, &admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let relay = mallory.relay_ssrc();
    assert_bye_for(&mut mallory, relay).await;
    // The others see its stream end.
    assert_bye_for(&mut bob, mallory.ssrc()).await;
    let (status, body) = get(&server, path, &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Its token, issued before the removal, is refused.
    let resp = http()
        .post(format!("{}/v1/rooms/keep/sessions", base(&server)))
        .bearer_auth(&t)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "removed");
    // A token the backend issues after the removal's second lets it back in (token
    // times are whole seconds: one of the same second is refused).
    let newer = token_as("keep", "mallory", PUBLISH_SUBSCRIBE, now() + 1, 600);
    Client::join(&base(&server), &newer, "keep", JoinOptions::default())
        .await
        .unwrap();
    // Other identities were never barred.
    player(&server, "keep", "carol", SUBSCRIBE).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_muted_publisher_is_dropped_and_counted_until_unmuted() {
    let server = start(60).await;
    let mut alice = player(&server, "mute", "alice", PUBLISH).await;
    let mut bob = player(&server, "mute", "bob", SUBSCRIBE).await;
    assert_forwarded(&mut alice, &mut bob).await;
    let admin = token("mute", ADMIN);
    let path = "/v1/rooms/mute/participants/alice";
    let (status, view) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &admin,
        Some(json!({"publish": false})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["muted"], true);
    assert_eq!(view["identity"], "alice");
    let before = metric(&server, "gsrelay_dropped_packets_total{reason=\"muted\"}")
        .await
        .unwrap_or(0.0);
    for i in 0..5 {
        alice
            .send_objects(&[moving_head(1, i as f32)])
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while metric(&server, "gsrelay_dropped_packets_total{reason=\"muted\"}")
        .await
        .unwrap_or(0.0)
        < before + 5.0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "muted packets not counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Nothing of it reached the subscriber.
    while let Some(r) = bob.recv(Duration::from_millis(100)).await.unwrap() {
        assert!(
            !matches!(r, Received::Rtp { .. }),
            "a muted publisher's update arrived"
        );
    }
    let (status, view) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &admin,
        Some(json!({"publish": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["muted"], false);
    assert_forwarded(&mut alice, &mut bob).await;
    // An unknown participant, an unknown field, a wrong type: refused, each clearly.
    let (status, body) = call(
        &server,
        reqwest::Method::PATCH,
        "/v1/rooms/mute/participants/nobody",
        &admin,
        Some(json!({"publish": false})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "participant_not_found");
    let (status, body) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &admin,
        Some(json!({"publish": false, "admin": true})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"]["code"], "invalid_request");
    let (status, _) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &admin,
        Some(json!({"publish": "no"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &admin,
        Some(json!([])),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // A player may not mute another.
    let (status, _) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &token("mute", PUBLISH_SUBSCRIBE),
        Some(json!({"publish": false})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn metadata_is_bounded_and_shows_in_the_room_and_its_participants() {
    let server = start(60).await;
    let _alice = player(&server, "meta", "alice", SUBSCRIBE).await;
    let admin = token("meta", ADMIN);
    let (status, _) = call(
        &server,
        reqwest::Method::PUT,
        "/v1/rooms/meta/metadata",
        &admin,
        Some(json!({"map": "dust", "round": 3})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, room) = get(&server, "/v1/rooms/meta", &admin).await;
    assert_eq!(room["metadata"], json!({"map": "dust", "round": 3}));
    let path = "/v1/rooms/meta/participants/alice";
    let (status, view) = call(
        &server,
        reqwest::Method::PATCH,
        path,
        &admin,
        Some(json!({"metadata": {"team": "red"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["metadata"], json!({"team": "red"}));
    let (_, list) = get(&server, "/v1/rooms/meta/participants", &admin).await;
    assert_eq!(list["participants"][0]["metadata"], json!({"team": "red"}));
    assert_eq!(list["participants"][0]["subscribe"], true);
    assert_eq!(
        list["participants"][0]["sessions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Too large, not JSON, a room with no one in it: refused.
    let big = json!({"blob": "x".repeat(5000)});
    let (status, body) = call(
        &server,
        reqwest::Method::PUT,
        "/v1/rooms/meta/metadata",
        &admin,
        Some(big),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"]["code"], "metadata_too_large");
    let resp = http()
        .put(format!("{}/v1/rooms/meta/metadata", base(&server)))
        .bearer_auth(&admin)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let (status, body) = call(
        &server,
        reqwest::Method::PUT,
        "/v1/rooms/empty/metadata",
        &token("empty", ADMIN),
        Some(json!(1)),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "room_not_found");
    let (status, _) = get(&server, "/v1/rooms/meta/participants/%00bad", &admin).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    server.shutdown().await.unwrap();
}

/// The next presence event, within the wait.
async fn next(p: &mut Presence) -> Option<PresenceEvent> {
    tokio::time::timeout(WAIT, p.next())
        .await
        .expect("a presence event within the wait")
        .unwrap()
}

#[tokio::test]
async fn a_player_watches_who_joins_changes_and_leaves_without_an_admin_token() {
    let server = start(60).await;
    let alice = player(&server, "hall", "alice", PUBLISH_SUBSCRIBE).await;
    let own = token_as("hall", "alice", SUBSCRIBE, now(), 600);
    let mut watch = Presence::watch(&base(&server), &own, "hall").await.unwrap();
    assert_eq!(next(&mut watch).await, Some(PresenceEvent::Snapshot));
    assert_eq!(watch.identity_of(alice.ssrc()), Some("alice"));
    let bob = player(&server, "hall", "bob", PUBLISH).await;
    let Some(PresenceEvent::Joined(joined)) = next(&mut watch).await else {
        panic!("bob's join");
    };
    assert_eq!(
        (joined.identity.as_str(), joined.ssrcs.as_slice()),
        ("bob", &[bob.ssrc()][..])
    );
    assert_eq!(watch.identity_of(bob.ssrc()), Some("bob"));
    let admin = token("hall", ADMIN);
    let nick = json!({"nick": "B"});
    call(
        &server,
        reqwest::Method::PATCH,
        "/v1/rooms/hall/participants/bob",
        &admin,
        Some(json!({"metadata": nick})),
    )
    .await;
    let Some(PresenceEvent::Updated(updated)) = next(&mut watch).await else {
        panic!("bob's metadata");
    };
    assert_eq!(updated.metadata, nick);
    call(
        &server,
        reqwest::Method::PUT,
        "/v1/rooms/hall/metadata",
        &admin,
        Some(json!("round 2")),
    )
    .await;
    assert_eq!(
        next(&mut watch).await,
        Some(PresenceEvent::RoomUpdated(json!("round 2")))
    );
    assert_eq!(watch.metadata(), &json!("round 2"));
    bob.leave().await.unwrap();
    assert_eq!(
        next(&mut watch).await,
        Some(PresenceEvent::Left("bob".into()))
    );
    assert_eq!(watch.participants().count(), 1);
    // A token of another room, or with no subscribe right, sees nothing.
    for t in [token("other", SUBSCRIBE), token("hall", PUBLISH)] {
        let refused = Presence::watch(&base(&server), &t, "hall")
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                gsrelay::client::ClientError::Status { status: 403, .. }
            ),
            "{refused}"
        );
    }
    // Closing the room tells the watcher and ends its stream.
    delete(&server, "/v1/rooms/hall", &admin).await;
    assert_eq!(next(&mut watch).await, Some(PresenceEvent::Closed));
    assert_eq!(
        next(&mut watch).await,
        None,
        "the stream ends with the room"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn stopping_the_relay_ends_presence_streams() {
    let server = start(60).await;
    let _alice = player(&server, "stop", "alice", SUBSCRIBE).await;
    let mut watch = Presence::watch(&base(&server), &token("stop", SUBSCRIBE), "stop")
        .await
        .unwrap();
    assert_eq!(next(&mut watch).await, Some(PresenceEvent::Snapshot));
    let stopped = tokio::spawn(server.shutdown());
    assert_eq!(next(&mut watch).await, Some(PresenceEvent::Stopping));
    assert_eq!(next(&mut watch).await, None);
    tokio::time::timeout(WAIT, stopped)
        .await
        .expect("the relay stops without waiting on a presence stream")
        .unwrap()
        .unwrap();
}
