//! Runs a scenario: starts the target (in-process relay, remote relay or baseline
//! reflector), joins the clients through the real API and transports, drives the
//! timeline (warm-up, window, late joiners, drain) and gathers a [`Report`].

use super::baseline::{self, Reflector, Role};
use super::impair::{Impairment, Proxy, ProxyListener};
use super::report::{Report, TargetKind};
use super::scenario::{BENCH_NO_ID, BENCH_STATE_ID, Scenario, Security};
use super::share::tally::{
    PublisherCount, SubscriberCount, Tally, TargetFigures, latency_histogram,
};
use super::share::{Barrier, Share, ShareOut};
use super::sys;
use anyhow::{Context, bail};
use gsrelay_client::{Client, JoinOptions};
use gsrelay_core::relay::{Interest, RelayConfig};
use gsrelay_core::rtp::{RtpHeader, RtpPacket};
use gsrelay_core::wire::layout;
use gsrelay_core::wire::reader::Reader;
use gsrelay_core::wire::{self, CONTAINER_TAG, Dialect, Object, Unknown, container};
use gsrelay_net::udp::recv::{Datagram, RecvBatch};
use gsrelay_server::serve::{self as server, ServeConfig};
use gsrelay_server::token::{Rights, Tokens};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use prometheus::IntCounter;
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UdpSocket;
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinSet;

/// Tag of the bench object: unassigned in draft01, so the relay forwards and caches it
/// as an unknown object. Its body is objectID 0, a per-publisher packet counter and the
/// send time in nanoseconds since the bench started (both u64, big endian).
pub const BENCH_TAG: u64 = 100;

/// Thread-name prefix of the in-process relay's runtime.
pub const RELAY_THREADS: &str = "gsr-relay";

/// How long a late joiner waits for a complete snapshot before giving up.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// A late joiner repeats its FIR this often until the snapshot is complete (a FIR or
/// its answer may be lost under impairment).
const FIR_RETRY: Duration = Duration::from_millis(250);

/// How long subscribers keep receiving after the window closes, beyond any impairment
/// delay, for packets still in flight.
const DRAIN: Duration = Duration::from_millis(300);

/// Subscribers send an RR this often so the relay does not time their session out.
const KEEPALIVE: Duration = Duration::from_secs(5);

/// Thread name of the runtime the publishers send from: their own thread, so that
/// thousands of receiving subscribers cannot delay the sends they are measuring.
const PUBLISHER_THREADS: &str = "gsr-bench-pub";

/// Reads one subscriber takes per `recvmmsg`, each a datagram or a train the kernel
/// coalesced (`RecvBatch::coalescing`: only the pages a read fills become resident).
const RECV_BATCH: usize = 8;

/// How often a counter (a subscriber that neither times updates nor waits for a
/// snapshot) wakes up to read what its socket has queued: one wake-up per pace instead
/// of one per train the relay sends (every `max_delay_ms` in aggregated delivery).
/// Counters time nothing, so the wait changes no figure as long as the socket holds a
/// pace's worth (about 30 KB at 500 players; see [`COUNTER_RECV_BUFFER`]).
const COUNTER_PACE: Duration = Duration::from_millis(50);

/// Receive buffer asked for by counters: a pace's worth many times over, so that a
/// counter the scheduler runs late on a busy machine loses nothing to its own socket.
const COUNTER_RECV_BUFFER: usize = 1 << 20;

/// Receive buffer asked for by late joiners, which take a snapshot's burst at once.
const LATE_RECV_BUFFER: usize = 4 << 20;

/// What kind of session a bench client joins as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubKind {
    /// Joined from the start, with the scenario's interest.
    Regular,
    /// Joins mid-run and asks for a snapshot.
    Late,
    /// Joined from the start with a bandwidth cap.
    Slow,
}

/// What to measure.
#[derive(Debug, Clone)]
pub enum Target {
    /// A relay started in this process on loopback (port 0, random secret).
    InProcess,
    /// A relay elsewhere; the bench issues its own tokens with the relay's secret.
    Remote {
        /// HTTP base URL, e.g. `http://host:8080`.
        http: String,
        /// The relay's token secret.
        token_secret: String,
    },
    /// The plain UDP reflector.
    Baseline,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The target.
    pub target: Target,
    /// Impairment between clients and target, with its text for the report.
    pub impair: Option<(String, Impairment)>,
    /// Shards of the in-process relay (0: one per core).
    pub shards: usize,
    /// Where the in-process relay records every room, if it does.
    pub record: Option<std::path::PathBuf>,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

/// How often subscribers send congestion feedback when they do.
const FEEDBACK_INTERVAL: Duration = Duration::from_millis(50);

/// Runs `scenario` once against `opts.target`.
pub fn run(scenario: &Scenario, opts: &RunOptions) -> anyhow::Result<Report> {
    scenario.validate()?;
    let (bench_rt, pub_rt) = runtimes()?;
    let rts = Runtimes {
        clients: &bench_rt,
        publishers: pub_rt.handle().clone(),
    };
    match &opts.target {
        Target::InProcess => run_in_process(&rts, scenario, opts),
        Target::Remote { http, token_secret } => {
            run_remote(&rts, scenario, opts, http, token_secret)
        }
        Target::Baseline => run_baseline(&rts, scenario, opts),
    }
}

/// Starts the clients' runtime (joins, subscribers) and the publishers' own.
fn runtimes() -> anyhow::Result<(Runtime, Runtime)> {
    let bench_rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("gsr-bench")
        .enable_all()
        .build()
        .context("starting the bench runtime")?;
    let pub_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(PUBLISHER_THREADS)
        .enable_all()
        .build()
        .context("starting the publishers' runtime")?;
    Ok((bench_rt, pub_rt))
}

/// The bench's runtimes: the clients' (joins, subscribers) and the publishers' own.
struct Runtimes<'a> {
    clients: &'a Runtime,
    publishers: Handle,
}

