//! Webhooks against real HTTP receivers on loopback: a relay started with `webhook_urls`
//! POSTs its rooms' events to an axum server (or a bare TCP listener that misbehaves),
//! which checks each request's JWT with the webhook key and the `sha256` claim against
//! the body, as `docs/webhooks.md` tells a backend to. Sessions join and publish through
//! the Rust client over UDP/SRTP. Nothing sleeps and hopes: the tests wait for requests
//! on a channel, or poll `/metrics` until a count is reached, each with a deadline.

mod support;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use gsrelay::client::{Client, JoinOptions};
use gsrelay::serve::{self as server, ServeConfig, Server};
use gsrelay::token::Rights;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::moving_head;
use support::server::{PUBLISH, SUBSCRIBE, base, config, metric, now, token_as};
use support::tools::{root, tool};
use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, mpsc};

/// The key the relays sign with and the receivers verify with.
const KEY: &str = "webhook-test-key-0123456789abcdef";

/// Another key: a receiver holding it must refuse every webhook.
const WRONG_KEY: &str = "not-the-webhook-key-0123456789abc";

const ROOM: &str = "hooked";

/// How long anything the tests wait for may take.
const WAIT: Duration = Duration::from_secs(20);

/// The claims a receiver checks.
#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    iat: u64,
    exp: u64,
    sha256: String,
}

/// Checks a webhook as a backend does: the bearer token's HS256 signature with `key`, its
/// expiry, and its `sha256` claim against the body's bytes.
fn verify(key: &str, headers: &HeaderMap, body: &[u8]) -> Result<Claims, String> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or("no bearer token")?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&["gsrelay"]);
    validation.set_required_spec_claims(&["exp", "iss"]);
    let claims = jsonwebtoken::decode::<Claims>(
        token,
        &DecodingKey::from_secret(key.as_bytes()),
        &validation,
    )
    .map_err(|e| format!("token: {e}"))?
    .claims;
    let sha256 = STANDARD.encode(ring::digest::digest(&ring::digest::SHA256, body));
    if claims.sha256 != sha256 {
        return Err("the body is not the one signed".into());
    }
    Ok(claims)
}

/// How a receiver answers its `n`th request (from 0).
#[derive(Clone)]
enum Answer {
    /// 204 No Content, when the request verifies (401 otherwise).
    Ok,
    /// This status.
    Status(u16),
    /// Never answers.
    Hang,
    /// Answers (as [`Answer::Ok`]) once the test notifies.
    After(Arc<Notify>),
}

/// One request a receiver got.
#[derive(Debug)]
struct Hit {
    headers: HeaderMap,
    body: Bytes,
    /// The body, parsed.
    event: Value,
    /// What [`verify`] made of it with the receiver's key.
    verified: Result<Claims, String>,
}

impl Hit {
    fn name(&self) -> &str {
        self.event["event"].as_str().unwrap_or("?")
    }

    fn identity(&self) -> Option<&str> {
        self.event["participant"]["identity"].as_str()
    }

    fn id(&self) -> &str {
        self.event["id"].as_str().unwrap_or("?")
    }
}

struct Receiver {
    key: &'static str,
    answer: Box<dyn Fn(usize) -> Answer + Send + Sync>,
    count: AtomicUsize,
    hits: mpsc::UnboundedSender<Hit>,
}

async fn hook(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let n = r.count.fetch_add(1, Ordering::SeqCst);
    let verified = verify(r.key, &headers, &body);
    let ok = verified.is_ok();
    let event = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let _ = r.hits.send(Hit {
        headers,
        body,
        event,
        verified,
    });
    let answer = match (r.answer)(n) {
        Answer::After(go) => {
            go.notified().await;
            Answer::Ok
        }
        a => a,
    };
    match answer {
        Answer::Ok | Answer::After(_) if ok => StatusCode::NO_CONTENT,
        Answer::Ok | Answer::After(_) => StatusCode::UNAUTHORIZED,
        Answer::Status(s) => StatusCode::from_u16(s).unwrap(),
        Answer::Hang => std::future::pending().await,
    }
}

