//! The client's HTTP requests (a join, a leave, the presence stream): JSON over HTTP/1.1,
//! and over TLS with the system's roots for an `https` relay, on hyper's client.
//!
//! Why hyper and not reqwest (which the server uses for webhooks): reqwest brings
//! `tower-http` and its redirect middleware, and a game links this crate; a join needs
//! three request shapes and no redirects, cookies or compression.

use crate::ClientError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Response};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;

/// A connection pool to one relay's API (or several: requests carry whole URLs).
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

/// An HTTP failure below the relay's answer: a refused connection, a timeout, a URL that
/// is not one, a body that is not the JSON expected.
fn failed(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ClientError {
    ClientError::Http(e.into())
}

impl HttpClient {
    /// A client for `http` and `https` URLs, trusting the system's roots (none found
    /// only means `https` relays fail to verify).
    pub(crate) fn new() -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let https = match builder.with_provider_and_native_roots(provider.clone()) {
            Ok(b) => b,
            Err(_) => {
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(empty_roots(provider))
            }
        }
        .https_or_http()
        .enable_http1()
        .build();
        Self {
            client: Client::builder(TokioExecutor::new()).build(https),
        }
    }

    /// Sends `method` to `url` with `token` as a bearer, and `body` as JSON if any; the
    /// answer's head arrives within `timeout` or the request fails.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: &str,
        token: &str,
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<Response<Incoming>, ClientError> {
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header(AUTHORIZATION, format!("Bearer {token}"));
        let body = match body {
            Some(b) => {
                req = req.header(CONTENT_TYPE, "application/json");
                Full::new(Bytes::from(serde_json::to_vec(b).map_err(failed)?))
            }
            None => Full::default(),
        };
        let req = req.body(body).map_err(failed)?;
        tokio::time::timeout(timeout, self.client.request(req))
            .await
            .map_err(failed)?
            .map_err(failed)
    }
}

/// A TLS configuration that trusts nothing: what an `https` request gets when the system
/// has no roots to read.
fn empty_roots(provider: Arc<rustls::crypto::CryptoProvider>) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        })
        .unwrap_or_else(|_| {
            // The ring provider supports the default versions; this arm is unreachable
            // in practice, and a default config is still a valid fallback.
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        })
}

/// The response if its status is a success, else its status and body as an error.
pub(crate) async fn checked(resp: Response<Incoming>) -> Result<Response<Incoming>, ClientError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = text(resp).await.unwrap_or_default();
    Err(ClientError::Status {
        status: status.as_u16(),
        body,
    })
}

/// The whole body, as text (lossy).
async fn text(resp: Response<Incoming>) -> Result<String, ClientError> {
    let bytes = resp.into_body().collect().await.map_err(failed)?.to_bytes();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The whole body, as the JSON of `T`, read within `timeout`.
pub(crate) async fn json<T: DeserializeOwned>(
    resp: Response<Incoming>,
    timeout: Duration,
) -> Result<T, ClientError> {
    let body = tokio::time::timeout(timeout, resp.into_body().collect())
        .await
        .map_err(failed)?
        .map_err(failed)?
        .to_bytes();
    serde_json::from_slice(&body).map_err(failed)
}

/// The next data of a streamed body; `None` at its end.
pub(crate) async fn chunk(body: &mut Incoming) -> Result<Option<Bytes>, ClientError> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(failed)?.into_data() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}
