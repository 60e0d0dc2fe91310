//! Recording rooms (`docs/recording.md`) on a whole relay over loopback: real SRTP
//! sessions, the server API, the files on disk read back by the format's reader and by
//! the real tshark.

mod support;

use gsrelay::client::Client;
use gsrelay::record::{Event, Recording};
use gsrelay::rtp::RtpPacket;
use gsrelay::serve::Server;
use gsrelay::wire::{self, Dialect};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::moving_head;
use support::recording::{Owned, TempDir, call, records, relay_admin, start};
use support::server::{ADMIN, PUBLISH, SUBSCRIBE, base, metric, token};
use support::transports::{WAIT, next_objects, player};

/// A publisher and a subscriber of `room`, the subscriber shown to get the publisher's
/// updates.
async fn pair(server: &Server, room: &str) -> (Client, Client) {
    let mut publisher = player(server, room, "alice", PUBLISH).await;
    let mut sub = player(server, room, "bob", SUBSCRIBE).await;
    support::transports::until_flowing(&mut publisher, &mut sub).await;
    (publisher, sub)
}

/// Sends `n` updates of head 7 (x = 100 + i), each waited for at the subscriber: the
/// room accepted them all.
async fn publish(publisher: &mut Client, sub: &mut Client, n: u32) -> Vec<f32> {
    let mut xs = Vec::new();
    for i in 0..n {
        let x = 100.0 + i as f32;
        publisher.send_objects(&[moving_head(7, x)]).await.unwrap();
        loop {
            let (ssrc, _, objects) = next_objects(sub).await;
            if ssrc == publisher.ssrc() && objects == vec![moving_head(7, x)] {
                break;
            }
        }
        xs.push(x);
    }
    xs
}

/// The head x of each live RTP packet of `ssrc` in `records`, with its sequence number.
fn live_heads(records: &[(u64, Owned)], ssrc: u32) -> Vec<(u16, f32)> {
    let mut out = Vec::new();
    for (_, r) in records {
        let Owned::Rtp(false, packet) = r else {
            continue;
        };
        let pkt = RtpPacket::parse(packet).unwrap();
        if pkt.ssrc() != ssrc {
            continue;
        }
        for o in wire::decode(pkt.payload(), Dialect::Draft01).unwrap() {
            if let gsrelay::wire::Object::Head1(h) = o {
                out.push((pkt.sequence_number(), h.location.x));
            }
        }
    }
    out
}