/// A receiver on a loopback port verifying with `key`, answering as `answer` says; its
/// URL and the requests it gets.
async fn receiver(
    key: &'static str,
    answer: impl Fn(usize) -> Answer + Send + Sync + 'static,
) -> (String, mpsc::UnboundedReceiver<Hit>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let state = Arc::new(Receiver {
        key,
        answer: Box::new(answer),
        count: AtomicUsize::new(0),
        hits: tx,
    });
    let app = Router::new().route("/hooks", post(hook)).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hooks"), rx)
}

/// A listener that reads the start of each request and closes the connection without
/// answering; the connections it took.
async fn closing_receiver() -> (String, mpsc::UnboundedReceiver<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 64];
            let _ = conn.read(&mut buf).await;
            let _ = tx.send(());
        }
    });
    (format!("http://{addr}/hooks"), rx)
}

/// A loopback address nothing listens on, held while the socket lives: bound and never
/// listening, so a connection to it is refused and no other test's listener can take
/// the port (one let go at once could be another test's receiver a moment later).
fn nobody() -> (SocketAddr, socket2::Socket) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    (addr, socket)
}

/// A relay of one shard (one room's events then come in one order) sending webhooks
/// signed with [`KEY`] to `urls`.
fn hooked(urls: &[&str]) -> ServeConfig {
    ServeConfig {
        shards: 1,
        webhook_urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        webhook_key: Some(KEY.into()),
        ..config(1)
    }
}

/// Joins [`ROOM`] over UDP as `identity`.
async fn join(server: &Server, identity: &str, rights: Rights) -> Client {
    let token = token_as(ROOM, identity, rights, now(), 600);
    Client::join(&base(server), &token, ROOM, JoinOptions::default())
        .await
        .unwrap()
}

/// The next request `hits` gets.
async fn next<T>(hits: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(WAIT, hits.recv())
        .await
        .expect("no request in time")
        .expect("the receiver is gone")
}

/// The relay's `gsrelay_webhook_deliveries_total` of `outcome`.
async fn count(server: &Server, outcome: &str) -> f64 {
    let series = format!("gsrelay_webhook_deliveries_total{{outcome=\"{outcome}\"}}");
    metric(server, &series).await.unwrap_or(f64::NAN)
}

