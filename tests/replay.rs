//! Replaying recordings into rooms (`docs/recording.md`, "Replay") on a whole relay over
//! loopback: a room recorded through the server API, then played into a room of its own
//! that viewers join as any room, with FIR, late join, seek, speed and pause.

mod support;

use gsrelay::client::{Client, Received};
use gsrelay::rtp::{RtcpItem, RtpPacket};
use gsrelay::serve::Server;
use gsrelay::wire::{self, Dialect, Object};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use support::moving_head;
use support::recording::{Owned, TempDir, call, records, relay_admin, start};
use support::server::{ADMIN, PUBLISH, SUBSCRIBE, base, token};
use support::transports::{WAIT, player, until_flowing};

/// Object 7 is alice's head, object 9 carol's.
const ALICE: u64 = 7;
const CAROL: u64 = 9;

async fn send_json(
    server: &Server,
    method: Method,
    path: &str,
    token: &str,
    body: Value,
) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .request(method, format!("{}{path}", base(server)))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// What a viewer saw: each object's states in order, and the SSRCs whose streams ended.
#[derive(Default, Debug)]
struct Seen {
    states: HashMap<u64, Vec<f32>>,
    ended: Vec<u32>,
}

/// Reads `c` until `done` says what it saw is enough; panics after [`WAIT`].
async fn watch(c: &mut Client, seen: &mut Seen, done: impl Fn(&Seen) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done(seen) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.recv(left).await.unwrap() {
            Some(Received::Rtp { payload, .. }) => {
                for o in wire::decode(&payload, Dialect::Draft01).unwrap() {
                    if let Object::Head1(h) = o {
                        seen.states.entry(h.id).or_default().push(h.location.x);
                    }
                }
            }
            Some(Received::Rtcp(items)) => {
                for i in items {
                    if let RtcpItem::Bye { ssrcs } = i {
                        seen.ended.extend(ssrcs);
                    }
                }
            }
            None => panic!("waited {WAIT:?}; saw {seen:?}"),
        }
    }
}

/// A viewer of `room`, asking for the whole room at once (FIR naming the relay).
async fn viewer(server: &Server, room: &str, name: &str) -> Client {
    let mut c = player(server, room, name, SUBSCRIBE).await;
    c.send_fir(c.relay_ssrc()).await.unwrap();
    c
}

/// Sends `x` as `id`'s head from `publisher` and waits until `sub` has it.
async fn update(publisher: &mut Client, sub: &mut Client, id: u64, x: f32) {
    publisher.send_objects(&[moving_head(id, x)]).await.unwrap();
    let mut seen = Seen::default();
    watch(sub, &mut seen, |s| {
        s.states.get(&id).is_some_and(|v| v.contains(&x))
    })
    .await;
}

