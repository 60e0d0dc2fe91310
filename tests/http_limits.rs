//! The HTTP API's limits, each observed on real sockets against `server::start` on
//! loopback port 0: the header, body and idle timeouts, the in-flight limit, the
//! per-identity rate limit, token lifetime checks and the relay-wide room and session
//! caps. Waits are bounded waits on the condition named; limits are set small so they
//! are reached in well under a second.

mod support;

use gsrelay::serve::ServeConfig;
use gsrelay::serve::{self as server, Server};
use gsrelay::token::Claims;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::server::{ALL, SECRET, base, config, metric, now, token, token_as, token_at};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ROOM: &str = "lobby";

/// Longest any condition below is waited for; far above every limit set in these tests.
const PATIENCE: Duration = Duration::from_secs(10);

/// A short limit, reached quickly but far above scheduling noise.
const SHORT: Duration = Duration::from_millis(500);

async fn start(adjust: impl FnOnce(&mut ServeConfig)) -> Server {
    let mut cfg = config(1);
    adjust(&mut cfg);
    server::start(cfg).await.unwrap()
}

/// An HTTP/1.1 answer read off a raw socket.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// Reads one answer (head, then a `Content-Length` body) within [`PATIENCE`].
async fn read_answer(stream: &mut TcpStream) -> Answer {
    tokio::time::timeout(PATIENCE, async {
        let mut buf = Vec::new();
        let head_len = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed before an answer");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8(buf[..head_len].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let mut answer = Answer {
            status: status.parse().unwrap(),
            headers,
            body: buf[head_len..].to_vec(),
        };
        let len: usize = answer
            .header("content-length")
            .map_or(0, |v| v.parse().unwrap());
        while answer.body.len() < len {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed inside the body");
            answer.body.extend_from_slice(&chunk[..n]);
        }
        answer
    })
    .await
    .expect("an answer in time")
}

/// Whether the server closes `stream` within [`PATIENCE`] (end of stream or reset).
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut chunk = [0u8; 256];
    tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// `gsrelay_http_limited_total{limit}` as `/metrics` shows it.
async fn limited(server: &Server, limit: &str) -> u64 {
    let series = format!("gsrelay_http_limited_total{{limit=\"{limit}\"}}");
    metric(server, &series).await.map_or(0, |v| v as u64)
}

fn join_head(token: &str, room: &str, content_length: usize) -> String {
    format!(
        "POST /v1/rooms/{room}/sessions HTTP/1.1\r\nHost: relay\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {content_length}\r\n\r\n"
    )
}

#[tokio::test]
async fn slowloris_headers_are_cut_off_after_the_header_timeout() {
    let server = start(|c| {
        c.http.header_timeout = SHORT;
        c.http.idle_timeout = Duration::from_secs(60);
    })
    .await;
    let mut stream = TcpStream::connect(server.http_addr).await.unwrap();
    let opened = Instant::now();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: relay\r\n")
        .await
        .unwrap();
    // One byte of an endless header every 50 ms: always sending, never finishing.
    let trickle = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed = false;
    for byte in trickle.iter().cycle() {
        if opened.elapsed() > PATIENCE {
            break;
        }
        if stream.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut chunk = [0u8; 64];
        match tokio::time::timeout(Duration::from_millis(50), stream.read(&mut chunk)).await {
            Ok(Ok(0) | Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => panic!("answered a request with unfinished headers: {n} bytes"),
            Err(_) => {}
        }
    }
    assert!(
        closed,
        "a trickling client still connected after {PATIENCE:?}"
    );
    assert!(
        opened.elapsed() >= SHORT,
        "closed before the header timeout"
    );
    assert_eq!(limited(&server, "header_timeout").await, 1);
    // The listener itself is unaffected.
    let health = reqwest::get(format!("{}/healthz", base(&server)))
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}

#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = start(|c| {
        c.http.header_timeout = Duration::from_secs(60);
        c.http.idle_timeout = SHORT;
    })
    .await;
    let mut stream = TcpStream::connect(server.http_addr).await.unwrap();
    // The server's idle time starts after it has the request, never before it was sent
    // (timing from the read of the answer would race the server's own clock).
    let sent = Instant::now();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_answer(&mut stream).await.status, 200);
    assert!(
        closed_by_server(&mut stream).await,
        "an idle connection still open after {PATIENCE:?}"
    );
    assert!(sent.elapsed() >= SHORT, "closed before the idle timeout");
    assert_eq!(limited(&server, "idle_timeout").await, 1);
}

#[tokio::test]
async fn slow_body_gets_408() {
    let server = start(|c| c.http.body_timeout = SHORT).await;
    let mut stream = TcpStream::connect(server.http_addr).await.unwrap();
    let body = br#"{"transport":"rtp"}"#;
    let head = join_head(&token(ROOM, ALL), ROOM, body.len() + 100);
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap(); // and the promised rest never comes
    let sent = Instant::now();
    let answer = read_answer(&mut stream).await;
    assert_eq!(answer.status, 408);
    assert_eq!(answer.json()["error"]["code"], "request_timeout");
    assert!(sent.elapsed() >= SHORT, "answered before the body timeout");
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(closed_by_server(&mut stream).await);
    assert_eq!(limited(&server, "body_timeout").await, 1);
}

