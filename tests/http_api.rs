//! The HTTP API of `docs/api.md`, over real HTTP on loopback against `server::start`, every
//! address on port 0 so the tests run in parallel.
//!
//! Every test starts a whole server, which spawns the UDP transport's relay task. Tests
//! marked `// needs the UDP transport` also need that task to answer commands (join,
//! leave, interest, room info); the others are decided by the HTTP layer alone.

mod support;

use gsrelay::serve::ServeConfig;
use gsrelay::serve::{self as server, Server};
use gsrelay::token::Tokens;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use support::server::{
    ADMIN, ALL, PUBLISH, PUBLISH_SUBSCRIBE, SUBSCRIBE, base, config, now, token, token_as, token_at,
};

const ROOM: &str = "lobby";

/// How long a drain waits for the last session.
const GRACE_SECS: u64 = 10;

/// A started server and a client for it.
struct Api {
    server: Server,
    client: reqwest::Client,
}

impl Api {
    async fn start() -> Self {
        Self::with(config(GRACE_SECS)).await
    }

    async fn with(cfg: ServeConfig) -> Self {
        Self {
            server: server::start(cfg).await.unwrap(),
            client: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", base(&self.server))
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let req = self.client.request(method, self.url(path));
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn join(&self, token: &str, body: Value) -> reqwest::Response {
        self.request(
            reqwest::Method::POST,
            &format!("/v1/rooms/{ROOM}/sessions"),
            Some(token),
        )
        .json(&body)
        .send()
        .await
        .unwrap()
    }

    async fn join_raw(&self, token: &str, body: &'static str) -> reqwest::Response {
        self.request(
            reqwest::Method::POST,
            &format!("/v1/rooms/{ROOM}/sessions"),
            Some(token),
        )
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
    }

    async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        self.request(reqwest::Method::GET, path, token)
            .send()
            .await
            .unwrap()
    }

    async fn delete(&self, path: &str, token: &str) -> reqwest::Response {
        self.request(reqwest::Method::DELETE, path, Some(token))
            .send()
            .await
            .unwrap()
    }

    async fn put_interest(&self, id: &str, token: &str, body: Value) -> reqwest::Response {
        self.request(
            reqwest::Method::PUT,
            &format!("/v1/sessions/{id}/interest"),
            Some(token),
        )
        .json(&body)
        .send()
        .await
        .unwrap()
    }

    /// Joins with the default body and returns the session id.
    async fn joined(&self) -> String {
        let resp = self
            .join(&token(ROOM, ALL), json!({"transport": "rtp"}))
            .await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        let body: Value = resp.json().await.unwrap();
        body["session_id"].as_str().unwrap().to_owned()
    }
}

/// Asserts the status and the `{"error":{"code","message"}}` shape; returns the message.
async fn expect_error(resp: reqwest::Response, status: StatusCode, code: &str) -> String {
    assert_eq!(resp.status(), status);
    assert_eq!(
        resp.headers()["content-type"],
        "application/json",
        "errors are JSON"
    );
    let body: Value = resp.json().await.unwrap();
    let keys: BTreeSet<_> = body.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, BTreeSet::from(["error".to_owned()]), "{body}");
    let error = body["error"].as_object().unwrap();
    let keys: BTreeSet<_> = error.keys().cloned().collect();
    assert_eq!(
        keys,
        BTreeSet::from(["code".to_owned(), "message".to_owned()])
    );
    assert_eq!(error["code"], code, "{body}");
    let message = error["message"].as_str().unwrap().to_owned();
    assert!(!message.is_empty());
    message
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[tokio::test]
async fn missing_bad_or_expired_tokens_are_401() {
    let api = Api::start().await;
    let join = format!("/v1/rooms/{ROOM}/sessions");
    let body = json!({"transport": "rtp"});

    let missing = api
        .request(reqwest::Method::POST, &join, None)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    expect_error(missing, StatusCode::UNAUTHORIZED, "token_missing").await;

    let basic = api
        .request(reqwest::Method::POST, &join, None)
        .basic_auth("a", Some("b"))
        .json(&body)
        .send()
        .await
        .unwrap();
    expect_error(basic, StatusCode::UNAUTHORIZED, "token_missing").await;

    let other_secret = Tokens::new(b"some-other-secret-0123456789")
        .unwrap()
        .issue(ROOM, "mallory", ALL, 600, now())
        .unwrap();
    expect_error(
        api.join(&other_secret, body.clone()).await,
        StatusCode::UNAUTHORIZED,
        "token_bad_signature",
    )
    .await;

    let expired = token_at(ROOM, ALL, now() - 3600, 60);
    expect_error(
        api.join(&expired, body.clone()).await,
        StatusCode::UNAUTHORIZED,
        "token_expired",
    )
    .await;

    expect_error(
        api.join("not-a-jwt", body).await,
        StatusCode::UNAUTHORIZED,
        "token_malformed",
    )
    .await;

    expect_error(
        api.get(&format!("/v1/rooms/{ROOM}"), None).await,
        StatusCode::UNAUTHORIZED,
        "token_missing",
    )
    .await;
}

#[tokio::test]
async fn wrong_room_or_missing_right_is_403() {
    let api = Api::start().await;
    let body = json!({"transport": "rtp"});
    expect_error(
        api.join(&token("elsewhere", ALL), body.clone()).await,
        StatusCode::FORBIDDEN,
        "forbidden_room",
    )
    .await;
    let message = expect_error(
        api.join(&token(ROOM, ADMIN), body).await,
        StatusCode::FORBIDDEN,
        "forbidden_right",
    )
    .await;
    assert!(message.contains("publish or subscribe"), "{message}");
    expect_error(
        api.get(&format!("/v1/rooms/{ROOM}"), Some(&token(ROOM, SUBSCRIBE)))
            .await,
        StatusCode::FORBIDDEN,
        "forbidden_right",
    )
    .await;
    expect_error(
        api.get(
            &format!("/v1/rooms/{ROOM}"),
            Some(&token("elsewhere", ADMIN)),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden_room",
    )
    .await;
}

#[tokio::test]
async fn join_answer_has_the_contract_shape_for_both_profiles() {
    // needs the UDP transport
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let api = Api::start().await;
    for (profile, key_len) in [
        (None, 30),
        (Some("AES_CM_128_HMAC_SHA1_80"), 30),
        (Some("AEAD_AES_128_GCM"), 28),
    ] {
        let mut body = json!({"transport": "rtp", "dialect": "gse", "interest": {"echo": true}});
        if let Some(p) = profile {
            body["srtp_profile"] = json!(p);
        }
        let resp = api.join(&token(ROOM, PUBLISH), body).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        let location = resp.headers()["location"].to_str().unwrap().to_owned();
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(
            keys(&answer),
            BTreeSet::from([
                "session_id",
                "ssrc",
                "relay_ssrc",
                "streams",
                "resume",
                "rtp"
            ]),
            "{answer}"
        );
        let id = answer["session_id"].as_str().unwrap();
        assert_eq!(location, format!("/v1/sessions/{id}"));
        assert!(
            answer["ssrc"]
                .as_u64()
                .is_some_and(|s| s <= u32::MAX.into())
        );
        assert!(answer["relay_ssrc"].as_u64().is_some());
        assert!(answer["streams"].is_array());
        let rtp = &answer["rtp"];
        assert_eq!(keys(rtp), BTreeSet::from(["addr", "srtp"]));
        let addr: std::net::SocketAddr = rtp["addr"].as_str().unwrap().parse().unwrap();
        assert_eq!(addr.port(), api.server.rtp_addr.port());
        let srtp = &rtp["srtp"];
        assert_eq!(
            keys(srtp),
            BTreeSet::from(["profile", "client_key", "relay_key"])
        );
        assert_eq!(
            srtp["profile"],
            profile.unwrap_or("AES_CM_128_HMAC_SHA1_80")
        );
        let client = b64.decode(srtp["client_key"].as_str().unwrap()).unwrap();
        let relay = b64.decode(srtp["relay_key"].as_str().unwrap()).unwrap();
        assert_eq!((client.len(), relay.len()), (key_len, key_len));
        assert_ne!(client, relay, "each direction has its own key");
    }
}

#[tokio::test]
async fn requested_ssrc_is_granted_and_a_required_taken_one_is_409() {
    // needs the UDP transport
    let api = Api::start().await;
    let t = token(ROOM, ALL);
    let first: Value = api
        .join(
            &t,
            json!({"transport": "rtp", "ssrc": 4242, "require_ssrc": true}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["ssrc"], 4242);
    expect_error(
        api.join(
            &t,
            json!({"transport": "rtp", "ssrc": 4242, "require_ssrc": true}),
        )
        .await,
        StatusCode::CONFLICT,
        "ssrc_taken",
    )
    .await;
    let relaxed = api
        .join(&t, json!({"transport": "rtp", "ssrc": 4242}))
        .await;
    assert_eq!(relaxed.status(), StatusCode::CREATED);
    let relaxed: Value = relaxed.json().await.unwrap();
    assert_ne!(
        relaxed["ssrc"], 4242,
        "another SSRC is picked when not required"
    );
}

#[tokio::test]
async fn invalid_join_bodies_are_422_naming_the_field() {
    let api = Api::start().await;
    let t = token(ROOM, ALL);
    for (body, code, field) in [
        (
            json!({"transport": "rtp", "interest": {"types": {"allow": ["Head1", "Head9"]}}}),
            "invalid_interest",
            "interest.types.allow[1]",
        ),
        (
            json!({"transport": "rtp", "interest": {"streams": {"deny": ["x"]}}}),
            "invalid_interest",
            "interest.streams.deny[0]",
        ),
        (
            json!({"transport": "rtp", "interest": {"radius": 3}}),
            "invalid_interest",
            "radius",
        ),
        (
            json!({"transport": "sctp"}),
            "unsupported_transport",
            "transport",
        ),
        (
            json!({"transport": "webrtc"}),
            "invalid_request",
            "sdp_offer",
        ),
        (json!({}), "invalid_request", "transport"),
        (
            json!({"transport": "rtp", "ssrc": -1}),
            "invalid_request",
            "ssrc",
        ),
        (
            json!({"transport": "rtp", "dialect": "draft02"}),
            "invalid_request",
            "dialect",
        ),
        (
            json!({"transport": "rtp", "srtp_profile": "AES_256"}),
            "invalid_request",
            "srtp_profile",
        ),
        (
            json!({"transport": "rtp", "colour": "red"}),
            "invalid_request",
            "colour",
        ),
    ] {
        let message = expect_error(
            api.join(&t, body.clone()).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            code,
        )
        .await;
        assert!(message.contains(field), "{body} gave {message:?}");
    }
}

#[tokio::test]
async fn malformed_or_oversized_bodies_are_400_and_413() {
    let api = Api::start().await;
    let t = token(ROOM, ALL);
    for body in ["{", "not json", "", "{\"transport\": \"rtp\",}"] {
        expect_error(
            api.join_raw(&t, body).await,
            StatusCode::BAD_REQUEST,
            "malformed_json",
        )
        .await;
    }
    let huge = format!(
        "{{\"transport\":\"rtp\",\"pad\":\"{}\"}}",
        "x".repeat(70 * 1024)
    );
    let resp = api
        .request(
            reqwest::Method::POST,
            &format!("/v1/rooms/{ROOM}/sessions"),
            Some(&t),
        )
        .body(huge)
        .send()
        .await
        .unwrap();
    expect_error(resp, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large").await;
}

#[tokio::test]
async fn invalid_room_names_are_400() {
    let api = Api::start().await;
    let resp = api
        .request(
            reqwest::Method::GET,
            "/v1/rooms/bad%20room",
            Some(&token(ROOM, ADMIN)),
        )
        .send()
        .await
        .unwrap();
    expect_error(resp, StatusCode::BAD_REQUEST, "invalid_room").await;
}

#[tokio::test]
async fn malformed_session_ids_and_unknown_paths_are_404() {
    let api = Api::start().await;
    let t = token(ROOM, ALL);
    expect_error(
        api.delete("/v1/sessions/garbage", &t).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    expect_error(
        api.put_interest("s12", &t, json!({})).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    expect_error(
        api.get("/v2/nothing", None).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_error(
        api.get(&format!("/v1/rooms/{ROOM}/sessions"), Some(&t))
            .await,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
}

#[tokio::test]
async fn unknown_sessions_are_404_and_delete_twice_is_404() {
    // needs the UDP transport
    let api = Api::start().await;
    let t = token(ROOM, ALL);
    expect_error(
        api.delete("/v1/sessions/s00000000000f4240", &t).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    let id = api.joined().await;
    let path = format!("/v1/sessions/{id}");
    assert_eq!(api.delete(&path, &t).await.status(), StatusCode::NO_CONTENT);
    expect_error(
        api.delete(&path, &t).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    expect_error(
        api.put_interest(&id, &t, json!({})).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
}

#[tokio::test]
async fn sessions_are_only_reachable_with_a_token_for_their_room() {
    // needs the UDP transport
    let api = Api::start().await;
    let id = api.joined().await;
    let other = token("elsewhere", ALL);
    // Another room's token cannot even tell that the session exists.
    expect_error(
        api.put_interest(&id, &other, json!({})).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    expect_error(
        api.delete(&format!("/v1/sessions/{id}"), &other).await,
        StatusCode::NOT_FOUND,
        "session_not_found",
    )
    .await;
    // Another member of the room may not touch it; a room admin may.
    let mallory = token_as(ROOM, "mallory", PUBLISH_SUBSCRIBE, now(), 600);
    expect_error(
        api.delete(&format!("/v1/sessions/{id}"), &mallory).await,
        StatusCode::FORBIDDEN,
        "forbidden_session",
    )
    .await;
    expect_error(
        api.put_interest(&id, &mallory, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden_session",
    )
    .await;
    let admin = token_as(ROOM, "operator", ADMIN, now(), 600);
    let deleted = api.delete(&format!("/v1/sessions/{id}"), &admin).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn interest_is_replaced_and_validated() {
    // needs the UDP transport
    let api = Api::start().await;
    let id = api.joined().await;
    let t = token(ROOM, SUBSCRIBE);
    let valid =
        json!({"echo": true, "types": {"deny": ["Mesh1", 3]}, "streams": {"allow": [1, 2]}});
    assert_eq!(
        api.put_interest(&id, &t, valid).await.status(),
        StatusCode::NO_CONTENT
    );
    let message = expect_error(
        api.put_interest(&id, &t, json!({"types": {"deny": ["Nope"]}}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_interest",
    )
    .await;
    assert!(message.contains("interest.types.deny[0]"), "{message}");
    let message = expect_error(
        api.put_interest(&id, &t, json!({"echo": "yes"})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_interest",
    )
    .await;
    assert!(message.contains("interest.echo"), "{message}");
}

#[tokio::test]
async fn room_info_is_admin_only() {
    // needs the UDP transport
    let api = Api::start().await;
    let id = api.joined().await;
    let admin = token(ROOM, ADMIN);
    let resp = api.get(&format!("/v1/rooms/{ROOM}"), Some(&admin)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let info: Value = resp.json().await.unwrap();
    assert_eq!(info["room"], ROOM);
    let sessions = info["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["session_id"], id.as_str());
    assert_eq!(sessions[0]["delivery"], "per_stream");
    assert!(info["streams"].is_array());
    expect_error(
        api.get(
            &format!("/v1/rooms/{ROOM}"),
            Some(&token(ROOM, PUBLISH_SUBSCRIBE)),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden_right",
    )
    .await;
    expect_error(
        api.get("/v1/rooms/empty", Some(&token("empty", ADMIN)))
            .await,
        StatusCode::NOT_FOUND,
        "room_not_found",
    )
    .await;
}

#[tokio::test]
async fn plain_rtp_needs_the_insecure_flag() {
    // needs the UDP transport
    let secure = Api::start().await;
    let plain = json!({"transport": "rtp", "srtp_profile": "none"});
    expect_error(
        secure.join(&token(ROOM, ALL), plain.clone()).await,
        StatusCode::FORBIDDEN,
        "plain_rtp_disabled",
    )
    .await;
    let insecure = Api::with(ServeConfig {
        insecure_plain_rtp: true,
        ..config(GRACE_SECS)
    })
    .await;
    let resp = insecure.join(&token(ROOM, ALL), plain).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["rtp"]["srtp"], Value::Null);
}

#[tokio::test]
async fn full_room_is_429() {
    // needs the UDP transport
    let mut cfg = config(GRACE_SECS);
    cfg.relay.max_sessions_per_room = 1;
    let api = Api::with(cfg).await;
    api.joined().await;
    expect_error(
        api.join(&token(ROOM, ALL), json!({"transport": "rtp"}))
            .await,
        StatusCode::TOO_MANY_REQUESTS,
        "room_full",
    )
    .await;
}

#[tokio::test]
async fn health_and_readiness_follow_the_drain() {
    // needs the UDP transport
    let api = Api::start().await;
    let health = api.get("/healthz", None).await;
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(health.json::<Value>().await.unwrap()["status"], "ok");
    assert_eq!(api.get("/readyz", None).await.status(), StatusCode::OK);

    let id = api.joined().await;
    assert_eq!(api.server.begin_drain().await.unwrap(), 1);
    expect_error(
        api.get("/readyz", None).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "draining",
    )
    .await;
    assert_eq!(api.get("/healthz", None).await.status(), StatusCode::OK);
    expect_error(
        api.join(&token(ROOM, ALL), json!({"transport": "rtp"}))
            .await,
        StatusCode::SERVICE_UNAVAILABLE,
        "draining",
    )
    .await;
    // Existing sessions keep working during the drain.
    assert_eq!(
        api.put_interest(&id, &token(ROOM, ALL), json!({"echo": true}))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn shutdown_ends_once_the_last_session_leaves() {
    // needs the UDP transport
    let api = Api::start().await; // grace: 10 s
    let id = api.joined().await;
    let http = api.server.http_addr;
    let client = api.client.clone();
    let stopping = tokio::spawn(api.server.shutdown());

    // Poll until the drain has begun rather than guessing how long it takes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let ready = client
            .get(format!("http://{http}/readyz"))
            .send()
            .await
            .unwrap();
        if ready.status() == StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "drain never began");
        tokio::task::yield_now().await;
    }
    assert!(!stopping.is_finished(), "a session is still joined");
    let left = client
        .delete(format!("http://{http}/v1/sessions/{id}"))
        .bearer_auth(token(ROOM, ALL))
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), StatusCode::NO_CONTENT);
    // Well within the 10 s grace period: the drain ends with the last session.
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("shutdown did not finish after the last session left")
        .unwrap()
        .unwrap();
    assert!(
        client
            .get(format!("http://{http}/healthz"))
            .send()
            .await
            .is_err(),
        "the HTTP server has stopped"
    );
}

#[tokio::test]
async fn metrics_are_valid_prometheus_text() {
    let api = Api::start().await;
    assert_eq!(api.get("/healthz", None).await.status(), StatusCode::OK);
    assert_eq!(
        api.get(&format!("/v1/rooms/{ROOM}"), None).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let resp = api.get("/metrics", None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/plain; version=0.0.4");
    let text = resp.text().await.unwrap();
    for line in [
        "gsrelay_http_requests_total{route=\"/healthz\",status=\"200\"} 1",
        "gsrelay_http_requests_total{route=\"/v1/rooms/{room}\",status=\"401\"} 1",
        "gsrelay_sessions 0",
        "gsrelay_rooms 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    assert!(
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .all(|l| l.starts_with("gsrelay_") || l.starts_with("process_")),
        "every metric is under gsrelay_ (or the standard process_):\n{text}"
    );
    promtool_check(&text);
}

/// Families a healthy relay counts nothing in until something goes wrong; each must be
/// exported from the start, every known label value at 0, for its panels and `rate()`
/// alerts to read 0 rather than nothing.
#[tokio::test]
async fn closed_label_sets_are_exported_at_zero_before_any_event() {
    use gsrelay::internal::labels::*;
    let api = Api::start().await;
    let text = api.get("/metrics", None).await.text().await.unwrap();
    let session_then = |only: &'static [&'static str]| [SESSION_OUTCOMES, only].concat();
    let families: [(&str, &str, Vec<&str>); 8] = [
        (
            "gsrelay_rtcp_feedback_total",
            "kind",
            FEEDBACK_KINDS.to_vec(),
        ),
        (
            "gsrelay_feedback_suppressed_total",
            "reason",
            FEEDBACK_SUPPRESSED.to_vec(),
        ),
        (
            "gsrelay_http_limited_total",
            "limit",
            http_limit::ALL.to_vec(),
        ),
        (
            "gsrelay_internal_errors_total",
            "where",
            INTERNAL_ERROR_PLACES.to_vec(),
        ),
        (
            "gsrelay_joins_refused_total",
            "reason",
            JOIN_REFUSALS.to_vec(),
        ),
        (
            "gsrelay_quic_connections_total",
            "outcome",
            session_then(HANDSHAKE_OUTCOMES),
        ),
        (
            "gsrelay_webrtc_connections_total",
            "outcome",
            WEBRTC_OUTCOMES.to_vec(),
        ),
        (
            "gsrelay_webtransport_sessions_total",
            "outcome",
            session_then(WEBTRANSPORT_OUTCOMES),
        ),
    ];
    for (family, label, values) in families {
        assert!(!values.is_empty(), "{family} has no known values");
        for value in values {
            let line = format!("{family}{{{label}=\"{value}\"}} 0");
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }
    promtool_check(&text);
}

/// Runs `promtool check metrics` on `text` (promtool as scripts/test.sh installs it).
fn promtool_check(text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(support::tools::tool("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running promtool: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn servers_run_side_by_side() {
    let a = Api::start().await;
    let b = Api::start().await;
    assert_ne!(a.server.http_addr, b.server.http_addr);
    assert_ne!(a.server.rtp_addr, b.server.rtp_addr);
    for api in [&a, &b] {
        assert_eq!(api.get("/healthz", None).await.status(), StatusCode::OK);
    }
}
