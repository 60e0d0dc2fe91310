//! Cross-origin access to the API and the JavaScript client: which web pages, served from
//! origins other than the relay's, may import `/client/gsrelay.js` and call `/v1`.
//!
//! The policy (`docs/api.md`, "CORS"): the origins of [`AllowedOrigins`] (every origin by
//! default), the methods the API uses, the request headers `Authorization` and
//! `Content-Type`, `Retry-After` readable by the page, and preflights cached for
//! [`PREFLIGHT_MAX_AGE`]. Credentials (cookies, TLS client certificates) are never allowed:
//! the API authenticates by a bearer token the page sends itself, so any origin may be let
//! in without letting it act with a visitor's ambient credentials.

use anyhow::{bail, ensure};
use axum::http::{HeaderValue, Method, header};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// How long a browser may reuse a preflight's answer before asking again.
pub const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The entry allowing every origin.
const ANY: &str = "*";

/// The origins whose pages may use the API and import the client
/// (`cors_allowed_origins` in the `[http]` table): `["*"]` for any origin (the default),
/// a list of `scheme://host[:port]` origins, or an empty list for none (no CORS headers
/// at all, so only pages of the relay's own origin may call it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AllowedOrigins(Vec<String>);

impl Default for AllowedOrigins {
    fn default() -> Self {
        Self(vec![ANY.to_owned()])
    }
}

impl AllowedOrigins {
    /// The list `origins`, blank entries left out (so that an empty flag value means none).
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(origins: I) -> Self {
        Self(
            origins
                .into_iter()
                .map(Into::into)
                .filter(|o| !o.trim().is_empty())
                .collect(),
        )
    }

    /// The layer answering preflights and adding the CORS headers to answers, or `None`
    /// when the list is empty. Fails naming the first entry that is not an origin as a
    /// browser sends it in its `Origin` header, since such an entry would never match.
    pub fn layer(&self) -> anyhow::Result<Option<CorsLayer>> {
        let allow = match self.0.as_slice() {
            [] => return Ok(None),
            [only] if only == ANY => AllowOrigin::any(),
            list => {
                ensure!(
                    !list.iter().any(|o| o == ANY),
                    "http.cors_allowed_origins: \"*\" allows every origin and cannot be \
                     listed with others"
                );
                let parsed = list
                    .iter()
                    .map(|o| parse_origin(o))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                AllowOrigin::list(parsed)
            }
        };
        Ok(Some(
            CorsLayer::new()
                .allow_origin(allow)
                .allow_methods([
                    Method::GET,
                    Method::HEAD,
                    Method::POST,
                    Method::PUT,
                    Method::PATCH,
                    Method::DELETE,
                ])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
                .expose_headers([header::RETRY_AFTER])
                .max_age(PREFLIGHT_MAX_AGE),
        ))
    }
}

/// `origin` as the exact `Origin` header value it must match: `scheme://host[:port]`, in
/// lower case, without a path and without the scheme's default port, as browsers send it.
fn parse_origin(origin: &str) -> anyhow::Result<HeaderValue> {
    let refuse = |why: &str| -> anyhow::Result<HeaderValue> {
        bail!(
            "http.cors_allowed_origins: {origin:?} is not an origin ({why}); write \
             scheme://host[:port] as a browser sends it, e.g. \"https://game.example.com\""
        )
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return refuse("no scheme://");
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return refuse("bad scheme");
    }
    if authority.is_empty() {
        return refuse("no host");
    }
    if let Some(c) = authority.chars().find(|c| "/?#@ \t".contains(*c)) {
        return refuse(&format!(
            "{c:?} after the host: an origin has no path, query or user"
        ));
    }
    if origin.chars().any(|c| c.is_ascii_uppercase()) {
        return refuse("upper case: browsers send origins in lower case");
    }
    // The port follows the last ':' unless that ':' is inside an IPv6 literal.
    let port = authority
        .rsplit_once(':')
        .filter(|(host, _)| !host.starts_with('[') || host.ends_with(']'))
        .map(|(_, port)| port);
    if let Some(port) = port {
        let Ok(port) = port.parse::<u16>() else {
            return refuse("bad port");
        };
        if matches!((scheme, port), ("http", 80) | ("https", 443)) {
            return refuse("default port: browsers leave it out");
        }
    }
    Ok(HeaderValue::from_str(origin)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(origins: &[&str]) -> anyhow::Result<Option<CorsLayer>> {
        AllowedOrigins::new(origins.iter().copied()).layer()
    }

    #[test]
    fn default_is_any_origin_and_empty_is_off() {
        assert_eq!(AllowedOrigins::default(), AllowedOrigins::new(["*"]));
        assert!(layer(&["*"]).unwrap().is_some());
        assert!(layer(&[]).unwrap().is_none());
        assert!(layer(&[""]).unwrap().is_none(), "a blank entry is none");
    }

    #[test]
    fn origins_as_browsers_send_them_are_accepted() {
        for ok in [
            "https://game.example.com",
            "http://127.0.0.1:8000",
            "http://[::1]:3000",
            "http://localhost",
            "https://example.com:8443",
        ] {
            assert!(layer(&[ok]).is_ok(), "{ok}");
        }
    }

    #[test]
    fn malformed_origins_are_refused_by_name() {
        for (bad, why) in [
            ("game.example.com", "no scheme"),
            ("https://game.example.com/", "after the host"),
            ("https://game.example.com/play", "after the host"),
            ("https://Game.example.com", "upper case"),
            ("https://game.example.com:443", "default port"),
            ("http://game.example.com:80", "default port"),
            ("https://game.example.com:99999", "bad port"),
            ("https://", "no host"),
            ("null", "no scheme"),
            ("1http://x", "bad scheme"),
        ] {
            let e = format!("{:#}", layer(&[bad]).unwrap_err());
            assert!(e.contains(bad) && e.contains(why), "{bad}: {e}");
        }
        let mixed = format!("{:#}", layer(&["*", "https://a.example"]).unwrap_err());
        assert!(mixed.contains("cannot be listed with others"), "{mixed}");
    }
}
