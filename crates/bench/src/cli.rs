//! `gsrelay bench` and `gsrelay bench sweep`: flags to a scenario and a target, then
//! the crate's library does the work.

use crate::chaos::Chaos;
use crate::failover::Failover;
use crate::impair::Impairment;
use crate::nodes::{Nodes, NodesTarget};
use crate::report::{cpu_ratio, sweep_svg};
use crate::restart::Restart;
use crate::scenario::{Mix, SendPhases};
use crate::soak::Soak;
use crate::{BenchTransport, Report, RunOptions, Scenario, Security, SweepPoint, Target, run};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use gsrelay_core::rtp::SrtpProfile;
use gsrelay_core::{Delivery, Interest};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Arguments of `gsrelay bench`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: Option<BenchCmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Run the scenario in process and against the baseline at increasing update rates,
    /// and draw latency against load as an SVG.
    Sweep(Box<SweepArgs>),
    /// A long run at a steady load with subscribers leaving and joining, against a relay
    /// in a child process: its memory over time and whether every subscriber ends with
    /// every publisher's last state.
    Soak(SoakArgs),
    /// Kill the relay (a child process) while a room is busy and start it again on the same
    /// ports: the time until every subscriber holds the whole room again.
    Restart(RestartArgs),
    /// A room across a cluster's nodes (child processes and their own redis-server, or
    /// `--relay` URLs): the latency one node hop adds, and the link bytes against what the
    /// remote subscribers receive, for each count of remote subscribers; then a late
    /// joiner on a remote node.
    Nodes(NodesArgs),
    /// A room over a cluster's nodes behind a Service, one node killed (SIGKILL) after
    /// another: the time until each of its clients holds the whole room again.
    Failover(FailoverArgs),
    /// What the C ABI costs a subscriber: a dense room in process, one subscriber joined
    /// through the C ABI in aggregated delivery, polling as a game loop does; CPU per
    /// received update and the wall time of a poll.
    Ffi(FfiArgs),
    /// Make a long recording of a dense room and time seeks in its replay, each to the
    /// whole room at a subscriber.
    Seek(SeekArgs),
    /// A cluster of nodes behind a Service, with faults drawn from a seed (nodes killed
    /// and restarted, frozen and thawed, Redis restarted empty), checked from the
    /// clients: splits, time to whole again, joins refused, deliveries across rooms,
    /// memory. Exits with an error when an invariant broke.
    Chaos(ChaosArgs),
    /// Coordinate a run whose clients are split over `gsrelay bench agent`s on other
    /// machines or pods: hand them the scenario, start them together, merge their results
    /// into one report.
    Coordinator(Box<CoordinatorArgs>),
    /// Run one share of a coordinated run's clients against a relay or a cluster.
    Agent(AgentArgs),
    /// Merge the part files agents wrote (`agent --out`) into one report.
    Merge(MergeArgs),
}

/// Arguments of `gsrelay bench coordinator`; a flag given twice takes its last value (a
/// manifest's arguments can be overridden by appending to them).
#[derive(Debug, Args)]
#[command(args_override_self = true)]
struct CoordinatorArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Agents that share the run's clients.
    #[arg(long)]
    agents: usize,
    /// Where the agents reach the coordinator.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:9100")]
    listen: std::net::SocketAddr,
    /// How long to wait for every agent to have joined its clients, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    wait: f64,
    /// Also write the merged report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench agent`; a flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