/// Against a relay started in this process, on its own runtime so that its CPU time can
/// be told from the clients' by thread name.
fn run_in_process(
    rts: &Runtimes<'_>,
    scenario: &Scenario,
    opts: &RunOptions,
) -> anyhow::Result<Report> {
    let bench_rt = rts.clients;
    let relay_rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name(RELAY_THREADS)
        .enable_all()
        .build()
        .context("starting the relay runtime")?;
    let proxy_listener = match &opts.impair {
        Some(_) => Some(bench_rt.block_on(ProxyListener::bind())?),
        None => None,
    };
    let secret = gsrelay_server::token::dev_secret()?;
    let mut cfg = relay_config(scenario, &secret, &proxy_listener, opts.shards)?;
    if let Some(dir) = &opts.record {
        cfg.recording_dir = dir.clone();
        cfg.record_rooms = vec!["*".into()];
    }
    let server = relay_rt.block_on(server::start(cfg))?;
    let proxy = match (proxy_listener, &opts.impair) {
        (Some(l), Some((_, i))) => {
            // The proxy's tasks belong to the clients' runtime.
            let _rt = bench_rt.enter();
            Some(l.start(server.rtp_addr, *i, scenario.seed))
        }
        _ => None,
    };
    let endpoint = Endpoint::Relay {
        http: format!("http://{}", server.http_addr),
        tokens: Box::new(Tokens::new(secret.as_bytes())?),
    };
    let out = rts.clients.block_on(drive(
        scenario,
        opts,
        Arc::new(endpoint),
        Watched {
            threads: Some(RELAY_THREADS),
            link_bytes: Some(server.metrics.bytes.with_label_values(&["link", "out"])),
        },
        rts.publishers.clone(),
        None,
    ));
    let dropped = proxy.map(|p| stop_proxy(bench_rt, p));
    let rtt = &server.metrics.session_rtt;
    let rtt_ms = (rtt.get_sample_count() > 0)
        .then(|| rtt.get_sample_sum() * 1e3 / rtt.get_sample_count() as f64);
    relay_rt.block_on(server.shutdown())?;
    let mut report = out?.report(scenario, opts, TargetKind::Inprocess)?;
    report.impair_dropped = dropped;
    report.relay_rtt_ms = rtt_ms;
    Ok(report)
}

/// Against a relay elsewhere (`--relay URL`): its CPU and memory are not seen from here.
fn run_remote(
    rts: &Runtimes<'_>,
    scenario: &Scenario,
    opts: &RunOptions,
    http: &str,
    token_secret: &str,
) -> anyhow::Result<Report> {
    if opts.impair.is_some() {
        bail!("--impair works with the in-process relay and the baseline only");
    }
    let endpoint = Endpoint::Relay {
        http: http.trim_end_matches('/').to_owned(),
        tokens: Box::new(Tokens::new(token_secret.as_bytes()).context("--token-secret")?),
    };
    let out = rts.clients.block_on(drive(
        scenario,
        opts,
        Arc::new(endpoint),
        Watched::default(),
        rts.publishers.clone(),
        None,
    ))?;
    let mut report = out.report(scenario, opts, TargetKind::Remote)?;
    report.relay_cpu_s = None;
    report.relay_peak_rss_bytes = None;
    Ok(report)
}

/// Runs `share` of `scenario`'s clients against a relay elsewhere, as one agent of a
/// distributed run: joins them, waits at `barrier` with the room's publishers it runs
/// until every agent has joined its own, then starts at the instant the barrier gives.
pub fn run_share(
    scenario: &Scenario,
    http: &str,
    token_secret: &str,
    share: Share,
    barrier: Barrier,
) -> anyhow::Result<ShareOut> {
    scenario.validate()?;
    let (bench_rt, pub_rt) = runtimes()?;
    let endpoint = Endpoint::Relay {
        http: http.trim_end_matches('/').to_owned(),
        tokens: Box::new(Tokens::new(token_secret.as_bytes()).context("--token-secret")?),
    };
    let opts = RunOptions {
        target: Target::Remote {
            http: http.to_owned(),
            token_secret: token_secret.to_owned(),
        },
        impair: None,
        shards: 0,
        record: None,
        progress: false,
    };
    let out = bench_rt.block_on(drive(
        scenario,
        &opts,
        Arc::new(endpoint),
        Watched::default(),
        pub_rt.handle().clone(),
        Some((share, barrier)),
    ))?;
    Ok(ShareOut {
        publishers: out.pubs.len(),
        subscribers: out.subs.len(),
        peak_rss_bytes: out.peak_rss,
        tally: out.tally(scenario)?,
    })
}

/// Against the reflector, the baseline a relay is compared with.
fn run_baseline(
    rts: &Runtimes<'_>,
    scenario: &Scenario,
    opts: &RunOptions,
) -> anyhow::Result<Report> {
    let bench_rt = rts.clients;
    let reflector = Reflector::start()?;
    let proxy = match &opts.impair {
        Some((_, i)) => Some(bench_rt.block_on(async {
            Ok::<_, anyhow::Error>(ProxyListener::bind().await?.start(
                reflector.addr,
                *i,
                scenario.seed,
            ))
        })?),
        None => None,
    };
    let endpoint = Endpoint::Reflector {
        addr: proxy.as_ref().map_or(reflector.addr, |p| p.addr),
        pad: match scenario.security {
            // SRTP's 10-byte auth tag, so both carry the same bytes.
            Security::Srtp => 10,
            Security::Plain => 0,
        },
    };
    let out = rts.clients.block_on(drive(
        scenario,
        opts,
        Arc::new(endpoint),
        Watched {
            threads: Some(baseline::THREAD_NAME),
            link_bytes: None,
        },
        rts.publishers.clone(),
        None,
    ));
    let dropped = proxy.map(|p| stop_proxy(bench_rt, p));
    reflector.stop()?;
    let mut report = out?.report(scenario, opts, TargetKind::Baseline)?;
    report.snapshot_ms = None;
    report.impair_dropped = dropped;
    Ok(report)
}

/// Stops an impairment proxy; returns how many datagrams it dropped.
fn stop_proxy(bench_rt: &Runtime, p: Proxy) -> u64 {
    let n = p.stats.dropped.load(Ordering::Relaxed);
    bench_rt.block_on(async { p.stop() });
    n
}

