//! A whole relay in one process: metrics, the relay task behind the UDP transport, and
//! the HTTP API, started from a [`ServeConfig`] and stopped with a graceful drain.
//!
//! Every address may use port 0; the bound addresses are on [`Server`], so tests run many
//! servers side by side.

use crate::config::ServeConfig;
use crate::control::conn::{self, ConnTimeouts};
use crate::control::http::{self, ApiState};
use crate::control::token::{self, Tokens};
use crate::metrics::Metrics;
use crate::relay::Relay;
use crate::transport::command::RelayHandle;
use crate::transport::quic::{QuicConfig, QuicInfo};
use crate::transport::udp::{self, UdpConfig};
use anyhow::Context;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often a drain checks whether the last session has left.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// How long in-flight HTTP requests, then the relay task, each get to finish once the
/// drain is over: a shutdown takes at most the drain grace plus twice this.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the event-loop lag of the relay task is probed.
const LAG_PROBE_EVERY: Duration = Duration::from_millis(250);

/// The relay task's shard label: one task today (see `docs/operations.md`).
const SHARD: &str = "0";

/// A running relay.
pub struct Server {
    /// Where the HTTP API listens (the real port when bound to port 0).
    pub http_addr: SocketAddr,
    /// Where the RTP/UDP socket is bound (the real port when bound to port 0).
    pub rtp_addr: SocketAddr,
    /// The QUIC endpoint: its bound address and certificate fingerprint.
    pub quic: QuicInfo,
    /// Handle on the relay task.
    pub handle: RelayHandle,
    /// The relay's metrics.
    pub metrics: Metrics,
    /// The random token secret generated because none was configured; `None` when the
    /// configuration supplied one.
    pub dev_secret: Option<String>,
    api: ApiState,
    grace: Duration,
    stop_http: oneshot::Sender<()>,
    http_task: JoinHandle<()>,
    relay_task: JoinHandle<()>,
    lag_probe: AbortOnDrop,
}

/// Aborts a background task when dropped: the lag probe holds a relay handle, and the
/// relay task only ends once every handle is gone.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Measures the relay task's event-loop lag: how long a no-op command (a lookup of
/// session 0, which is never allocated) waits before the task answers it. A busy or
/// blocked task shows here before it shows anywhere else.
async fn probe_lag(handle: RelayHandle, metrics: Metrics) {
    let lag = metrics.event_loop_lag.with_label_values(&[SHARD]);
    let mut every = tokio::time::interval(LAG_PROBE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let sent = Instant::now();
        if handle.session_owner(0).await.is_err() {
            return;
        }
        lag.observe(sent.elapsed().as_secs_f64());
    }
}

