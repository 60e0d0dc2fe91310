//! The distributed bench end to end: a coordinator and three `gsrelay bench agent`
//! processes, each running a third of the players, against a cluster of three nodes
//! (`gsrelay serve` processes sharing a real `redis-server`), and the same load from one
//! `gsrelay bench` process against a cluster started the same way. The merged report must
//! agree with the single process's, and `gsrelay bench merge` over the agents' part files
//! must give the coordinator's report exactly. Also the Kubernetes manifests of a
//! distributed run (`deploy/kustomize/bench`): valid, wired to each other and to the
//! relays' Secret and Service, and their arguments accepted by the binary.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;
use support::cluster::{Node, linked};
use support::redis::Redis;
use support::serve::{BIN, QUEUE_DELAY};
use support::server::SECRET;
use support::tools::{run, yaml_documents};

/// The load of both runs: two rooms of three publishers (five objects at 30 Hz), six
/// subscribers and a late joiner, 3 s measured after 1 s of warm-up.
const SCENARIO: &[&str] = &[
    "--rooms",
    "2",
    "--publishers",
    "3",
    "--subscribers",
    "6",
    "--objects",
    "5",
    "--rate",
    "30",
    "--late-joiners",
    "1",
    "--late-join-at",
    "1.5",
    "--warmup",
    "1",
    "--duration",
    "3",
    "--plain-rtp",
];

/// Publishers of the scenario, all rooms.
const PUBLISHERS: f64 = 6.0;

/// The measured window, seconds.
const WINDOW_S: f64 = 3.0;

/// Agents of the distributed run.
const AGENTS: usize = 3;

/// How long one bench process may take, joins and all: far above the 5 s it runs.
const RUN_LIMIT: Duration = Duration::from_secs(50);

/// A cluster of three nodes on loopback, spilling a room's sessions to the next node
/// past 8 on one, so that both rooms span nodes and updates cross links.
struct Cluster {
    nodes: Vec<Node>,
    _redis: Redis,
}

async fn cluster() -> Cluster {
    let redis = Redis::start().await;
    let mut nodes = Vec::new();
    for name in ["a", "b", "c"] {
        let extra = [
            "--insecure-plain-rtp",
            "--node-spill-sessions",
            "8",
            "--shards",
            "1",
        ];
        nodes.push(Node::start(&redis, name, &extra).await);
    }
    linked(&nodes.iter().collect::<Vec<_>>()).await;
    Cluster {
        nodes,
        _redis: redis,
    }
}

/// A `gsrelay bench` command with the tests' environment (no `GSRELAY_*` or Indexed Job
/// variables of the machine's, the tests' queueing budget).
fn bench(args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("bench").args(args).kill_on_drop(true);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GSRELAY_")) {
        cmd.env_remove(k);
    }
    cmd.env_remove("JOB_COMPLETION_INDEX")
        .env(QUEUE_DELAY.0, QUEUE_DELAY.1);
    cmd
}