/// The in-process relay: loopback, port 0, limits raised so that the scenario, not the
/// per-session rate limit or the relay-wide caps, sets the load.
fn relay_config(
    s: &Scenario,
    secret: &str,
    proxy: &Option<ProxyListener>,
    shards: usize,
) -> anyhow::Result<ServeConfig> {
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let per_room = s.publishers + s.subscribers + s.late_joiners + s.slow_subscribers + 8;
    Ok(ServeConfig {
        http_addr: loopback,
        rtp_addr: loopback,
        quic_addr: loopback,
        webrtc_addr: loopback,
        rtp_advertise_addr: proxy.as_ref().map(ProxyListener::local_addr),
        token_secret: Some(secret.to_owned()),
        insecure_plain_rtp: s.security == Security::Plain,
        drain_grace_secs: 0,
        shards,
        relay: RelayConfig {
            max_packets_per_sec: 1_000_000,
            max_sessions_per_room: per_room,
            max_sessions: (s.rooms * per_room).max(RelayConfig::default().max_sessions),
            max_rooms: s.rooms.max(RelayConfig::default().max_rooms),
            max_objects_per_stream: (s.objects + s.static_objects + 1)
                .max(RelayConfig::default().max_objects_per_stream),
            ..RelayConfig::default()
        },
        ..ServeConfig::default()
    })
}

/// Where clients connect.
enum Endpoint {
    /// gsrelay's HTTP API.
    Relay { http: String, tokens: Box<Tokens> },
    /// The reflector; `pad` bytes stand in for the SRTP tag.
    Reflector { addr: SocketAddr, pad: usize },
}

/// One client, of either kind.
enum Conn {
    Relay(Box<Client>),
    Raw {
        socket: UdpSocket,
        ssrc: u32,
        seq: u16,
        pad: usize,
        out: Vec<u8>,
    },
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Endpoint {
    async fn join(
        &self,
        s: &Scenario,
        room: usize,
        role: Role,
        n: usize,
        kind: SubKind,
    ) -> anyhow::Result<Conn> {
        let late = kind == SubKind::Late;
        match self {
            Endpoint::Relay { http, tokens } => {
                let rights = Rights {
                    publish: role == Role::Publisher,
                    subscribe: role == Role::Subscriber,
                    admin: false,
                };
                let ttl = (s.warmup_s + s.duration_s) as u64 + 600;
                let room_name = format!("bench-{room}");
                let token = tokens.issue(
                    &room_name,
                    &format!("bench-{role:?}-{n}"),
                    rights,
                    ttl,
                    unix_now(),
                )?;
                let opts = JoinOptions {
                    dialect: Dialect::Draft01,
                    interest: match kind {
                        SubKind::Late => None,
                        SubKind::Slow => Some(Interest {
                            max_bitrate_bps: Some(s.slow_max_bitrate_bps),
                            ..s.interest.clone().unwrap_or_default()
                        }),
                        SubKind::Regular => s.interest.clone(),
                    },
                    profile: s.srtp_profile,
                    plain_rtp: s.security == Security::Plain,
                    quic: s.transport.quic(role == Role::Publisher),
                    webrtc: s.transport.webrtc(),
                    webtransport: s.transport.webtransport(),
                    ..JoinOptions::default()
                };
                let mut c = Client::join(http, &token, &room_name, opts)
                    .await
                    .with_context(|| format!("joining room {room_name}"))?;
                if late {
                    c.set_recv_buffer(LATE_RECV_BUFFER)?;
                } else if role == Role::Subscriber && !s.observes(n) {
                    c.set_recv_buffer(COUNTER_RECV_BUFFER)?;
                }
                if role == Role::Subscriber {
                    // Latches the address; repeated in case impairment drops one.
                    for _ in 0..3 {
                        c.send_rr().await?;
                    }
                }
                Ok(Conn::Relay(Box::new(c)))
            }
            Endpoint::Reflector { addr, pad } => {
                let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await?;
                socket.connect(addr).await?;
                let hello = baseline::hello(role, room as u32);
                for _ in 0..3 {
                    socket.send(&hello).await?;
                }
                Ok(Conn::Raw {
                    socket,
                    ssrc: 0x4253_0000 + (room * 10_000 + n) as u32,
                    seq: 0,
                    pad: *pad,
                    out: Vec::with_capacity(1500),
                })
            }
        }
    }
}

impl Conn {
    fn ssrc(&self) -> u32 {
        match self {
            Conn::Relay(c) => c.ssrc(),
            Conn::Raw { ssrc, .. } => *ssrc,
        }
    }

    async fn send(&mut self, payload: &[u8]) -> anyhow::Result<()> {
        match self {
            Conn::Relay(c) => Ok(c.send_payload(payload).await?),
            Conn::Raw {
                socket,
                ssrc,
                seq,
                pad,
                out,
                ..
            } => {
                out.clear();
                RtpHeader {
                    marker: false,
                    payload_type: gsrelay_client::PAYLOAD_TYPE,
                    sequence_number: *seq,
                    timestamp: u32::from(*seq) * 3000,
                    ssrc: *ssrc,
                    csrcs: &[],
                    extension: None,
                }
                .append_to(out)?;
                *seq = seq.wrapping_add(1);
                out.extend_from_slice(payload);
                out.resize(out.len() + *pad, 0);
                socket.send(out).await?;
                Ok(())
            }
        }
    }

    /// Waits up to `timeout`, then reads one batch of datagrams and calls
    /// `f(ssrc, seq, payload)` for each RTP packet; returns how many (0 on timeout).
    async fn recv_batch(
        &mut self,
        batch: &mut RecvBatch,
        timeout: Duration,
        mut f: impl FnMut(u32, u16, &[u8]),
    ) -> anyhow::Result<usize> {
        match self {
            Conn::Relay(c) => Ok(c.recv_batch(batch, timeout, f).await?),
            Conn::Raw { socket, pad, .. } => {
                let deadline = tokio::time::Instant::now() + timeout;
                loop {
                    let n = batch.read_until(socket, deadline).await?;
                    if n == 0 {
                        return Ok(0);
                    }
                    let mut rtp = 0;
                    for i in 0..n {
                        // Only the reflector sends here, and only what publishers sent.
                        let Datagram::Whole(data, _) = batch.datagram(i) else {
                            continue;
                        };
                        let Ok(p) = RtpPacket::parse(data) else {
                            continue;
                        };
                        let payload = p.payload();
                        let payload = payload
                            .get(..payload.len().saturating_sub(*pad))
                            .unwrap_or_default();
                        f(p.ssrc(), p.sequence_number(), payload);
                        rtp += 1;
                    }
                    if rtp > 0 {
                        return Ok(rtp);
                    }
                }
            }
        }
    }