/// Waits until the relay has counted `want` webhooks of `outcome`.
async fn until_counted(server: &Server, outcome: &str, want: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = count(server, outcome).await;
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{outcome}: {got}, never {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts every outcome's count at once.
async fn assert_counts(server: &Server, want: [(&str, f64); 5]) {
    for (outcome, n) in want {
        assert_eq!(count(server, outcome).await, n, "{outcome}");
    }
}

#[tokio::test]
async fn a_room_s_life_arrives_signed_and_in_order() {
    let (url, mut hits) = receiver(KEY, |_| Answer::Ok).await;
    let relay = server::start(hooked(&[&url])).await.unwrap();
    let mut got = Vec::new();
    let mut expect = async |n: usize, got: &mut Vec<Hit>| {
        for _ in 0..n {
            got.push(next(&mut hits).await);
        }
    };

    let mut alice = join(&relay, "alice", PUBLISH).await;
    expect(2, &mut got).await;
    alice.send_objects(&[moving_head(1, 1.0)]).await.unwrap();
    expect(1, &mut got).await;
    let bob = join(&relay, "bob", SUBSCRIBE).await;
    expect(1, &mut got).await;
    alice.send_bye().await.unwrap();
    expect(1, &mut got).await;
    let (alice_session, alice_ssrc) = (alice.session(), alice.ssrc());
    alice.leave().await.unwrap();
    expect(1, &mut got).await;
    bob.leave().await.unwrap();
    expect(2, &mut got).await;

    let seen: Vec<(&str, Option<&str>)> = got.iter().map(|h| (h.name(), h.identity())).collect();
    assert_eq!(
        seen,
        [
            ("room_started", None),
            ("participant_joined", Some("alice")),
            ("stream_started", Some("alice")),
            ("participant_joined", Some("bob")),
            ("stream_ended", Some("alice")),
            ("participant_left", Some("alice")),
            ("participant_left", Some("bob")),
            ("room_finished", None),
        ]
    );
    let mut ids = BTreeSet::new();
    for h in &got {
        let claims = h
            .verified
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", h.name()));
        assert_eq!(claims.iss, "gsrelay");
        assert!(claims.exp > claims.iat && claims.exp - claims.iat <= 300);
        assert_eq!(h.headers["content-type"], "application/webhook+json");
        assert_eq!(
            h.headers["webhook-id"],
            h.id(),
            "the header names the event"
        );
        assert!(ids.insert(h.id().to_owned()), "ids are unique");
        assert_eq!(h.event["room"]["name"], ROOM);
        assert!(h.event["created_at"].as_u64().unwrap() / 1000 >= now() - 60);
        assert!(h.event.get("node").is_none(), "no node outside a cluster");
    }
    let session = format!("s{alice_session:016x}");
    for h in got.iter().filter(|h| h.identity() == Some("alice")) {
        assert_eq!(h.event["session_id"], session, "{}", h.name());
    }
    for h in [&got[2], &got[4]] {
        assert_eq!(h.event["ssrc"], alice_ssrc, "{}", h.name());
    }
    assert_eq!(got[5].event["reason"], "left");
    assert_eq!(got[6].event["reason"], "left");
    assert!(got[0].event.get("participant").is_none());
    assert_counts(
        &relay,
        [
            ("delivered", 8.0),
            ("retried", 0.0),
            ("rejected", 0.0),
            ("failed", 0.0),
            ("dropped", 0.0),
        ],
    )
    .await;
    assert_eq!(metric(&relay, "gsrelay_webhook_queued").await, Some(0.0));
    assert_eq!(
        metric(&relay, "gsrelay_webhook_delivery_seconds_count").await,
        Some(8.0)
    );
    relay.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_the_same_event_a_third_time() {
    let (url, mut hits) = receiver(KEY, |n| match n {
        0 | 1 => Answer::Status(500),
        _ => Answer::Ok,
    })
    .await;
    let relay = server::start(hooked(&[&url])).await.unwrap();
    let _alice = join(&relay, "alice", PUBLISH).await;
    until_counted(&relay, "delivered", 2.0).await;
    let got: Vec<Hit> = [
        next(&mut hits).await,
        next(&mut hits).await,
        next(&mut hits).await,
        next(&mut hits).await,
    ]
    .into();
    let names: Vec<&str> = got.iter().map(Hit::name).collect();
    assert_eq!(
        names,
        [
            "room_started",
            "room_started",
            "room_started",
            "participant_joined"
        ],
        "the retried event holds up the next one: order is kept"
    );
    assert!(
        got[0].body == got[1].body && got[1].body == got[2].body,
        "the same body each time"
    );
    assert_eq!(got[0].headers["webhook-id"], got[2].headers["webhook-id"]);
    assert_ne!(got[2].id(), got[3].id());
    assert!(got.iter().all(|h| h.verified.is_ok()));
    assert!(hits.try_recv().is_err(), "delivered once: no more requests");
    assert_counts(
        &relay,
        [
            ("delivered", 2.0),
            ("retried", 2.0),
            ("rejected", 0.0),
            ("failed", 0.0),
            ("dropped", 0.0),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_receiver_that_is_down_costs_counted_failures_and_nothing_else() {
    let (down, _held) = nobody();
    let url = format!("http://{down}/hooks");
    let relay = server::start(ServeConfig {
        webhook_attempts: 2,
        ..hooked(&[&url])
    })
    .await
    .unwrap();
    let mut clients = Vec::new();
    for who in ["alice", "bob", "carol"] {
        clients.push(join(&relay, who, PUBLISH).await);
    }
    // Each of the 4 events (the room's start, three joins): one attempt refused, a wait,
    // a second refused, given up.
    until_counted(&relay, "failed", 4.0).await;
    assert_counts(
        &relay,
        [
            ("delivered", 0.0),
            ("retried", 4.0),
            ("rejected", 0.0),
            ("failed", 4.0),
            ("dropped", 0.0),
        ],
    )
    .await;
    // The relay goes on: another join, a leave.
    let dave = join(&relay, "dave", PUBLISH).await;
    dave.leave().await.unwrap();
    until_counted(&relay, "failed", 6.0).await;
}

#[tokio::test]
async fn hanging_and_closing_receivers_are_retried_then_given_up_without_holding_up_others() {
    let (hang, mut hung) = receiver(KEY, |_| Answer::Hang).await;
    let (close, mut closed) = closing_receiver().await;
    let (ok, mut hits) = receiver(KEY, |_| Answer::Ok).await;
    let relay = server::start(ServeConfig {
        webhook_attempts: 2,
        webhook_timeout_secs: 1,
        ..hooked(&[&hang, &close, &ok])
    })
    .await
    .unwrap();
    let started = Instant::now();
    let _alice = join(&relay, "alice", PUBLISH).await;
    // Queueing never waits: a join that waited on the hanging receiver would take its
    // whole 1 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the join took {:?}",
        started.elapsed()
    );
    // The good receiver has both events while the others are still being tried.
    assert_eq!(next(&mut hits).await.name(), "room_started");
    assert_eq!(next(&mut hits).await.name(), "participant_joined");
    until_counted(&relay, "failed", 4.0).await;
    assert_counts(
        &relay,
        [
            ("delivered", 2.0),
            ("retried", 4.0),
            ("rejected", 0.0),
            ("failed", 4.0),
            ("dropped", 0.0),
        ],
    )
    .await;
    for _ in 0..4 {
        assert!(next(&mut hung).await.verified.is_ok());
        next(&mut closed).await;
    }
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_while_its_receiver_stalls() {
    let go = Arc::new(Notify::new());
    let first = go.clone();
    let (url, mut hits) = receiver(KEY, move |n| match n {
        0 => Answer::After(first.clone()),
        _ => Answer::Ok,
    })
    .await;
    let relay = server::start(ServeConfig {
        webhook_queue: 1,
        webhook_timeout_secs: 60,
        ..hooked(&[&url])
    })
    .await
    .unwrap();
    let mut clients = vec![join(&relay, "alice", PUBLISH).await];
    assert_eq!(
        next(&mut hits).await.name(),
        "room_started",
        "in flight, stalled"
    );
    for who in ["bob", "carol", "dave"] {
        clients.push(join(&relay, who, PUBLISH).await);
    }
    // Five events: one in flight, one queued, three dropped (whichever joins they were).
    until_counted(&relay, "dropped", 3.0).await;
    assert_eq!(metric(&relay, "gsrelay_webhook_queued").await, Some(1.0));
    go.notify_one();
    until_counted(&relay, "delivered", 2.0).await;
    assert_eq!(next(&mut hits).await.name(), "participant_joined");
    assert_eq!(metric(&relay, "gsrelay_webhook_queued").await, Some(0.0));
    assert_counts(
        &relay,
        [
            ("delivered", 2.0),
            ("retried", 0.0),
            ("rejected", 0.0),
            ("failed", 0.0),
            ("dropped", 3.0),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_receiver_with_another_key_refuses_and_the_signature_is_the_keys() {
    let (url, mut hits) = receiver(WRONG_KEY, |_| Answer::Ok).await;
    let relay = server::start(hooked(&[&url])).await.unwrap();
    let _alice = join(&relay, "alice", PUBLISH).await;
    until_counted(&relay, "rejected", 2.0).await;
    assert_counts(
        &relay,
        [
            ("delivered", 0.0),
            ("retried", 0.0),
            ("rejected", 2.0),
            ("failed", 0.0),
            ("dropped", 0.0),
        ],
    )
    .await;
    for _ in 0..2 {
        let h = next(&mut hits).await;
        let refused = h.verified.as_ref().unwrap_err();
        assert!(refused.contains("InvalidSignature"), "{refused}");
        // The same request verifies with the relay's key, and only with its own body.
        verify(KEY, &h.headers, &h.body).unwrap();
        let mut tampered = h.body.to_vec();
        tampered[h.body.len() - 2] ^= 1;
        assert_eq!(
            verify(KEY, &h.headers, &tampered).unwrap_err(),
            "the body is not the one signed"
        );
    }
    assert!(hits.try_recv().is_err(), "a refusal is not retried");
}

#[tokio::test]
async fn a_bad_webhook_configuration_stops_the_start() {
    let bad_url = server::start(hooked(&["ftp://127.0.0.1/hooks"])).await;
    let e = format!("{:#}", bad_url.err().expect("refused"));
    assert!(e.contains("webhook_urls[0]") && e.contains("ftp"), "{e}");
    let short_key = server::start(ServeConfig {
        webhook_key: Some("too-short".into()),
        ..hooked(&["http://127.0.0.1:9/hooks"])
    })
    .await;
    let e = format!("{:#}", short_key.err().expect("refused"));
    assert!(e.contains("webhook_key must be at least 16 bytes"), "{e}");
}

/// The first code block in `lang` of `docs/webhooks.md`'s "Verifying a webhook".
fn documented(lang: &str) -> String {
    let doc = std::fs::read_to_string(root().join("docs/webhooks.md")).unwrap();
    let section = doc.split("## Verifying a webhook").nth(1).unwrap();
    let start = section
        .find(&format!("```{lang}\n"))
        .unwrap_or_else(|| panic!("no {lang} block"))
        + lang.len()
        + 4;
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_owned()
}

/// What the documented verifier in `lang` says of a request: `ok <event>` or
/// `refused: <why>`.
fn run_documented(lang: &str, key: &str, authorization: &str, body: &[u8]) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let file = std::env::temp_dir().join(format!(
        "gsrelay-webhook-{}-{}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::write(&file, body).unwrap();
    let (program, args) = match lang {
        "js" => (
            "node",
            vec![
                "--input-type=module".to_owned(),
                "-e".to_owned(),
                documented("js")
                    + r#"
import { readFileSync } from "node:fs";
try {
  console.log("ok " + verifyWebhook(process.env.AUTH, readFileSync(process.env.BODY)).event);
} catch (e) {
  console.log("refused: " + e.message);
}
"#,
            ],
        ),
        _ => (
            "python3",
            vec![
                "-c".to_owned(),
                documented("python")
                    + r#"
try:
    print("ok " + verify_webhook(os.environ["AUTH"], open(os.environ["BODY"], "rb").read())["event"])
except ValueError as e:
    print("refused: " + str(e))
"#,
            ],
        ),
    };
    let out = std::process::Command::new(tool(program))
        .args(&args)
        .env("GSRELAY_WEBHOOK_KEY", key)
        .env("AUTH", authorization)
        .env("BODY", &file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test]
async fn the_documented_verifiers_accept_a_real_webhook_and_refuse_forgeries() {
    let (url, mut hits) = receiver(KEY, |_| Answer::Ok).await;
    let relay = server::start(hooked(&[&url])).await.unwrap();
    let _alice = join(&relay, "alice", PUBLISH).await;
    let hit = next(&mut hits).await;
    let auth = hit.headers["authorization"].to_str().unwrap();
    let mut tampered = hit.body.to_vec();
    tampered.splice(1..1, *b"\"admin\":true,");
    for lang in ["js", "python"] {
        assert_eq!(
            run_documented(lang, KEY, auth, &hit.body),
            "ok room_started",
            "{lang}"
        );
        assert_eq!(
            run_documented(lang, KEY, auth, &tampered),
            "refused: the body is not the one signed",
            "{lang}"
        );
        assert_eq!(
            run_documented(lang, WRONG_KEY, auth, &hit.body),
            "refused: bad signature",
            "{lang}"
        );
    }
}

/// The count of `outcome` in `metrics`, which outlive their server.
fn counted(metrics: &gsrelay::internal::Metrics, outcome: &str) -> u64 {
    metrics
        .webhook_deliveries
        .with_label_values(&[outcome])
        .get()
}

#[tokio::test]
async fn a_shutdown_delivers_what_is_queued() {
    // The first attempt fails, so the room's events are still queued, behind a backoff,
    // when the shutdown begins.
    let (url, mut hits) = receiver(KEY, |n| match n {
        0 => Answer::Status(503),
        _ => Answer::Ok,
    })
    .await;
    let relay = server::start(hooked(&[&url])).await.unwrap();
    let metrics = relay.metrics.clone();
    let alice = join(&relay, "alice", PUBLISH).await;
    alice.leave().await.unwrap();
    relay.shutdown().await.unwrap();
    assert_eq!(counted(&metrics, "delivered"), 4);
    assert_eq!(counted(&metrics, "dropped"), 0);
    let mut names = Vec::new();
    while let Ok(h) = hits.try_recv() {
        names.push(h.name().to_owned());
    }
    assert_eq!(
        names,
        [
            "room_started",
            "room_started",
            "participant_joined",
            "participant_left",
            "room_finished"
        ]
    );
}

#[tokio::test]
async fn a_shutdown_drops_and_counts_what_a_hung_receiver_holds() {
    let (url, mut hung) = receiver(KEY, |_| Answer::Hang).await;
    let relay = server::start(ServeConfig {
        webhook_timeout_secs: 120,
        ..hooked(&[&url])
    })
    .await
    .unwrap();
    let metrics = relay.metrics.clone();
    let alice = join(&relay, "alice", PUBLISH).await;
    alice.leave().await.unwrap();
    next(&mut hung).await;
    let started = Instant::now();
    relay.shutdown().await.unwrap();
    // No session is left to drain: the stop budget bounds the shutdown.
    let budget = 2 * server::STOP_TIMEOUT + Duration::from_secs(2);
    assert!(started.elapsed() < budget, "{:?}", started.elapsed());
    // One event in flight, three queued: none delivered, all counted.
    assert_eq!(counted(&metrics, "dropped"), 4);
    assert_eq!(counted(&metrics, "delivered"), 0);
    assert_eq!(metrics.webhook_queued.get(), 0);
}

/// The next request `hits` gets named `event`, the others passed over.
async fn next_named(hits: &mut mpsc::UnboundedReceiver<Hit>, event: &str) -> Hit {
    loop {
        let h = next(hits).await;
        if h.name() == event {
            return h;
        }
    }
}

#[tokio::test]
async fn a_recordings_start_and_stop_arrive_with_its_id_and_why_it_stopped() {
    let (url, mut hits) = receiver(KEY, |_| Answer::Ok).await;
    let relay = server::start(hooked(&[&url])).await.unwrap();
    let _alice = join(&relay, "alice", PUBLISH).await;
    let admin = support::server::token(ROOM, support::server::ADMIN);
    let path = format!("{}/v1/rooms/{ROOM}/recording", base(&relay));
    let http = reqwest::Client::new();
    let started: Value = http
        .post(&path)
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = started["id"].as_str().expect("a recording").to_owned();
    let h = next_named(&mut hits, "recording_started").await;
    assert!(h.verified.is_ok());
    assert_eq!(h.event["room"]["name"], ROOM);
    assert_eq!(
        (
            h.event["recording"]["id"].as_str(),
            h.event["recording"]["failed"].as_bool()
        ),
        (Some(id.as_str()), Some(false))
    );
    http.delete(&path).bearer_auth(&admin).send().await.unwrap();
    let h = next_named(&mut hits, "recording_stopped").await;
    assert_eq!(h.event["recording"]["id"].as_str(), Some(id.as_str()));
    assert_eq!(h.event["recording"]["reason"], "stopped");
    assert_eq!(h.event["recording"]["failed"], false);
}