/// Waits until `path`'s recording has a checkpoint holding head 7 at `x`.
async fn await_checkpoint_with(dir: &Path, x: f32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let found = Recording::open(dir).is_ok()
            && records(dir).iter().any(|(_, r)| match r {
                Owned::Rtp(true, p) => RtpPacket::parse(p).is_ok_and(|pkt| {
                    wire::decode(pkt.payload(), Dialect::Draft01)
                        .is_ok_and(|objects| objects.contains(&moving_head(7, x)))
                }),
                _ => false,
            });
        if found {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no checkpoint with x = {x}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_recording_holds_every_accepted_packet_the_rooms_events_and_checkpoints() {
    let tmp = TempDir::new("rec-whole");
    let server = start(&tmp.0, &[]).await;
    let (mut publisher, mut sub) = pair(&server, "r1").await;
    let admin = token("r1", ADMIN);
    let (status, started) = call(&server, Method::POST, "/v1/rooms/r1/recording", &admin).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!(started["state"], "recording");
    assert_eq!(started["room"], "r1");
    let dir = tmp.0.join(&id);

    let sent = publish(&mut publisher, &mut sub, 20).await;
    // The periodic checkpoint (every second here) takes the newest state.
    await_checkpoint_with(&dir, *sent.last().unwrap()).await;
    let (status, stopped) = call(&server, Method::DELETE, "/v1/rooms/r1/recording", &admin).await;
    assert_eq!(status, StatusCode::OK, "{stopped}");
    assert_eq!(stopped["state"], "stopped");
    assert_eq!(stopped["stop_reason"], "stopped");

    let all = records(&dir);
    // Every update, in order, with the publisher's own numbering.
    let heads = live_heads(&all, publisher.ssrc());
    let xs: Vec<f32> = heads.iter().map(|(_, x)| *x).collect();
    assert_eq!(xs, sent);
    for w in heads.windows(2) {
        assert_eq!(
            w[1].0,
            w[0].0.wrapping_add(1),
            "the source's sequence numbers"
        );
    }
    let events: Vec<&Event> = all
        .iter()
        .filter_map(|(_, r)| match r {
            Owned::Event(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(matches!(
        events.first(),
        Some(Event::SegmentStarted { segment: 0 })
    ));
    let first = events.iter().find(|e| !e.is_bookkeeping());
    assert!(
        matches!(first, Some(Event::RecordingStarted { room, .. }) if room == "r1"),
        "{first:?}"
    );
    for who in ["alice", "bob"] {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::ParticipantJoined { identity, .. } if identity == who)),
            "{who} joined: {events:?}"
        );
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Checkpoint { packets } if *packets >= 1)),
        "{events:?}"
    );
    let last = events.iter().rev().find(|e| !e.is_bookkeeping());
    assert!(
        matches!(last, Some(Event::RecordingStopped { reason }) if reason == "stopped"),
        "{last:?}"
    );
    let times: Vec<u64> = all.iter().map(|(t, _)| *t).collect();
    assert!(times[0] > 1_600_000_000_000_000_000, "Unix nanoseconds");

    // Listed, downloaded as one pcapng that tshark reads whole, then deleted.
    let (status, list) = call(&server, Method::GET, "/v1/recordings", &relay_admin()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["recordings"][0]["id"], id.as_str());
    let file = tmp.0.join("export.pcapng");
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/recordings/{id}/pcapng", base(&server)))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/x-pcapng");
    std::fs::write(&file, resp.bytes().await.unwrap()).unwrap();
    tshark_reads_whole(&file, &all, publisher.ssrc());

    let path = format!("/v1/recordings/{id}");
    assert_eq!(
        call(&server, Method::DELETE, &path, &admin).await.0,
        StatusCode::NO_CONTENT
    );
    assert!(!dir.exists());
    let (status, body) = call(&server, Method::GET, &path, &admin).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("recording_not_found"))
    );
}

/// tshark opens `file` with no malformed packet, finds as many RTP packets as were
/// recorded, those of `ssrc` with their sequence numbers, and every event as JSON.
fn tshark_reads_whole(file: &Path, all: &[(u64, Owned)], ssrc: u32) {
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(file)
        .args([
            "-d",
            "udp.port==5004,rtp",
            "-d",
            "udp.port==5005,rtp",
            "-T",
            "fields",
            "-E",
            "separator=,",
            "-e",
            "frame.interface_id",
            "-e",
            "rtp.ssrc",
            "-e",
            "rtp.seq",
            "-e",
            "_ws.malformed",
            "-e",
            "json.object",
        ])
        .output()
        .expect("tshark (scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), all.len(), "one frame per record");
    let malformed = lines
        .iter()
        .filter(|l| l.split(',').nth(3).is_some_and(|m| !m.is_empty()))
        .count();
    assert_eq!(malformed, 0, "{text}");
    let rtp: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("0,"))
        .copied()
        .collect();
    let recorded_rtp = all
        .iter()
        .filter(|(_, r)| matches!(r, Owned::Rtp(..)))
        .count();
    assert_eq!(rtp.len(), recorded_rtp);
    let ours = format!("0x{ssrc:08x}");
    assert!(
        rtp.iter()
            .any(|l| l.split(',').nth(1) == Some(ours.as_str())),
        "{text}"
    );
    let events = lines.iter().filter(|l| l.starts_with("1,")).count();
    let recorded_events = all
        .iter()
        .filter(|(_, r)| matches!(r, Owned::Event(_)))
        .count();
    assert_eq!(events, recorded_events);
}

