//! Requests this node hands to another node of the cluster: a join placed on another
//! node, an operation on a session another node serves, and the other nodes' part of a
//! room's inspection. The client needs only the Service's address; whichever node its
//! request reaches answers with what the serving node answered.
//!
//! A forwarded request carries [`FORWARDED`], naming the node that forwarded it; the
//! receiving node serves it itself and never forwards it again, so a request crosses at
//! most one hop. The header only ever keeps a request on the node it reached, which any
//! client may ask for by calling that node: it grants nothing.

use super::error::ApiError;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::time::Duration;

/// The header a forwarded request carries.
pub const FORWARDED: HeaderName = HeaderName::from_static("gsrelay-forwarded");

/// How long a node may take to accept a forwarded request's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a forwarded request may take in all (a WebRTC join waits for ICE set-up).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The response headers passed back to the client.
const PASSED_BACK: [HeaderName; 3] = [header::CONTENT_TYPE, header::LOCATION, header::RETRY_AFTER];

/// The request headers passed on.
const PASSED_ON: [HeaderName; 2] = [header::AUTHORIZATION, header::CONTENT_TYPE];

/// Forwards requests to other nodes.
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: reqwest::Client,
    /// For answers that stream (presence): no bound on the whole request, which lasts as
    /// long as its watcher.
    streaming: reqwest::Client,
}

/// Whether a request was forwarded by another node.
pub fn is_forwarded(headers: &HeaderMap) -> bool {
    headers.contains_key(&FORWARDED)
}

impl Default for Forwarder {
    fn default() -> Self {
        Self::new()
    }
}

impl Forwarder {
    /// A forwarder.
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .unwrap_or_default();
        let streaming = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self { client, streaming }
    }

    /// Sends `method path` with `body` and the client's credentials to the node at `to`,
    /// naming this node `from`.
    async fn send(
        &self,
        to: SocketAddr,
        from: &str,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut req = self
            .client
            .request(method, format!("http://{to}{path}"))
            .header(
                FORWARDED,
                HeaderValue::from_str(from).unwrap_or(HeaderValue::from_static("node")),
            )
            .body(body);
        for name in PASSED_ON {
            if let Some(v) = headers.get(&name) {
                req = req.header(name, v.clone());
            }
        }
        req.send().await
    }

    /// Forwards a request and answers with the other node's answer as it is; a node that
    /// cannot be reached answers 503 `node_unavailable`, to be retried.
    pub async fn forward(
        &self,
        to: SocketAddr,
        from: &str,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, ApiError> {
        let resp = self
            .send(to, from, method, path, headers, body)
            .await
            .map_err(|e| unavailable(to, &e))?;
        let status = resp.status();
        let mut back = HeaderMap::new();
        for name in PASSED_BACK {
            if let Some(v) = resp.headers().get(&name) {
                back.insert(name, v.clone());
            }
        }
        let body = resp.bytes().await.map_err(|e| unavailable(to, &e))?;
        Ok((status, back, body).into_response())
    }

    /// Forwards a `GET` whose answer streams (presence) and passes the other node's
    /// answer on as it comes, chunk by chunk, until either side ends it.
    pub async fn stream(
        &self,
        to: SocketAddr,
        from: &str,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Response, ApiError> {
        let mut req = self.streaming.get(format!("http://{to}{path}")).header(
            FORWARDED,
            HeaderValue::from_str(from).unwrap_or(HeaderValue::from_static("node")),
        );
        if let Some(v) = headers.get(header::AUTHORIZATION) {
            req = req.header(header::AUTHORIZATION, v.clone());
        }
        let resp = req.send().await.map_err(|e| unavailable(to, &e))?;
        let status = resp.status();
        let mut back = HeaderMap::new();
        for name in PASSED_BACK {
            if let Some(v) = resp.headers().get(&name) {
                back.insert(name, v.clone());
            }
        }
        let chunks = futures_util::stream::unfold(resp, |mut resp| async move {
            match resp.chunk().await {
                Ok(Some(chunk)) => Some((Ok::<_, reqwest::Error>(chunk), resp)),
                // The other node ended the stream, or went: so does this one.
                Ok(None) | Err(_) => None,
            }
        });
        Ok((status, back, axum::body::Body::from_stream(chunks)).into_response())
    }

    /// The other node's JSON answer to `method path` (a forwarded request, which it
    /// answers for itself alone); `None` when it answers 404 (it holds none of it).
    pub async fn json(
        &self,
        to: SocketAddr,
        from: &str,
        (method, path): (Method, &str),
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Option<serde_json::Value>, ApiError> {
        let resp = self
            .send(to, from, method, path, headers, body)
            .await
            .map_err(|e| unavailable(to, &e))?;
        match resp.status() {
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::NO_CONTENT => Ok(Some(serde_json::Value::Null)),
            s if s.is_success() => resp.json().await.map(Some).map_err(|e| unavailable(to, &e)),
            s => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "node_unavailable",
                format!("the node at {to} answered {s} for {path}"),
            )
            .retry_after(Duration::from_secs(1))),
        }
    }
}

/// The answer to a request given up because the node serving it died meanwhile.
pub fn fell(to: SocketAddr) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "node_unavailable",
        format!("the node serving this request ({to}) died; try again"),
    )
    .retry_after(Duration::from_secs(1))
}

fn unavailable(to: SocketAddr, e: &reqwest::Error) -> ApiError {
    tracing::warn!(node = %to, error = %e, "a forwarded request failed");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "node_unavailable",
        format!("the node serving this request ({to}) cannot be reached; try again"),
    )
    .retry_after(Duration::from_secs(1))
}
