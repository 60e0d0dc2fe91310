//! A cluster as an operator runs one, for the cluster runs (`gsrelay bench nodes`,
//! `gsrelay bench failover`): a `redis-server` the bench starts on a free port, `gsrelay
//! serve` child processes sharing it and the token secret (so they link to each other
//! over QUIC), and a Service in front of them, a TCP proxy that sends each new connection
//! to the next node that accepts it, as a Kubernetes Service does once a dead pod's
//! endpoint is gone. Also the reading of a node's `/metrics`, labelled series included.

use super::process::{RelayProcess, RelaySpec, free_loopback_addrs};
use super::scenario::Security;
use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// How long `redis-server` gets to answer after it starts.
const REDIS_START: Duration = Duration::from_secs(10);

/// How long the nodes get to link to each other.
const LINK_TIMEOUT: Duration = Duration::from_secs(30);

/// How often readiness and links are polled.
const POLL: Duration = Duration::from_millis(20);

/// The metric whose value is how many other nodes a node is linked to.
pub const LINKS_METRIC: &str = "gsrelay_cluster_links";

/// A `redis-server` child process that keeps nothing on disk; killed when dropped.
#[derive(Debug)]
pub struct RedisProcess {
    child: Child,
    port: u16,
}

impl RedisProcess {
    /// Starts `redis-server` on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        Self::start_on(port).await
    }

    /// Starts `redis-server` on `port` (again, after [`kill`](Self::kill)), empty.
    pub async fn start_on(port: u16) -> anyhow::Result<Self> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server (the cluster runs need it on the PATH)")?;
        let mut redis = Self { child, port };
        redis.wait_ready().await?;
        Ok(redis)
    }

    /// Waits until the server answers a PING.
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + REDIS_START;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("redis-server exited before it answered: {status}");
            }
            if self.ping().await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "redis-server did not answer on port {} within {REDIS_START:?}",
                    self.port
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn ping(&self) -> redis::RedisResult<()> {
        let mut c = self.connection().await?;
        let _: String = redis::cmd("PING").query_async(&mut c).await?;
        Ok(())
    }

    /// A connection for the bench's own look-ups.
    pub async fn connection(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        redis::Client::open(self.url())?
            .get_multiplexed_async_connection()
            .await
    }

    /// Its URL, for `--redis-url`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills it at once (SIGKILL: everything it held is gone) and reaps it.
    pub fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        // Already reaped after `kill`; otherwise it must not outlive the run.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How the nodes of a cluster are started.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// The `gsrelay` binary.
    pub exe: PathBuf,
    /// The cluster's token secret (the links' key derives from it).
    pub secret: String,
    /// The directory.
    pub redis_url: String,
    /// SRTP or plain RTP.
    pub security: Security,
}

/// A `gsrelay serve` node of the cluster in its own process; killed when dropped.
#[derive(Debug)]
pub struct ClusterNode {
    /// Its name in the directory.
    pub name: String,
    /// Its HTTP API.
    pub http_addr: SocketAddr,
    /// Its one RTP address (one shard), which the join answers of its sessions carry.
    pub rtp_addr: SocketAddr,
    process: RelayProcess,
}

