//! Interest end to end: a whole relay from `server::start` on loopback, Rust [`Client`]s
//! joining over HTTP and speaking SRTP over UDP. The same behaviours as
//! `relay_interest.rs` (areas, objects entering in full, filtered snapshots, stream
//! filters, replacing the interest, a bandwidth cap) through real sockets.
//!
//! Nothing here sleeps and hopes: what must come is waited for with a timeout, and what
//! must not come is checked against a marker sent after it on the same stream (or after
//! an unfiltered watcher has seen it, when it is on another stream).

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::{Hand1, Head1, Loc2, Object, Object2};
use gsrelay::{Interest, format_session_id};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::server::{PUBLISH, PUBLISH_SUBSCRIBE, SUBSCRIBE, base, start, token};

/// How long a packet that must come may take.
const WAIT: Duration = Duration::from_secs(5);

async fn join(server: &Server, room: &str, rights: Rights, interest: Option<Value>) -> Client {
    let interest: Option<Interest> =
        interest.map(|v| serde_json::from_value(v).expect("interest JSON"));
    let opts = JoinOptions {
        interest,
        ..JoinOptions::default()
    };
    let mut c = Client::join(&base(server), &token(room, rights), room, opts)
        .await
        .unwrap();
    if rights.subscribe {
        // Latch the address, so the relay can send before the client publishes.
        c.send_rr().await.unwrap();
    }
    c
}

fn loc(x: f32) -> Loc2 {
    Loc2 {
        x,
        ..Loc2::default()
    }
}

fn head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 1,
        location: loc(x),
        ..Head1::default()
    })
}

fn hand(id: u64, x: f32) -> Object {
    Object::Hand1(Hand1 {
        id,
        time: 1,
        left: true,
        location: loc(x),
        ..Hand1::default()
    })
}

/// A static prop: an Object2 without a parent.
fn prop(id: u64, x: f32) -> Object {
    Object::Object2(Object2 {
        id,
        time: 1,
        location: loc(x),
        active: true,
        ..Object2::default()
    })
}

/// The next RTP packet, which must come within [`WAIT`]: (SSRC, objects).
async fn next(c: &mut Client, what: &str) -> (u32, Vec<Object>) {
    c.recv_objects(WAIT)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: nothing arrived within {WAIT:?}"))
}

/// Every packet up to and including the one holding `marker` from `ssrc`: what came
/// before the marker's packet, and the marker's packet.
async fn until_marker(
    c: &mut Client,
    ssrc: u32,
    marker: &Object,
) -> (Vec<(u32, Vec<Object>)>, Vec<Object>) {
    let mut before = Vec::new();
    loop {
        let (from, objects) = next(c, &format!("waiting for marker {marker:?}")).await;
        if from == ssrc && objects.contains(marker) {
            return (before, objects);
        }
        before.push((from, objects));
    }
}

/// Waits until `watcher` (unfiltered) receives `objects` from `ssrc`: then the relay has
/// handled that packet, and everything it sent because of it is on its way.
async fn seen(watcher: &mut Client, ssrc: u32, objects: &[Object]) {
    assert_eq!(next(watcher, "watcher").await, (ssrc, objects.to_vec()));
}