#[tokio::test]
async fn saturated_api_sheds_with_503_while_health_answers() {
    let server = start(|c| {
        c.http.max_in_flight = 2;
        c.http.body_timeout = Duration::from_secs(60);
    })
    .await;
    // Two joins whose bodies never come hold both slots.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(server.http_addr).await.unwrap();
        s.write_all(join_head(&token(ROOM, ALL), ROOM, 64).as_bytes())
            .await
            .unwrap();
        held.push(s);
    }
    let client = reqwest::Client::new();
    let probe = || async {
        client
            .get(format!("{}/v1/rooms/{ROOM}", base(&server)))
            .send()
            .await
            .unwrap()
    };
    // Until both held joins have reached their handlers, a probe may still get a slot
    // (and answer 401, having no token).
    let deadline = Instant::now() + PATIENCE;
    let shed = loop {
        let resp = probe().await;
        if resp.status() == StatusCode::SERVICE_UNAVAILABLE {
            break resp;
        }
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert!(Instant::now() < deadline, "no request was shed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(shed.headers()["retry-after"], "1");
    let body: Value = shed.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("maximum of 2"), "{message}");

    for path in ["/healthz", "/readyz", "/metrics"] {
        let resp = client
            .get(format!("{}{path}", base(&server)))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path} while saturated");
    }
    assert!(limited(&server, "overloaded").await >= 1);

    // Hanging up ends the held joins and frees their slots.
    drop(held);
    let deadline = Instant::now() + PATIENCE;
    while probe().await.status() != StatusCode::UNAUTHORIZED {
        assert!(Instant::now() < deadline, "slots not freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn join(
    client: &reqwest::Client,
    server: &Server,
    room: &str,
    token: &str,
) -> reqwest::Response {
    client
        .post(format!("{}/v1/rooms/{room}/sessions", base(server)))
        .bearer_auth(token)
        .json(&json!({"transport": "rtp"}))
        .send()
        .await
        .unwrap()
}

async fn put_interest(
    client: &reqwest::Client,
    server: &Server,
    session: &str,
    token: &str,
) -> reqwest::Response {
    client
        .put(format!("{}/v1/sessions/{session}/interest", base(server)))
        .bearer_auth(token)
        .json(&json!({"echo": true}))
        .send()
        .await
        .unwrap()
}

async fn session_id(resp: reqwest::Response) -> String {
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    body["session_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn repeated_joins_by_one_identity_get_429_while_others_are_unaffected() {
    // Three at once, then one every 20 s: the test never sees a refill.
    let server = start(|c| {
        c.http.rate_burst = 3;
        c.http.rate_per_sec = 0.05;
    })
    .await;
    let client = reqwest::Client::new();
    let alice = token_as(ROOM, "alice", ALL, now(), 600);
    let first = session_id(join(&client, &server, ROOM, &alice).await).await;
    let resp = put_interest(&client, &server, &first, &alice).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    session_id(join(&client, &server, ROOM, &alice).await).await;

    let refused = join(&client, &server, ROOM, &alice).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "Retry-After: {retry}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    // Interest changes draw on the same bucket.
    let resp = put_interest(&client, &server, &first, &alice).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);

    // Another identity in the room, and the same name in another room, are unaffected.
    let bob = token_as(ROOM, "bob", ALL, now(), 600);
    let bobs = session_id(join(&client, &server, ROOM, &bob).await).await;
    let resp = put_interest(&client, &server, &bobs, &bob).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let elsewhere = token_as("arena", "alice", ALL, now(), 600);
    session_id(join(&client, &server, "arena", &elsewhere).await).await;
    assert_eq!(limited(&server, "rate_limited").await, 2);
}

async fn refusal_code(server: &Server, token: &str) -> (StatusCode, String) {
    let resp = join(&reqwest::Client::new(), server, ROOM, token).await;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn tokens_with_too_long_a_lifetime_or_a_future_iat_get_401() {
    let server = start(|_| {}).await;
    let unauthorized = |code: &str| (StatusCode::UNAUTHORIZED, code.to_owned());
    let day = 24 * 3600;
    // The default maximum is one day, inclusive.
    let resp = join(
        &reqwest::Client::new(),
        &server,
        ROOM,
        &token_at(ROOM, ALL, now(), day),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(
        refusal_code(&server, &token_at(ROOM, ALL, now(), 2 * day)).await,
        unauthorized("token_ttl_too_long")
    );
    assert_eq!(
        refusal_code(&server, &token_at(ROOM, ALL, now() + 3600, 600)).await,
        unauthorized("token_iat_in_future")
    );
    let no_iat = Claims {
        room: ROOM.into(),
        sub: "tester".into(),
        publish: true,
        subscribe: true,
        admin: false,
        exp: now() + 600,
        iat: None,
        nbf: None,
    };
    let no_iat = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &no_iat,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    assert_eq!(
        refusal_code(&server, &no_iat).await,
        unauthorized("token_iat_missing")
    );

    // A configured maximum replaces the default.
    let strict = start(|c| c.token_max_ttl_secs = 60).await;
    assert_eq!(
        refusal_code(&strict, &token_at(ROOM, ALL, now(), 61)).await,
        unauthorized("token_ttl_too_long")
    );
    let resp = join(
        &reqwest::Client::new(),
        &strict,
        ROOM,
        &token_at(ROOM, ALL, now(), 60),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn relay_wide_room_and_session_caps_answer_503() {
    let server = start(|c| {
        c.relay.max_rooms = 1;
        c.relay.max_sessions = 2;
    })
    .await;
    let client = reqwest::Client::new();
    let in_a = token("a", ALL);
    let in_b = token("b", ALL);
    session_id(join(&client, &server, "a", &in_a).await).await;

    let refused = join(&client, &server, "b", &in_b).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_rooms");

    session_id(join(&client, &server, "a", &in_a).await).await;
    let refused = join(&client, &server, "a", &in_a).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "relay_full");
}