/// Waits for a bench process, which must succeed within [`RUN_LIMIT`].
async fn finish(name: &str, cmd: &mut tokio::process::Command) -> Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{name} still running after {RUN_LIMIT:?}"))
        .unwrap();
    assert!(
        out.status.success(),
        "{name} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn num(v: &Value, key: &str) -> f64 {
    v.pointer(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{key} missing or not a number in {v}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The single process's run against a fresh cluster; its JSON report.
async fn single(dir: &Path) -> Value {
    let c = cluster().await;
    let json = dir.join("single.json");
    let target = ["--relay", &c.nodes[0].base(), "--token-secret", SECRET];
    let mut cmd = bench(SCENARIO);
    cmd.args(target)
        .args(["--no-progress", "--json"])
        .arg(&json);
    finish("gsrelay bench", &mut cmd).await;
    read_json(&json)
}

/// The coordinated run against a fresh cluster, agent k joining through node k; the
/// coordinator's JSON report and the agents' part files.
async fn distributed(dir: &Path) -> (Value, Vec<PathBuf>) {
    let c = cluster().await;
    let json = dir.join("merged.json");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut coordinator = bench(&["coordinator"]);
    coordinator
        .args(SCENARIO)
        .args(["--agents", &AGENTS.to_string(), "--listen", &listen])
        .arg("--json")
        .arg(&json);
    let coordinator =
        tokio::spawn(async move { finish("the coordinator", &mut coordinator).await });
    let mut parts = Vec::new();
    let mut agents = Vec::new();
    for (k, node) in c.nodes.iter().enumerate() {
        let part = dir.join(format!("part{k}.json"));
        let mut agent = bench(&["agent", "--coordinator", &format!("http://{listen}")]);
        agent
            .args(["--index", &k.to_string(), "--relay", &node.base()])
            .args(["--token-secret", SECRET, "--wait", "30", "--out"])
            .arg(&part);
        parts.push(part);
        agents.push(tokio::spawn(async move {
            finish(&format!("agent {k}"), &mut agent).await
        }));
    }
    // Agents that start before the coordinator listens ask again until it does.
    for agent in agents {
        agent.await.unwrap();
    }
    let out = coordinator.await.unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("received pps") && table.contains("3 agents"),
        "{table}"
    );
    (read_json(&json), parts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_against_three_nodes_agree_with_one_process() {
    let dir = std::env::temp_dir().join(format!("gsrelay-bench-dist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one = single(&dir).await;
    let (merged, parts) = distributed(&dir).await;

    // The same report: every key of the single process's, and the agents.
    for key in one.as_object().unwrap().keys() {
        assert!(merged.get(key).is_some(), "{key} missing from {merged}");
    }
    for key in ["/rooms", "/publishers", "/subscribers", "/duration_s"] {
        assert_eq!(num(&merged, key), num(&one, key), "{key}");
    }
    assert_eq!(merged["scenario"], one["scenario"]);

    // The same load: each publisher sends on its own schedule, so the window holds the
    // same updates give or take one at each of its edges per publisher.
    let sent = |r: &Value| num(r, "/sent_pps") * WINDOW_S;
    assert!(
        (sent(&merged) - sent(&one)).abs() <= 2.0 * PUBLISHERS,
        "sent {} and {}",
        sent(&merged),
        sent(&one)
    );
    for r in [&one, &merged] {
        assert!(num(r, "/offered_share") > 0.9, "{r}");
        // Nothing lost on loopback: every subscriber present from the start got every
        // update of its room (1%: a relay descheduled for long on a loaded machine).
        assert!(num(r, "/loss_ratio") < 0.01, "{r}");
        assert!(num(r, "/seq_loss_ratio") < 0.01, "{r}");
        // Both late joiners got their room's whole state.
        assert_eq!(num(r, "/snapshot_ms/completed"), 2.0, "{r}");
        assert_eq!(num(r, "/snapshot_ms/incomplete"), 0.0, "{r}");
        let p = |q: &str| num(r, &format!("/latency_us/{q}"));
        assert!(
            p("p50") > 0.0 && p("p50") <= p("p99") && p("p99") <= p("max"),
            "{r}"
        );
        assert!(p("p50") < 1e6, "median latency over a second: {r}");
    }
    // Delivered: what the regular subscribers got follows from what was sent and lost
    // (both ≈ 0), so the two runs' deliveries differ by the sent difference times the
    // subscribers (12, 0.6%) and by the late joiners' share, which depends on when they
    // joined (1 of 7 subscribers per room, present for half the window): 3% holds both.
    let received = |r: &Value| num(r, "/received_pps");
    let ratio = received(&merged) / received(&one);
    assert!(
        (0.97..=1.03).contains(&ratio),
        "received {} against {}",
        received(&merged),
        received(&one)
    );

    // Every client ran, on exactly one agent, and each agent ran some of each kind.
    let agents = merged["agents"].as_array().unwrap();
    assert_eq!(agents.len(), AGENTS);
    let sum = |k: &str| agents.iter().map(|a| num(a, k)).sum::<f64>();
    assert_eq!(sum("/publishers"), PUBLISHERS);
    assert_eq!(sum("/subscribers"), 2.0 * (6.0 + 1.0));
    for a in agents {
        assert!(
            num(a, "/publishers") >= 1.0 && num(a, "/subscribers") >= 1.0,
            "{a}"
        );
        assert!(num(a, "/process_cpu_s") > 0.0, "{a}");
    }

    // `gsrelay bench merge` over the part files: the coordinator's report, exactly.
    let again = dir.join("again.json");
    let mut merge = bench(&["merge", "--json"]);
    merge.arg(&again).args(&parts);
    finish("gsrelay bench merge", &mut merge).await;
    assert_eq!(read_json(&again), merged);
    // A part missing is refused, not merged into a smaller report.
    let mut short = bench(&["merge"]);
    let out = short.args(&parts[..2]).output().await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no part of agents [2]"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Kubernetes version the manifests are validated against, as `tests/deploy.rs`'s.
const KUBERNETES: &str = "1.32.0";

/// The `--flag=value` arguments of a container, as a map.
fn flags(container: &Value) -> std::collections::BTreeMap<String, String> {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix("--")?.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Runs `gsrelay` with a container's arguments and `more` (which override them), which
/// must fail at run time for the reason `expected`, never on its arguments.
fn runs_until(container: &Value, more: &[&str], expected: &str) {
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let out = std::process::Command::new(BIN)
        .args(&args)
        .args(more)
        .env_remove("JOB_COMPLETION_INDEX")
        .env("GSRELAY_TOKEN_SECRET", SECRET)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(expected),
        "{args:?}: {err}"
    );
}

#[test]
fn the_bench_manifests_validate_and_fit_the_relays_and_the_binary() {
    let text =
        String::from_utf8(run("kubectl", &["kustomize", "deploy/kustomize/bench"]).stdout).unwrap();
    let path = std::env::temp_dir().join(format!("gsrelay-bench-{}.yaml", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let path_arg = path.to_str().unwrap();
    let out = run(
        "kubernetes-validate",
        &["-k", KUBERNETES, "--strict", path_arg],
    );
    std::fs::remove_file(&path).unwrap();
    let docs = yaml_documents(&text);
    let report = String::from_utf8_lossy(&out.stdout);
    let passed = report
        .lines()
        .filter(|l| l.contains(" passed for "))
        .count();
    assert_eq!(passed, docs.len(), "{report}");
    let get = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    let coordinator_job = get("Job", "gsrelay-bench-coordinator");
    let agents_job = get("Job", "gsrelay-bench-agents");
    let service = get("Service", "gsrelay-bench-coordinator");
    let container = |job: &Value| job["spec"]["template"]["spec"]["containers"][0].clone();
    let (coordinator, agent) = (container(coordinator_job), container(agents_job));
    let (cf, af) = (flags(&coordinator), flags(&agent));

    // As many agents as the coordinator waits for, each pod its own index.
    let spec = &agents_job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"].to_string(), cf["agents"]);
    assert_eq!(spec["parallelism"].to_string(), cf["agents"]);
    // The agents reach the coordinator through its Service, on the port it listens on.
    let port = cf["listen"].rsplit_once(':').unwrap().1;
    assert_eq!(coordinator["ports"][0]["containerPort"].to_string(), port);
    assert_eq!(service["spec"]["ports"][0]["port"].to_string(), port);
    let selector = service["spec"]["selector"].as_object().unwrap();
    let labels = &coordinator_job["spec"]["template"]["metadata"]["labels"];
    assert!(selector.iter().all(|(k, v)| &labels[k] == v), "{labels}");
    assert_eq!(
        af["coordinator"],
        format!(
            "http://{}:{port}",
            service["metadata"]["name"].as_str().unwrap()
        )
    );
    // The relays' Service and Secret, as the base names them; and the relays' Services
    // (which select app.kubernetes.io/name: gsrelay) never select a bench pod.
    assert_eq!(af["relay"], "http://gsrelay:8080");
    let secret = &agent["env"][0];
    assert_eq!(secret["name"], "GSRELAY_TOKEN_SECRET");
    assert_eq!(secret["valueFrom"]["secretKeyRef"]["name"], "gsrelay-token");
    assert_eq!(secret["valueFrom"]["secretKeyRef"]["key"], "token-secret");
    for job in [coordinator_job, agents_job] {
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        assert_eq!(
            labels["app.kubernetes.io/name"], "gsrelay-bench",
            "{labels}"
        );
    }

    // The binary takes the arguments as they are: the coordinator resolves its scenario
    // and listens (then finds no agent within the zero wait given here), the agent looks
    // for its coordinator.
    runs_until(
        &coordinator,
        &["--listen", "127.0.0.1:0", "--wait", "0"],
        "were not ready",
    );
    let nobody = format!("http://127.0.0.1:{}", free_port());
    runs_until(
        &agent,
        &["--index", "0", "--coordinator", &nobody, "--wait", "0"],
        "no plan from",
    );
}