impl ClusterNode {
    /// Starts node `name`, taking joins of a room up to `spill` sessions before sending
    /// them to another node, and returns once it answers `/readyz` (registered in the
    /// directory). One shard, so that a room's hops are the nodes' and not the shards',
    /// and its RTP address is the one every session of the node is given.
    pub async fn start(spec: &ClusterSpec, name: &str, spill: usize) -> anyhow::Result<Self> {
        let (http_addr, rtp_addr) = free_loopback_addrs()?;
        let mut args: Vec<String> = [
            "--redis-url",
            &spec.redis_url,
            "--node-name",
            name,
            "--link-addr",
            "127.0.0.1:0",
            "--node-spill-sessions",
            &spill.to_string(),
            "--shards",
            "1",
            "--drain-grace-secs",
            "0",
            // The bench's clients send far below it; the default would only matter to a
            // publisher re-sending thousands of static objects at once.
            "--max-packets-per-sec",
            "100000",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if spec.security == Security::Plain {
            args.push("--insecure-plain-rtp".to_owned());
        }
        let relay = RelaySpec {
            exe: spec.exe.clone(),
            wrapper: Vec::new(),
            http_addr,
            rtp_addr,
            token_secret: spec.secret.clone(),
            args,
        };
        // A node killed on purpose makes the others warn (lost link, forwarded request
        // failed): expected here, so only errors are shown.
        let process = RelayProcess::start_logging(&relay, "error")
            .await
            .with_context(|| format!("starting node {name}"))?;
        Ok(Self {
            name: name.to_owned(),
            http_addr,
            rtp_addr,
            process,
        })
    }

    /// The HTTP base URL.
    pub fn http(&self) -> &str {
        self.process.http()
    }

    /// Its resident set size, bytes.
    pub fn rss_bytes(&self) -> Option<u64> {
        self.process.rss_bytes()
    }

    /// Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the node.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        self.process.signal(signal)
    }

    /// Kills the node at once (SIGKILL: no drain, no goodbye to the other nodes).
    pub fn kill(self) -> anyhow::Result<()> {
        self.process.kill()
    }
}

/// Waits until each node at `https` is linked to every other one.
pub async fn wait_linked(https: &[String]) -> anyhow::Result<()> {
    let want = https.len().saturating_sub(1) as f64;
    let client = reqwest::Client::new();
    let deadline = Instant::now() + LINK_TIMEOUT;
    for http in https {
        loop {
            let links = scrape(&client, http)
                .await
                .ok()
                .and_then(|text| sample(&text, LINKS_METRIC, &[]));
            if links == Some(want) {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "{http} has {links:?} cluster links, not {want}, after {LINK_TIMEOUT:?}: \
                     do the nodes share a Redis and a token secret?"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

/// The text of the node's `/metrics`.
pub async fn scrape(client: &reqwest::Client, http: &str) -> anyhow::Result<String> {
    let url = format!("{}/metrics", http.trim_end_matches('/'));
    Ok(client
        .get(&url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .with_context(|| format!("reading {url}"))?
        .error_for_status()?
        .text()
        .await?)
}

/// The value of the series of metric `name` whose labels include every pair of `labels`
/// (in any order), summed over the series that match (so that `&[]` on a family with
/// labels gives its total); `None` when no series matches.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (series, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once("} ") {
                Some((l, v)) => (l, v),
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(v) => ("", v),
                // Another metric whose name starts with this one's.
                None => continue,
            },
        };
        let wanted = labels
            .iter()
            .all(|(k, v)| series.split(',').any(|pair| pair == format!("{k}=\"{v}\"")));
        if let (true, Ok(v)) = (wanted, value.trim().parse::<f64>()) {
            found = Some(found.unwrap_or(0.0) + v);
        }
    }
    found
}

/// The series of metric `name` by the value of its label `label`, summed over its other
/// labels (e.g. a node's dropped packets by reason).
pub fn by_label(text: &str, name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut found = BTreeMap::new();
    let key = format!("{label}=\"");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((series, value)) = rest.split_once("} ") else {
            continue;
        };
        let Some(v) = series
            .split(',')
            .find_map(|pair| pair.strip_prefix(key.as_str()))
            .and_then(|v| v.strip_suffix('"'))
        else {
            continue;
        };
        if let Ok(n) = value.trim().parse::<f64>() {
            *found.entry(v.to_owned()).or_insert(0.0) += n;
        }
    }
    found
}

