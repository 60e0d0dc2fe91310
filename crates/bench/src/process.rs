//! A `gsrelay serve` child process on chosen addresses: the soak reads the relay's own
//! memory apart from its clients', the restart run kills it and starts another on the same
//! ports, and the chaos tests run it inside a network namespace.

use super::sys;
use anyhow::{Context, bail};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started relay gets to answer `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How often readiness is polled.
const READY_POLL: Duration = Duration::from_millis(20);

/// How to start the relay.
#[derive(Debug, Clone)]
pub struct RelaySpec {
    /// The `gsrelay` binary.
    pub exe: PathBuf,
    /// A command the relay runs under, e.g. `ip netns exec NAME`; empty for none. It
    /// must exec the relay (so the child's pid is the relay's).
    pub wrapper: Vec<String>,
    /// HTTP address.
    pub http_addr: SocketAddr,
    /// RTP address.
    pub rtp_addr: SocketAddr,
    /// Token secret, handed over in the environment rather than on the command line.
    pub token_secret: String,
    /// Further `serve` flags.
    pub args: Vec<String>,
}

/// A running relay process; killed when dropped.
#[derive(Debug)]
pub struct RelayProcess {
    child: Child,
    http: String,
    client: reqwest::Client,
}

impl RelayProcess {
    /// Starts the relay and returns once `/readyz` answers 200.
    pub async fn start(spec: &RelaySpec) -> anyhow::Result<Self> {
        Self::start_logging(spec, "warn").await
    }

    /// Starts the relay logging at `rust_log` (a `RUST_LOG` filter, e.g. `error` where the
    /// warnings are what the run causes on purpose) and returns once `/readyz` answers
    /// 200.
    pub async fn start_logging(spec: &RelaySpec, rust_log: &str) -> anyhow::Result<Self> {
        let (program, pre) = match spec.wrapper.split_first() {
            Some((first, rest)) => (PathBuf::from(first), rest.to_vec()),
            None => (spec.exe.clone(), Vec::new()),
        };
        let mut cmd = Command::new(program);
        if !spec.wrapper.is_empty() {
            cmd.args(pre).arg(&spec.exe);
        }
        cmd.arg("serve")
            .arg("--http-addr")
            .arg(spec.http_addr.to_string())
            .arg("--rtp-addr")
            .arg(spec.rtp_addr.to_string())
            // Any free port beside the RTP one: two relays (a restart, parallel tests) never
            // contend for the default QUIC port; join answers carry the bound one.
            .arg("--quic-addr")
            .arg(std::net::SocketAddr::new(spec.rtp_addr.ip(), 0).to_string())
            .arg("--webrtc-addr")
            .arg(std::net::SocketAddr::new(spec.rtp_addr.ip(), 0).to_string())
            .args(&spec.args)
            .env("GSRELAY_TOKEN_SECRET", &spec.token_secret)
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", spec.exe.display()))?;
        let mut relay = Self {
            child,
            http: format!("http://{}", spec.http_addr),
            client: reqwest::Client::new(),
        };
        relay.wait_ready().await?;
        Ok(relay)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let url = format!("{}/readyz", self.http);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("the relay exited before it was ready: {status}");
            }
            let ready = self
                .client
                .get(&url)
                .timeout(Duration::from_secs(1))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "the relay at {} was not ready within {READY_TIMEOUT:?}",
                    self.http
                );
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// The HTTP base URL.
    pub fn http(&self) -> &str {
        &self.http
    }

    /// The relay's resident set size, bytes.
    pub fn rss_bytes(&self) -> Option<u64> {
        sys::rss_bytes_of(self.child.id())
    }

    /// The value of an unlabelled metric from `/metrics` (e.g. `gsrelay_sessions`).
    pub async fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let text = self
            .client
            .get(format!("{}/metrics", self.http))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        text.lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .find_map(|v| v.trim().parse().ok())
            .with_context(|| format!("metric {name} missing"))
    }

    /// Sends the relay `signal` (`SIGSTOP` freezes it, `SIGCONT` thaws it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        let pid = i32::try_from(self.child.id()).context("pid out of range")?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
            .with_context(|| format!("sending {signal} to the relay"))
    }

    /// Kills the relay at once (SIGKILL: no drain, no goodbye) and reaps it.
    pub fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        // Already reaped after `kill`; otherwise the relay must not outlive its run.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback TCP port for HTTP and a free UDP port for RTP, found by binding port 0
/// and letting go (another process could take them in between; on a test machine that
/// is rare enough).
pub fn free_loopback_addrs() -> std::io::Result<(SocketAddr, SocketAddr)> {
    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?;
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?;
    Ok((tcp, udp))
}
