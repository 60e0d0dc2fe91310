//! WebTransport over HTTP/3 for browsers, on the relay's QUIC endpoint ([`super::quic`]):
//! a connection that negotiates ALPN `h3` is taken through the HTTP/3 SETTINGS exchange
//! and its extended CONNECT to [`PATH`] by `web-transport-quinn`, then carries the session
//! exactly as a RoQ connection does: the token line on a bidirectional stream, RoQ
//! datagrams (flow id + one RTP or RTCP packet) both ways, RoQ unidirectional streams for
//! what does not fit a datagram (snapshots).
//!
//! The only differences on the wire are HTTP/3's: each datagram starts with the quarter
//! stream id of the session's CONNECT stream (RFC 9297 §2.1), [`DATAGRAM_HEADER`], and each
//! stream with its WebTransport stream header, which the library writes and strips.

use web_transport_quinn::http::StatusCode;
use web_transport_quinn::{Request, Session};

pub use gsrelay_core::roq::webtransport::{DATAGRAM_HEADER, PATH, url};

/// Takes a new `h3` connection through the HTTP/3 handshake and its CONNECT request, and
/// opens the WebTransport session; says why not (the connection's outcome).
pub async fn open(conn: quinn::Connection) -> Result<Session, &'static str> {
    let request = Request::accept(conn).await.map_err(|e| {
        tracing::debug!(error = %e, "HTTP/3 handshake or CONNECT failed");
        "h3_failed"
    })?;
    if request.url.path() != PATH {
        // The refusal is best effort: the connection closes with it either way.
        let _ = request.reject(StatusCode::NOT_FOUND).await;
        return Err("wrong_path");
    }
    request.ok().await.map_err(|_| "h3_failed")
}
