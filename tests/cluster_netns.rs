//! Rooms across nodes on separate hosts: three `gsrelay serve` nodes, each in a network
//! namespace of its own joined to this one by a veth pair (10.78.k.2 there, 10.78.k.1
//! here, this namespace routing between them), a `redis-server` here, and nftables in the
//! second node's namespace dropping 5% of the packets crossing its veth, each way, at
//! random. A publisher joins through the first node and a subscriber through the second:
//! every update crosses the lossy link (QUIC datagrams between the nodes, and SRTP to the
//! subscriber). The publisher changes objects for a while, then stops; the subscriber's
//! view must equal the publisher's within three link refreshes (the link's refresh every
//! second sends each object's newest state again, whatever was lost).
//!
//! Needs root (CAP_NET_ADMIN), `ip`, `nft`, `sysctl` and `redis-server`; it skips with a
//! message when a namespace cannot be made. It changes the host's network configuration
//! for its own duration (torn down even on failure), so CI does not run it:
//!
//! ```sh
//! cargo test --release --test cluster_netns -- --ignored --nocapture
//! ```

use gsrelay::bench::process::{RelayProcess, RelaySpec};
use gsrelay::client::{Client, JoinOptions};
use gsrelay::token::{Rights, Tokens};
use gsrelay::wire::{Head1, Loc2, Object};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODES: usize = 3;
/// The namespace whose veth drops packets.
const LOSSY: usize = 2;
const LOSS_PERCENT: u32 = 5;
const SECRET: &str = "gsrelay-netns-cluster-secret-0123456789";
const ROOM: &str = "arena";
/// Objects the publisher keeps changing.
const OBJECTS: u64 = 50;
/// The link refresh (the default `link_refresh`).
const REFRESH: Duration = Duration::from_secs(1);

fn ns(k: usize) -> String {
    format!("gsr-node{k}")
}

fn veth(k: usize) -> String {
    format!("gsr-node{k}h")
}

/// This namespace's address on veth `k`, and the node's.
fn addrs(k: usize) -> (String, String) {
    (format!("10.78.{k}.1"), format!("10.78.{k}.2"))
}