struct AgentArgs {
    /// The coordinator's base URL, e.g. `http://bench-coordinator:9100`.
    #[arg(long, value_name = "URL")]
    coordinator: String,
    /// This agent's index, from 0 (a Kubernetes Indexed Job gives each pod its own).
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    index: usize,
    /// The relay, or the cluster's Service, the clients join through.
    #[arg(long, value_name = "URL")]
    relay: String,
    /// The relay's token secret (the agent issues its clients' tokens).
    #[arg(long, env = "GSRELAY_TOKEN_SECRET", hide_env_values = true)]
    token_secret: String,
    /// How long to wait for the coordinator to answer at all, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    wait: f64,
    /// Also write this agent's part (what `gsrelay bench merge` reads) to FILE (`-`:
    /// to standard output, as one line).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Arguments of `gsrelay bench merge`.
#[derive(Debug, Args)]
struct MergeArgs {
    /// The agents' part files, one per agent.
    #[arg(required = true, value_name = "PART")]
    parts: Vec<PathBuf>,
    /// Also write the merged report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench chaos`; defaults are `Chaos::default()`.
#[derive(Debug, Args)]
struct ChaosArgs {
    /// Nodes [default: 5].
    #[arg(long)]
    nodes: Option<usize>,
    /// Rooms [default: 20].
    #[arg(long)]
    rooms: Option<usize>,
    /// Players, spread evenly over the rooms [default: 200].
    #[arg(long)]
    players: Option<usize>,
    /// Updates per second per player [default: 10].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Seconds of faults [default: 600].
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// The schedule's seed [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Shortest time between two faults, seconds [default: 6].
    #[arg(long, value_name = "SECS")]
    min_gap: Option<f64>,
    /// Longest time between two faults, seconds [default: 12].
    #[arg(long, value_name = "SECS")]
    max_gap: Option<f64>,
    /// Silence from its node after which a client rejoins, ms [default: 300].
    #[arg(long, value_name = "MS")]
    silence: Option<u64>,
    /// A node's sessions from which a room's joins go to another node [default: 30].
    #[arg(long)]
    spill: Option<usize>,
    /// Network faults too, by nftables on loopback (root): a node's link port cut off
    /// (a partition), 5% of a node's RTP datagrams dropped.
    #[arg(long)]
    network_faults: bool,
    /// Print the fault schedule and exit.
    #[arg(long)]
    schedule_only: bool,
    /// Plain RTP instead of SRTP.
    #[arg(long)]
    plain_rtp: bool,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench seek`; defaults are `SeekBench::default()`.
#[derive(Debug, Args)]
struct SeekArgs {
    /// Players (streams) in the recorded room [default: 200].
    #[arg(long)]
    players: Option<usize>,
    /// Updates per second per player [default: 20].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// The recording's length, seconds [default: 3600].
    #[arg(long, value_name = "SECS")]
    seconds: Option<u64>,
    /// Seeks to time [default: 20].
    #[arg(long)]
    seeks: Option<usize>,
    /// Where the recording is made (rewritten each run) [default: a directory under
    /// the system's temporary one].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Also write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench ffi`; defaults are `FfiBench::default()`.
#[derive(Debug, Args)]
struct FfiArgs {
    /// Publishers in the room [default: 200].
    #[arg(long)]
    players: Option<usize>,
    /// Updates per second per publisher [default: 20].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Polls per second, the game's frame rate [default: 60].
    #[arg(long, value_name = "HZ")]
    poll_rate: Option<f64>,
    /// Aggregated delivery's longest wait [default: 10].
    #[arg(long, value_name = "MS")]
    aggregate_ms: Option<u32>,
    /// Measured seconds, after a 3 s warm-up [default: 20].
    #[arg(long)]
    seconds: Option<f64>,
    /// Plain RTP instead of SRTP (the relay runs with `--insecure-plain-rtp`).
    #[arg(long)]
    plain_rtp: bool,
    /// Also write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench nodes`; defaults are `Nodes::default()`.
#[derive(Debug, Args)]
struct NodesArgs {
    /// Nodes to start, the first taking the publishers [default: 3].
    #[arg(long, conflicts_with = "relays")]
    nodes: Option<usize>,
    /// Use the running, linked node at URL instead of starting nodes (repeat it, the first
    /// node first; it must keep every join it gets, the others spill past one session).
    #[arg(long = "relay", value_name = "URL", requires = "token_secret")]
    relays: Vec<String>,
    /// The remote nodes' token secret (the bench issues its own tokens).
    #[arg(long, env = "GSRELAY_TOKEN_SECRET", hide_env_values = true)]
    token_secret: Option<String>,
    /// Publishers, on the first node [default: 4].
    #[arg(long)]
    publishers: Option<usize>,
    /// Live objects per publisher [default: 20].
    #[arg(long)]
    objects: Option<usize>,
    /// Updates per second per publisher [default: 30].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Subscribers on the first node [default: 8].
    #[arg(long)]
    subscribers: Option<usize>,
    /// Subscribers spread over the other nodes; a list runs one measurement per count,
    /// e.g. `1,100` [default: 8].
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',')]
    remote_subscribers: Vec<usize>,
    /// Warm-up before each window, seconds [default: 2].
    #[arg(long, value_name = "SECS")]
    warmup: Option<f64>,
    /// Each measurement window, seconds [default: 10].
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Objects of the late joiner's room, 0 for no late join [default: 10000].
    #[arg(long)]
    late_objects: Option<usize>,
    /// Plain RTP instead of SRTP.
    #[arg(long)]
    plain_rtp: bool,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench failover`; defaults are `Failover::default()`.
#[derive(Debug, Args)]
struct FailoverArgs {
    /// Nodes running at any time [default: 3].
    #[arg(long)]
    nodes: Option<usize>,
    /// Nodes killed, one after another; 0 checks only the end state [default: 20].
    #[arg(long)]
    kills: Option<usize>,
    /// Publishers, at least 2 (they also subscribe) [default: 4].
    #[arg(long)]
    publishers: Option<usize>,
    /// Subscribers [default: 9].
    #[arg(long)]
    subscribers: Option<usize>,
    /// Live objects per publisher [default: 20].
    #[arg(long)]
    objects: Option<usize>,
    /// Static objects per publisher [default: 100].
    #[arg(long)]
    static_objects: Option<usize>,
    /// Updates per second per publisher [default: 30].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Silence from its node after which a client rejoins through the Service, ms
    /// [default: 300].
    #[arg(long, value_name = "MS")]
    silence: Option<u64>,
    /// After the kills, kill Redis for SECS while the room flows, start it again on its
    /// port, and time the directory until it is whole [default: not at all].
    #[arg(long, value_name = "SECS")]
    redis_kill: Option<f64>,
    /// Plain RTP instead of SRTP.
    #[arg(long)]
    plain_rtp: bool,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench restart`; defaults are `Restart::default()`.
#[derive(Debug, Args)]
struct RestartArgs {
    /// Publishers, at least 2 (they also subscribe) [default: 4].
    #[arg(long)]
    publishers: Option<usize>,
    /// Subscribers [default: 8].
    #[arg(long)]
    subscribers: Option<usize>,
    /// Live objects per publisher [default: 20].
    #[arg(long)]
    objects: Option<usize>,
    /// Static objects per publisher [default: 100].
    #[arg(long)]
    static_objects: Option<usize>,
    /// Updates per second per publisher [default: 30].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Silence from the relay after which a client rejoins, ms [default: 500].
    #[arg(long, value_name = "MS")]
    silence: Option<u64>,
    /// Time the relay stays down before the new one starts, ms [default: 0].
    #[arg(long, value_name = "MS")]
    down: Option<u64>,
    /// Plain RTP instead of SRTP.
    #[arg(long)]
    plain_rtp: bool,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench soak`; defaults are `Soak::default()` (half the saturating
/// SRTP load for 10 minutes, one subscriber replaced per second).
#[derive(Debug, Args)]
struct SoakArgs {
    /// Publishers [default: 4].
    #[arg(long)]
    publishers: Option<usize>,
    /// Subscribers present at any time [default: 8].
    #[arg(long)]
    subscribers: Option<usize>,
    /// Live objects per publisher [default: 20].
    #[arg(long)]
    objects: Option<usize>,
    /// Static objects per publisher, re-sent every 10 s [default: 100].
    #[arg(long)]
    static_objects: Option<usize>,
    /// Updates per second per publisher [default: 1290].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Load before the measurement, without churn, seconds [default: 5].
    #[arg(long, value_name = "SECS")]
    warmup: Option<f64>,
    /// Measured load with churn, seconds [default: 600].
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Subscribers replaced per second (one leaves, a new one joins and sends a FIR)
    /// [default: 1].
    #[arg(long, value_name = "RATE")]
    churn: Option<f64>,
    /// Plain RTP instead of SRTP.
    #[arg(long)]
    plain_rtp: bool,
    /// Seed of the choice of who leaves [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// No progress lines.
    #[arg(long)]
    no_progress: bool,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Scenario flags; each overrides the `--scenario` file or the default scenario.
#[derive(Debug, Clone, Args)]
struct ScenarioArgs {
    /// TOML scenario file (keys as in `Scenario`: rooms, publishers, rate_hz, ...).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Dense-room preset: N players in one room, each publishing one Head1 at 20 Hz at a
    /// random phase and subscribing to everyone, no late joiners; the flags below still
    /// apply on top of it.
    #[arg(long, value_name = "N")]
    players: Option<usize>,
    /// Subscribers per room that decode and time every update (latency comes from them);
    /// the rest only count updates and check sequence numbers [default: all; 4 with
    /// --players].
    #[arg(long, value_name = "K")]
    observers: Option<usize>,
    /// When publishers send within each period: `aligned` (all at once) or `random`
    /// [default: aligned; random with --players].
    #[arg(long, value_name = "PHASES", value_parser = parse_phases)]
    send_phases: Option<SendPhases>,
    /// Rooms [default: 1].
    #[arg(long)]
    rooms: Option<usize>,
    /// Publishers per room [default: 4].
    #[arg(long)]
    publishers: Option<usize>,
    /// Subscribers per room, joined from the start [default: 8].
    #[arg(long)]
    subscribers: Option<usize>,
    /// Live objects per publisher, all sent at each update [default: 20].
    #[arg(long)]
    objects: Option<usize>,
    /// Cached-only objects per publisher, sent during warm-up [default: 0].
    #[arg(long)]
    static_objects: Option<usize>,
    /// Object mix weights, e.g. `head1=1,hand2=2,object2=15,game_control1=1,mesh1=1`.
    #[arg(long, value_parser = parse_mix)]
    mix: Option<Mix>,
    /// Updates per second per publisher [default: 30].
    #[arg(long, value_name = "HZ")]
    rate: Option<f64>,
    /// Measurement window, seconds [default: 10].
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Warm-up, seconds [default: 2].
    #[arg(long, value_name = "SECS")]
    warmup: Option<f64>,
    /// Late joiners per room [default: 2].
    #[arg(long)]
    late_joiners: Option<usize>,
    /// When late joiners join, seconds after publishing starts [default: 5].
    #[arg(long, value_name = "SECS")]
    late_join_at: Option<f64>,
    /// Slow subscribers per room, capped at --slow-max-bitrate and left out of the other
    /// figures [default: 0].
    #[arg(long)]
    slow_subscribers: Option<usize>,
    /// The slow subscribers' bandwidth cap, bits per second [default: 16000].
    #[arg(long, value_name = "BPS")]
    slow_max_bitrate: Option<u64>,
    /// Subscribers' delivery: `per_stream`, `aggregated` or `aggregated:MS` (the longest
    /// an update waits for its packet to fill, ms) [default: the interest's, per_stream].
    #[arg(long, value_name = "MODE", value_parser = parse_delivery)]
    delivery: Option<Delivery>,
    /// Subscribers' interest as JSON, e.g. `{"types":{"deny":["Mesh1"]}}`.
    #[arg(long, value_name = "JSON", value_parser = parse_interest)]
    interest: Option<Interest>,
    /// Plain RTP instead of SRTP (the in-process relay allows it for this run).
    #[arg(long)]
    plain_rtp: bool,
    /// Clients' transport: `udp`, `quic`, `mixed` (publishers over QUIC, subscribers
    /// over UDP), `webtransport` (every client, as a browser) or `webrtc` (every client on
    /// a data channel) [default: udp].
    #[arg(long, value_name = "TRANSPORT")]
    transport: Option<BenchTransport>,
    /// SRTP profile [default: the relay's].
    #[arg(long, value_parser = parse_profile)]
    srtp_profile: Option<SrtpProfile>,
    /// Seed of the impairment and other random choices [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Impairment between clients and target, e.g. `loss=5%,delay=20ms,jitter=5ms,reorder=1%`;
    /// `rate=2mbit,queue=200ms` adds a bottleneck per client and direction.
    #[arg(long, value_name = "SPEC")]
    impair: Option<String>,
    /// Shards of the in-process relay [default: one per core; 1 with --impair, whose proxy
    /// stands for one RTP address].
    #[arg(long, value_name = "N")]
    shards: Option<usize>,
    /// The in-process relay records every room into DIR (`docs/recording.md`): what
    /// recording costs the relay, against the same run without.
    #[arg(long, value_name = "DIR")]
    record: Option<std::path::PathBuf>,
    /// Subscribers send RFC 8888 congestion feedback every 50 ms; the relay derives a send
    /// budget per subscriber from it.
    #[arg(long)]
    congestion_feedback: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Target and output flags of a single run.
#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Bench a remote relay at this HTTP base URL instead of one in process.
    #[arg(
        long,
        value_name = "URL",
        requires = "token_secret",
        conflicts_with = "baseline"
    )]
    relay: Option<String>,
    /// The remote relay's token secret (the bench issues its own tokens).
    #[arg(long, env = "GSRELAY_TOKEN_SECRET", hide_env_values = true)]
    token_secret: Option<String>,
    /// Bench the plain UDP reflector instead of a relay.
    #[arg(long)]
    baseline: bool,
    /// Run against the relay, then against the baseline, and print the ratio.
    #[arg(long, conflicts_with = "baseline")]
    compare_baseline: bool,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Arguments of `gsrelay bench sweep`.
#[derive(Debug, Args)]
struct SweepArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Update rates to run, Hz per publisher.
    #[arg(long, value_delimiter = ',', default_value = "30,100,300,1000,2000")]
    rates: Vec<f64>,
    /// Where to write the SVG.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Also write every run as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_profile(s: &str) -> Result<SrtpProfile, String> {
    s.parse().map_err(|_| {
        let names: Vec<_> = SrtpProfile::ALL.iter().map(|p| p.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn parse_phases(s: &str) -> Result<SendPhases, String> {
    match s {
        "aligned" => Ok(SendPhases::Aligned),
        "random" => Ok(SendPhases::Random),
        _ => Err("expected aligned or random".into()),
    }
}

fn parse_delivery(s: &str) -> Result<Delivery, String> {
    let delivery = match s.split_once(':') {
        None if s == "per_stream" => Delivery::default(),
        None if s == "aggregated" => Delivery::aggregated(None),
        Some(("aggregated", ms)) => {
            Delivery::aggregated(Some(ms.parse().map_err(|e| format!("{ms}: {e}"))?))
        }
        _ => return Err("expected per_stream, aggregated or aggregated:MS".into()),
    };
    delivery.validate()?;
    Ok(delivery)
}

fn parse_interest(s: &str) -> Result<Interest, String> {
    serde_json::from_str(s).map_err(|e| e.to_string())
}

fn parse_mix(s: &str) -> Result<Mix, String> {
    let mut mix = Mix {
        head1: 0,
        hand2: 0,
        object2: 0,
        game_control1: 0,
        mesh1: 0,
    };
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or("expected type=weight")?;
        let v: u32 = v.parse().map_err(|e| format!("{k}: {e}"))?;
        match k.trim().to_ascii_lowercase().as_str() {
            "head1" => mix.head1 = v,
            "hand2" => mix.hand2 = v,
            "object2" => mix.object2 = v,
            "game_control1" | "gamecontrol1" => mix.game_control1 = v,
            "mesh1" => mix.mesh1 = v,
            other => return Err(format!("unknown object type {other:?}")),
        }
    }
    Ok(mix)
}

impl ScenarioArgs {
    fn resolve(&self, base: Scenario) -> anyhow::Result<Scenario> {
        let mut s = match &self.scenario {
            Some(path) => Scenario::from_file(path)?,
            None => base,
        };
        fn set<T: Clone>(slot: &mut T, v: &Option<T>) {
            if let Some(v) = v {
                *slot = v.clone();
            }
        }
        if let Some(n) = self.players {
            s.make_dense(n);
        }
        set(&mut s.send_phases, &self.send_phases);
        if self.observers.is_some() {
            s.observers = self.observers;
        }
        set(&mut s.rooms, &self.rooms);
        set(&mut s.publishers, &self.publishers);
        set(&mut s.subscribers, &self.subscribers);
        set(&mut s.objects, &self.objects);
        set(&mut s.static_objects, &self.static_objects);
        set(&mut s.mix, &self.mix);
        set(&mut s.rate_hz, &self.rate);
        set(&mut s.duration_s, &self.duration);
        set(&mut s.warmup_s, &self.warmup);
        set(&mut s.late_joiners, &self.late_joiners);
        set(&mut s.late_join_at_s, &self.late_join_at);
        set(&mut s.slow_subscribers, &self.slow_subscribers);
        set(&mut s.slow_max_bitrate_bps, &self.slow_max_bitrate);
        set(&mut s.seed, &self.seed);
        if self.interest.is_some() {
            s.interest.clone_from(&self.interest);
        }
        if let Some(d) = self.delivery {
            s.interest.get_or_insert_default().delivery = d;
        }
        if self.plain_rtp {
            s.security = Security::Plain;
        }
        if self.congestion_feedback {
            s.congestion_feedback = true;
        }
        set(&mut s.transport, &self.transport);
        if self.srtp_profile.is_some() {
            s.srtp_profile = self.srtp_profile;
        }
        s.validate()?;
        Ok(s)
    }

    fn options(&self, target: Target) -> anyhow::Result<RunOptions> {
        let impair = match &self.impair {
            Some(spec) => Some((spec.clone(), spec.parse::<Impairment>()?)),
            None => None,
        };
        let shards = match (self.shards, &impair) {
            (Some(n), Some(_)) if n > 1 => {
                anyhow::bail!("--impair proxies one RTP address: use --shards 1 with it")
            }
            (_, Some(_)) => 1,
            (n, None) => n.unwrap_or(0),
        };
        Ok(RunOptions {
            target,
            impair,
            shards,
            record: self.record.clone(),
            progress: !self.no_progress && std::io::stderr().is_terminal(),
        })
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Runs `gsrelay bench`.
pub fn bench(a: BenchArgs) -> anyhow::Result<()> {
    match a.cmd {
        Some(BenchCmd::Sweep(s)) => return sweep(*s),
        Some(BenchCmd::Soak(s)) => return soak(s),
        Some(BenchCmd::Restart(r)) => return restart(r),
        Some(BenchCmd::Nodes(n)) => return nodes(n),
        Some(BenchCmd::Failover(f)) => return failover(f),
        Some(BenchCmd::Ffi(f)) => return ffi(f),
        Some(BenchCmd::Seek(s)) => return seek(s),
        Some(BenchCmd::Chaos(c)) => return chaos(c),
        Some(BenchCmd::Coordinator(c)) => return coordinator(*c),
        Some(BenchCmd::Agent(a)) => return agent(a),
        Some(BenchCmd::Merge(m)) => return merge(m),
        None => {}
    }
    let a = a.run;
    let scenario = a.scenario.resolve(Scenario::default())?;
    let target = match (&a.relay, a.baseline) {
        (Some(http), _) => Target::Remote {
            http: http.clone(),
            token_secret: a
                .token_secret
                .clone()
                .context("--relay needs --token-secret")?,
        },
        (None, true) => Target::Baseline,
        (None, false) => Target::InProcess,
    };
    let mut report = run(&scenario, &a.scenario.options(target)?)?;
    if a.compare_baseline {
        let baseline = run(&scenario, &a.scenario.options(Target::Baseline)?)?;
        report = report.with_baseline(baseline);
    }
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// Runs `gsrelay bench sweep`.
fn sweep(a: SweepArgs) -> anyhow::Result<()> {
    // Shorter runs than the default scenario: a sweep runs many.
    let base = Scenario {
        name: "sweep".into(),
        duration_s: 4.0,
        warmup_s: 1.0,
        late_joiners: 0,
        ..Scenario::default()
    };
    let scenario = a.scenario.resolve(base)?;
    if a.rates.is_empty() {
        bail!("--rates needs at least one rate");
    }
    let mut points = Vec::new();
    println!(
        "{:>8} {:>12} {:>8} {:>9} {:>9} {:>9} {:>12} {:>9} {:>7} {:>10} {:>9}",
        "rate Hz",
        "relay rx/s",
        "loss",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "base rx/s",
        "base p99",
        "ratio",
        "µs/packet",
        "cpu ratio"
    );
    for rate in &a.rates {
        let s = Scenario {
            rate_hz: *rate,
            ..scenario.clone()
        };
        s.validate()?;
        let relay: Report = run(&s, &a.scenario.options(Target::InProcess)?)?;
        let baseline = run(&s, &a.scenario.options(Target::Baseline)?)?;
        println!(
            "{:>8} {:>12.0} {:>7.3}% {:>9.0} {:>9.0} {:>9.0} {:>12.0} {:>9.0} {:>7.3} {:>10} {:>9}",
            rate,
            relay.received_pps,
            relay.loss_ratio * 100.0,
            relay.latency_us.p50,
            relay.latency_us.p99,
            relay.latency_us.p999,
            baseline.received_pps,
            baseline.latency_us.p99,
            relay.received_pps / baseline.received_pps.max(f64::MIN_POSITIVE),
            fixed(relay.relay_cpu_us_per_packet),
            fixed(cpu_ratio(&relay, &baseline)),
        );
        points.push(SweepPoint {
            rate_hz: *rate,
            relay,
            baseline,
        });
    }
    let title = format!(
        "gsrelay latency vs load: {} pub × {} obj, {} sub, {:?}",
        scenario.publishers, scenario.objects, scenario.subscribers, scenario.security
    );
    std::fs::write(&a.out, sweep_svg(&points, &title))
        .with_context(|| format!("writing {}", a.out.display()))?;
    if let Some(path) = &a.json {
        write_json(path, &points)?;
    }
    Ok(())
}

/// A figure with three decimals, or `-` when not measured.
fn fixed(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

/// Runs `gsrelay bench soak`.
fn soak(a: SoakArgs) -> anyhow::Result<()> {
    let d = Soak::default();
    let s = Soak {
        publishers: a.publishers.unwrap_or(d.publishers),
        subscribers: a.subscribers.unwrap_or(d.subscribers),
        objects: a.objects.unwrap_or(d.objects),
        static_objects: a.static_objects.unwrap_or(d.static_objects),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        warmup_s: a.warmup.unwrap_or(d.warmup_s),
        duration_s: a.duration.unwrap_or(d.duration_s),
        churn_per_s: a.churn.unwrap_or(d.churn_per_s),
        security: if a.plain_rtp {
            Security::Plain
        } else {
            d.security
        },
        seed: a.seed.unwrap_or(d.seed),
    };
    let exe = std::env::current_exe().context("finding the gsrelay binary")?;
    let report = crate::soak::run(&s, exe, !a.no_progress)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// Runs `gsrelay bench restart`.
fn restart(a: RestartArgs) -> anyhow::Result<()> {
    let d = Restart::default();
    let r = Restart {
        publishers: a.publishers.unwrap_or(d.publishers),
        subscribers: a.subscribers.unwrap_or(d.subscribers),
        objects: a.objects.unwrap_or(d.objects),
        static_objects: a.static_objects.unwrap_or(d.static_objects),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        silence_ms: a.silence.unwrap_or(d.silence_ms),
        down_ms: a.down.unwrap_or(d.down_ms),
        security: if a.plain_rtp {
            Security::Plain
        } else {
            d.security
        },
    };
    let exe = std::env::current_exe().context("finding the gsrelay binary")?;
    let report = crate::restart::run(&r, exe)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// Plain RTP when asked, else `default`.
fn security(plain_rtp: bool, default: Security) -> Security {
    if plain_rtp { Security::Plain } else { default }
}

/// Runs `gsrelay bench nodes`.
fn nodes(a: NodesArgs) -> anyhow::Result<()> {
    let d = Nodes::default();
    let n = Nodes {
        nodes: a.nodes.unwrap_or(d.nodes),
        publishers: a.publishers.unwrap_or(d.publishers),
        objects: a.objects.unwrap_or(d.objects),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        local_subscribers: a.subscribers.unwrap_or(d.local_subscribers),
        remote_subscribers: if a.remote_subscribers.is_empty() {
            d.remote_subscribers
        } else {
            a.remote_subscribers
        },
        warmup_s: a.warmup.unwrap_or(d.warmup_s),
        duration_s: a.duration.unwrap_or(d.duration_s),
        late_objects: a.late_objects.unwrap_or(d.late_objects),
        security: security(a.plain_rtp, d.security),
    };
    let target = match (a.relays.len(), a.token_secret) {
        (0, _) => NodesTarget::Children {
            exe: std::env::current_exe().context("finding the gsrelay binary")?,
        },
        (1, _) => bail!("--relay takes the cluster's nodes: give at least two"),
        (_, Some(token_secret)) => NodesTarget::Remote {
            https: a.relays,
            token_secret,
        },
        (_, None) => bail!("--relay needs --token-secret"),
    };
    let report = crate::nodes::run(&n, target)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// Runs `gsrelay bench failover`.
fn failover(a: FailoverArgs) -> anyhow::Result<()> {
    let d = Failover::default();
    let f = Failover {
        nodes: a.nodes.unwrap_or(d.nodes),
        publishers: a.publishers.unwrap_or(d.publishers),
        subscribers: a.subscribers.unwrap_or(d.subscribers),
        objects: a.objects.unwrap_or(d.objects),
        static_objects: a.static_objects.unwrap_or(d.static_objects),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        silence_ms: a.silence.unwrap_or(d.silence_ms),
        kills: a.kills.unwrap_or(d.kills),
        security: security(a.plain_rtp, d.security),
        redis_kill_s: a.redis_kill.unwrap_or(d.redis_kill_s),
    };
    let exe = std::env::current_exe().context("finding the gsrelay binary")?;
    let report = crate::failover::run(&f, exe)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// `gsrelay bench ffi`.
fn ffi(a: FfiArgs) -> anyhow::Result<()> {
    let d = crate::ffi::FfiBench::default();
    let bench = crate::ffi::FfiBench {
        players: a.players.unwrap_or(d.players),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        poll_hz: a.poll_rate.unwrap_or(d.poll_hz),
        aggregate_ms: a.aggregate_ms.unwrap_or(d.aggregate_ms),
        seconds: a.seconds.unwrap_or(d.seconds),
        plain_rtp: a.plain_rtp,
    };
    let report = crate::ffi::run(&bench)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// `gsrelay bench seek`.
fn seek(a: SeekArgs) -> anyhow::Result<()> {
    let d = crate::seek::SeekBench::default();
    let bench = crate::seek::SeekBench {
        players: a.players.unwrap_or(d.players),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        seconds: a.seconds.unwrap_or(d.seconds),
        seeks: a.seeks.unwrap_or(d.seeks),
        dir: a.dir.unwrap_or(d.dir),
        ..d
    };
    let report = crate::seek::run(&bench)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// `gsrelay bench chaos`.
fn chaos(a: ChaosArgs) -> anyhow::Result<()> {
    let d = Chaos::default();
    let c = Chaos {
        nodes: a.nodes.unwrap_or(d.nodes),
        rooms: a.rooms.unwrap_or(d.rooms),
        players: a.players.unwrap_or(d.players),
        rate_hz: a.rate.unwrap_or(d.rate_hz),
        duration_s: a.duration.unwrap_or(d.duration_s),
        seed: a.seed.unwrap_or(d.seed),
        gap_s: (
            a.min_gap.unwrap_or(d.gap_s.0),
            a.max_gap.unwrap_or(d.gap_s.1),
        ),
        silence_ms: a.silence.unwrap_or(d.silence_ms),
        spill: a.spill.unwrap_or(d.spill),
        security: security(a.plain_rtp, d.security),
        network: a.network_faults,
    };
    if a.schedule_only {
        c.validate()?;
        println!(
            "{}",
            serde_json::to_string_pretty(&crate::chaos::schedule(&c))?
        );
        return Ok(());
    }
    let exe = std::env::current_exe().context("finding the gsrelay binary")?;
    let report = crate::chaos::run(&c, exe)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    if report.violations() > 0 {
        anyhow::bail!("{} invariant violations", report.violations());
    }
    Ok(())
}

/// A count of seconds as a duration, refused when negative or not a number.
fn seconds(what: &str, secs: f64) -> anyhow::Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(secs).with_context(|| format!("--{what} {secs}"))
}

/// `gsrelay bench coordinator`.
fn coordinator(a: CoordinatorArgs) -> anyhow::Result<()> {
    if a.scenario.impair.is_some() || a.scenario.shards.is_some() {
        bail!("--impair and --shards are for a relay in process, not a distributed run");
    }
    let c = crate::dist::coordinator::Coordinator {
        scenario: a.scenario.resolve(Scenario::default())?,
        agents: a.agents,
        listen: a.listen,
        wait: seconds("wait", a.wait)?,
    };
    let report = crate::dist::coordinator::run(&c)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// `gsrelay bench agent`.
fn agent(a: AgentArgs) -> anyhow::Result<()> {
    let agent = crate::dist::agent::Agent {
        coordinator: a.coordinator,
        index: a.index,
        relay: a.relay,
        token_secret: a.token_secret,
        wait: seconds("wait", a.wait)?,
        out: a.out,
    };
    let part = crate::dist::agent::run(&agent)?;
    eprintln!(
        "agent {}: done, {} publishers and {} subscribers",
        part.share.index, part.agent.publishers, part.agent.subscribers
    );
    Ok(())
}

/// `gsrelay bench merge`.
fn merge(a: MergeArgs) -> anyhow::Result<()> {
    let report = crate::dist::merge::merge_files(&a.parts)?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        write_json(path, &report)?;
    }
    Ok(())
}