/// A Service in front of the nodes: each new connection goes to the next backend, in
/// turn, that accepts it. Stops when dropped.
#[derive(Debug)]
pub struct Service {
    addr: SocketAddr,
    next: Arc<AtomicUsize>,
    backends: Arc<Mutex<Vec<SocketAddr>>>,
    /// Whether each backend passed its last readiness probe (all, without probes).
    ready: Arc<Mutex<Vec<bool>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Service {
    /// A Service over `backends` on a free loopback port, the first connection going to
    /// `backends[0]`.
    pub async fn start(backends: Vec<SocketAddr>) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let next = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(Mutex::new(vec![true; backends.len()]));
        let backends = Arc::new(Mutex::new(backends));
        let pool = Pool {
            backends: backends.clone(),
            ready: ready.clone(),
            turn: next.clone(),
        };
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, pool.clone()));
            }
        });
        Ok(Self {
            addr,
            next,
            backends,
            ready,
            tasks: vec![task],
        })
    }

    /// The same Service, taking a backend out while its readiness probe fails, as a
    /// Kubernetes Service does: `GET /readyz` on each backend every `every`, failing when
    /// it does not answer 200 within `every` (a frozen node accepts connections, its
    /// kernel does, and answers none).
    pub fn with_probes(mut self, every: Duration) -> Self {
        let (backends, ready) = (self.backends.clone(), self.ready.clone());
        self.tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let list = backends
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let probes = list.iter().map(|b| {
                    let get = http.get(format!("http://{b}/readyz")).timeout(every).send();
                    async move { get.await.is_ok_and(|r| r.status().is_success()) }
                });
                let passed = futures_util::future::join_all(probes).await;
                *ready.lock().unwrap_or_else(PoisonError::into_inner) = passed;
                tokio::time::sleep(every).await;
            }
        }));
        self
    }

    /// The Service's base URL.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends the next connection to backend `k` (or the next one after it that accepts).
    pub fn next_to(&self, k: usize) {
        self.next.store(k, Ordering::Relaxed);
    }

    /// Puts `addr` in the place of backend `k` (a replacement pod's endpoint).
    pub fn replace(&self, k: usize, addr: SocketAddr) {
        let mut list = self.backends.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = list.get_mut(k) {
            *slot = addr;
        }
    }

    /// Whether each backend passed its last readiness probe.
    pub fn ready(&self) -> Vec<bool> {
        self.ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What a Service's connections are sent to.
#[derive(Debug, Clone)]
struct Pool {
    backends: Arc<Mutex<Vec<SocketAddr>>>,
    ready: Arc<Mutex<Vec<bool>>>,
    turn: Arc<AtomicUsize>,
}

/// Connects `client` to the next ready backend that accepts (any that accepts, when
/// none passed its probe), and copies both ways until either side closes.
async fn forward(mut client: TcpStream, pool: Pool) {
    let list = pool
        .backends
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let ready = pool
        .ready
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let any_ready = ready.iter().any(|r| *r);
    for _ in 0..list.len() {
        let k = pool.turn.fetch_add(1, Ordering::Relaxed) % list.len();
        if any_ready && !ready.get(k).copied().unwrap_or(true) {
            continue;
        }
        // A dead node's port refuses at once on loopback: try the next.
        if let Ok(mut server) = TcpStream::connect(list[k]).await {
            let _ = server.set_nodelay(true);
            let _ = client.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sample;

    const TEXT: &str = "# HELP gsrelay_bytes_total Bytes.\n\
        gsrelay_bytes_total{direction=\"in\",transport=\"link\"} 10\n\
        gsrelay_bytes_total{direction=\"out\",transport=\"link\"} 32\n\
        gsrelay_bytes_total{direction=\"out\",transport=\"udp\"} 7\n\
        gsrelay_bytes_total_extra 1\n\
        gsrelay_cluster_links 2\n";

    #[test]
    fn a_series_is_found_by_its_labels_in_any_order() {
        let out = [("transport", "link"), ("direction", "out")];
        assert_eq!(sample(TEXT, "gsrelay_bytes_total", &out), Some(32.0));
        assert_eq!(
            sample(TEXT, "gsrelay_bytes_total", &[("direction", "out")]),
            Some(39.0)
        );
        assert_eq!(sample(TEXT, "gsrelay_cluster_links", &[]), Some(2.0));
        assert_eq!(
            sample(TEXT, "gsrelay_bytes_total", &[("transport", "quic")]),
            None
        );
        assert_eq!(sample(TEXT, "gsrelay_cluster", &[]), None);
    }
}
