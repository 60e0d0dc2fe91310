//! A userspace network impairment proxy (the kernel here has no netem): a UDP proxy
//! between the clients and the relay that drops, delays (with jitter) and reorders
//! datagrams in each direction, from a seeded RNG, and may hold each direction of each
//! client to a bandwidth behind a tail-drop queue (a bottleneck link).
//!
//! Each client gets its own upstream socket, so the relay still sees one address per
//! client and latches them apart.

use anyhow::{Context, bail};
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Extra delay given to a packet picked for reordering, on top of delay and jitter, so
/// that it arrives after the packets sent just behind it.
const REORDER_EXTRA: Duration = Duration::from_millis(3);

/// Largest datagram the proxy carries.
const MAX_DATAGRAM: usize = 2048;

/// What the proxy does to each datagram, in each direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Impairment {
    /// Share of datagrams dropped, 0..=1.
    pub loss: f64,
    /// Fixed one-way delay.
    pub delay: Duration,
    /// Uniform jitter: each delay is `delay ± jitter` (never below zero).
    pub jitter: Duration,
    /// Share of datagrams held back by an extra 3 ms so they arrive out of order, 0..=1.
    pub reorder: f64,
    /// Bandwidth of each direction of each client's path, bits per second (IP and UDP
    /// headers counted); none when 0.
    pub rate_bps: f64,
    /// The most a datagram may wait for that bandwidth before it is dropped (tail drop).
    pub queue: Duration,
}

/// Queue limit of a rate-limited path when the spec names none.
pub const DEFAULT_QUEUE: Duration = Duration::from_millis(200);

/// IPv4 and UDP headers, counted against a rate limit.
const UDP_IP_OVERHEAD: usize = 28;

impl FromStr for Impairment {
    type Err = anyhow::Error;

    /// Parses `loss=5%,delay=20ms,jitter=5ms,reorder=1%,rate=2mbit,queue=100ms` (any
    /// subset, any order; shares as `5%` or `0.05`, times as `20ms`, `1.5s` or `300us`,
    /// rates as `500kbit`, `2mbit` or bits per second).
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let mut out = Impairment {
            queue: DEFAULT_QUEUE,
            ..Impairment::default()
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .with_context(|| format!("impairment {part:?}: expected key=value"))?;
            match key.trim() {
                "loss" => out.loss = share(value)?,
                "reorder" => out.reorder = share(value)?,
                "delay" => out.delay = time(value)?,
                "jitter" => out.jitter = time(value)?,
                "rate" => out.rate_bps = rate(value)?,
                "queue" => out.queue = time(value)?,
                other => bail!(
                    "unknown impairment {other:?} (loss, delay, jitter, reorder, rate, queue)"
                ),
            }
        }
        Ok(out)
    }
}

fn share(v: &str) -> anyhow::Result<f64> {
    let v = v.trim();
    let x = match v.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>()? / 100.0,
        None => v.parse::<f64>()?,
    };
    if !(0.0..=1.0).contains(&x) {
        bail!("share {v:?} is not within 0..=100%");
    }
    Ok(x)
}

fn rate(v: &str) -> anyhow::Result<f64> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = v.strip_suffix("kbit") {
        (n, 1e3)
    } else {
        (v, 1.0)
    };
    let bps = num.trim().parse::<f64>()? * scale;
    if !(1e3..=1e11).contains(&bps) {
        bail!("rate {v:?} must be within 1kbit..=100000mbit");
    }
    Ok(bps)
}

fn time(v: &str) -> anyhow::Result<Duration> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1.0)
    } else {
        bail!("time {v:?} needs a unit: s, ms or us");
    };
    let secs = num.trim().parse::<f64>()? * scale;
    if !(0.0..=10.0).contains(&secs) {
        bail!("time {v:?} must be within 0..=10 s");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// SplitMix64: a small, good-enough seeded generator, so runs repeat exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A bottleneck: when the link is next free.
#[derive(Debug, Clone, Copy, Default)]
pub struct Link {
    free_at: Option<Instant>,
}

impl Impairment {
    /// The fate of one datagram of `len` bytes sent at `now` over `link`: `None` to drop
    /// it, else how long to hold it.
    pub fn decide(
        &self,
        rng: &mut Rng,
        link: &mut Link,
        now: Instant,
        len: usize,
    ) -> Option<Duration> {
        if rng.unit() < self.loss {
            return None;
        }
        let mut queued = Duration::ZERO;
        if self.rate_bps > 0.0 {
            let start = link.free_at.map_or(now, |t| t.max(now));
            if start - now > self.queue {
                return None;
            }
            let serialise = (len + UDP_IP_OVERHEAD) as f64 * 8.0 / self.rate_bps;
            let done = start + Duration::from_secs_f64(serialise);
            link.free_at = Some(done);
            queued = done - now;
        }
        let jitter = self.jitter.as_secs_f64() * (2.0 * rng.unit() - 1.0);
        let mut hold = (self.delay.as_secs_f64() + jitter).max(0.0);
        if rng.unit() < self.reorder {
            hold += REORDER_EXTRA.as_secs_f64();
        }
        Some(queued + Duration::from_secs_f64(hold))
    }
}

/// Datagrams through the proxy, both directions together.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Datagrams passed on.
    pub forwarded: AtomicU64,
    /// Datagrams dropped on purpose.
    pub dropped: AtomicU64,
}

