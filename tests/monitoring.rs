//! The Grafana dashboard and the Prometheus alert rules, checked by the real tools: promtool
//! checks and unit-tests every alert, and a real Prometheus scrapes a relay under
//! `gsrelay bench` load on loopback, then answers every dashboard query and every alert
//! expression. A query that matches no series fails, unless it is listed in
//! [`LEGITIMATELY_EMPTY`] with the reason.

mod support;

use gsrelay::client::{Client, JoinOptions, Received};
use reqwest::StatusCode;
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::serve::{BIN, DevServe, Serve};
use support::server::{PUBLISH, SUBSCRIBE};
use support::tools::{root, run, tool, yaml_documents};

const DASHBOARD: &str = "grafana/gsrelay-dashboard.json";
const ALERTS: &str = "grafana/alerts.yml";
const ALERT_TESTS: &str = "grafana/alerts.test.yml";
const OPERATIONS: &str = "docs/operations.md";

/// Metrics that have no series at all in a healthy run, and why. A family a healthy
/// relay counts nothing in (`gsrelay_internal_errors_total`) is exported at zero from
/// start-up, but for the one below.
const LEGITIMATELY_EMPTY: &[(&str, &str)] = &[(
    "gsrelay_recordings_failed_total",
    "the run records nothing, and the relay creates a failure reason's series at its first \
     failure (GsrelayRecordingFailed fires on a series that is new, as its unit test shows)",
)];

/// What the dashboard's template variables stand for in the test: the scrape job, every
/// instance, and a rate window covering the whole run.
const VARIABLES: &[(&str, &str)] = &[
    ("$__rate_interval", "5m"),
    ("$job", "gsrelay"),
    ("$instance", ".+"),
];

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON")
}

/// Every panel of the dashboard (rows left out), with its title.
fn panels(dash: &Value) -> Vec<&Value> {
    dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .filter(|p| p["type"] != "row")
        .collect()
}

/// Every (panel title, query) of the dashboard, variables substituted.
fn panel_queries(dash: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dash) {
        let title = p["title"].as_str().expect("panel title").to_owned();
        let targets = p["targets"].as_array().expect("panel targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for t in targets {
            let mut expr = t["expr"].as_str().expect("target expr").to_owned();
            for (var, value) in VARIABLES {
                expr = expr.replace(var, value);
            }
            assert!(!expr.contains('$'), "unsubstituted variable in {expr}");
            out.push((title.clone(), expr));
        }
    }
    out
}

/// Every (alert name, expression) of the rule file.
fn alerts() -> Vec<(String, String)> {
    let docs = yaml_documents(&read(ALERTS));
    let mut out = Vec::new();
    for group in docs[0]["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("only alerting rules");
            let expr = rule["expr"].as_str().expect("expr");
            out.push((name.to_owned(), expr.trim().to_owned()));
        }
    }
    out
}

#[test]
fn promtool_checks_and_unit_tests_every_alert() {
    run("promtool", &["check", "rules", ALERTS]);
    let out = run("promtool", &["test", "rules", ALERT_TESTS]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS"));
    // Every alert has a unit test that expects it to fire.
    let tests = yaml_documents(&read(ALERT_TESTS));
    let mut fired = BTreeSet::new();
    for test in tests[0]["tests"].as_array().expect("tests") {
        for case in test["alert_rule_test"].as_array().expect("alert_rule_test") {
            let firing = case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
            if firing {
                fired.insert(case["alertname"].as_str().unwrap().to_owned());
            }
        }
    }
    let names: BTreeSet<String> = alerts().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names, fired,
        "every alert needs a unit test in which it fires"
    );
}

