//! CORS (`docs/api.md`, "CORS") on real sockets against `server::start` on loopback: the
//! preflight and the actual request a browser sends from a page of another origin, for
//! the default policy (any origin), a configured list (a listed origin is answered, any
//! other is not) and an empty list (no CORS at all); and which routes take part.

mod support;

use gsrelay::internal::cors::AllowedOrigins;
use gsrelay::serve::ServeConfig;
use gsrelay::serve::{self as server, Server};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use support::server::{ALL, base, config, token};

const ROOM: &str = "lobby";
const GAME: &str = "http://game.example:8000";
const OTHER: &str = "https://elsewhere.example";

async fn start(origins: Option<&[&str]>) -> Server {
    let mut cfg: ServeConfig = config(1);
    if let Some(origins) = origins {
        cfg.http.cors_allowed_origins = AllowedOrigins::new(origins.iter().copied());
    }
    server::start(cfg).await.unwrap()
}

/// The preflight a browser sends before `method` on `path` with a bearer token and a JSON
/// body, from a page of `origin`.
async fn preflight(server: &Server, path: &str, method: &str, origin: &str) -> Response {
    reqwest::Client::new()
        .request(Method::OPTIONS, format!("{}{path}", base(server)))
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap()
}

/// A join from a page of `origin`.
async fn join(server: &Server, origin: &str) -> Response {
    reqwest::Client::new()
        .post(format!("{}/v1/rooms/{ROOM}/sessions", base(server)))
        .header("origin", origin)
        .bearer_auth(token(ROOM, ALL))
        .json(&json!({"transport": "rtp"}))
        .send()
        .await
        .unwrap()
}

/// A GET of `path` from a page of `origin`.
async fn get(server: &Server, path: &str, origin: &str) -> Response {
    reqwest::Client::new()
        .get(format!("{}{path}", base(server)))
        .header("origin", origin)
        .send()
        .await
        .unwrap()
}

fn header<'a>(resp: &'a Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).map(|v| v.to_str().unwrap())
}

/// Asserts a preflight answer allows the API's methods and headers to `allowed_origin`.
fn assert_preflight_allows(resp: &Response, allowed_origin: &str) {
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        header(resp, "access-control-allow-origin"),
        Some(allowed_origin)
    );
    let methods = header(resp, "access-control-allow-methods").unwrap();
    for m in ["GET", "POST", "PUT", "DELETE"] {
        assert!(methods.contains(m), "{methods}");
    }
    let headers = header(resp, "access-control-allow-headers").unwrap();
    assert!(headers.contains("authorization"), "{headers}");
    assert!(headers.contains("content-type"), "{headers}");
    assert_eq!(header(resp, "access-control-max-age"), Some("600"));
    assert_eq!(header(resp, "access-control-allow-credentials"), None);
}

/// Asserts an answer carries no CORS header, so a browser keeps it from the page.
fn assert_no_cors(resp: &Response) {
    let cors: Vec<_> = resp
        .headers()
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .collect();
    assert!(cors.is_empty(), "{cors:?}");
}

#[tokio::test]
async fn by_default_any_origin_may_join_and_import_the_client() {
    let server = start(None).await;

    for (path, method) in [
        (format!("/v1/rooms/{ROOM}/sessions"), "POST"),
        ("/v1/sessions/s0000000000000001/interest".to_owned(), "PUT"),
        ("/v1/sessions/s0000000000000001".to_owned(), "DELETE"),
        (format!("/v1/rooms/{ROOM}"), "GET"),
    ] {
        assert_preflight_allows(&preflight(&server, &path, method, GAME).await, "*");
    }

    let joined = join(&server, GAME).await;
    assert_eq!(joined.status(), StatusCode::CREATED);
    assert_eq!(header(&joined, "access-control-allow-origin"), Some("*"));
    let exposed = header(&joined, "access-control-expose-headers").unwrap();
    assert!(exposed.contains("retry-after"), "{exposed}");
    let body: Value = joined.json().await.unwrap();
    assert!(body["session_id"].is_string());

    // An error answer reaches the page too, so it can read the code.
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/rooms/{ROOM}/sessions", base(&server)))
        .header("origin", OTHER)
        .bearer_auth("not-a-token")
        .json(&json!({"transport": "rtp"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&refused, "access-control-allow-origin"), Some("*"));

    let module = get(&server, "/client/gsrelay.js", OTHER).await;
    assert_eq!(module.status(), StatusCode::OK);
    assert_eq!(header(&module, "access-control-allow-origin"), Some("*"));

    // Probes, scrapes and the relay's own viewer page are not for other origins' pages.
    for path in [
        "/metrics",
        "/healthz",
        "/readyz",
        "/viewer",
        "/viewer/viewer.js",
    ] {
        let resp = get(&server, path, GAME).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_no_cors(&resp);
    }
}

#[tokio::test]
async fn a_configured_list_answers_only_its_origins() {
    let server = start(Some(&[GAME, "https://other-game.example"])).await;
    let path = format!("/v1/rooms/{ROOM}/sessions");

    let allowed = preflight(&server, &path, "POST", GAME).await;
    assert_preflight_allows(&allowed, GAME);
    let vary = header(&allowed, "vary").unwrap();
    assert!(vary.contains("origin"), "{vary}");
    let joined = join(&server, GAME).await;
    assert_eq!(joined.status(), StatusCode::CREATED);
    assert_eq!(header(&joined, "access-control-allow-origin"), Some(GAME));
    let module = get(&server, "/client/gsrelay.js", GAME).await;
    assert_eq!(header(&module, "access-control-allow-origin"), Some(GAME));

    // Another origin gets no Access-Control-Allow-Origin, so its browser refuses the
    // preflight (and the join is never sent) and keeps the module from the page.
    let refused = preflight(&server, &path, "POST", OTHER).await;
    assert_eq!(refused.status(), StatusCode::OK);
    assert_eq!(header(&refused, "access-control-allow-origin"), None);
    let module = get(&server, "/client/gsrelay.js", OTHER).await;
    assert_eq!(module.status(), StatusCode::OK);
    assert_eq!(header(&module, "access-control-allow-origin"), None);
}

#[tokio::test]
async fn an_empty_list_turns_cors_off() {
    let server = start(Some(&[])).await;
    let joined = join(&server, GAME).await;
    assert_eq!(joined.status(), StatusCode::CREATED);
    assert_no_cors(&joined);
    assert_no_cors(&get(&server, "/client/gsrelay.js", GAME).await);
    // Without CORS an OPTIONS is just a method the route does not have.
    let options = preflight(&server, &format!("/v1/rooms/{ROOM}/sessions"), "POST", GAME).await;
    assert_eq!(options.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_no_cors(&options);
}

#[tokio::test]
async fn a_malformed_origin_stops_the_start() {
    let mut cfg = config(1);
    cfg.http.cors_allowed_origins = AllowedOrigins::new(["https://game.example/"]);
    let e = format!("{:#}", server::start(cfg).await.err().unwrap());
    assert!(
        e.contains("cors_allowed_origins") && e.contains("https://game.example/"),
        "{e}"
    );
}
