//! `gsrelay serve` and `gsrelay token`.

use anyhow::{Context, bail};
use clap::Args;
use gsrelay::serve as server;
use gsrelay::serve::{LogFormat, ServeArgs};
use gsrelay::token::{Rights, Tokens};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};
use tracing_subscriber::EnvFilter;

/// Room, identity and lifetime of the example token printed with a generated dev secret.
const EXAMPLE_ROOM: &str = "dev";
const EXAMPLE_IDENTITY: &str = "dev";
const EXAMPLE_TTL_SECS: u64 = 24 * 3600;

/// Arguments of `gsrelay token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The one room the token is valid for; `*` with --admin for a relay-wide admin token
    /// (lists every room, administers any; joins none).
    #[arg(long)]
    room: String,
    /// The holder's identity (the token's subject).
    #[arg(long)]
    identity: String,
    /// Grant the right to publish game state.
    #[arg(long)]
    publish: bool,
    /// Grant the right to receive game state.
    #[arg(long)]
    subscribe: bool,
    /// Grant the room admin's rights: inspect the room (GET /v1/rooms/{room}) and change the
    /// interest of, or remove, any session in it (PUT .../interest, DELETE /v1/sessions/{id}).
    #[arg(long)]
    admin: bool,
    /// Lifetime in seconds. Relays refuse tokens living longer than their
    /// token_max_ttl_secs (default 86400).
    #[arg(long, default_value_t = 3600, value_name = "SECS")]
    ttl: u64,
    /// Signing secret: the relay's --token-secret.
    #[arg(long, env = "GSRELAY_TOKEN_SECRET", hide_env_values = true)]
    secret: String,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Prints a signed token.
pub fn token(a: TokenArgs) -> anyhow::Result<()> {
    if !(a.publish || a.subscribe || a.admin) {
        bail!("a token without rights is useless: give --publish, --subscribe and/or --admin");
    }
    if a.room == "*" && !a.admin {
        bail!(
            "a relay-wide token (--room '*') joins no room: it carries the admin right alone; give --admin"
        );
    }
    let tokens = Tokens::new(a.secret.as_bytes())?;
    let rights = Rights {
        publish: a.publish,
        subscribe: a.subscribe,
        admin: a.admin,
    };
    println!(
        "{}",
        tokens.issue(&a.room, &a.identity, rights, a.ttl, unix_now())?
    );
    Ok(())
}

fn init_logging(format: LogFormat) {
    // web-transport-quinn warns each time a browser closes its session without the close
    // capsule, which is an ordinary close here: only its errors are logged by default.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,web_transport_quinn=error"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in collected logs.
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs the relay until SIGINT or SIGTERM, then drains; a second signal stops at once.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let cfg = args.resolve()?;
    init_logging(cfg.log_format);
    let runtime = tokio::runtime::Runtime::new().context("starting the tokio runtime")?;
    runtime.block_on(async {
        // Listen before anything is printed: a signal sent as soon as the token appears
        // must drain, not kill the process.
        let mut signals = Signals::install()?;
        let server = server::start(cfg).await?;
        if let Some(secret) = &server.dev_secret {
            print_dev_credentials(secret, server.http_addr)?;
        }
        if server.quic.self_signed {
            // Clients pin this (join answers carry it too), as they copy the dev token.
            println!(
                "QUIC self-signed certificate sha256: {} (RoQ and WebTransport; replaced every {} days, join answers carry the current one)",
                server.quic.cert_sha256,
                server.quic.certs.rotation().map_or(0, |d| d.as_secs() / 86_400)
            );
        }
        signals.next().await;
        tracing::info!("signal received: draining (signal again to stop at once)");
        tokio::select! {
            done = server.shutdown() => done,
            () = signals.next() => {
                tracing::warn!("second signal: stopping without waiting for the drain");
                Ok(())
            }
        }
    })
}

/// Prints the generated secret, a ready-to-use token and the viewer's address with it, so a
/// laptop run needs no setup.
fn print_dev_credentials(secret: &str, http_addr: SocketAddr) -> anyhow::Result<()> {
    tracing::warn!(
        "no token secret configured: generated a random dev secret for this run only \
         (set --token-secret / GSRELAY_TOKEN_SECRET in production)"
    );
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: true,
    };
    let token = Tokens::new(secret.as_bytes())?.issue(
        EXAMPLE_ROOM,
        EXAMPLE_IDENTITY,
        rights,
        EXAMPLE_TTL_SECS,
        unix_now(),
    )?;
    // Connecting to 0.0.0.0 works on Linux only; show loopback for an unspecified address.
    let mut shown = http_addr;
    if shown.ip().is_unspecified() {
        shown.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    println!("dev token secret: {secret}");
    println!(
        "example token (room {EXAMPLE_ROOM:?}, identity {EXAMPLE_IDENTITY:?}, publish+subscribe+admin, 24 h): {token}"
    );
    println!(
        "try: curl -X POST http://{shown}/v1/rooms/{EXAMPLE_ROOM}/sessions -H 'Authorization: Bearer {token}' -d '{{\"transport\":\"rtp\"}}'"
    );
    // The token rides in the fragment, which browsers never send to the server.
    println!("viewer: http://{shown}/viewer#token={token}&room={EXAMPLE_ROOM}");
    Ok(())
}

/// SIGINT (Ctrl-C) and, on Unix, SIGTERM (what Kubernetes sends), listened to from the
/// moment they are installed.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                int: signal(SignalKind::interrupt()).context("installing SIGINT handler")?,
                term: signal(SignalKind::terminate()).context("installing SIGTERM handler")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves on the next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
