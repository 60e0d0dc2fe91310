//! A cluster as an operator runs one: `gsrelay serve` processes sharing a real
//! `redis-server`, and a Service in front of them, a TCP proxy that sends each new
//! connection to the next node that accepts it, as a Kubernetes Service does once a dead
//! pod's endpoint is gone.

use super::redis::Redis;
use super::serve::{BIN, Serve};
use super::server::SECRET;
use gsrelay::client::Client;
use gsrelay::wire::Object;
use std::future::Future;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

/// How long a node may take to start, register and link.
const READY: Duration = Duration::from_secs(30);

/// A relay node in its own process.
pub struct Node {
    /// Its name in the directory.
    pub name: String,
    /// Its HTTP API.
    pub http: SocketAddr,
    /// The process; killed when dropped.
    pub serve: Serve,
}

/// A free TCP port on loopback (free when asked; taken by the node right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Node {
    /// Starts node `name` of the cluster on `redis` with `extra` flags, and waits until
    /// it is ready (registered in the directory).
    pub async fn start(redis: &Redis, name: &str, extra: &[&str]) -> Self {
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--http-addr", &http.to_string()])
            .args(["--rtp-addr", "127.0.0.1:0", "--quic-addr", "127.0.0.1:0"])
            .args(["--webrtc-addr", "127.0.0.1:0", "--link-addr", "127.0.0.1:0"])
            .args(["--redis-url", &redis.url(), "--node-name", name])
            .args(["--token-secret", SECRET])
            .args(extra);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GSRELAY_")) {
            cmd.env_remove(k);
        }
        cmd.env(super::serve::QUEUE_DELAY.0, super::serve::QUEUE_DELAY.1);
        let serve = Serve::spawn(&mut cmd);
        let node = Self {
            name: name.to_owned(),
            http,
            serve,
        };
        let deadline = Instant::now() + READY;
        while node.status("/readyz").await != Some(200) {
            assert!(Instant::now() < deadline, "node {name} not ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        node
    }

    /// The node's HTTP base URL.
    pub fn base(&self) -> String {
        format!("http://{}", self.http)
    }

    async fn status(&self, path: &str) -> Option<u16> {
        let resp = reqwest::get(format!("{}{path}", self.base())).await.ok()?;
        Some(resp.status().as_u16())
    }

    /// The value of the sample `series` on the node's `/metrics`.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let text = reqwest::get(format!("{}/metrics", self.base()))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// The sessions the node serves (links aside), over all its shards.
    pub async fn sessions(&self) -> f64 {
        let Ok(resp) = reqwest::get(format!("{}/metrics", self.base())).await else {
            return 0.0;
        };
        let text = resp.text().await.unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with("gsrelay_shard_sessions{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Kills the process at once (`kill -9`).
    pub fn kill(&mut self) {
        self.serve.signal("KILL");
        let _ = self.serve.child.wait();
    }
}

/// Waits until every node of `nodes` has a link to each of the others.
pub async fn linked(nodes: &[&Node]) {
    let want = (nodes.len() - 1) as f64;
    for n in nodes {
        until_links(&n.name, want, || n.metric("gsrelay_cluster_links")).await;
    }
}

/// Waits until `links` (a node's `gsrelay_cluster_links`) reads `want`, naming `who`.
pub async fn until_links<F: Future<Output = Option<f64>>>(
    who: &str,
    want: f64,
    links: impl Fn() -> F,
) {
    let deadline = Instant::now() + READY;
    while links().await != Some(want) {
        assert!(Instant::now() < deadline, "{who} not linked to the others");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Receives until an update of object `id` at x = `x` arrives.
pub async fn sees(c: &mut Client, id: u64, x: f32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "object {id} at x={x} did not arrive");
        let Ok(Some((_, objects))) = c.recv_objects(left).await else {
            continue;
        };
        if objects
            .iter()
            .any(|o| matches!(o, Object::Head1(h) if h.id == id && h.location.x == x))
        {
            return;
        }
    }
}

/// A Service in front of the nodes: each new connection goes to the next node, in turn,
/// that accepts it.
pub struct Service {
    /// Where it listens.
    pub addr: SocketAddr,
    next: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Service {
    /// A Service over `backends`, the first connection going to `backends[first]`.
    pub async fn start(backends: Vec<SocketAddr>, first: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let next = Arc::new(AtomicUsize::new(first));
        let turn = next.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let backends = backends.clone();
                let turn = turn.clone();
                tokio::spawn(async move {
                    for _ in 0..backends.len() {
                        let k = turn.fetch_add(1, Ordering::Relaxed) % backends.len();
                        if let Ok(mut server) = TcpStream::connect(backends[k]).await {
                            let mut client = client;
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            return;
                        }
                    }
                });
            }
        });
        Self { addr, next, task }
    }

    /// The Service's base URL.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends the next connection to `backends[k]`.
    pub fn next_to(&self, k: usize) {
        self.next.store(k, Ordering::Relaxed);
    }
}