    /// Sends congestion feedback when the client records arrivals.
    async fn feedback(&mut self) -> anyhow::Result<()> {
        if let Conn::Relay(c) = self {
            c.send_congestion_feedback().await?;
        }
        Ok(())
    }

    async fn keepalive(&mut self) -> anyhow::Result<()> {
        if let Conn::Relay(c) = self {
            c.send_rr().await?;
        }
        Ok(())
    }

    /// Asks for every stream's state; false when the target keeps none.
    async fn fir(&mut self) -> anyhow::Result<bool> {
        match self {
            Conn::Relay(c) => {
                let relay = c.relay_ssrc();
                c.send_fir(relay).await?;
                Ok(true)
            }
            Conn::Raw { .. } => Ok(false),
        }
    }
}

/// Time points, as nanoseconds since `epoch`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    pub(super) epoch: Instant,
    /// Publishing starts.
    pub(super) start: Instant,
    /// The window.
    pub(super) w0: u64,
    pub(super) w1: u64,
}

impl Clock {
    pub(super) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub(super) fn at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    pub(super) fn in_window(&self, ns: u64) -> bool {
        (self.w0..self.w1).contains(&ns)
    }
}

/// Objects pre-encoded and packed into payload-sized chunks.
pub(super) struct Chunk {
    pub(super) bytes: Vec<u8>,
    pub(super) objects: u64,
}

/// Encodes `objects` (draft01) into chunks of at most `budget` bytes, leaving room for
/// the bench object.
pub(super) fn pack(objects: &[Object], budget: usize) -> anyhow::Result<Vec<Chunk>> {
    // Room for the bench object.
    let budget = budget.saturating_sub(24);
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut scratch = Vec::new();
    for o in objects {
        let mut one = Vec::new();
        wire::encode_object(o, Dialect::Draft01, &mut scratch, &mut one)?;
        match chunks.last_mut() {
            Some(c) if c.bytes.len() + one.len() <= budget => {
                c.bytes.extend_from_slice(&one);
                c.objects += 1;
            }
            _ => chunks.push(Chunk {
                bytes: one,
                objects: 1,
            }),
        }
    }
    Ok(chunks)
}

/// Writes the bench object (as state when `cached`) then `chunk` into `out`.
pub(super) fn stamp(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    (counter, ts_ns, cached): (u64, u64, bool),
    chunk: &[u8],
) -> anyhow::Result<()> {
    out.clear();
    let mut data = Vec::with_capacity(19);
    if cached {
        data.extend_from_slice(&BENCH_STATE_ID);
    } else {
        data.push(BENCH_NO_ID);
    }
    data.extend_from_slice(&counter.to_be_bytes());
    data.extend_from_slice(&ts_ns.to_be_bytes());
    let bench = Object::Unknown(Unknown {
        tag: BENCH_TAG,
        data: wire::json::Hex(data),
    });
    wire::encode_object(&bench, Dialect::Draft01, scratch, out)?;
    out.extend_from_slice(chunk);
    Ok(())
}

#[derive(Debug, Default)]
struct PubOut {
    room: usize,
    packets: u64,
    objects: u64,
    /// Packets of live objects sent in the window, and how many the schedule called for.
    live: u64,
    nominal: f64,
}

/// What one publisher sends, and when in each period.
struct Sending {
    /// Live objects, sent at every update.
    live: Vec<Chunk>,
    /// Cached-only objects, spread over the warm-up and refreshed.
    statics: Vec<Chunk>,
    /// Offset of its sends within the period.
    phase: Duration,
}

async fn publisher(
    mut conn: Conn,
    room: usize,
    sending: Sending,
    s: Scenario,
    clock: Clock,
) -> anyhow::Result<PubOut> {
    let Sending {
        live,
        statics,
        phase,
    } = sending;
    let mut out = PubOut {
        room,
        nominal: live.len() as f64 * s.rate_hz * s.duration_s,
        ..PubOut::default()
    };
    let mut tick = tokio::time::interval_at((clock.start + phase).into(), s.period());
    // A late tick still sends, and the next ones keep to the schedule, as a game's
    // fixed-step loop does: what is offered is the scenario's rate whenever the
    // publishers' thread keeps up on average (each stamp is the actual send time, so the
    // lateness shows in the latency, not as missing load).
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    // Static objects go out over half the warm-up (at most 1 s) at the update rate.
    let spread = (s.warmup_s / 2.0).clamp(1.0 / s.rate_hz, 1.0) * s.rate_hz;
    let static_per_tick = (statics.len() as f64 / spread).ceil().max(1.0) as usize;
    let refresh = Duration::from_secs_f64(s.static_refresh_s);
    let mut static_next = 0usize;
    let mut last_refresh = clock.start;
    let (mut buf, mut scratch) = (Vec::with_capacity(1500), Vec::new());
    let mut counter = 0u64;
    loop {
        tick.tick().await;
        if clock.now_ns() >= clock.w1 {
            return Ok(out);
        }
        if static_next >= statics.len() && last_refresh.elapsed() >= refresh {
            static_next = 0;
            last_refresh = Instant::now();
        }
        let end = (static_next + static_per_tick).min(statics.len());
        let due = statics.get(static_next..end).unwrap_or_default();
        static_next = end;
        for (i, chunk) in live.iter().chain(due).enumerate() {
            let ts = clock.now_ns();
            counter += 1;
            let header = (counter, ts, s.congestion_feedback);
            stamp(&mut buf, &mut scratch, header, &chunk.bytes)?;
            conn.send(&buf).await?;
            if clock.in_window(ts) {
                out.packets += 1;
                out.objects += chunk.objects;
                out.live += u64::from(i < live.len());
            }
        }
    }
}

/// What a late joiner waits for.
struct LateJoin {
    at: Instant,
    expected: HashSet<(u32, u64)>,
}