/// A bound proxy that is not yet forwarding: bind first to learn the address clients
/// must use, then [`start`](Self::start) it toward the relay.
#[derive(Debug)]
pub struct ProxyListener {
    socket: UdpSocket,
    addr: SocketAddr,
}

/// A running proxy; dropping it stops it.
#[derive(Debug)]
pub struct Proxy {
    /// The address clients send to.
    pub addr: SocketAddr,
    /// Counts of forwarded and dropped datagrams.
    pub stats: Arc<ProxyStats>,
    tasks: JoinSet<()>,
}

impl ProxyListener {
    /// Binds the client-facing socket on loopback.
    pub async fn bind() -> anyhow::Result<Self> {
        let socket = UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = socket.local_addr()?;
        Ok(Self { socket, addr })
    }

    /// The address clients must send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts forwarding to `upstream` with `impairment`, seeded with `seed`.
    pub fn start(self, upstream: SocketAddr, impairment: Impairment, seed: u64) -> Proxy {
        let addr = self.addr;
        let stats = Arc::new(ProxyStats::default());
        let mut tasks = JoinSet::new();
        let front = Arc::new(self.socket);
        tasks.spawn(front_loop(front, upstream, impairment, seed, stats.clone()));
        Proxy { addr, stats, tasks }
    }
}

impl Proxy {
    /// Stops forwarding.
    pub fn stop(mut self) {
        self.tasks.abort_all();
    }
}

/// Where a delayed datagram goes.
#[derive(Debug, Clone)]
enum Dest {
    /// Back to a client, through the front socket.
    Client(Arc<UdpSocket>, SocketAddr),
    /// Up to the relay, through the client's upstream socket (connected).
    Relay(Arc<UdpSocket>),
}

impl Dest {
    async fn send(&self, data: &[u8]) {
        // A send that fails is a lost datagram, which is what a network may do.
        let _ = match self {
            Dest::Client(s, to) => s.send_to(data, *to).await,
            Dest::Relay(s) => s.send(data).await,
        };
    }
}

/// One direction's impairment: decides each datagram's fate and delivers it on time, in
/// deadline order (a heap, not a task per datagram, so equal delays keep their order).
struct Lane {
    impairment: Impairment,
    rng: Rng,
    stats: Arc<ProxyStats>,
    queue: mpsc::UnboundedSender<(Instant, u64, Vec<u8>)>,
    n: u64,
    link: Link,
}

impl Lane {
    fn spawn(
        tasks: &mut JoinSet<()>,
        impairment: Impairment,
        seed: u64,
        stats: Arc<ProxyStats>,
        dest: Dest,
    ) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tasks.spawn(deliver(rx, dest));
        Self {
            impairment,
            rng: Rng::new(seed),
            stats,
            queue,
            n: 0,
            link: Link::default(),
        }
    }

    fn push(&mut self, data: &[u8]) {
        let now = Instant::now();
        match self
            .impairment
            .decide(&mut self.rng, &mut self.link, now, data.len())
        {
            None => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Some(hold) => {
                self.stats.forwarded.fetch_add(1, Ordering::Relaxed);
                self.n += 1;
                let _ = self.queue.send((now + hold, self.n, data.to_vec()));
            }
        }
    }
}