/// The recording of room `r`: alice and carol publish from x = 1, then while it records
/// 20 updates each (x = 100.., 200..), then carol leaves and alice sends 5 more (x =
/// 120..). Returns the recording's id and the still-connected alice.
async fn record_a_match(server: &Server, tmp: &TempDir) -> (String, Client) {
    let mut alice = player(server, "r", "alice", PUBLISH).await;
    let mut carol = player(server, "r", "carol", PUBLISH).await;
    let mut bob = player(server, "r", "bob", SUBSCRIBE).await;
    until_flowing(&mut alice, &mut bob).await;
    until_flowing(&mut carol, &mut bob).await;
    update(&mut alice, &mut bob, ALICE, 1.0).await;
    update(&mut carol, &mut bob, CAROL, 1.0).await;
    let admin = token("r", ADMIN);
    let (status, started) = call(server, Method::POST, "/v1/rooms/r/recording", &admin).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    for i in 0..20 {
        update(&mut alice, &mut bob, ALICE, 100.0 + i as f32).await;
        update(&mut carol, &mut bob, CAROL, 200.0 + i as f32).await;
        // Spread over time, as a match is: a seek lands between updates.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    carol.leave().await.unwrap();
    for i in 20..25 {
        update(&mut alice, &mut bob, ALICE, 100.0 + i as f32).await;
    }
    let (status, _) = call(server, Method::DELETE, "/v1/rooms/r/recording", &admin).await;
    assert_eq!(status, StatusCode::OK);
    assert!(tmp.0.join(&id).exists());
    (id, alice)
}

fn alice_xs() -> Vec<f32> {
    (0..25).map(|i| 100.0 + i as f32).collect()
}

fn carol_xs() -> Vec<f32> {
    (0..20).map(|i| 200.0 + i as f32).collect()
}

#[tokio::test]
async fn a_replay_at_1x_gives_every_viewer_the_recorded_sequence_of_states() {
    let tmp = TempDir::new("replay-1x");
    let server = start(&tmp.0, &[]).await;
    let (id, alice) = record_a_match(&server, &tmp).await;
    let admin = relay_admin();
    let body = json!({"recording": id, "room": "rp", "paused": true});
    let (status, started) = send_json(&server, Method::POST, "/v1/replays", &admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    assert_eq!(started["paused"].as_bool(), Some(true));
    assert!(started["position_ms"].as_u64() < Some(10), "{started}");

    // Two viewers join while it is paused: each gets the room as it was when the
    // recording began, from the relay's cache.
    let mut v1 = viewer(&server, "rp", "v1").await;
    let mut v2 = viewer(&server, "rp", "v2").await;
    let (mut s1, mut s2) = (Seen::default(), Seen::default());
    let initial = |s: &Seen| {
        s.states.get(&ALICE).is_some_and(|v| v.contains(&1.0))
            && s.states.get(&CAROL).is_some_and(|v| v.contains(&1.0))
    };
    watch(&mut v1, &mut s1, initial).await;
    watch(&mut v2, &mut s2, initial).await;

    // alice is still in room r on this relay: her stream plays under another SSRC.
    let (_, status) = call(&server, Method::GET, "/v1/replays/rp", &admin).await;
    let remapped = status["remapped"].as_array().unwrap();
    assert!(remapped.iter().any(|p| p[0] == alice.ssrc()), "{status}");

    let resume = json!({"paused": false});
    let (status, _) = send_json(&server, Method::PATCH, "/v1/replays/rp", &admin, resume).await;
    assert_eq!(status, StatusCode::OK);
    let all_played = |s: &Seen| {
        s.states
            .get(&ALICE)
            .is_some_and(|v| v.last() == Some(&124.0))
            && !s.ended.is_empty()
    };
    watch(&mut v1, &mut s1, all_played).await;
    watch(&mut v2, &mut s2, all_played).await;
    for s in [&s1, &s2] {
        let after = |id: u64, first: f32| -> Vec<f32> {
            let v = &s.states[&id];
            let at = v.iter().position(|x| *x == first).unwrap();
            v[at..].to_vec()
        };
        assert_eq!(
            after(ALICE, 100.0),
            alice_xs(),
            "alice's head, state by state"
        );
        assert_eq!(
            after(CAROL, 200.0),
            carol_xs(),
            "carol's head, state by state"
        );
    }
    // Played to its end: it holds the room's last state until stopped.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, s) = call(&server, Method::GET, "/v1/replays/rp", &admin).await;
        if s["ended"] == true {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The time of object `id`'s update `x` in recording `dir`, nanoseconds from its start.
fn time_of(dir: &std::path::Path, id: u64, x: f32) -> u64 {
    let all = records(dir);
    let first = all.first().unwrap().0;
    all.iter()
        .find_map(|(at, r)| match r {
            Owned::Rtp(false, p) => {
                let pkt = RtpPacket::parse(p).unwrap();
                let objects = wire::decode(pkt.payload(), Dialect::Draft01).unwrap();
                objects.contains(&moving_head(id, x)).then_some(*at - first)
            }
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn seek_gives_the_whole_room_at_the_target_and_late_joiners_get_it_too() {
    let tmp = TempDir::new("replay-seek");
    let server = start(&tmp.0, &[]).await;
    let (id, _alice) = record_a_match(&server, &tmp).await;
    let admin = relay_admin();
    let body = json!({"recording": id, "room": "rs", "paused": true});
    let (status, _) = send_json(&server, Method::POST, "/v1/replays", &admin, body).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut v1 = viewer(&server, "rs", "v1").await;
    let mut s1 = Seen::default();
    watch(&mut v1, &mut s1, |s| {
        s.states.contains_key(&ALICE) && s.states.contains_key(&CAROL)
    })
    .await;

    // Just after carol's update 210, which followed alice's 110; alice's 111 comes 10 ms
    // later.
    let target = time_of(&tmp.0.join(&id), CAROL, 210.0) / 1_000_000 + 1;
    let seek = json!({"seek_ms": target});
    let (status, at) = send_json(&server, Method::PATCH, "/v1/replays/rs", &admin, seek).await;
    assert_eq!(status, StatusCode::OK, "{at}");
    assert_eq!(at["position_ms"].as_u64(), Some(target));
    let mut after = Seen::default();
    watch(&mut v1, &mut after, |s| {
        s.states.contains_key(&ALICE) && s.states.contains_key(&CAROL)
    })
    .await;
    assert_eq!(after.states[&ALICE], [110.0], "alice's head at the target");
    assert_eq!(after.states[&CAROL], [210.0], "carol's head at the target");
    assert!(
        !after.ended.is_empty(),
        "the streams before the seek ended first"
    );

    // A viewer joining now gets the same room from the relay's cache.
    let mut v2 = viewer(&server, "rs", "v2").await;
    let mut s2 = Seen::default();
    watch(&mut v2, &mut s2, |s| {
        s.states.contains_key(&ALICE) && s.states.contains_key(&CAROL)
    })
    .await;
    assert_eq!(
        (s2.states[&ALICE].clone(), s2.states[&CAROL].clone()),
        (vec![110.0], vec![210.0])
    );

    // At 8x from there, the rest plays in order.
    let fast = json!({"speed": 8.0, "paused": false});
    let (status, s) = send_json(&server, Method::PATCH, "/v1/replays/rs", &admin, fast).await;
    assert_eq!((status, s["speed"].as_f64()), (StatusCode::OK, Some(8.0)));
    let mut rest = Seen::default();
    watch(&mut v2, &mut rest, |s| {
        s.states
            .get(&ALICE)
            .is_some_and(|v| v.last() == Some(&124.0))
    })
    .await;
    assert_eq!(rest.states[&ALICE], alice_xs()[11..].to_vec());

    // Pause holds the position.
    let pause = json!({"paused": true});
    let (_, p1) = send_json(&server, Method::PATCH, "/v1/replays/rs", &admin, pause).await;
    let (_, p2) = call(&server, Method::GET, "/v1/replays/rs", &admin).await;
    assert_eq!(p1["position_ms"], p2["position_ms"]);
    assert_eq!(p2["paused"], true);

    // Stopped: its streams end for the viewers, and the room with it.
    let (status, _) = call(&server, Method::DELETE, "/v1/replays/rs", &admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let mut bye = Seen::default();
    watch(&mut v1, &mut bye, |s| !s.ended.is_empty()).await;
    let (status, _) = call(&server, Method::GET, "/v1/replays/rs", &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_replay_requests_get_clear_errors_and_lose_nothing() {
    let tmp = TempDir::new("replay-bad");
    let server = start(&tmp.0, &[]).await;
    let (id, _alice) = record_a_match(&server, &tmp).await;
    let admin = relay_admin();
    let code = |v: &Value| v["error"]["code"].as_str().map(str::to_string);
    let cases = [
        (
            json!({"recording": id, "room": "r"}),
            StatusCode::CONFLICT,
            "room_live",
        ),
        (
            json!({"recording": "rec-1-abcdef12", "room": "x"}),
            StatusCode::NOT_FOUND,
            "recording_not_found",
        ),
        (
            json!({"recording": "../../etc", "room": "x"}),
            StatusCode::NOT_FOUND,
            "recording_not_found",
        ),
        (
            json!({"recording": id, "room": "x", "speed": 9.0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_speed",
        ),
        (
            json!({"recording": id, "room": "x", "speed": 0.1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_speed",
        ),
        (
            json!({"recording": id, "room": "x", "from_ms": 86_400_000u64}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_replay",
        ),
        (
            json!({"recording": id, "room": "bad room"}),
            StatusCode::BAD_REQUEST,
            "invalid_room",
        ),
        (
            json!({"recording": id, "room": "x", "extra": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!([1, 2]),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
    ];
    for (body, want, want_code) in cases {
        let (status, answer) =
            send_json(&server, Method::POST, "/v1/replays", &admin, body.clone()).await;
        assert_eq!(
            (status, code(&answer).as_deref()),
            (want, Some(want_code)),
            "{body}: {answer}"
        );
    }
    // A room admin of another room may not replay this room's recording.
    let body = json!({"recording": id, "room": "x"});
    let (status, _) = send_json(
        &server,
        Method::POST,
        "/v1/replays",
        &token("x", ADMIN),
        body,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Nothing was left playing by any of it.
    let (_, list) = call(&server, Method::GET, "/v1/replays", &admin).await;
    assert_eq!(list["replays"], json!([]));
    // Controls of a replay that is not there, and bad controls of one that is.
    let (status, answer) = send_json(
        &server,
        Method::PATCH,
        "/v1/replays/nothing",
        &admin,
        json!({"paused": true}),
    )
    .await;
    assert_eq!(
        (status, code(&answer).as_deref()),
        (StatusCode::NOT_FOUND, Some("replay_not_found"))
    );
    let body = json!({"recording": id, "room": "x"});
    let (status, _) = send_json(&server, Method::POST, "/v1/replays", &admin, body).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, answer) = send_json(
        &server,
        Method::PATCH,
        "/v1/replays/x",
        &admin,
        json!({"seek_ms": 86_400_000u64}),
    )
    .await;
    assert_eq!(
        (status, code(&answer).as_deref()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("seek_past_end"))
    );
    let (status, answer) =
        send_json(&server, Method::PATCH, "/v1/replays/x", &admin, json!({})).await;
    assert_eq!(
        (status, code(&answer).as_deref()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_request"))
    );
    let (status, answer) = send_json(
        &server,
        Method::PATCH,
        "/v1/replays/x",
        &admin,
        json!({"speed": "fast"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let (status, s) = call(&server, Method::GET, "/v1/replays/x", &admin).await;
    assert_eq!(
        (status, s["speed"].as_f64()),
        (StatusCode::OK, Some(1.0)),
        "unchanged"
    );
    // The recording itself is intact.
    let (status, v) = call(
        &server,
        Method::GET,
        &format!("/v1/recordings/{id}"),
        &admin,
    )
    .await;
    assert_eq!(
        (status, v["state"].as_str()),
        (StatusCode::OK, Some("stopped"))
    );
}

/// `gsrelay room --url U --token T ARGS` or `gsrelay replay ...`: success and stdout.
async fn cli(server: &Server, args: &[&str]) -> (bool, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_gsrelay"))
        .args(&args[..1])
        .args(["--url", &base(server), "--token", &relay_admin()])
        .args(&args[1..])
        .env_remove("GSRELAY_URL")
        .env_remove("GSRELAY_TOKEN")
        .output()
        .await
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test]
async fn the_command_line_records_and_replays() {
    let tmp = TempDir::new("replay-cli");
    let server = start(&tmp.0, &[]).await;
    let mut alice = player(&server, "c", "alice", PUBLISH).await;
    let mut bob = player(&server, "c", "bob", SUBSCRIBE).await;
    until_flowing(&mut alice, &mut bob).await;
    let (ok, started) = cli(&server, &["room", "record", "start", "c"]).await;
    assert!(ok, "{started}");
    let id = started.split_whitespace().nth(2).unwrap().to_string();
    assert!(id.starts_with("rec-"), "{started}");
    for i in 0..5 {
        update(&mut alice, &mut bob, ALICE, 100.0 + i as f32).await;
    }
    let (ok, stopped) = cli(&server, &["room", "record", "stop", "c"]).await;
    assert!(ok && stopped.contains("stopped"), "{stopped}");
    let (ok, text) = cli(&server, &["replay", "start", &id, "c-replay", "--paused"]).await;
    assert!(
        ok && text.contains("c-replay:") && text.contains("paused"),
        "{text}"
    );
    let (ok, text) = cli(&server, &["replay", "speed", "c-replay", "2"]).await;
    assert!(ok && text.contains("2.0x"), "{text}");
    let (ok, text) = cli(&server, &["replay", "resume", "c-replay"]).await;
    assert!(ok && !text.contains("paused"), "{text}");
    let (ok, text) = cli(&server, &["replay", "seek", "c-replay", "999999999"]).await;
    assert!(!ok && text.contains("seek_past_end"), "{text}");
    let (ok, text) = cli(&server, &["replay", "stop", "c-replay"]).await;
    assert!(ok, "{text}");
    let (ok, text) = cli(&server, &["replay", "status", "c-replay"]).await;
    assert!(!ok && text.contains("replay_not_found"), "{text}");
    // The files, read on this machine.
    let dir = tmp.0.join(&id);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gsrelay"))
        .args(["recording", "info"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && text.contains("stopped (stopped)")
            && text.contains("checksum good"),
        "{text}"
    );
}