struct SubOut {
    room: usize,
    late: bool,
    /// Decodes and times every update; a counter only counts them (see
    /// [`Scenario::observers`]).
    observer: bool,
    /// Sequence numbers per stream received, over the whole run.
    seq: SeqCheck,
    /// A slow subscriber: left out of the figures, reported apart.
    slow: bool,
    /// Objects received in any packet, with or without a send time (a capped subscriber
    /// gets most of its state from the relay's store, which holds no send times).
    all_objects: u64,
    packets: u64,
    objects: u64,
    latency: Histogram<u64>,
    /// `Some(None)`: a snapshot asked for and not completed.
    snapshot: Option<Option<Duration>>,
}

impl SubOut {
    /// Nothing received yet; a late joiner observes.
    fn new(room: usize, late: bool, observer: bool) -> anyhow::Result<Self> {
        Ok(Self {
            room,
            late,
            observer: observer || late,
            seq: SeqCheck::default(),
            slow: false,
            all_objects: 0,
            packets: 0,
            objects: 0,
            latency: latency_histogram()?,
            snapshot: None,
        })
    }
}

/// Sequence numbers seen per stream: what is missing between the lowest and the highest.
#[derive(Debug, Default)]
struct SeqCheck {
    /// SSRC → (lowest, highest extended sequence number, packets received).
    streams: HashMap<u32, (i64, i64, u64)>,
}

impl SeqCheck {
    fn see(&mut self, ssrc: u32, seq: u16) {
        let (low, high, got) =
            self.streams
                .entry(ssrc)
                .or_insert((i64::from(seq), i64::from(seq) - 1, 0));
        // Extended from the highest so far: a jump of more than half the space back is
        // a wrap forwards, as RFC 3550 counts.
        let ext = *high + i64::from(seq.wrapping_sub(*high as u16) as i16);
        *high = (*high).max(ext);
        *low = (*low).min(ext);
        *got += 1;
    }

    /// Packets the sequence numbers call for, and packets received.
    fn expected_received(&self) -> (u64, u64) {
        self.streams
            .values()
            .fold((0, 0), |(e, r), (low, high, got)| {
                (e + (high - low + 1).max(0) as u64, r + got)
            })
    }
}

async fn subscriber(
    mut conn: Conn,
    room: usize,
    (late, observer): (Option<LateJoin>, bool),
    clock: Clock,
    stop_at: Instant,
    live: Arc<AtomicU64>,
) -> anyhow::Result<SubOut> {
    let mut out = SubOut::new(room, late.is_some(), observer)?;
    let mut pending: Option<Snapshot> = None;
    if let Some(l) = late {
        tokio::time::sleep_until(l.at.into()).await;
        if conn.fir().await? {
            pending = Some((Instant::now(), Instant::now(), l.expected, HashSet::new()));
        }
    }
    let mut last_keepalive = Instant::now();
    let mut last_feedback = Instant::now();
    let mut batch = RecvBatch::coalescing(RECV_BATCH);
    let mut pace = tokio::time::interval(COUNTER_PACE);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut emptied = true;
    loop {
        let now = Instant::now();
        if now >= stop_at {
            break;
        }
        if now - last_keepalive >= KEEPALIVE {
            conn.keepalive().await?;
            last_keepalive = now;
        }
        if now - last_feedback >= FEEDBACK_INTERVAL {
            conn.feedback().await?;
            last_feedback = now;
        }
        let wait = (stop_at - now).min(FIR_RETRY);
        let wait = if out.observer {
            wait
        } else {
            // A counter reads what has queued since its last wake-up, then sleeps.
            if emptied {
                pace.tick().await;
            }
            Duration::ZERO
        };
        let got = conn
            .recv_batch(&mut batch, wait, |ssrc, seq, payload| {
                out.seq.see(ssrc, seq);
                if out.observer {
                    take_packet(&mut out, &mut pending, &clock, ssrc, payload, &live);
                } else {
                    count_packet(&mut out, &clock, payload, &live);
                }
            })
            .await?;
        emptied = got == 0;
        if got == 0 {
            if let Some((t0, last_fir, _, _)) = &mut pending {
                if t0.elapsed() > SNAPSHOT_TIMEOUT {
                    out.snapshot = Some(None);
                    pending = None;
                } else if last_fir.elapsed() >= FIR_RETRY {
                    conn.fir().await?;
                    *last_fir = Instant::now();
                }
            }
            continue;
        }
        if let Some((t0, _, expected, seen)) = &pending {
            if seen.len() == expected.len() {
                out.snapshot = Some(Some(t0.elapsed()));
                pending = None;
            } else if t0.elapsed() > SNAPSHOT_TIMEOUT {
                out.snapshot = Some(None);
                pending = None;
            }
        }
    }
    if pending.is_some() {
        out.snapshot = Some(None);
    }
    Ok(out)
}

/// A late joiner's snapshot in progress: (FIR sent, last FIR, expected, seen).
type Snapshot = (Instant, Instant, HashSet<(u32, u64)>, HashSet<(u32, u64)>);

/// Takes one RTP packet: an aggregated packet holds one container per sender, each what
/// that sender sent (with its bench object); a per-stream packet is one sender's payload.
fn take_packet(
    out: &mut SubOut,
    pending: &mut Option<Snapshot>,
    clock: &Clock,
    ssrc: u32,
    payload: &[u8],
    live: &AtomicU64,
) {
    let arrived = clock.now_ns();
    let mut containers = false;
    for o in wire::objects(payload, Dialect::Draft01).flatten() {
        if let Some((sender, body)) = container::split(o.bytes(payload)) {
            containers = true;
            take_unit(out, pending, clock, arrived, sender, body, live);
        }
    }
    if !containers {
        take_unit(out, pending, clock, arrived, ssrc, payload, live);
    }
}

/// Takes one RTP packet as a counter does: walks the TLV headers only (tag and length,
/// the containers' SSRC) without decoding or checking any object, and reads each bench
/// object's send time, its last 8 bytes, to tell whether it was sent in the window. The
/// counts are those [`take_packet`] makes of the relay's well-formed packets; the
/// observers decode the same packets whole.
fn count_packet(out: &mut SubOut, clock: &Clock, payload: &[u8], live: &AtomicU64) {
    let arrived = clock.now_ns();
    let mut r = Reader::new(payload);
    let mut containers = false;
    while let Ok(t) = layout::read_tlv(&mut r) {
        if t.tag != CONTAINER_TAG {
            continue;
        }
        containers = true;
        let mut body = t.body;
        if body.skip_varuint().is_ok() {
            count_unit(out, clock, arrived, body, live);
        }
    }
    if !containers {
        count_unit(out, clock, arrived, Reader::new(payload), live);
    }
}

