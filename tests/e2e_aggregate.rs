//! Aggregated delivery end to end: a whole relay on loopback port 0, clients joining over
//! HTTP and speaking SRTP over UDP; a subscriber in aggregated mode receives several
//! publishers' objects in one stream from the relay and keeps their state.

mod support;

use gsrelay::client::{Client, JoinOptions, Received, RoomState, Update, updates};
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::{Hand1, Head1, Loc2, Object};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use support::server::{PUBLISH, SUBSCRIBE, base, room_info, start, token};

/// How long what must come may take.
const WAIT: Duration = Duration::from_secs(5);

async fn join(server: &Server, room: &str, rights: Rights, opts: JoinOptions) -> Client {
    Client::join(&base(server), &token(room, rights), room, opts)
        .await
        .unwrap()
}

/// An aggregated subscriber that has latched its address with an RR.
async fn aggregated_subscriber(server: &Server, room: &str, max_delay_ms: u32) -> Client {
    let mut c = join(
        server,
        room,
        SUBSCRIBE,
        JoinOptions::aggregated(Some(max_delay_ms)),
    )
    .await;
    c.send_rr().await.unwrap();
    c
}

fn head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 7,
        location: Loc2 {
            x,
            y: 1.7,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

fn hand(id: u64, x: f32) -> Object {
    Object::Hand1(Hand1 {
        id,
        time: 7,
        left: id.is_multiple_of(2),
        location: Loc2 {
            x,
            ..Loc2::default()
        },
        ..Hand1::default()
    })
}

/// What the publishers sent last, per sender and objectID.
type Sent = BTreeMap<u32, BTreeMap<u64, Object>>;

fn record(sent: &mut Sent, ssrc: u32, objects: &[Object]) {
    for o in objects {
        sent.entry(ssrc)
            .or_default()
            .insert(o.id().unwrap(), o.clone());
    }
}

/// Whether `state` holds exactly what `sent` says for every sender in `sent`, and no one
/// else.
fn matches(state: &RoomState, sent: &Sent) -> bool {
    state.senders().count() == sent.len()
        && sent
            .iter()
            .all(|(ssrc, objects)| state.sender(*ssrc) == Some(objects))
}

/// Reads updates into `state` until it matches `sent` (or fails after [`WAIT`]); returns
/// the largest number of senders one aggregated packet carried.
async fn converge(c: &mut Client, state: &mut RoomState, sent: &Sent) -> usize {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut widest = 0;
    while !matches(state, sent) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let received = c.recv(left).await.unwrap();
        let Some(received) = received else {
            panic!("state never matched: have {state:?}, want {sent:?}");
        };
        if let Received::Rtp { ssrc, .. } = &received {
            assert_eq!(*ssrc, c.relay_ssrc(), "aggregated: only the relay's stream");
        }
        let got = updates(&received, c.dialect()).unwrap();
        let senders = got
            .iter()
            .filter(|u| matches!(u, Update::Objects { .. }))
            .count();
        widest = widest.max(senders);
        for u in &got {
            state.apply(u);
        }
    }
    widest
}

#[tokio::test]
async fn an_aggregated_subscriber_gets_every_publishers_state_in_one_stream() {
    let server = start().await;
    let room = "dense";
    let mut publishers = Vec::new();
    for _ in 0..3 {
        publishers.push(join(&server, room, PUBLISH, JoinOptions::default()).await);
    }
    // A long delay, so that the three publishers' updates share packets.
    let mut sub = aggregated_subscriber(&server, room, 200).await;
    let mut per_stream = join(&server, room, SUBSCRIBE, JoinOptions::default()).await;
    per_stream.send_rr().await.unwrap();

    let mut sent = Sent::new();
    for round in 0..3 {
        for (k, p) in publishers.iter_mut().enumerate() {
            let x = (10 * k + round) as f32;
            let objects = vec![head(1, x), hand(2, x + 0.5), hand(3, x - 0.5)];
            p.send_objects(&objects).await.unwrap();
            record(&mut sent, p.ssrc(), &objects);
        }
    }
    let mut state = RoomState::default();
    let widest = converge(&mut sub, &mut state, &sent).await;
    assert!(
        widest >= 2,
        "one aggregated packet carried several publishers ({widest})"
    );

    // The per-stream subscriber in the same room gets each sender's own stream.
    let mut theirs = RoomState::default();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !matches(&theirs, &sent) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(received) = per_stream.recv(left).await.unwrap() else {
            panic!("per-stream state never matched");
        };
        if let Received::Rtp { ssrc, .. } = &received {
            assert_ne!(*ssrc, per_stream.relay_ssrc());
        }
        for u in updates(&received, per_stream.dialect()).unwrap() {
            theirs.apply(&u);
        }
    }

    // A publisher leaving is announced by a BYE naming it, and its state goes.
    let gone = publishers.remove(0);
    let gone_ssrc = gone.ssrc();
    gone.leave().await.unwrap();
    sent.remove(&gone_ssrc);
    converge(&mut sub, &mut state, &sent).await;
    assert!(state.sender(gone_ssrc).is_none());

    // A late aggregated joiner gets the room's state from a FIR naming the relay.
    let mut late = aggregated_subscriber(&server, room, 10).await;
    late.send_fir(late.relay_ssrc()).await.unwrap();
    let mut late_state = RoomState::default();
    converge(&mut late, &mut late_state, &sent).await;

    // Live updates keep flowing to it, newest state first.
    let objects = vec![head(1, 99.0)];
    publishers[0].send_objects(&objects).await.unwrap();
    record(&mut sent, publishers[0].ssrc(), &objects);
    converge(&mut late, &mut late_state, &sent).await;

    for p in publishers {
        p.leave().await.unwrap();
    }
    sub.leave().await.unwrap();
    late.leave().await.unwrap();
    per_stream.leave().await.unwrap();
}

#[tokio::test]
async fn delivery_is_chosen_at_join_changed_with_the_interest_and_validated() {
    let server = start().await;
    let http = reqwest::Client::new();
    let room = "modes";
    let join_url = format!("{}/v1/rooms/{room}/sessions", base(&server));
    for (delivery, field) in [
        (
            json!({"mode": "aggregated", "max_delay_ms": 1001}),
            "interest.delivery.max_delay_ms",
        ),
        (json!({"mode": "bundled"}), "interest.delivery.mode"),
        (json!({"max_delay_ms": 5}), "interest.delivery.max_delay_ms"),
        (
            json!({"mode": "aggregated", "delay": 5}),
            "interest.delivery",
        ),
    ] {
        let body = json!({"transport": "rtp", "interest": {"delivery": delivery}});
        let resp = http
            .post(&join_url)
            .bearer_auth(token(room, SUBSCRIBE))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 422, "{body}");
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"]["code"], "invalid_interest");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{message}");
    }
    // Per-stream at join, aggregated after a PUT, as the admin's room view shows.
    let c = join(&server, room, SUBSCRIBE, JoinOptions::default()).await;
    let id = gsrelay::format_session_id(c.session());
    let mode = || async {
        let info = room_info(&server, room).await;
        info["sessions"][0]["delivery"].clone()
    };
    assert_eq!(mode().await, "per_stream");
    let resp = http
        .put(format!("{}/v1/sessions/{id}/interest", base(&server)))
        .bearer_auth(token(room, SUBSCRIBE))
        .json(&json!({"delivery": {"mode": "aggregated", "max_delay_ms": 0}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(mode().await, "aggregated");
    c.leave().await.unwrap();
}
