//! `gsrelay serve` as an operator runs it: the built binary in a child process, on
//! loopback port 0, with its generated dev secret read back from its output.

use gsrelay::token::{Rights, Tokens};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The queueing budget of the relays the tests start (`udp_max_queue_delay_ms`): a shard
/// descheduled on a busy test machine must not shed a test's packets as stale; the
/// shedding itself is tested with its own budget (`tests/udp_queue.rs`).
pub const QUEUE_DELAY: (&str, &str) = ("GSRELAY_UDP_MAX_QUEUE_DELAY_MS", "250");

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_gsrelay");

/// How long the child may take to start and print its credentials.
const START: Duration = Duration::from_secs(30);

/// A `gsrelay serve` child, killed when dropped so a failed test leaves nothing behind.
pub struct Serve {
    pub child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Spawns `cmd` (a `gsrelay serve` command) with piped output.
    pub fn spawn(cmd: &mut Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Pass the logs on to the test's output (shown when it fails) so the child never
        // blocks on a full pipe.
        let stderr = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[serve] {line}");
            }
        });
        Self { child, lines }
    }

    /// `gsrelay serve` on loopback port 0 with a generated dev secret and `extra` flags,
    /// ignoring any `GSRELAY_*` variable of the caller's environment.
    pub fn dev(extra: &[&str]) -> DevServe {
        let mut cmd = Command::new(BIN);
        cmd.args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--rtp-addr",
            "127.0.0.1:0",
            "--quic-addr",
            "127.0.0.1:0",
            "--webrtc-addr",
            "127.0.0.1:0",
        ])
        .args(extra);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GSRELAY_")) {
            cmd.env_remove(k);
        }
        cmd.env(QUEUE_DELAY.0, QUEUE_DELAY.1);
        let serve = Self::spawn(&mut cmd);
        let secret = serve.line("dev token secret: ", START);
        let secret = secret.trim_start_matches("dev token secret: ").to_owned();
        let curl = serve.line("try: curl ", START);
        let url = curl
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap();
        let base = url.split("/v1/").next().unwrap().to_owned();
        DevServe {
            serve,
            secret,
            base,
        }
    }

    /// The next stdout line starting with `prefix`, waiting at most `timeout`.
    pub fn line(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line starting with {prefix:?} from gsrelay serve: {e}"),
            }
        }
    }

    /// Sends `signal` (`TERM`, `INT`, ...) to the child.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// The child's exit status, or `None` if it still runs after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A dev-mode `gsrelay serve`: its secret and HTTP base URL.
pub struct DevServe {
    pub serve: Serve,
    pub secret: String,
    /// e.g. `http://127.0.0.1:41234`.
    pub base: String,
}

impl DevServe {
    /// A ten-minute token for `room` with `rights`, issued to `identity`.
    pub fn token(&self, room: &str, identity: &str, rights: Rights) -> String {
        Tokens::new(self.secret.as_bytes())
            .unwrap()
            .issue(room, identity, rights, 600, super::server::now())
            .unwrap()
    }
}