/// What [`take_unit`] counts of one sender's objects, from their tags and the bench
/// objects' send times only.
fn count_unit(out: &mut SubOut, clock: &Clock, arrived: u64, mut r: Reader<'_>, live: &AtomicU64) {
    let (mut stamps, mut objects) = (0u64, 0u64);
    while let Ok(t) = layout::read_tlv(&mut r) {
        if t.tag != BENCH_TAG {
            objects += 1;
            continue;
        }
        let b = t.body.rest();
        let sent = b
            .len()
            .checked_sub(8)
            .and_then(|i| b.get(i..))
            .and_then(|ts| ts.try_into().ok())
            .map(u64::from_be_bytes);
        stamps += u64::from(sent.is_some_and(|t| clock.in_window(t)));
    }
    tally_unit(out, clock, arrived, (stamps, objects), live);
}

/// Counts what one sender's packet (or its container in an aggregated packet) brought:
/// its objects, what a snapshot in progress was waiting for, and, for each bench object,
/// one packet received and its latency from the send time. A container may hold several
/// bench objects: an update superseded before the aggregated packet went travels only as
/// its bench object (the subscriber has its newer state), and counts as delivered.
fn take_unit(
    out: &mut SubOut,
    pending: &mut Option<Snapshot>,
    clock: &Clock,
    arrived: u64,
    ssrc: u32,
    payload: &[u8],
    live: &AtomicU64,
) {
    let mut stamps = 0u64;
    let mut objects = 0u64;
    for o in wire::objects(payload, Dialect::Draft01).flatten() {
        if o.tag != BENCH_TAG {
            objects += 1;
            if let (Some((_, _, expected, seen)), Some(id)) = (&mut *pending, o.id)
                && expected.contains(&(ssrc, id))
            {
                seen.insert((ssrc, id));
            }
            continue;
        }
        let b = o.bytes(payload);
        let sent = b
            .len()
            .checked_sub(8)
            .and_then(|i| b.get(i..))
            .and_then(|ts| ts.try_into().ok())
            .map(u64::from_be_bytes);
        let Some(sent) = sent.filter(|t| clock.in_window(*t)) else {
            continue;
        };
        stamps += 1;
        // A late joiner's first packets are snapshots of old state: no latency there.
        // Counters leave timing to the observers.
        if out.observer && !out.late {
            out.latency.saturating_record(arrived.saturating_sub(sent));
        }
    }
    tally_unit(out, clock, arrived, (stamps, objects), live);
}

/// Adds one sender's unit: its objects when it arrived in the window, and its bench
/// objects sent in the window (with its objects) when it carried any.
fn tally_unit(
    out: &mut SubOut,
    clock: &Clock,
    arrived: u64,
    (stamps, objects): (u64, u64),
    live: &AtomicU64,
) {
    if clock.in_window(arrived) {
        out.all_objects += objects;
    }
    if stamps > 0 {
        live.fetch_add(stamps, Ordering::Relaxed);
        out.packets += stamps;
        out.objects += objects;
    }
}

/// Everything a run gathered, before it becomes a report.
struct Gathered {
    pubs: Vec<PubOut>,
    subs: Vec<SubOut>,
    relay_cpu_s: Option<f64>,
    relay_shard_cpu_s: Vec<f64>,
    link_bytes: Option<u64>,
    process_cpu_s: f64,
    peak_rss: Option<u64>,
}

/// The clients joined before publishing starts.
struct Clients {
    /// (room, index in the room, connection) of the regular subscribers.
    subs: Vec<(usize, usize, Conn)>,
    /// (room, connection) of the slow (capped) subscribers.
    slow: Vec<(usize, Conn)>,
    /// (room, index in the room, connection) of the publishers.
    pubs: Vec<(usize, usize, Conn)>,
    /// Publishers' SSRCs per room, for what late joiners expect.
    pub_ssrcs: Vec<Vec<u32>>,
}

/// What the tasks of a run share.
#[derive(Clone)]
struct Timeline {
    clock: Clock,
    /// When subscribers stop receiving.
    stop_at: Instant,
    /// Live packets received so far (the progress bar's rate).
    live: Arc<AtomicU64>,
}

/// What the bench watches of its target beside the clients, when it runs in process.
#[derive(Default)]
struct Watched<'a> {
    /// Name prefix of the target's threads (their CPU is the target's).
    threads: Option<&'a str>,
    /// Bytes the relay's shards sent each other over links.
    link_bytes: Option<IntCounter>,
}

async fn drive(
    s: &Scenario,
    opts: &RunOptions,
    endpoint: Arc<Endpoint>,
    target: Watched<'_>,
    publishers: Handle,
    part: Option<(Share, Barrier)>,
) -> anyhow::Result<Gathered> {
    let epoch = Instant::now();
    let share = part.as_ref().map_or(Share::WHOLE, |(share, _)| *share);
    let mut clients = join_clients(s, &endpoint, share).await?;
    // Let the latching RRs and hellos land.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (epoch, start) = match part {
        None => (epoch, Instant::now() + Duration::from_millis(50)),
        // Every agent's clock counts from the start they were all given, so a send
        // time stamped by one agent's publisher reads the same on another's subscriber.
        Some((_, barrier)) => {
            let go = barrier(clients.pub_ssrcs.clone()).await?;
            clients.pub_ssrcs = go.pub_ssrcs;
            (go.start, go.start)
        }
    };
    let t = timeline(s, opts, epoch, start);
    let mut pub_tasks = JoinSet::new();
    for (room, n, conn) in clients.pubs {
        let live_chunks = pack(&s.live_objects(n), s.payload_budget)?;
        let static_chunks = pack(&s.static_objects(n), s.payload_budget)?;
        let phase = s.send_phase(room, n);
        let sending = Sending {
            live: live_chunks,
            statics: static_chunks,
            phase,
        };
        pub_tasks.spawn_on(
            publisher(conn, room, sending, s.clone(), t.clock),
            &publishers,
        );
    }
    let mut sub_tasks = JoinSet::new();
    for (room, n, mut conn) in clients.subs {
        if let (true, Conn::Relay(c)) = (s.congestion_feedback, &mut conn) {
            c.enable_congestion_feedback();
        }
        let t = t.clone();
        let observer = s.observes(n);
        let role = (None, observer);
        sub_tasks.spawn(subscriber(conn, room, role, t.clock, t.stop_at, t.live));
    }
    for (room, conn) in clients.slow {
        let t = t.clone();
        sub_tasks.spawn(async move {
            let role = (None, true);
            let mut out = subscriber(conn, room, role, t.clock, t.stop_at, t.live).await?;
            out.slow = true;
            Ok(out)
        });
    }
    spawn_late_joiners(&mut sub_tasks, s, &endpoint, &clients.pub_ssrcs, &t, share);
    let cpu = watch_window(s, opts, &t, &target).await;
    let mut out = Gathered {
        pubs: Vec::new(),
        subs: Vec::new(),
        relay_cpu_s: cpu.relay_s,
        relay_shard_cpu_s: cpu.shards_s,
        link_bytes: cpu.link_bytes,
        process_cpu_s: cpu.process_s,
        peak_rss: None,
    };
    while let Some(r) = pub_tasks.join_next().await {
        out.pubs.push(r??);
    }
    while let Some(r) = sub_tasks.join_next().await {
        out.subs.push(r??);
    }
    out.peak_rss = sys::peak_rss_bytes();
    Ok(out)
}