/// Runs a command; its stderr when it fails.
fn run(line: &str) -> Result<(), String> {
    let args: Vec<&str> = line.split(' ').collect();
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{line}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "`{line}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// The namespaces, veths, routes and drop rules; all removed when dropped.
struct Hosts {
    forwarding: String,
}

impl Hosts {
    fn create() -> Result<Self, String> {
        Self::teardown();
        let forwarding = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
            .map_err(|e| e.to_string())?
            .trim()
            .to_owned();
        let hosts = Hosts { forwarding };
        run("sysctl -qw net.ipv4.ip_forward=1")?;
        for k in 1..=NODES {
            let (here, there) = addrs(k);
            let (ns, veth) = (ns(k), veth(k));
            run(&format!("ip netns add {ns}"))?;
            run(&format!(
                "ip link add {veth} type veth peer name eth0 netns {ns}"
            ))?;
            run(&format!("ip addr add {here}/30 dev {veth}"))?;
            run(&format!("ip link set {veth} up"))?;
            run(&format!("ip -n {ns} addr add {there}/30 dev eth0"))?;
            run(&format!("ip -n {ns} link set eth0 up"))?;
            run(&format!("ip -n {ns} link set lo up"))?;
            run(&format!("ip -n {ns} route add default via {here}"))?;
        }
        let lossy = ns(LOSSY);
        run(&format!("ip netns exec {lossy} nft add table inet chaos"))?;
        for (hook, dir) in [("input", "iifname"), ("output", "oifname")] {
            let chain = format!(
                "ip netns exec {lossy} nft add chain inet chaos {hook} {{ type filter hook {hook} priority 0 ; policy accept ; }}"
            );
            run(&chain)?;
            run(&format!(
                "ip netns exec {lossy} nft add rule inet chaos {hook} {dir} eth0 numgen random mod 100 < {LOSS_PERCENT} drop"
            ))?;
        }
        Ok(hosts)
    }

    fn teardown() {
        for k in 1..=NODES {
            let _ = run(&format!("ip link del {}", veth(k)));
            let _ = run(&format!("ip netns del {}", ns(k)));
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        Self::teardown();
        let _ = run(&format!(
            "sysctl -qw net.ipv4.ip_forward={}",
            self.forwarding
        ));
    }
}

/// A `redis-server` on this namespace's address towards the first node, which every
/// namespace reaches through the routes.
struct RedisHere(Child);

impl Drop for RedisHere {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn token(rights: Rights, identity: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Tokens::new(SECRET.as_bytes())
        .unwrap()
        .issue(ROOM, identity, rights, 3600, now)
        .unwrap()
}

fn object(id: u64, version: u32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 1,
        location: Loc2 {
            x: version as f32,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, ip, nft and redis-server; run with --ignored, see the module docs"]
async fn a_room_across_three_hosts_converges_under_five_percent_loss_on_one_link() {
    let _hosts = match Hosts::create() {
        Ok(h) => h,
        Err(why) => {
            eprintln!("skipped: cannot make the hosts: {why}");
            return;
        }
    };
    let (redis_host, _) = addrs(1);
    let redis_port = 6391;
    let redis = Command::new("redis-server")
        .args(["--port", &redis_port.to_string(), "--bind", &redis_host])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    let _redis = RedisHere(redis);
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_gsrelay"));
    let mut nodes = Vec::new();
    for k in 1..=NODES {
        let (_, there) = addrs(k);
        let spec = RelaySpec {
            exe: exe.clone(),
            wrapper: vec!["ip".into(), "netns".into(), "exec".into(), ns(k)],
            http_addr: format!("{there}:8080").parse().unwrap(),
            rtp_addr: format!("{there}:5004").parse().unwrap(),
            token_secret: SECRET.into(),
            args: [
                "--redis-url",
                &format!("redis://{redis_host}:{redis_port}/0"),
                "--node-name",
                &format!("node{k}"),
                "--link-addr",
                &format!("{there}:7100"),
                "--node-spill-sessions",
                "1",
            ]
            .map(str::to_owned)
            .to_vec(),
        };
        nodes.push(RelayProcess::start(&spec).await.expect("node started"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in &nodes {
        while n.metric("gsrelay_cluster_links").await.ok() != Some((NODES - 1) as f64) {
            assert!(Instant::now() < deadline, "{} not linked", n.http());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let publish = Rights {
        publish: true,
        subscribe: false,
        admin: false,
    };
    let subscribe = Rights {
        publish: false,
        subscribe: true,
        admin: false,
    };
    let opts = JoinOptions::default;
    let mut publisher = Client::join(nodes[0].http(), &token(publish, "pub"), ROOM, opts())
        .await
        .unwrap();
    let mut subscriber = Client::join(
        nodes[LOSSY - 1].http(),
        &token(subscribe, "sub"),
        ROOM,
        opts(),
    )
    .await
    .unwrap();
    subscriber.send_rr().await.unwrap();

    // Two seconds of changes at 30 Hz, a few objects each, then quiet.
    let mut truth: HashMap<u64, u32> = HashMap::new();
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let changing = Instant::now();
    let mut version = 0u32;
    while changing.elapsed() < Duration::from_secs(2) {
        version += 1;
        let changed: Vec<Object> = (0..3)
            .map(|i| {
                let id = 1 + (u64::from(version) * 7 + i) % OBJECTS;
                truth.insert(id, version);
                object(id, version)
            })
            .collect();
        publisher.send_objects(&changed).await.unwrap();
        let until = Instant::now() + Duration::from_millis(33);
        receive(&mut subscriber, &mut seen, until).await;
    }
    let quiet = Instant::now();
    while seen != truth {
        assert!(
            quiet.elapsed() < REFRESH * 3,
            "the subscriber's view differs from the publisher's 3 s after the last change: \
             {} of {} objects current",
            truth
                .iter()
                .filter(|(id, v)| seen.get(id) == Some(v))
                .count(),
            truth.len()
        );
        receive(
            &mut subscriber,
            &mut seen,
            Instant::now() + Duration::from_millis(50),
        )
        .await;
    }
    eprintln!("converged {:?} after the last change", quiet.elapsed());
}

/// Reads the subscriber's updates until `until`, keeping each object's newest version.
async fn receive(c: &mut Client, seen: &mut HashMap<u64, u32>, until: Instant) {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let Ok(Some((_, objects))) = c.recv_objects(left).await else {
            continue;
        };
        for o in objects {
            if let Object::Head1(h) = o {
                let v = h.location.x as u32;
                let e = seen.entry(h.id).or_default();
                *e = (*e).max(v);
            }
        }
    }
}