async fn deliver(mut rx: mpsc::UnboundedReceiver<(Instant, u64, Vec<u8>)>, dest: Dest) {
    let mut heap: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>> = BinaryHeap::new();
    loop {
        let next = heap.peek().map(|Reverse((at, _, _))| *at);
        tokio::select! {
            got = rx.recv() => match got {
                Some(item) => heap.push(Reverse(item)),
                None if heap.is_empty() => return,
                None => {}
            },
            _ = sleep_until(next), if next.is_some() => {
                while let Some(Reverse((at, _, _))) = heap.peek() {
                    if *at > Instant::now() {
                        break;
                    }
                    if let Some(Reverse((_, _, data))) = heap.pop() {
                        dest.send(&data).await;
                    }
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Reads from clients; opens an upstream socket (and its return lane) per new client.
async fn front_loop(
    front: Arc<UdpSocket>,
    upstream: SocketAddr,
    impairment: Impairment,
    seed: u64,
    stats: Arc<ProxyStats>,
) {
    let mut tasks = JoinSet::new();
    let mut clients: HashMap<SocketAddr, Lane> = HashMap::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut lanes = 0u64;
    loop {
        let Ok((len, from)) = front.recv_from(&mut buf).await else {
            continue;
        };
        let lane = match clients.entry(from) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(slot) => {
                let Ok(up) = open_upstream(upstream).await else {
                    continue;
                };
                let up = Arc::new(up);
                lanes += 1;
                // Each lane has its own stream of random numbers, derived from the seed.
                let mix = lanes.wrapping_mul(0x2545_f491_4f6c_dd1d);
                let to_relay = Lane::spawn(
                    &mut tasks,
                    impairment,
                    seed ^ mix,
                    stats.clone(),
                    Dest::Relay(up.clone()),
                );
                let mut to_client = Lane::spawn(
                    &mut tasks,
                    impairment,
                    !seed ^ mix,
                    stats.clone(),
                    Dest::Client(front.clone(), from),
                );
                tasks.spawn(async move {
                    let mut buf = vec![0u8; MAX_DATAGRAM];
                    while let Ok(len) = up.recv(&mut buf).await {
                        to_client.push(buf.get(..len).unwrap_or_default());
                    }
                });
                slot.insert(to_relay)
            }
        };
        lane.push(buf.get(..len).unwrap_or_default());
    }
}

async fn open_upstream(upstream: SocketAddr) -> std::io::Result<UdpSocket> {
    let local: SocketAddr = if upstream.is_ipv4() {
        (std::net::Ipv4Addr::LOCALHOST, 0).into()
    } else {
        (std::net::Ipv6Addr::LOCALHOST, 0).into()
    };
    let s = UdpSocket::bind(local).await?;
    s.connect(upstream).await?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_issue_example() {
        let i: Impairment = "loss=5%,delay=20ms,jitter=5ms,reorder=1%".parse().unwrap();
        assert_eq!(i.loss, 0.05);
        assert_eq!(i.delay, Duration::from_millis(20));
        assert_eq!(i.jitter, Duration::from_millis(5));
        assert_eq!(i.reorder, 0.01);
        assert!("loss=150%".parse::<Impairment>().is_err());
        assert!("delay=20".parse::<Impairment>().is_err());
        assert!("speed=1".parse::<Impairment>().is_err());
        let r: Impairment = "rate=2mbit,queue=50ms".parse().unwrap();
        assert_eq!((r.rate_bps, r.queue), (2e6, Duration::from_millis(50)));
        assert_eq!(
            "rate=500kbit".parse::<Impairment>().unwrap().queue,
            DEFAULT_QUEUE
        );
        assert!("rate=10".parse::<Impairment>().is_err());
    }

    #[test]
    fn a_rate_limit_queues_then_tail_drops() {
        // 1 Mbit/s: a 97-byte datagram (125 with headers) takes 1 ms; queue of 10 ms.
        let i: Impairment = "rate=1mbit,queue=10ms".parse().unwrap();
        let (mut rng, mut link, now) = (Rng::new(1), Link::default(), Instant::now());
        let holds: Vec<Option<Duration>> = (0..15)
            .map(|_| i.decide(&mut rng, &mut link, now, 97))
            .collect();
        assert_eq!(holds[0], Some(Duration::from_millis(1)));
        assert_eq!(holds[9], Some(Duration::from_millis(10)));
        assert_eq!(
            holds[10],
            Some(Duration::from_millis(11)),
            "waits 10 ms: admitted"
        );
        assert_eq!(holds[11], None, "would wait 11 ms: dropped");
        // Later, the link has drained.
        let later = now + Duration::from_millis(50);
        assert_eq!(
            i.decide(&mut rng, &mut link, later, 97),
            Some(Duration::from_millis(1))
        );
    }

    #[test]
    fn decisions_follow_the_shares() {
        let i: Impairment = "loss=10%,delay=20ms,jitter=5ms".parse().unwrap();
        let mut rng = Rng::new(7);
        let (mut link, now) = (Link::default(), Instant::now());
        let n = 100_000;
        let mut dropped = 0;
        for _ in 0..n {
            match i.decide(&mut rng, &mut link, now, 100) {
                None => dropped += 1,
                Some(d) => {
                    assert!(d >= Duration::from_millis(15) && d <= Duration::from_millis(25))
                }
            }
        }
        // Binomial sd is ~0.1% of n here; 0.5% is five of them.
        let share = dropped as f64 / n as f64;
        assert!((share - 0.10).abs() < 0.005, "{share}");
    }
}
