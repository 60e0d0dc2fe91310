//! A `gsrelay serve` child that can be killed (`kill -9`) and started again on the same
//! ports with the same token secret ([`SECRET`]), for the tests of resume across a crash.

use super::serve::{BIN, QUEUE_DELAY, Serve};
use super::server::SECRET;
use reqwest::StatusCode;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;
use tokio::time::Instant;

/// How long a started relay may take to answer `/readyz`.
const READY: Duration = Duration::from_secs(30);

/// How long a restart may keep finding its ports taken before the test gives up.
const PORTS_BACK: Duration = Duration::from_secs(10);

/// The relay's ports: HTTP (TCP), RTP and QUIC (UDP). WebRTC, which no client here uses,
/// takes any free port.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    pub http: SocketAddr,
    pub rtp: SocketAddr,
    pub quic: SocketAddr,
}

impl Ports {
    /// Free loopback ports, found by binding port 0 and letting go (another process may
    /// take one in between: [`Relay::start`] then tries others).
    pub fn free() -> Self {
        let http = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let rtp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let quic = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        Self {
            http: http.local_addr().unwrap(),
            rtp: rtp.local_addr().unwrap(),
            quic: quic.local_addr().unwrap(),
        }
    }
}

/// A `gsrelay serve` child on [`Ports`], accepting tokens signed with [`SECRET`].
pub struct Relay {
    pub serve: Serve,
    pub ports: Ports,
}

impl Relay {
    /// A relay on free ports, taking others if the first ones got taken meanwhile.
    pub async fn start() -> Self {
        let mut failures = Vec::new();
        for _ in 0..5 {
            let ports = Ports::free();
            match Self::start_on(ports).await {
                Ok(relay) => return relay,
                Err(e) => failures.push(e),
            }
        }
        panic!("no relay started: {failures:?}");
    }

    /// A relay on exactly `ports`, trying again while they are taken, for at most
    /// [`PORTS_BACK`].
    pub async fn restart_on(ports: Ports) -> Self {
        let deadline = Instant::now() + PORTS_BACK;
        loop {
            match Self::start_on(ports).await {
                Ok(relay) => return relay,
                Err(e) if Instant::now() >= deadline => {
                    panic!("no relay started again on {ports:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Spawns the relay on `ports` and waits until `/readyz` answers 200; an error when
    /// the relay exits first (a port taken).
    async fn start_on(ports: Ports) -> Result<Self, String> {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--http-addr", &ports.http.to_string()])
            .args(["--rtp-addr", &ports.rtp.to_string()])
            .args(["--quic-addr", &ports.quic.to_string()])
            .args(["--webrtc-addr", "127.0.0.1:0"])
            // One shard: shard k binds the RTP port plus k, which nobody made sure is free.
            .args(["--shards", "1"]);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GSRELAY_")) {
            cmd.env_remove(k);
        }
        cmd.env("GSRELAY_TOKEN_SECRET", SECRET);
        cmd.env(QUEUE_DELAY.0, QUEUE_DELAY.1);
        let mut relay = Self {
            serve: Serve::spawn(&mut cmd),
            ports,
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let url = format!("{}/readyz", relay.base());
        let deadline = Instant::now() + READY;
        loop {
            if let Some(status) = relay.serve.child.try_wait().unwrap() {
                return Err(format!("the relay on {ports:?} exited: {status}"));
            }
            let ready = http.get(&url).send().await;
            if ready.is_ok_and(|r| r.status() == StatusCode::OK) {
                return Ok(relay);
            }
            assert!(
                Instant::now() < deadline,
                "the relay on {ports:?} not ready"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Its HTTP API, `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.ports.http)
    }

    /// `kill -9`, and waits until the process is gone.
    pub fn kill_9(mut self) -> Ports {
        self.serve.signal("KILL");
        let status = self
            .serve
            .wait_exit(Duration::from_secs(10))
            .expect("the relay outlived kill -9");
        assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status}");
        self.ports
    }
}