/// Joins every client of `share` that is there from the start: subscribers first, so
/// none misses the first packets, then slow subscribers (a relay only: the reflector has
/// no cap), then publishers.
async fn join_clients(s: &Scenario, endpoint: &Endpoint, share: Share) -> anyhow::Result<Clients> {
    let mut c = Clients {
        subs: Vec::new(),
        slow: Vec::new(),
        pubs: Vec::new(),
        pub_ssrcs: vec![Vec::new(); s.rooms],
    };
    for room in 0..s.rooms {
        for n in (0..s.subscribers).filter(|n| share.holds(room, *n)) {
            let conn = endpoint
                .join(s, room, Role::Subscriber, n, SubKind::Regular)
                .await?;
            c.subs.push((room, n, conn));
        }
    }
    if matches!(endpoint, Endpoint::Relay { .. }) {
        for room in 0..s.rooms {
            for n in 0..s.slow_subscribers {
                let n = s.subscribers + s.late_joiners + n;
                if !share.holds(room, n) {
                    continue;
                }
                let conn = endpoint
                    .join(s, room, Role::Subscriber, n, SubKind::Slow)
                    .await?;
                c.slow.push((room, conn));
            }
        }
    }
    for room in 0..s.rooms {
        for n in (0..s.publishers).filter(|n| share.holds(room, *n)) {
            let conn = endpoint
                .join(s, room, Role::Publisher, n, SubKind::Regular)
                .await?;
            if let Some(v) = c.pub_ssrcs.get_mut(room) {
                v.push(conn.ssrc());
            }
            c.pubs.push((room, n, conn));
        }
    }
    Ok(c)
}

/// The run's time points: publishing starts at `start`, the window follows the warm-up,
/// and subscribers listen on past it for what is in flight (longer under impairment).
fn timeline(s: &Scenario, opts: &RunOptions, epoch: Instant, start: Instant) -> Timeline {
    let ns = |d: Duration| (start + d - epoch).as_nanos() as u64;
    let warmup = Duration::from_secs_f64(s.warmup_s);
    let window = Duration::from_secs_f64(s.duration_s);
    let clock = Clock {
        epoch,
        start,
        w0: ns(warmup),
        w1: ns(warmup + window),
    };
    let hold = opts
        .impair
        .as_ref()
        .map_or(Duration::ZERO, |(_, i)| i.delay + i.jitter)
        * 2;
    Timeline {
        clock,
        stop_at: clock.at(clock.w1) + DRAIN + hold,
        live: Arc::new(AtomicU64::new(0)),
    }
}

/// The late joiners of `share` join at their time, in their own tasks, each expecting
/// every object of its room's publishers.
fn spawn_late_joiners(
    tasks: &mut JoinSet<anyhow::Result<SubOut>>,
    s: &Scenario,
    endpoint: &Arc<Endpoint>,
    pub_ssrcs: &[Vec<u32>],
    t: &Timeline,
    share: Share,
) {
    let late_at = t.clock.start + Duration::from_secs_f64(s.late_join_at_s);
    let ids: Vec<u64> = (1..=s.objects as u64)
        .chain((0..s.static_objects as u64).map(|i| super::scenario::STATIC_ID_BASE + i))
        .collect();
    for room in 0..s.rooms {
        for n in (0..s.late_joiners).filter(|n| share.holds(room, s.subscribers + n)) {
            let expected: HashSet<(u32, u64)> = pub_ssrcs
                .get(room)
                .into_iter()
                .flatten()
                .flat_map(|ssrc| ids.iter().map(move |id| (*ssrc, *id)))
                .collect();
            let (endpoint, s2, t) = (endpoint.clone(), s.clone(), t.clone());
            tasks.spawn(async move {
                tokio::time::sleep_until(late_at.into()).await;
                let n = s2.subscribers + n;
                let conn = endpoint
                    .join(&s2, room, Role::Subscriber, n, SubKind::Late)
                    .await?;
                let late = LateJoin {
                    at: Instant::now(),
                    expected,
                };
                let role = (Some(late), true);
                subscriber(conn, room, role, t.clock, t.stop_at, t.live).await
            });
        }
    }
}

/// CPU seconds spent during the window.
struct WindowCpu {
    /// The target's threads, when in process.
    relay_s: Option<f64>,
    /// Each of the in-process relay's shard threads.
    shards_s: Vec<f64>,
    /// Bytes sent over links between the relay's shards.
    link_bytes: Option<u64>,
    /// The whole process.
    process_s: f64,
}

