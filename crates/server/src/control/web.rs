//! The browser side of the relay, embedded in the binary so that nothing has to be
//! deployed beside it: the JavaScript client at `/client/gsrelay.js` and the live room
//! viewer at `/viewer` (sources in `web/`; `docs/js-client.md`).
//!
//! Every asset is answered with its content type, `X-Content-Type-Options: nosniff`,
//! `Cache-Control: no-cache` and a strong `ETag` (SHA-256 of the content), so a browser
//! revalidates each load and gets `304 Not Modified` until the relay is upgraded: a cached
//! client never outlives the relay it talks to. HTML also carries a Content-Security-Policy
//! allowing only the relay's own scripts and styles.

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::LazyLock;

/// One embedded file.
struct Asset {
    /// Route it is served at.
    path: &'static str,
    /// `Content-Type`.
    content_type: &'static str,
    /// The file.
    body: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";
const VIEWER_HTML: &str = include_str!("../../../../web/viewer/index.html");

const ASSETS: &[Asset] = &[
    Asset {
        path: "/client/gsrelay.js",
        content_type: JS,
        body: include_str!("../../../../web/client/gsrelay.js"),
    },
    Asset {
        path: "/viewer",
        content_type: "text/html; charset=utf-8",
        body: VIEWER_HTML,
    },
    Asset {
        path: "/viewer/",
        content_type: "text/html; charset=utf-8",
        body: VIEWER_HTML,
    },
    Asset {
        path: "/viewer/viewer.js",
        content_type: JS,
        body: include_str!("../../../../web/viewer/viewer.js"),
    },
    Asset {
        path: "/viewer/viewer.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../../../web/viewer/viewer.css"),
    },
];

/// Scripts and styles from the relay only; `connect-src` allows the API (same origin)
/// and a WebTransport endpoint on another port of the relay (`https:`).
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self' https:; frame-ancestors 'none'";

/// Each asset's ETag, computed once.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = ring::digest::digest(&ring::digest::SHA256, a.body.as_bytes());
            let tag = format!("\"{}\"", hex::encode(&digest.as_ref()[..16]));
            HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"0\""))
        })
        .collect()
});

/// Where the JavaScript client is served: pages of other origins import it from there.
const CLIENT_PREFIX: &str = "/client/";

/// The routes serving the JavaScript client (GET and HEAD).
pub fn client_router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    router(|path| path.starts_with(CLIENT_PREFIX))
}

/// The routes serving the viewer, a page of the relay's own origin (GET and HEAD).
pub fn viewer_router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    router(|path| !path.starts_with(CLIENT_PREFIX))
}

/// The routes serving the embedded assets whose path `wanted` accepts.
fn router<S: Clone + Send + Sync + 'static>(wanted: impl Fn(&str) -> bool) -> Router<S> {
    ASSETS
        .iter()
        .enumerate()
        .filter(|(_, a)| wanted(a.path))
        .fold(Router::new(), |r, (i, a)| {
            r.route(a.path, get(move |h: HeaderMap| async move { serve(i, &h) }))
        })
}

/// The asset `i`, or 304 when the request already holds its current version.
fn serve(i: usize, request: &HeaderMap) -> Response {
    let (asset, etag) = (&ASSETS[i], &ETAGS[i]);
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == etag || t.trim() == "*");
    let mut headers = HeaderMap::new();
    headers.insert(header::ETAG, etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    if asset.content_type.starts_with("text/html") {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    (headers, asset.body).into_response()
}