/// Starts a relay: binds the HTTP listener and the RTP socket, spawns the relay task and
/// the HTTP server, and returns once both accept traffic.
pub async fn start(cfg: ServeConfig) -> anyhow::Result<Server> {
    let (secret, dev_secret) = match &cfg.token_secret {
        Some(s) => (s.clone(), None),
        None => {
            let s = token::dev_secret()?;
            (s.clone(), Some(s))
        }
    };
    anyhow::ensure!(
        cfg.token_max_ttl_secs > 0,
        "token_max_ttl_secs must be at least 1"
    );
    let tokens = Tokens::new(secret.as_bytes())
        .context("token secret")?
        .with_max_ttl(cfg.token_max_ttl_secs);
    if cfg.insecure_plain_rtp {
        tracing::warn!(
            "INSECURE: --insecure-plain-rtp is on; sessions may send unencrypted RTP that \
             anyone on the path can read and forge. Use for lab interop only."
        );
    }

    let listener = tokio::net::TcpListener::bind(cfg.http_addr)
        .await
        .with_context(|| format!("binding the HTTP address {}", cfg.http_addr))?;
    let http_addr = listener.local_addr()?;

    let metrics = Metrics::new();
    let seed = getrandom::u64().context("seeding the relay")?;
    let relay = Relay::new(cfg.relay.clone(), seed, metrics.clone());
    let quic = QuicConfig {
        advertise: cfg.quic_advertise_addr,
        cert: cfg.quic_cert.clone().zip(cfg.quic_key.clone()),
        ..QuicConfig::new(cfg.quic_addr)
    };
    let transport = udp::spawn_with(
        UdpConfig {
            bind: cfg.rtp_addr,
            advertise: cfg.rtp_advertise_addr,
            insecure_plain_rtp: cfg.insecure_plain_rtp,
            default_profile: cfg.srtp_profile,
        },
        Some(quic),
        relay,
        metrics.clone(),
    )
    .await
    .with_context(|| {
        format!(
            "binding the RTP address {} and the QUIC address {}",
            cfg.rtp_addr, cfg.quic_addr
        )
    })?;
    let quic = transport
        .quic
        .clone()
        .context("the QUIC endpoint did not start")?;

    let api = ApiState::new(
        transport.handle.clone(),
        tokens,
        metrics.clone(),
        cfg.srtp_profile,
        cfg.http.clone(),
    )
    .context("HTTP limits")?;
    let (stop_http, stopped) = oneshot::channel();
    let app = http::router(api.clone());
    let timeouts = ConnTimeouts {
        header: cfg.http.header_timeout,
        idle: cfg.http.idle_timeout,
    };
    let http_task = tokio::spawn(conn::serve(
        listener,
        app,
        timeouts,
        metrics.clone(),
        async {
            // A dropped sender stops the server too.
            let _ = stopped.await;
        },
    ));

    let lag_probe = AbortOnDrop(tokio::spawn(probe_lag(
        transport.handle.clone(),
        metrics.clone(),
    )));

    tracing::info!(
        http = %http_addr,
        rtp = %transport.local_addr,
        rtp_advertised = ?cfg.rtp_advertise_addr,
        srtp_profile = %cfg.srtp_profile,
        "gsrelay listening"
    );
    tracing::info!(
        quic = %quic.local_addr,
        quic_advertised = ?cfg.quic_advertise_addr,
        cert_sha256 = %quic.cert_sha256,
        self_signed = quic.self_signed,
        "RTP over QUIC listening (ALPN roq)"
    );

    Ok(Server {
        http_addr,
        rtp_addr: transport.local_addr,
        quic,
        handle: transport.handle,
        metrics,
        dev_secret,
        api,
        grace: cfg.drain_grace(),
        stop_http,
        http_task,
        relay_task: transport.task,
        lag_probe,
    })
}

impl Server {
    /// Starts a graceful drain: readiness goes false and new joins are refused (503),
    /// while existing sessions keep flowing. Returns the sessions still joined.
    pub async fn begin_drain(&self) -> anyhow::Result<usize> {
        self.api.start_draining();
        Ok(self.handle.drain().await?)
    }

    /// Drains, waits until every session has left or the grace period has passed, then
    /// stops the HTTP server and the relay task.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.grace;
        // A relay task that has already stopped holds no sessions: go on stopping HTTP.
        let mut left = self.begin_drain().await.unwrap_or(0);
        tracing::info!(sessions = left, grace = ?self.grace, "draining");
        while left > 0 && Instant::now() < deadline {
            tokio::time::sleep(DRAIN_POLL.min(deadline - Instant::now())).await;
            left = self.handle.drain().await.unwrap_or(0);
        }
        if left > 0 {
            tracing::warn!(sessions = left, "drain grace period over; stopping anyway");
        }

        let _ = self.stop_http.send(());
        let mut http_task = self.http_task;
        match tokio::time::timeout(STOP_TIMEOUT, &mut http_task).await {
            Ok(joined) => joined.context("HTTP server task")?,
            Err(_) => {
                tracing::warn!("HTTP requests still in flight; aborting them");
                http_task.abort();
            }
        }

        // The relay task ends once every handle is gone; the router's went with it.
        drop(self.lag_probe);
        drop(self.handle);
        drop(self.api);
        let mut relay_task = self.relay_task;
        match tokio::time::timeout(STOP_TIMEOUT, &mut relay_task).await {
            Ok(joined) => joined.context("relay task")?,
            Err(_) => {
                tracing::warn!("relay task still has handles; aborting it");
                relay_task.abort();
            }
        }
        tracing::info!("stopped");
        Ok(())
    }
}