/// Waits out the warm-up and the window with a progress bar; returns the CPU seconds
/// spent during the window.
async fn watch_window(
    s: &Scenario,
    opts: &RunOptions,
    t: &Timeline,
    target: &Watched<'_>,
) -> WindowCpu {
    let relay_threads = target.threads;
    let shards = || sys::numbered_threads_cpu_s(gsrelay_server::SHARD_THREADS);
    let bar = progress_bar(opts.progress, s);
    // The relay's runtime (HTTP), its shard threads (the data path) and its recordings'
    // writers.
    let cpu_threads = |name: Option<&str>| {
        name.map(|n| {
            sys::threads_cpu_s(n)
                + sys::threads_cpu_s(gsrelay_server::SHARD_THREADS)
                + sys::threads_cpu_s(gsrelay_server::RECORDER_THREADS)
        })
    };
    tokio::time::sleep_until(t.clock.at(t.clock.w0).into()).await;
    let (relay0, proc0) = (cpu_threads(relay_threads), sys::process_cpu_s());
    let shards0 = shards();
    let link0 = target.link_bytes.as_ref().map(IntCounter::get);
    let mut last = (Instant::now(), 0u64);
    while Instant::now() < t.clock.at(t.clock.w1) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let got = t.live.load(Ordering::Relaxed);
        let dt = last.0.elapsed().as_secs_f64();
        if let Some(b) = &bar {
            b.set_position(t.clock.start.elapsed().as_millis() as u64);
            b.set_message(format!(
                "{:.0} pkt/s received",
                (got - last.1) as f64 / dt.max(1e-3)
            ));
        }
        last = (Instant::now(), got);
    }
    // CPU is read at the window's end, before the drain.
    let relay_cpu_s = match (relay0, cpu_threads(relay_threads)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let shards_s = shards()
        .iter()
        .enumerate()
        .map(|(k, c)| c - shards0.get(k).copied().unwrap_or(0.0))
        .collect();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let link_bytes = target
        .link_bytes
        .as_ref()
        .zip(link0)
        .map(|(c, at0)| c.get() - at0);
    WindowCpu {
        relay_s: relay_cpu_s,
        shards_s,
        link_bytes,
        process_s: sys::process_cpu_s() - proc0,
    }
}

fn progress_bar(show: bool, s: &Scenario) -> Option<ProgressBar> {
    if !show {
        return None;
    }
    let total = ((s.warmup_s + s.duration_s) * 1000.0) as u64;
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{bar:40}] {elapsed:>3} warm-up {prefix}+ window, {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(format!("{} s", s.warmup_s));
    Some(bar)
}

impl Gathered {
    fn report(self, s: &Scenario, opts: &RunOptions, target: TargetKind) -> anyhow::Result<Report> {
        let seen = TargetFigures {
            relay_cpu_s: self.relay_cpu_s,
            shard_cpu_s: self.relay_shard_cpu_s.clone(),
            link_bytes: self.link_bytes,
            peak_rss: self.peak_rss,
        };
        let impairment = opts.impair.as_ref().map(|(t, _)| t.clone());
        Ok(self.tally(s)?.report(s, target, impairment, &seen))
    }

    /// What the clients counted, in the form that adds up across agents.
    fn tally(&self, s: &Scenario) -> anyhow::Result<Tally> {
        let mut tally = Tally::new(s.rooms)?;
        for p in &self.pubs {
            tally.add_publisher(PublisherCount {
                room: p.room,
                packets: p.packets,
                objects: p.objects,
                live: p.live,
                nominal: p.nominal,
            })?;
        }
        for r in &self.subs {
            tally.add_subscriber(SubscriberCount {
                room: r.room,
                late: r.late,
                slow: r.slow,
                packets: r.packets,
                objects: r.objects,
                all_objects: r.all_objects,
                seq: r.seq.expected_received(),
                latency: &r.latency,
                snapshot: r.snapshot,
            })?;
        }
        tally.process_cpu_s = self.process_cpu_s;
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::{Clock, SeqCheck, SubOut, count_packet, pack, stamp, take_packet};
    use crate::scenario::Scenario;
    use gsrelay_core::wire::container;
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;

    /// A sender's update as the relay forwards it: the bench object sent at `ts`, then
    /// the avatar (none when the update was superseded before the packet went).
    fn update(ts: u64, avatar: bool) -> Vec<u8> {
        let mut s = Scenario::default();
        s.make_dense(2);
        let chunk = pack(&s.live_objects(0), s.payload_budget).unwrap();
        let body = if avatar { &chunk[0].bytes[..] } else { &[] };
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        stamp(&mut out, &mut scratch, (1, ts, false), body).unwrap();
        out
    }

    /// Each sender's objects in its container, as one aggregated payload.
    fn aggregated(senders: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (ssrc, objects) in senders {
            container::write_header(&mut p, *ssrc, objects.len());
            p.extend_from_slice(objects);
        }
        p
    }

    #[test]
    fn counters_count_what_observers_decode() {
        let epoch = Instant::now();
        let clock = Clock {
            epoch,
            start: epoch,
            w0: 0,
            w1: 1 << 62,
        };
        // Sent before the window: counted by neither.
        let early = Clock { w0: 1_000, ..clock };
        let superseded = [update(5, false), update(6, true)].concat();
        let packets = [
            aggregated(&[(7, update(5, true)), (8, superseded), (9, update(7, true))]),
            update(8, true),
        ];
        let live = AtomicU64::new(0);
        for clock in [clock, early] {
            let mut observer = SubOut::new(0, false, true).unwrap();
            let mut counter = SubOut::new(0, false, false).unwrap();
            for p in &packets {
                take_packet(&mut observer, &mut None, &clock, 1, p, &live);
                count_packet(&mut counter, &clock, p, &live);
            }
            let counts = |o: &SubOut| (o.packets, o.objects, o.all_objects);
            assert_eq!(counts(&counter), counts(&observer));
            if clock.w0 == 0 {
                // Five bench objects (one superseded) and four avatars.
                assert_eq!(counts(&counter), (5, 4, 4));
                assert_eq!(observer.latency.len(), 5);
            } else {
                assert_eq!(counts(&counter).0, 0);
            }
        }
    }

    #[test]
    fn sequence_gaps_are_counted_across_the_wrap_and_per_stream() {
        let mut c = SeqCheck::default();
        for seq in [65_533u16, 65_534, 0, 1, 3] {
            c.see(7, seq);
        }
        // 65 533 ..= 3 is 7 packets; 65 535 and 2 are missing.
        c.see(9, 10);
        c.see(9, 9);
        assert_eq!(c.expected_received(), (7 + 2, 5 + 2));
    }
}