#[tokio::test]
async fn area_admits_the_near_object_not_the_far_one_until_it_comes_near() {
    let server = start().await;
    let room = "area";
    let mut p = join(&server, room, PUBLISH, None).await;
    let area = json!({"area": {"center": [0, 0, 0], "radius": 10}});
    let mut s = join(&server, room, SUBSCRIBE, Some(area)).await;

    // Same packet: the far object is cut out, the near one comes alone.
    p.send_objects(&[head(1, 5.0), head(2, 50.0)])
        .await
        .unwrap();
    assert_eq!(
        next(&mut s, "same packet").await,
        (p.ssrc(), vec![head(1, 5.0)])
    );

    // Separate packets: the far one's packet is not forwarded at all.
    p.send_objects(&[head(2, 51.0)]).await.unwrap();
    let marker = head(1, 6.0);
    p.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, got) = until_marker(&mut s, p.ssrc(), &marker).await;
    assert!(
        before.is_empty(),
        "far object in its own packet: {before:?}"
    );
    assert_eq!(got, vec![marker]);

    // The far object walks to 5 m: it arrives.
    p.send_objects(&[head(2, 5.0)]).await.unwrap();
    let marker = head(1, 7.0);
    p.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, got) = until_marker(&mut s, p.ssrc(), &marker).await;
    assert_eq!(before, vec![(p.ssrc(), vec![head(2, 5.0)])]);
    assert_eq!(got, vec![marker]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn walking_up_to_a_static_object_delivers_it_from_the_store_at_once() {
    let server = start().await;
    let room = "walk";
    let mut p = join(&server, room, PUBLISH, None).await;
    let mut w = join(&server, room, SUBSCRIBE, None).await;
    // The publisher sends its props once: one at x=50, one far away at x=200.
    let props = [prop(5, 50.0), prop(6, 200.0)];
    p.send_objects(&props).await.unwrap();
    seen(&mut w, p.ssrc(), &props).await;

    // A's area follows its own avatar; echo lets A see when the relay has its position.
    let area = json!({"echo": true, "area": {"radius": 10}});
    let mut a = join(&server, room, PUBLISH_SUBSCRIBE, Some(area)).await;
    let own = a.ssrc();
    a.send_objects(&[head(1, 0.0)]).await.unwrap();
    let marker = head(1, 0.5);
    a.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, _) = until_marker(&mut a, own, &marker).await;
    assert_eq!(
        before,
        vec![(own, vec![head(1, 0.0)])],
        "at x=0 nothing of the publisher's is near"
    );

    // A walks to x=45: the prop at 50 enters and comes from the store, in full, although
    // the publisher sends nothing; the one at 200 does not.
    let walked = Instant::now();
    a.send_objects(&[head(1, 45.0)]).await.unwrap();
    let mut got = Vec::new();
    while !got.iter().any(|(ssrc, _)| *ssrc == p.ssrc()) {
        got.push(next(&mut a, "the prop entering").await);
    }
    let delay = walked.elapsed();
    assert!(delay < Duration::from_secs(1), "took {delay:?}");
    let marker = head(1, 45.5);
    a.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, _) = until_marker(&mut a, own, &marker).await;
    got.extend(before);
    let from_p: Vec<Object> = got
        .iter()
        .filter(|(ssrc, _)| *ssrc == p.ssrc())
        .flat_map(|(_, objects)| objects.clone())
        .collect();
    assert_eq!(from_p, vec![prop(5, 50.0)], "exactly the prop that entered");
    let echoed: Vec<Object> = got
        .iter()
        .filter(|(ssrc, _)| *ssrc == own)
        .flat_map(|(_, objects)| objects.clone())
        .collect();
    assert_eq!(echoed, vec![head(1, 45.0)], "{got:?}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn fir_snapshot_holds_only_the_objects_inside_the_area() {
    let server = start().await;
    let room = "snap";
    let mut p = join(&server, room, PUBLISH, None).await;
    let mut w = join(&server, room, SUBSCRIBE, None).await;
    let state = [head(1, 1.0), head(2, 4.0), head(3, 9.0)];
    p.send_objects(&state).await.unwrap();
    seen(&mut w, p.ssrc(), &state).await;

    let area = json!({"area": {"center": [0, 0, 0], "half_extents": [5, 5, 5]}});
    let mut a = join(&server, room, SUBSCRIBE, Some(area)).await;
    a.send_fir(a.relay_ssrc()).await.unwrap();
    // The first snapshot packet means the whole snapshot is on its way; the marker goes
    // after it.
    let first = next(&mut a, "snapshot").await;
    let update = [head(1, 1.5), head(3, 9.5)];
    p.send_objects(&update).await.unwrap();
    let marker = head(1, 1.5);
    let (mut snapshot, live) = until_marker(&mut a, p.ssrc(), &marker).await;
    snapshot.insert(0, first);
    let mut got: HashMap<u64, Object> = HashMap::new();
    for (ssrc, objects) in snapshot {
        assert_eq!(ssrc, p.ssrc());
        for o in objects {
            let id = o.id().unwrap();
            assert!(got.insert(id, o).is_none(), "object {id} twice");
        }
    }
    assert_eq!(
        got,
        HashMap::from([(1, head(1, 1.0)), (2, head(2, 4.0))]),
        "the snapshot is cut to the box"
    );
    assert_eq!(
        live,
        vec![head(1, 1.5)],
        "live updates are cut to the box too"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn stream_deny_and_allow_lists_pick_publishers_by_ssrc() {
    let server = start().await;
    let room = "ssrc";
    let mut a = join(&server, room, PUBLISH, None).await;
    let mut b = join(&server, room, PUBLISH, None).await;
    let mut w = join(&server, room, SUBSCRIBE, None).await;
    let deny = json!({"streams": {"deny": [b.ssrc()]}});
    let allow = json!({"streams": {"allow": [a.ssrc()]}});
    let mut d = join(&server, room, SUBSCRIBE, Some(deny)).await;
    let mut l = join(&server, room, SUBSCRIBE, Some(allow)).await;

    for i in 0..5 {
        let x = i as f32;
        let from_b = [head(1, x), hand(2, x)];
        b.send_objects(&from_b).await.unwrap();
        // Once the watcher has b's packet, the relay has handled it; a's packet is the
        // marker that comes after it.
        seen(&mut w, b.ssrc(), &from_b).await;
        let from_a = [head(1, 100.0 + x)];
        a.send_objects(&from_a).await.unwrap();
        seen(&mut w, a.ssrc(), &from_a).await;
        for (c, name) in [(&mut d, "deny b"), (&mut l, "allow a")] {
            let (before, got) = until_marker(c, a.ssrc(), &from_a[0]).await;
            assert!(before.is_empty(), "{name}, round {i}: {before:?}");
            assert_eq!(got, from_a.to_vec(), "{name}, round {i}");
        }
    }
    server.shutdown().await.unwrap();
}

/// `PUT /v1/sessions/{id}/interest` with the session's token: (status, body).
async fn put_interest(server: &Server, room: &str, c: &Client, body: &str) -> (u16, Value) {
    let url = format!(
        "{}/v1/sessions/{}/interest",
        base(server),
        format_session_id(c.session())
    );
    let resp = reqwest::Client::new()
        .put(url)
        .bearer_auth(token(room, SUBSCRIBE))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    (status, json)
}

#[tokio::test]
async fn a_replaced_interest_takes_effect_and_an_invalid_one_is_refused() {
    let server = start().await;
    let room = "put";
    let mut p = join(&server, room, PUBLISH, None).await;
    let deny_hands = json!({"types": {"deny": ["Hand1"]}});
    let mut s = join(&server, room, SUBSCRIBE, Some(deny_hands)).await;

    // Before: hands are denied; the head after them is the marker.
    p.send_objects(&[hand(2, 0.0)]).await.unwrap();
    let marker = head(1, 0.0);
    p.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, _) = until_marker(&mut s, p.ssrc(), &marker).await;
    assert!(before.is_empty(), "a denied hand arrived: {before:?}");

    // Replace it: now heads are denied and hands arrive.
    let (status, body) = put_interest(&server, room, &s, r#"{"types":{"deny":["head1"]}}"#).await;
    assert_eq!(status, 204, "{body}");
    p.send_objects(&[head(1, 1.0)]).await.unwrap();
    let marker = hand(2, 1.0);
    p.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, got) = until_marker(&mut s, p.ssrc(), &marker).await;
    assert!(before.is_empty(), "a head after the PUT: {before:?}");
    assert_eq!(got, vec![marker]);

    // Invalid interests are 422 naming the field, and leave the interest as it was.
    let bad = [
        (r#"{"area":{"radius":-1}}"#, "interest.area.radius"),
        (
            r#"{"area":{"radius":5,"exit_radius":4}}"#,
            "interest.area.exit_radius",
        ),
        (r#"{"types":{"deny":["Head9"]}}"#, "interest.types.deny[0]"),
        (r#"{"area":{"radius":5,"bogus":1}}"#, "interest.area"),
        (r#"{"max_bitrate_bps":0}"#, "interest.max_bitrate_bps"),
    ];
    for (json, field) in bad {
        let (status, body) = put_interest(&server, room, &s, json).await;
        assert_eq!(status, 422, "{json}: {body}");
        assert_eq!(body["error"]["code"], "invalid_interest", "{json}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(field), "{json}: {message}");
    }
    p.send_objects(&[head(1, 2.0)]).await.unwrap();
    let marker = hand(2, 2.0);
    p.send_objects(std::slice::from_ref(&marker)).await.unwrap();
    let (before, _) = until_marker(&mut s, p.ssrc(), &marker).await;
    assert!(before.is_empty(), "a head after refused PUTs: {before:?}");
    server.shutdown().await.unwrap();
}

/// Objects per publish step in the isolation test.
const OBJECTS: u64 = 20;
/// Publish steps (50 Hz for 2 s).
const STEPS: u32 = 100;
/// The id of the object that ends the run.
const END: u64 = 1000;

/// What one subscriber received in the isolation test.
struct Log {
    /// (arrival, object id, its x = the publish step).
    objects: Vec<(Instant, u64, f32)>,
    /// Bytes the cap counts: payload plus the 12-byte RTP header, per packet.
    bytes: usize,
}

/// Receives until the END object arrives.
fn collect(mut c: Client, ssrc: u32) -> tokio::task::JoinHandle<Log> {
    tokio::spawn(async move {
        let mut log = Log {
            objects: Vec::new(),
            bytes: 0,
        };
        loop {
            let got = c.recv(Duration::from_secs(10)).await.unwrap();
            let Some(gsrelay::client::Received::Rtp {
                ssrc: from,
                payload,
                ..
            }) = got
            else {
                assert!(got.is_some(), "END never arrived");
                continue;
            };
            let at = Instant::now();
            assert_eq!(from, ssrc);
            log.bytes += payload.len() + 12;
            let mut end = false;
            for o in gsrelay::wire::decode(&payload, c.dialect()).unwrap() {
                let id = o.id().unwrap();
                end |= id == END;
                log.objects.push((at, id, o.position().unwrap()[0]));
            }
            if end {
                return log;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_subscriber_gets_recent_state_and_leaves_the_others_whole() {
    let server = start().await;
    let room = "isolation";
    let mut p = join(&server, room, PUBLISH, None).await;
    let fast = join(&server, room, SUBSCRIBE, None).await;
    let cap = 8000u64;
    let slow = join(
        &server,
        room,
        SUBSCRIBE,
        Some(json!({"max_bitrate_bps": cap})),
    )
    .await;
    let fast = collect(fast, p.ssrc());
    let slow = collect(slow, p.ssrc());

    // 20 heads at 50 Hz for 2 s; each head's x is the step number.
    let mut sent_at = Vec::new();
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    for step in 0..STEPS {
        tick.tick().await;
        let objects: Vec<Object> = (0..OBJECTS).map(|id| head(id, step as f32)).collect();
        // Noted before sending, so no copy can arrive before it.
        sent_at.push(Instant::now());
        p.send_objects(&objects).await.unwrap();
    }
    p.send_objects(&[head(END, STEPS as f32)]).await.unwrap();
    let published = start.elapsed();
    let (fast, slow) = (fast.await.unwrap(), slow.await.unwrap());
    let elapsed = start.elapsed();

    // The unconstrained subscriber: every update, each exactly once.
    let mut seen: HashMap<(u64, u32), u32> = HashMap::new();
    for (_, id, x) in &fast.objects {
        *seen.entry((*id, *x as u32)).or_default() += 1;
    }
    let want = (OBJECTS * STEPS as u64) as usize + 1;
    assert_eq!(fast.objects.len(), want, "fast subscriber lost updates");
    assert_eq!(seen.len(), want, "fast subscriber got duplicates");

    // The capped one: a trickle within the cap, every object at least once...
    let n = slow.objects.len();
    assert!(n * 10 < want, "slow subscriber got {n} of {want}");
    let bucket = 1500.0; // the cap's burst: one MTU
    let allowed = bucket + cap as f64 / 8.0 * elapsed.as_secs_f64() * 1.1;
    assert!(
        (slow.bytes as f64) <= allowed,
        "{} bytes in {elapsed:?} over a {cap} bit/s cap",
        slow.bytes
    );
    for id in 0..OBJECTS {
        assert!(
            slow.objects.iter().any(|(_, i, _)| *i == id),
            "object {id} starved"
        );
    }
    // ...and always recent: at arrival, its value is from the last 0.5 s of publishing.
    let mut worst = 0;
    for (at, id, x) in &slow.objects {
        let latest = sent_at.iter().rposition(|t| t <= at).unwrap_or(0) as i64;
        let age = latest - *x as i64;
        worst = worst.max(age);
        assert!(
            age <= 25,
            "object {id} with step {x} arrived when step {latest} was out ({age} steps old)"
        );
    }
    eprintln!(
        "published in {published:?}, END at the slow one after {elapsed:?}; fast {} objects; slow {n} objects, {} bytes, worst age {worst} steps",
        fast.objects.len(),
        slow.bytes
    );
    server.shutdown().await.unwrap();
}
