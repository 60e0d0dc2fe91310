//! Graceful drain of `gsrelay serve` on SIGTERM, as Kubernetes does it: the built binary
//! with live SRTP traffic, signalled from outside.
//!
//! The contract (`docs/operations.md`): at the signal `/readyz` turns 503 at once while
//! `/healthz` stays 200, new joins get 503 `draining`, existing sessions keep flowing
//! until they have all left or the grace period ends, then the process exits 0; a second
//! signal stops it at once.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::token::Rights;
use gsrelay::wire::Object;
use reqwest::StatusCode;
use std::time::{Duration, Instant};
use support::serve::{DevServe, Serve};
use support::server::{PUBLISH, SUBSCRIBE};
use support::{head, x_of};

const ROOM: &str = "arena";
/// Bound on anything that must happen promptly.
const WAIT: Duration = Duration::from_secs(5);

async fn join(relay: &DevServe, who: &str, rights: Rights) -> Client {
    let token = relay.token(ROOM, who, rights);
    Client::join(&relay.base, &token, ROOM, JoinOptions::default())
        .await
        .unwrap()
}

/// A publisher and a latched subscriber in [`ROOM`].
async fn pair(relay: &DevServe) -> (Client, Client) {
    let publisher = join(relay, "pub", PUBLISH).await;
    let mut subscriber = join(relay, "sub", SUBSCRIBE).await;
    subscriber.send_rr().await.unwrap();
    (publisher, subscriber)
}

/// Publishes `x` and waits until the subscriber receives exactly that update.
async fn flows(publisher: &mut Client, subscriber: &mut Client, x: f32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    // Resend until it arrives: the first packets may race the subscriber's latching.
    loop {
        publisher.send_objects(&[head(1, x)]).await.unwrap();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(!left.is_zero(), "update x={x} never reached the subscriber");
        let got = subscriber
            .recv_objects(left.min(Duration::from_millis(200)))
            .await
            .unwrap();
        if let Some((_, objects)) = got
            && objects
                .iter()
                .any(|o| matches!(o, Object::Head1(_)) && x_of(o) == x)
        {
            return;
        }
    }
}

async fn get(base: &str, path: &str) -> (StatusCode, String) {
    let resp = reqwest::get(format!("{base}{path}")).await.unwrap();
    (resp.status(), resp.text().await.unwrap())
}

/// Waits (bounded) until `/readyz` answers 503 `draining`; returns how long that took.
async fn readyz_turns_draining(base: &str) -> Duration {
    let asked = Instant::now();
    loop {
        let (status, body) = get(base, "/readyz").await;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            assert!(body.contains("\"draining\""), "{body}");
            return asked.elapsed();
        }
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            asked.elapsed() < WAIT,
            "/readyz still 200 {WAIT:?} after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The value of one sample line of `/metrics`, e.g. `gsrelay_draining`.
async fn metric(base: &str, series: &str) -> Option<f64> {
    let (_, text) = get(base, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn sigterm_drains_live_sessions_then_exits_zero() {
    let mut relay = Serve::dev(&["--drain-grace-secs", "60"]);
    let (mut publisher, mut subscriber) = pair(&relay).await;
    flows(&mut publisher, &mut subscriber, 1.0).await;
    assert_eq!(metric(&relay.base, "gsrelay_ready").await, Some(1.0));

    relay.serve.signal("TERM");
    let took = readyz_turns_draining(&relay.base).await;
    assert!(
        took < Duration::from_secs(1),
        "readyz took {took:?} to turn"
    );
    // Still alive: a liveness probe must not restart a draining relay.
    assert_eq!(get(&relay.base, "/healthz").await.0, StatusCode::OK);

    // New joins are refused, and counted by reason.
    let token = relay.token(ROOM, "late", SUBSCRIBE);
    let refused = Client::join(&relay.base, &token, ROOM, JoinOptions::default()).await;
    let err = refused
        .expect_err("a join during the drain must fail")
        .to_string();
    assert!(err.contains("503") && err.contains("draining"), "{err}");
    assert_eq!(metric(&relay.base, "gsrelay_draining").await, Some(1.0));
    assert_eq!(metric(&relay.base, "gsrelay_ready").await, Some(0.0));
    assert_eq!(
        metric(
            &relay.base,
            "gsrelay_joins_refused_total{reason=\"draining\"}"
        )
        .await,
        Some(1.0)
    );

    // The joined sessions keep flowing, and the relay waits for them.
    for x in [2.0, 3.0, 4.0] {
        flows(&mut publisher, &mut subscriber, x).await;
    }
    assert!(
        relay.serve.wait_exit(Duration::from_millis(300)).is_none(),
        "the relay exited with sessions still joined and grace left"
    );

    // The last one leaving ends the drain, long before the 60 s grace.
    publisher.leave().await.unwrap();
    assert!(relay.serve.wait_exit(Duration::from_millis(300)).is_none());
    subscriber.leave().await.unwrap();
    let status = relay
        .serve
        .wait_exit(WAIT)
        .expect("the relay did not exit once its last session left");
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn drain_ends_with_the_grace_period() {
    let grace = Duration::from_secs(2);
    let mut relay = Serve::dev(&["--drain-grace-secs", "2"]);
    let (mut publisher, mut subscriber) = pair(&relay).await;
    flows(&mut publisher, &mut subscriber, 1.0).await;

    let signalled = Instant::now();
    relay.serve.signal("TERM");
    readyz_turns_draining(&relay.base).await;
    // Traffic keeps flowing through the grace period...
    flows(&mut publisher, &mut subscriber, 2.0).await;
    // ...which then ends the drain with both sessions still joined.
    let status = relay
        .serve
        .wait_exit(grace + WAIT)
        .expect("the relay outlived its grace period");
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= grace,
        "exited after {:?}, before the {grace:?} grace period",
        signalled.elapsed()
    );
}

#[tokio::test]
async fn a_second_signal_stops_at_once() {
    let mut relay = Serve::dev(&["--drain-grace-secs", "600"]);
    let (mut publisher, mut subscriber) = pair(&relay).await;
    flows(&mut publisher, &mut subscriber, 1.0).await;

    relay.serve.signal("TERM");
    readyz_turns_draining(&relay.base).await;
    assert!(relay.serve.wait_exit(Duration::from_millis(300)).is_none());
    // Ctrl-C counts as the second signal too.
    relay.serve.signal("INT");
    let status = relay
        .serve
        .wait_exit(WAIT)
        .expect("the second signal did not stop the relay");
    assert!(status.success(), "{status:?}");
}