#[test]
fn operations_doc_lists_every_panel_and_every_alert_with_a_runbook() {
    let doc = read(OPERATIONS);
    let dash = dashboard();
    for p in panels(&dash) {
        let title = p["title"].as_str().unwrap();
        assert!(
            doc.contains(&format!("**{title}**")),
            "{OPERATIONS} does not describe the panel **{title}**"
        );
        assert!(
            p["description"].as_str().is_some_and(|d| !d.is_empty()),
            "panel {title:?} has no description"
        );
    }
    for (name, _) in alerts() {
        assert!(
            doc.contains(&format!("### {name}")),
            "{OPERATIONS} has no runbook section ### {name}"
        );
    }
}

#[test]
fn the_dashboard_configmap_is_the_dashboard() {
    let out = run("kubectl", &["kustomize", "grafana"]);
    let docs = yaml_documents(&String::from_utf8_lossy(&out.stdout));
    let cm = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "gsrelay-dashboard")
        .expect("the dashboard ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let embedded: Value =
        serde_json::from_str(cm["data"]["gsrelay-dashboard.json"].as_str().unwrap()).unwrap();
    assert_eq!(embedded, dashboard());
}

/// The operands of an alert expression: its parts between top-level comparisons and set
/// operators (`and`, `or`, `unless`), number literals left out. Each must match series
/// for the alert to ever fire.
fn operands(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let (mut depth, mut quote, mut start, mut i) = (0i32, None, 0, 0);
    let mut parts = Vec::new();
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' | b'`' => quote = Some(c),
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth -= 1,
            _ if depth == 0 => {
                if let Some(len) = operator_at(expr, i) {
                    parts.push(&expr[start..i]);
                    i += len;
                    start = i;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&expr[start..]);
    parts
        .into_iter()
        .map(|p| p.trim().trim_start_matches("bool ").trim().to_owned())
        .filter(|p| !p.is_empty() && p.parse::<f64>().is_err())
        .collect()
}

/// The length of the comparison or set operator at byte `i` of `s`, if one starts there.
fn operator_at(s: &str, i: usize) -> Option<usize> {
    let rest = &s[i..];
    if let Some(op) = ["==", "!=", ">=", "<=", ">", "<"]
        .iter()
        .find(|op| rest.starts_with(**op))
    {
        return Some(op.len());
    }
    let before = s[..i].chars().next_back();
    if !before.is_some_and(|c| c.is_whitespace() || c == ')') {
        return None;
    }
    ["and", "or", "unless"].iter().find_map(|w| {
        let after = rest.strip_prefix(w)?.chars().next();
        after
            .is_some_and(|c| c.is_whitespace() || c == '(')
            .then_some(w.len())
    })
}

#[test]
fn operands_split_at_comparisons_and_set_operators_only() {
    assert_eq!(
        operands(r#"gsrelay_ready == 0 and gsrelay_draining{a!="b"} == 0"#),
        ["gsrelay_ready", r#"gsrelay_draining{a!="b"}"#]
    );
    assert_eq!(
        operands("sum by (x) (rate(a[5m])) / sum(rate(orders_total[5m])) > 0.01"),
        ["sum by (x) (rate(a[5m])) / sum(rate(orders_total[5m]))"]
    );
    assert_eq!(
        operands("predict_linear(m[1h], 6 * 3600) > 2 * m"),
        ["predict_linear(m[1h], 6 * 3600)", "2 * m"]
    );
}

/// A Prometheus server on loopback with its own data directory, killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts Debian's `prometheus` scraping `target` every second as job `gsrelay`,
    /// with the alert rules loaded.
    fn start(target: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gsrelay-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        let rules = root().join(ALERTS);
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 rule_files: [{rules:?}]\n\
                 scrape_configs:\n  - job_name: gsrelay\n    static_configs: [{{targets: [{target:?}]}}]\n"
            ),
        )
        .unwrap();
        // Prometheus cannot report a port it picked itself: take a free one and hand it on.
        let addr = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap();
        let child = Command::new(tool("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting prometheus");
        Self { child, addr, dir }
    }

    /// Evaluates `query` now; panics on an API error (a query that does not parse).
    async fn query(&self, query: &str) -> Vec<Value> {
        let resp = reqwest::Client::new()
            .get(format!("http://{}/api/v1/query", self.addr))
            .query(&[("query", query)])
            .send()
            .await
            .unwrap_or_else(|e| panic!("prometheus query {query}: {e}"));
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["status"], "success", "{query}: {body}");
        match &body["data"]["result"] {
            Value::Array(samples) => samples.clone(),
            scalar => vec![serde_json::json!({ "value": scalar })],
        }
    }

    /// A single number from `query`, if it has one.
    async fn number(&self, query: &str) -> Option<f64> {
        self.query(query)
            .await
            .first()
            .and_then(|s| s["value"][1].as_str()?.parse().ok())
    }

    /// Waits (bounded) until the API answers and the relay's target is up.
    async fn wait_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "prometheus exited at start ({status}); is {} taken?",
                    self.addr
                );
            }
            let ready = reqwest::get(format!("http://{}/-/ready", self.addr))
                .await
                .is_ok_and(|r| r.status() == StatusCode::OK);
            if ready && self.number("up{job=\"gsrelay\"}").await == Some(1.0) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus never scraped the relay"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Scrapes of the relay so far.
    async fn scrapes(&self) -> f64 {
        self.number("count_over_time(up{job=\"gsrelay\"}[10m])")
            .await
            .unwrap_or(0.0)
    }
}

/// Whether a sample's value is a finite number (histogram quantiles of nothing are NaN).
fn finite(sample: &Value) -> bool {
    sample["value"][1]
        .as_str()
        .and_then(|v| v.parse::<f64>().ok())
        .is_some_and(f64::is_finite)
}

/// Why `query` may legitimately return nothing, if it reads only such a metric.
fn excuse(query: &str) -> Option<&'static str> {
    LEGITIMATELY_EMPTY
        .iter()
        .find(|(metric, _)| query.contains(metric))
        .map(|(_, why)| *why)
}

/// Traffic no bench makes: a NACK answered and then repeated (a repair and a suppression),
/// datagrams that are not RTP (drops), a join with a token for another room (refused),
/// and one identity joining faster than its rate limit (the relay runs with a burst of
/// [`RATE_BURST`]).
async fn odd_traffic(relay: &DevServe) {
    let room = "ops";
    let mut publisher = Client::join(
        &relay.base,
        &relay.token(room, "pub", PUBLISH),
        room,
        JoinOptions::default(),
    )
    .await
    .unwrap();
    let mut subscriber = Client::join(
        &relay.base,
        &relay.token(room, "sub", SUBSCRIBE),
        room,
        JoinOptions::default(),
    )
    .await
    .unwrap();
    subscriber.send_rr().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let seq = loop {
        publisher
            .send_objects(&[support::head(1, 1.0)])
            .await
            .unwrap();
        if let Some(Received::Rtp { seq, .. }) =
            subscriber.recv(Duration::from_millis(100)).await.unwrap()
        {
            break seq;
        }
        assert!(tokio::time::Instant::now() < deadline, "no update arrived");
    };
    for _ in 0..2 {
        subscriber
            .send_nack(publisher.ssrc(), &[seq])
            .await
            .unwrap();
    }

    let answer: Value = reqwest::Client::new()
        .post(format!("{}/v1/rooms/{room}/sessions", relay.base))
        .bearer_auth(relay.token(room, "raw", SUBSCRIBE))
        .json(&serde_json::json!({"transport": "rtp"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rtp: SocketAddr = answer["rtp"]["addr"].as_str().unwrap().parse().unwrap();
    let junk = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for _ in 0..10 {
        junk.send_to(b"not rtp at all", rtp).await.unwrap();
    }

    let refused = Client::join(
        &relay.base,
        &relay.token("elsewhere", "pub", PUBLISH),
        room,
        JoinOptions::default(),
    )
    .await;
    assert!(refused.is_err());

    // One session over each transport that counts its connections by outcome.
    for opts in [
        JoinOptions {
            quic: true,
            ..JoinOptions::default()
        },
        JoinOptions {
            webtransport: true,
            ..JoinOptions::default()
        },
        JoinOptions {
            webrtc: true,
            ..JoinOptions::default()
        },
    ] {
        let browserlike = Client::join(
            &relay.base,
            &relay.token(room, "conn", SUBSCRIBE),
            room,
            opts,
        )
        .await
        .unwrap();
        browserlike.leave().await.unwrap();
    }

    let eager = relay.token(room, "eager", SUBSCRIBE);
    let mut statuses = Vec::new();
    for _ in 0..=RATE_BURST {
        let status = reqwest::Client::new()
            .post(format!("{}/v1/rooms/{room}/sessions", relay.base))
            .bearer_auth(&eager)
            .json(&serde_json::json!({"transport": "rtp"}))
            .send()
            .await
            .unwrap()
            .status();
        statuses.push(status);
    }
    assert_eq!(
        statuses.last(),
        Some(&StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
}

/// The relay's per-identity join burst in the test.
const RATE_BURST: u32 = 3;

/// `gsrelay bench` against the relay: two rooms with rate-tiered subscribers, a late
/// joiner each (snapshots) and a capped slow subscriber each (deferred, dropped objects).
fn bench(relay: &DevServe) -> Child {
    Command::new(BIN)
        .args([
            "bench",
            "--relay",
            &relay.base,
            "--token-secret",
            &relay.secret,
            "--rooms",
            "2",
            "--publishers",
            "2",
            "--subscribers",
            "2",
            "--late-joiners",
            "1",
            "--late-join-at",
            "2",
            "--slow-subscribers",
            "1",
            "--rate",
            "30",
            "--warmup",
            "1",
            "--duration",
            "8",
            "--interest",
            r#"{"area":{"center":[0,0,0],"radius":100000},"rates":[{"within":1},{"max_hz":5}]}"#,
            "--no-progress",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting gsrelay bench")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_answers_every_panel_and_alert_expression() {
    let burst = RATE_BURST.to_string();
    let relay = Serve::dev(&["--drain-grace-secs", "1", "--http-rate-burst", &burst]);
    let target = relay.base.trim_start_matches("http://").to_owned();
    let mut prometheus = Prometheus::start(&target);
    prometheus.wait_up().await;

    let mut load = bench(&relay);
    odd_traffic(&relay).await;
    let status = tokio::task::spawn_blocking(move || load.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "gsrelay bench failed: {status}");
    // Two more scrapes, so everything the load did is in Prometheus.
    let seen = prometheus.scrapes().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while prometheus.scrapes().await < seen + 2.0 {
        assert!(Instant::now() < deadline, "prometheus stopped scraping");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let mut failures = Vec::new();
    let mut excused = Vec::new();
    let mut check = async |what: String, query: String| {
        let samples = prometheus.query(&query).await;
        if samples.iter().any(finite) {
            return;
        }
        match excuse(&query) {
            Some(why) => excused.push(format!("{what}: {why}")),
            None => failures.push(format!("{what}: no data from {query}")),
        }
    };
    let dash = dashboard();
    let queries = panel_queries(&dash);
    for (title, query) in &queries {
        check(format!("panel {title:?}"), query.clone()).await;
    }
    let alerts = alerts();
    for (name, expr) in &alerts {
        for operand in operands(expr) {
            check(format!("alert {name}"), operand).await;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "{} panel queries and {} alerts answered; empty by design:\n  {}",
        queries.len(),
        alerts.len(),
        excused.join("\n  ")
    );

    // Prometheus loaded every rule and evaluates each without error.
    let rules: Value = reqwest::get(format!("http://{}/api/v1/rules", prometheus.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let loaded: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert_eq!(loaded.len(), alerts.len());
    for rule in loaded {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
}