#[tokio::test]
async fn a_recording_stops_when_its_room_ends_and_says_so() {
    let tmp = TempDir::new("rec-end");
    let server = start(&tmp.0, &[]).await;
    let (mut publisher, mut sub) = pair(&server, "r2").await;
    let admin = token("r2", ADMIN);
    let (status, started) = call(&server, Method::POST, "/v1/rooms/r2/recording", &admin).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    publish(&mut publisher, &mut sub, 3).await;
    let ssrc = publisher.ssrc();
    publisher.leave().await.unwrap();
    sub.leave().await.unwrap();
    let path = format!("/v1/recordings/{id}");
    let deadline = tokio::time::Instant::now() + WAIT;
    let view = loop {
        let (_, view) = call(&server, Method::GET, &path, &admin).await;
        if view["state"] == "stopped" {
            break view;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still recording: {view}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(view["stop_reason"], "room_ended");
    let all = records(&tmp.0.join(&id));
    for who in ["alice", "bob"] {
        assert!(
            all.iter().any(|(_, r)| matches!(r, Owned::Event(Event::ParticipantLeft { identity, .. }) if identity == who)),
            "{who} left"
        );
    }
    assert!(
        all.iter().any(
            |(_, r)| matches!(r, Owned::Event(Event::StreamEnded { ssrc: s, .. }) if *s == ssrc)
        )
    );
    let (status, _) = call(&server, Method::GET, "/v1/rooms/r2/recording", &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn rooms_matching_a_pattern_are_recorded_from_their_first_join() {
    let tmp = TempDir::new("rec-auto");
    let server = start(&tmp.0, &["match-*"]).await;
    let _lobby = player(&server, "lobby", "alice", PUBLISH).await;
    let _m = player(&server, "match-7", "alice", PUBLISH).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let running = loop {
        let (status, body) = call(
            &server,
            Method::GET,
            "/v1/rooms/match-7/recording",
            &token("match-7", ADMIN),
        )
        .await;
        if status == StatusCode::OK {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "match-7 not recorded: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(running["state"], "recording");
    let (status, _) = call(
        &server,
        Method::GET,
        "/v1/rooms/lobby/recording",
        &token("lobby", ADMIN),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "lobby is not recorded");
    assert_eq!(
        metric(&server, "gsrelay_recordings_active").await,
        Some(1.0)
    );
}

#[tokio::test]
async fn bad_recording_requests_get_clear_errors_and_change_nothing() {
    let tmp = TempDir::new("rec-bad");
    let server = start(&tmp.0, &[]).await;
    let admin = token("r3", ADMIN);
    let code = |v: &Value| v["error"]["code"].as_str().map(str::to_string);
    // No room yet: nothing to record.
    let (status, body) = call(&server, Method::POST, "/v1/rooms/r3/recording", &admin).await;
    assert_eq!(
        (status, code(&body).as_deref()),
        (StatusCode::NOT_FOUND, Some("room_not_found"))
    );
    let (_p, _s) = pair(&server, "r3").await;
    // A player's token may not record.
    let (status, _) = call(
        &server,
        Method::POST,
        "/v1/rooms/r3/recording",
        &token("r3", PUBLISH),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Another room's admin may not either.
    let (status, _) = call(
        &server,
        Method::POST,
        "/v1/rooms/r3/recording",
        &token("other", ADMIN),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call(&server, Method::DELETE, "/v1/rooms/r3/recording", &admin).await;
    assert_eq!(
        (status, code(&body).as_deref()),
        (StatusCode::NOT_FOUND, Some("not_recording"))
    );
    let (status, started) = call(&server, Method::POST, "/v1/rooms/r3/recording", &admin).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = call(&server, Method::POST, "/v1/rooms/r3/recording", &admin).await;
    assert_eq!(
        (status, code(&body).as_deref()),
        (StatusCode::CONFLICT, Some("already_recording"))
    );
    let id = started["id"].as_str().unwrap();
    let (status, body) = call(
        &server,
        Method::DELETE,
        &format!("/v1/recordings/{id}"),
        &admin,
    )
    .await;
    assert_eq!(
        (status, code(&body).as_deref()),
        (StatusCode::CONFLICT, Some("recording_running"))
    );
    for bad in [
        "..",
        "rec-1-..%2F..%2Fx",
        "nothing",
        "rec-1-abcdef12",
        "%2Fetc%2Fpasswd",
    ] {
        let (status, _) = call(
            &server,
            Method::GET,
            &format!("/v1/recordings/{bad}"),
            &admin,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{bad}");
        let (status, _) = call(
            &server,
            Method::GET,
            &format!("/v1/recordings/{bad}/pcapng"),
            &admin,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{bad}");
    }
    // Listing needs a relay-wide admin.
    let (status, _) = call(&server, Method::GET, "/v1/recordings", &admin).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The recording went on through all of it.
    let (status, body) = call(&server, Method::GET, "/v1/rooms/r3/recording", &admin).await;
    assert_eq!((status, body["id"].as_str()), (StatusCode::OK, Some(id)));
}

#[tokio::test]
async fn ownership_changes_are_recorded() {
    let tmp = TempDir::new("rec-own");
    let server = start(&tmp.0, &[]).await;
    let (mut alice, mut sub) = pair(&server, "r4").await;
    let mut bob = player(
        &server,
        "r4",
        "bob-holder",
        support::server::PUBLISH_SUBSCRIBE,
    )
    .await;
    publish(&mut alice, &mut sub, 1).await;
    let admin = token("r4", ADMIN);
    let (status, started) = call(&server, Method::POST, "/v1/rooms/r4/recording", &admin).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let dir = tmp.0.join(started["id"].as_str().unwrap());
    let ball = (alice.ssrc(), 7);
    let changes = |holder: Option<u32>| {
        records(&dir).into_iter().any(|(_, r)| {
            matches!(r, Owned::Event(Event::Ownership { ssrc, object, holder: h })
                if (ssrc, object, h) == (ball.0, ball.1, holder))
        })
    };
    bob.request_objects(&[ball]).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !changes(Some(bob.ssrc())) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "bob's hold not recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bob.release_objects(&[ball]).await.unwrap();
    while !changes(None) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the release not recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn retention_deletes_stopped_recordings_past_their_age() {
    let tmp = TempDir::new("rec-retention");
    let cfg = gsrelay::serve::ServeConfig {
        recording_dir: tmp.0.clone(),
        recording_max_age_secs: 1,
        shards: 1,
        ..support::server::config(1)
    };
    let server = gsrelay::serve::start(cfg).await.unwrap();
    let (mut alice, mut sub) = pair(&server, "r5").await;
    let admin = token("r5", ADMIN);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, started) = call(&server, Method::POST, "/v1/rooms/r5/recording", &admin).await;
        assert_eq!(status, StatusCode::CREATED, "{started}");
        ids.push(started["id"].as_str().unwrap().to_string());
        publish(&mut alice, &mut sub, 3).await;
        let (status, _) = call(&server, Method::DELETE, "/v1/rooms/r5/recording", &admin).await;
        assert_eq!(status, StatusCode::OK);
        // Past the first one's age before the second one ends.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    // The second one's end deleted the first, older than a second; itself it kept.
    let (_, list) = call(&server, Method::GET, "/v1/recordings", &relay_admin()).await;
    let listed: Vec<&str> = list["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(!listed.contains(&ids[0].as_str()), "{list}");
    assert!(!tmp.0.join(&ids[0]).exists());
    assert_eq!(
        metric(&server, "gsrelay_recordings_deleted_total").await,
        Some(1.0)
    );
}

#[tokio::test]
async fn recordings_can_be_encrypted_at_rest() {
    let tmp = TempDir::new("rec-enc");
    let (key_file, other_key) = (tmp.0.join("key"), tmp.0.join("other-key"));
    std::fs::write(&key_file, "5a".repeat(32) + "\n").unwrap();
    std::fs::write(&other_key, "a5".repeat(32)).unwrap();
    let recs = tmp.0.join("recs");
    let cfg = gsrelay::serve::ServeConfig {
        recording_dir: recs.clone(),
        recording_key_file: Some(key_file.clone()),
        shards: 1,
        ..support::server::config(1)
    };
    let server = gsrelay::serve::start(cfg).await.unwrap();
    let (mut alice, mut sub) = pair(&server, "secret-room").await;
    let admin = token("secret-room", ADMIN);
    let (status, started) = call(
        &server,
        Method::POST,
        "/v1/rooms/secret-room/recording",
        &admin,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    publish(&mut alice, &mut sub, 5).await;
    let (status, _) = call(
        &server,
        Method::DELETE,
        "/v1/rooms/secret-room/recording",
        &admin,
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // On disk: sealed, nothing of the room readable.
    let dir = recs.join(&id);
    let sealed = std::fs::read(dir.join("000000.pcapng.enc")).unwrap();
    assert!(!dir.join("000000.pcapng").exists());
    assert!(
        !sealed.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]),
        "a pcapng header in the clear"
    );
    assert!(
        !sealed.windows(11).any(|w| w == b"secret-room"),
        "the room's name in the clear"
    );
    assert!(matches!(
        Recording::open(&dir),
        Err(gsrelay::record::RecordingError::Encrypted { .. })
    ));

    // The relay opens it: the download is the pcapng, and it replays.
    let body = reqwest::Client::new()
        .get(format!("{}/v1/recordings/{id}/pcapng", base(&server)))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(body.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]));
    assert!(gsrelay::record::scan(&body).unwrap().records().count() > 5);
    let replay = serde_json::json!({"recording": id, "room": "secret-replay"});
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/replays", base(&server)))
        .bearer_auth(relay_admin())
        .json(&replay)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);

    // On the command line: refused without the key or with another, read with it.
    let info = |key: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gsrelay"));
        cmd.args(["recording", "info"]).arg(&dir);
        if let Some(k) = key {
            cmd.arg("--key-file").arg(k);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, text) = info(None);
    assert!(!ok && text.contains("encrypted"), "{text}");
    let (ok, text) = info(Some(&other_key));
    assert!(!ok && text.contains("cannot decrypt"), "{text}");
    let (ok, text) = info(Some(&key_file));
    assert!(ok && text.contains("checksum good"), "{text}");
}

#[tokio::test]
async fn a_participants_metadata_is_recorded_with_its_join() {
    let tmp = TempDir::new("rec-meta");
    let server = start(&tmp.0, &[]).await;
    let (_alice, _sub) = pair(&server, "r7").await;
    let admin = token("r7", ADMIN);
    let patch = reqwest::Client::new()
        .patch(format!("{}/v1/rooms/r7/participants/alice", base(&server)))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"metadata": {"team": "red"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patch.status(), StatusCode::OK);
    let (status, started) = call(&server, Method::POST, "/v1/rooms/r7/recording", &admin).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let dir = tmp.0.join(started["id"].as_str().unwrap());
    // Alice joins again (a second device): the recording has her metadata with it.
    let _again = player(&server, "r7", "alice", PUBLISH).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let found = records(&dir).into_iter().any(|(_, r)| {
            matches!(r, Owned::Event(Event::ParticipantJoined { identity, metadata: Some(m), .. })
                if identity == "alice" && m.contains("red"))
        });
        if found {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no metadata recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
