//! The HTTP listener: accepts TCP connections and serves HTTP/1.1 on each, closing those
//! that hold a connection without sending requests.
//!
//! hyper parses requests and writes answers; a [`Watch`] per connection sees every byte
//! read and every request start and finish, and the connection's task closes it when the
//! current phase has lasted too long:
//!
//! - a request head is awaited (on a new connection, or once a byte of the next request
//!   has arrived): [`ConnTimeouts::header`] from the connection's opening or that first
//!   byte. A client trickling its headers (slowloris) is cut off.
//! - nothing is awaited (a kept-alive connection between requests):
//!   [`ConnTimeouts::idle`] from the last answer.
//! - a request is being handled, its answer's body included: no bound here; the body
//!   timeout and the handlers bound it.
//!
//! hyper's own `header_read_timeout` is not used: it also runs while a kept-alive
//! connection waits for its next request, so an idle timeout longer than the header
//! timeout (what a load balancer in front needs) could not be set.

use crate::metrics::Metrics;
use crate::metrics::labels::http_limit;
use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt as _;

/// How long the listener pauses after an accept error that is not the client's (out of
/// file descriptors, say), so the error does not spin the loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long a connection may take over each phase; see the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct ConnTimeouts {
    /// From a connection's opening, or the first byte of a later request, to the end of
    /// the request head.
    pub header: Duration,
    /// From an answer to the first byte of the next request on a kept-alive connection.
    pub idle: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting, lets each
/// connection finish its current request and returns once all have closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    timeouts: ConnTimeouts,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    // Every connection holds a receiver; a send asks them to stop, and `closed` resolves
    // once the last one is gone.
    let (stop, stopped) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    if !is_per_connection(&e) {
                        tracing::warn!(error = %e, "HTTP accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let conn = serve_conn(
            stream,
            app.clone(),
            timeouts,
            metrics.clone(),
            stopped.clone(),
        );
        tokio::spawn(conn);
    }
    drop(listener);
    drop(stopped);
    let _ = stop.send(());
    stop.closed().await;
}

/// Accept errors that concern one connection only (it was reset before being accepted).
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection until it ends, a timeout closes it, or the server stops.
async fn serve_conn(
    stream: TcpStream,
    app: Router,
    timeouts: ConnTimeouts,
    metrics: Metrics,
    mut stop: watch::Receiver<()>,
) {
    let watch = Watch::new(Instant::now());
    let io = TokioIo::new(Watched {
        inner: stream,
        watch: watch.clone(),
    });
    let requests = watch.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let handling = requests.begin();
        let app = app.clone();
        async move {
            let resp = app.oneshot(req).await;
            // The request is handled until its body is sent or dropped, not just until
            // its head is produced: a streamed answer (presence) is not an idle
            // connection.
            resp.map(|r| {
                r.map(|body| {
                    Body::new(body.map_frame(move |f| {
                        let _ = &handling;
                        f
                    }))
                })
            })
        }
    });
    let conn = http1::Builder::new().serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let deadline = watch.deadline(timeouts);
        let wake_at = deadline.map_or_else(far_future, |(at, _)| at);
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(wake_at), if deadline.is_some() => {
                if let Some((at, limit)) = watch.deadline(timeouts)
                    && at <= Instant::now()
                {
                    // Dropping the connection closes the socket: nothing is owed to a
                    // client that has not finished a request.
                    metrics.http_limited.with_label_values(&[limit]).inc();
                    return;
                }
            }
            () = watch.0.changed.notified() => {}
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// A deadline that never comes, for a disabled `sleep_until` branch.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// What a connection is doing, as far as its timeouts care.
#[derive(Debug)]
struct Phase {
    /// Requests being handled (hyper handles one at a time on HTTP/1.1).
    handling: usize,
    /// When the awaited request head began: the connection's opening or the first byte
    /// read after the last answer. `None` while idle or handling.
    head_since: Option<Instant>,
    /// When the last answer was produced (or the connection opened).
    idle_since: Instant,
}

#[derive(Debug)]
struct WatchInner {
    phase: Mutex<Phase>,
    /// Wakes the connection's task when a deadline moves.
    changed: Notify,
}

/// One connection's [`Phase`], shared by its socket, its service and its task.
#[derive(Debug, Clone)]
struct Watch(Arc<WatchInner>);

impl Watch {
    fn new(now: Instant) -> Self {
        Self(Arc::new(WatchInner {
            phase: Mutex::new(Phase {
                handling: 0,
                head_since: Some(now),
                idle_since: now,
            }),
            changed: Notify::new(),
        }))
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        // Nothing panics while holding the lock; a poisoned phase is still consistent.
        self.0.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived: if the connection was idle, a request head has begun.
    fn on_read(&self) {
        let mut p = self.phase();
        if p.handling == 0 && p.head_since.is_none() {
            p.head_since = Some(Instant::now());
            drop(p);
            self.0.changed.notify_one();
        }
    }

    /// A request head is complete and handed to the router.
    fn begin(&self) -> Handling {
        let mut p = self.phase();
        p.handling += 1;
        p.head_since = None;
        drop(p);
        self.0.changed.notify_one();
        Handling(self.clone())
    }

    /// When the current phase times out, and the name of the limit; `None` while a
    /// request is handled.
    fn deadline(&self, t: ConnTimeouts) -> Option<(Instant, &'static str)> {
        let p = self.phase();
        if p.handling > 0 {
            return None;
        }
        Some(match p.head_since {
            Some(since) => (since + t.header, http_limit::HEADER_TIMEOUT),
            None => (p.idle_since + t.idle, http_limit::IDLE_TIMEOUT),
        })
    }
}

/// A request being handled; dropping it (answer produced, or connection gone) ends it.
struct Handling(Watch);

impl Drop for Handling {
    fn drop(&mut self) {
        let mut p = self.0.phase();
        p.handling = p.handling.saturating_sub(1);
        if p.handling == 0 {
            p.idle_since = Instant::now();
        }
        drop(p);
        self.0.0.changed.notify_one();
    }
}

/// A socket that reports each read to its connection's [`Watch`].
struct Watched<T> {
    inner: T,
    watch: Watch,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.on_read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: ConnTimeouts = ConnTimeouts {
        header: Duration::from_secs(2),
        idle: Duration::from_secs(60),
    };

    #[test]
    fn phases_pick_their_timeout() {
        let t0 = Instant::now();
        let w = Watch::new(t0);
        assert_eq!(w.deadline(T), Some((t0 + T.header, "header_timeout")));
        let handling = w.begin();
        w.on_read(); // body bytes do not start a head
        assert_eq!(w.deadline(T), None);
        drop(handling);
        let (idle_at, limit) = w.deadline(T).unwrap();
        assert_eq!(limit, "idle_timeout");
        assert!(idle_at >= t0 + T.idle);
        w.on_read();
        let (head_at, limit) = w.deadline(T).unwrap();
        assert_eq!(limit, "header_timeout");
        assert!(head_at < idle_at, "a begun head has the shorter bound");
        // Further bytes of the same head do not extend it.
        w.on_read();
        assert_eq!(w.deadline(T).unwrap().0, head_at);
    }
}
