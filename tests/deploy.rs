//! The Kubernetes manifests as `kubectl kustomize` renders each overlay: every object
//! valid for a pinned Kubernetes version (kubernetes-validate, strict), and no drift
//! between the manifests and the binary: the configuration the pod would run with is
//! resolved by `serve`'s own code, and ports, probes, advertised address, environment and
//! grace period are checked against it and against a relay started with it (and with a
//! real Redis standing in for the cluster's directory). The cluster wiring too: the
//! directory's URL (dev: the overlay's own Redis, prod: a Secret), node names, the link
//! port and the addresses the pods advertise to each other.

mod support;

use clap::Parser;
use gsrelay::serve::{self as server, STOP_TIMEOUT};
use gsrelay::serve::{ServeArgs, ServeConfig};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::redis::Redis;
use support::serve::BIN;
use support::tools::{run, tool, yaml_documents};

const OVERLAYS: &[&str] = &["dev", "prod"];
/// The Kubernetes version the manifests are validated against.
const KUBERNETES: &str = "1.32.0";
/// Custom resources, which kubernetes-validate has no schema for: checked here instead.
const CUSTOM_KINDS: &[&str] = &["ServiceMonitor"];
/// What the downward API would give the pod as its IP.
const POD_IP: &str = "10.1.2.3";
/// What the downward API would give the pod as its name.
const POD_NAME: &str = "gsrelay-5d8f7c9b4-x2k7q";
/// Stands in for a token secret kept outside the repository (prod).
const EXTERNAL_SECRET: &str = "an-external-secret-0123456789abcdef";
/// Stands in for a Redis URL kept outside the repository (prod).
const EXTERNAL_REDIS_URL: &str = "redis://:an-external-password@redis.example.internal:6379/0";
/// The Redis image the dev overlay runs.
const REDIS_IMAGE: &str = "redis:7.0";

fn render(overlay: &str) -> String {
    let dir = format!("deploy/kustomize/overlays/{overlay}");
    let out = run("kubectl", &["kustomize", &dir]);
    String::from_utf8(out.stdout).unwrap()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("gsrelay-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_overlay_renders_and_validates_for_the_pinned_kubernetes() {
    for overlay in OVERLAYS {
        let text = render(overlay);
        let docs = yaml_documents(&text);
        let path = temp_file(&format!("{overlay}.yaml"), &text);
        let out = run(
            "kubernetes-validate",
            &["-k", KUBERNETES, "--strict", path.to_str().unwrap()],
        );
        std::fs::remove_file(&path).unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        let custom = docs
            .iter()
            .filter(|d| CUSTOM_KINDS.contains(&d["kind"].as_str().unwrap()))
            .count();
        let passed = report
            .lines()
            .filter(|l| l.contains(" passed for "))
            .count();
        assert_eq!(passed, docs.len() - custom, "{overlay}:\n{report}");
        for line in report.lines().filter(|l| !l.contains(" passed for ")) {
            assert!(
                CUSTOM_KINDS
                    .iter()
                    .any(|k| line.contains(&format!("kind {k} "))),
                "{overlay}: unexpected validator output: {line}"
            );
        }
    }
}

/// The rendered objects of one overlay, looked up by kind and name.
struct Rendered {
    overlay: &'static str,
    docs: Vec<Value>,
}

impl Rendered {
    fn of(overlay: &'static str) -> Self {
        Self {
            overlay,
            docs: yaml_documents(&render(overlay)),
        }
    }

    fn all(&self, kind: &str) -> impl Iterator<Item = &Value> {
        self.docs.iter().filter(move |d| d["kind"] == kind)
    }

    fn get(&self, kind: &str, name: &str) -> Option<&Value> {
        self.all(kind).find(|d| d["metadata"]["name"] == name)
    }

    fn deployment(&self) -> &Value {
        self.get("Deployment", "gsrelay")
            .expect("a Deployment gsrelay")
    }

    fn pod(&self) -> &Value {
        &self.deployment()["spec"]["template"]
    }

    fn container(&self) -> &Value {
        container(self.pod(), "gsrelay")
    }

    /// The container port named `name`: (number, protocol).
    fn port(&self, name: &str) -> Option<(u16, &str)> {
        container_port(self.container(), name)
    }

    /// The container's env entry `name` as the manifest has it (its value source).
    fn env_entry(&self, name: &str) -> &Value {
        let env = self.container()["env"].as_array().unwrap();
        env.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{}: no env {name}", self.overlay))
    }

    /// The container's environment as the kubelet would set it: downward-API fields,
    /// secrets and `$(VAR)` references resolved.
    fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for e in self.container()["env"].as_array().unwrap() {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = if let Some(v) = e["value"].as_str() {
                expand(v, &env)
            } else if let Some(field) = e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                match field {
                    "status.podIP" => POD_IP.to_owned(),
                    "metadata.name" => POD_NAME.to_owned(),
                    _ => panic!("{}: {name} from {field}", self.overlay),
                }
            } else if let Some(r) = e["valueFrom"]["secretKeyRef"].as_object() {
                self.secret(r["name"].as_str().unwrap(), r["key"].as_str().unwrap())
            } else {
                panic!(
                    "{}: env {name} has no value source the test knows",
                    self.overlay
                );
            };
            env.insert(name, value);
        }
        env
    }

    /// A key of a Secret the overlay generates, or a stand-in for one kept outside the
    /// repository (the overlay must then say how to create it).
    fn secret(&self, name: &str, key: &str) -> String {
        match self.get("Secret", name) {
            Some(s) => {
                use base64::Engine;
                let b64 = s["data"][key].as_str().expect("secret key");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap();
                String::from_utf8(bytes).unwrap()
            }
            None => {
                let kustomization = std::fs::read_to_string(format!(
                    "{}/deploy/kustomize/overlays/{}/kustomization.yaml",
                    env!("CARGO_MANIFEST_DIR"),
                    self.overlay
                ))
                .unwrap();
                assert!(
                    kustomization.contains(&format!("create secret generic {name}")),
                    "{}: Secret {name} is neither generated nor documented",
                    self.overlay
                );
                match key {
                    "url" => EXTERNAL_REDIS_URL.to_owned(),
                    _ => EXTERNAL_SECRET.to_owned(),
                }
            }
        }
    }

    /// The file a mounted ConfigMap provides at `path`.
    fn mounted_file(&self, path: &str) -> String {
        let (dir, file) = path.rsplit_once('/').unwrap();
        let mounts = self.container()["volumeMounts"].as_array().unwrap();
        let mount = mounts
            .iter()
            .find(|m| m["mountPath"] == dir)
            .unwrap_or_else(|| panic!("{}: nothing mounted at {dir}", self.overlay));
        let volumes = self.pod()["spec"]["volumes"].as_array().unwrap();
        let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
        let cm = volume["configMap"]["name"].as_str().unwrap();
        let cm = self.get("ConfigMap", cm).expect("the mounted ConfigMap");
        cm["data"][file].as_str().expect("the file").to_owned()
    }
}

/// The container `name` of a pod template.
fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    let containers = pod["spec"]["containers"].as_array().unwrap();
    containers
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("a container {name}"))
}

/// The port named `name` of a container: (number, protocol).
fn container_port<'a>(container: &'a Value, name: &str) -> Option<(u16, &'a str)> {
    let ports = container["ports"].as_array()?;
    let p = ports.iter().find(|p| p["name"] == name)?;
    let number = u16::try_from(p["containerPort"].as_u64()?).ok()?;
    Some((number, p["protocol"].as_str().unwrap_or("TCP")))
}

/// Kubernetes' `$(VAR)` expansion of an env value.
fn expand(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = value.to_owned();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    assert!(!out.contains("$("), "unresolved reference in {value}");
    out
}

#[derive(Parser)]
struct ServeCmd {
    #[command(flatten)]
    args: ServeArgs,
}

/// What `gsrelay serve` resolves from the pod's config file and `GSRELAY_*` environment:
/// each variable is passed as the flag that reads it (clap's flag > env precedence makes
/// that the same), after checking `serve --help` names the variable, since a misspelt
/// variable would be silently ignored.
fn resolve(r: &Rendered) -> ServeConfig {
    let help = std::process::Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let env = r.env();
    let mut argv = vec!["serve".to_owned()];
    let mut config_file = None;
    for (name, value) in env.iter().filter(|(n, _)| n.starts_with("GSRELAY_")) {
        assert!(
            help.contains(&format!("env: {name}=")) || help.contains(&format!("env: {name}]")),
            "{}: {name} is not a variable serve reads",
            r.overlay
        );
        let flag = name["GSRELAY_".len()..]
            .to_ascii_lowercase()
            .replace('_', "-");
        let value = if flag == "config" {
            let toml = r.mounted_file(value);
            let path = temp_file(&format!("{}.toml", r.overlay), &toml);
            let shown = path.display().to_string();
            config_file = Some(path);
            shown
        } else {
            value.clone()
        };
        argv.push(format!("--{flag}={value}"));
    }
    let cmd = ServeCmd::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let cfg = cmd.args.resolve().expect("serve accepts the configuration");
    if let Some(path) = config_file {
        std::fs::remove_file(path).unwrap();
    }
    cfg
}

fn probe(r: &Rendered, which: &str) -> (String, String) {
    let p = &r.container()[which]["httpGet"];
    (
        p["path"].as_str().unwrap().to_owned(),
        p["port"].as_str().expect("a named port").to_owned(),
    )
}

/// Whether every label of `selector` is on `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let s = selector.as_object().expect("matchLabels");
    !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v)
}

#[tokio::test]
async fn manifests_match_what_serve_uses() {
    assert!(tool("kubectl").is_file());
    for overlay in OVERLAYS {
        let r = Rendered::of(overlay);
        let cfg = resolve(&r);
        let c = r.container();
        assert_eq!(c["args"], serde_json::json!(["serve"]), "{overlay}");

        // Ports: what serve binds, reachable from outside the pod, and nothing it does
        // not bind.
        let (http, http_proto) = r.port("http").expect("port http");
        let (rtp, rtp_proto) = r.port("rtp").expect("port rtp");
        assert_eq!(
            (http, http_proto),
            (cfg.http_addr.port(), "TCP"),
            "{overlay}"
        );
        assert_eq!((rtp, rtp_proto), (cfg.rtp_addr.port(), "UDP"), "{overlay}");
        assert!(cfg.http_addr.ip().is_unspecified() && cfg.rtp_addr.ip().is_unspecified());
        // Shard k binds the RTP port + k: each has its container port.
        let shards = cfg.shards;
        assert!(shards >= 1, "{overlay}: an explicit shard count");
        for k in 1..shards {
            let name = format!("rtp-{k}");
            let port = r
                .port(&name)
                .unwrap_or_else(|| panic!("{overlay}: port {name}"));
            assert_eq!(port, (rtp + k as u16, "UDP"), "{overlay}: {name}");
        }
        let (quic, quic_proto) = r.port("quic").expect("port quic");
        assert_eq!(
            (quic, quic_proto),
            (cfg.quic_addr.port(), "UDP"),
            "{overlay}"
        );
        let (webrtc, webrtc_proto) = r.port("webrtc").expect("port webrtc");
        assert_eq!(
            (webrtc, webrtc_proto),
            (cfg.webrtc_addr.port(), "UDP"),
            "{overlay}"
        );
        check_cluster(&r, &cfg);
        assert_eq!(
            c["ports"].as_array().unwrap().len(),
            4 + shards,
            "{overlay}: only http, quic, webrtc, link and one rtp port per shard"
        );

        // Each pod advertises its own address and the port it binds.
        let pod_ip: IpAddr = POD_IP.parse().unwrap();
        assert_eq!(
            cfg.rtp_advertise_addr,
            Some(SocketAddr::new(pod_ip, rtp)),
            "{overlay}"
        );
        assert_eq!(
            cfg.quic_advertise_addr,
            Some(SocketAddr::new(pod_ip, quic)),
            "{overlay}"
        );
        assert_eq!(
            cfg.webrtc_advertise_addr,
            Some(SocketAddr::new(pod_ip, webrtc)),
            "{overlay}"
        );
        let secret = cfg.token_secret.as_deref().expect("a token secret");
        assert!(secret.len() >= 16, "{overlay}: token secret too short");

        // Probes and scrape annotations name real endpoints: a relay started with this
        // configuration (on loopback port 0, a real Redis as its directory) answers them,
        // /readyz once it is registered in the directory under the pod's name.
        let (ready_path, ready_port) = probe(&r, "readinessProbe");
        let (live_path, live_port) = probe(&r, "livenessProbe");
        assert_eq!(
            (ready_path.as_str(), ready_port.as_str()),
            ("/readyz", "http")
        );
        assert_eq!(
            (live_path.as_str(), live_port.as_str()),
            ("/healthz", "http")
        );
        let annotations = &r.pod()["metadata"]["annotations"];
        assert_eq!(annotations["prometheus.io/port"], http.to_string());
        let scrape_path = annotations["prometheus.io/path"].as_str().unwrap();
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let redis = Redis::start().await;
        let running = server::start(ServeConfig {
            http_addr: local,
            rtp_addr: local,
            quic_addr: local,
            webrtc_addr: local,
            link_addr: local,
            redis_url: Some(redis.url()),
            ..cfg.clone()
        })
        .await
        .unwrap();
        let ready = Instant::now() + Duration::from_secs(10);
        for path in [&ready_path, &live_path, scrape_path] {
            let url = format!("http://{}{path}", running.http_addr);
            loop {
                let status = reqwest::get(&url).await.unwrap().status();
                if status == reqwest::StatusCode::OK {
                    break;
                }
                assert!(
                    *path == ready_path && Instant::now() < ready,
                    "{overlay}: {url} answers {status}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let node_key = format!("{}:node:{POD_NAME}", cfg.redis_prefix);
        let registered: bool = redis::cmd("EXISTS")
            .arg(&node_key)
            .query_async(&mut redis.connection().await.unwrap())
            .await
            .unwrap();
        assert!(registered, "{overlay}: no {node_key} in the directory");
        running.shutdown().await.unwrap();
        drop(redis);

        // The pod gets time for preStop, the whole drain and the stop after it.
        let pod = &r.pod()["spec"];
        let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
        let pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
            .as_u64()
            .unwrap();
        let needed = pre_stop + cfg.drain_grace_secs + 2 * STOP_TIMEOUT.as_secs();
        assert!(
            grace >= needed,
            "{overlay}: terminationGracePeriodSeconds {grace} < preStop {pre_stop} + drain {} + stop {}",
            cfg.drain_grace_secs,
            2 * STOP_TIMEOUT.as_secs()
        );

        check_selectors_and_services(&r);
        assert!(r.get("ConfigMap", "gsrelay-dashboard").is_some());
        assert!(r.get("ConfigMap", "gsrelay-alerts").is_some());
    }
}

/// The cluster wiring both overlays share: a directory URL, each pod a node under its own
/// name, the link port declared where serve binds it, and the link and HTTP addresses
/// the other pods use advertised as the pod's own. The token secret, which also
/// authenticates the links, comes from one Secret for every pod.
fn check_cluster(r: &Rendered, cfg: &ServeConfig) {
    let overlay = r.overlay;
    assert!(cfg.redis_url.is_some(), "{overlay}: no directory URL");
    assert_eq!(cfg.node_name.as_deref(), Some(POD_NAME), "{overlay}");
    assert_eq!(
        r.env_entry("GSRELAY_NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name",
        "{overlay}: node names are the pods' names, unique in the cluster"
    );
    assert!(
        r.env_entry("GSRELAY_TOKEN_SECRET")["valueFrom"]["secretKeyRef"].is_object(),
        "{overlay}: every pod's token secret from one Secret"
    );
    let (link, link_proto) = r.port("link").expect("port link");
    assert_eq!(
        (link, link_proto),
        (cfg.link_addr.port(), "UDP"),
        "{overlay}"
    );
    assert!(cfg.link_addr.ip().is_unspecified(), "{overlay}");
    let pod_ip: IpAddr = POD_IP.parse().unwrap();
    assert_eq!(
        cfg.link_advertise_addr,
        Some(SocketAddr::new(pod_ip, link)),
        "{overlay}"
    );
    assert_eq!(
        cfg.http_advertise_addr,
        Some(SocketAddr::new(pod_ip, cfg.http_addr.port())),
        "{overlay}"
    );
}

/// The workloads (Deployments, StatefulSets) whose pods `selector` picks: (kind, name,
/// pod template).
fn selected<'a>(r: &'a Rendered, selector: &Value) -> Vec<(&'a str, &'a str, &'a Value)> {
    ["Deployment", "StatefulSet"]
        .into_iter()
        .flat_map(|kind| r.all(kind))
        .filter(|w| selects(selector, &w["spec"]["template"]["metadata"]["labels"]))
        .map(|w| {
            (
                w["kind"].as_str().unwrap(),
                w["metadata"]["name"].as_str().unwrap(),
                &w["spec"]["template"],
            )
        })
        .collect()
}

/// Services, the disruption budget and the ServiceMonitor point at the relay's pods and
/// ports; any other Service (dev's Redis) at the pods and ports of one other workload.
fn check_selectors_and_services(r: &Rendered) {
    let overlay = r.overlay;
    let labels = &r.pod()["metadata"]["labels"];
    let d = r.deployment();
    assert!(selects(&d["spec"]["selector"]["matchLabels"], labels));
    let pdb = r.get("PodDisruptionBudget", "gsrelay").expect("a PDB");
    assert_eq!(
        selected(r, &pdb["spec"]["selector"]["matchLabels"]),
        [("Deployment", "gsrelay", r.pod())],
        "{overlay}: the PDB covers the relays only"
    );
    for w in r.all("StatefulSet") {
        let selector = &w["spec"]["selector"]["matchLabels"];
        assert!(selects(
            selector,
            &w["spec"]["template"]["metadata"]["labels"]
        ));
        assert!(
            !selects(selector, labels),
            "{overlay}: not the relays' pods"
        );
    }
    let mut services = Vec::new();
    for s in r.all("Service") {
        let workloads = selected(r, &s["spec"]["selector"]);
        assert_eq!(workloads.len(), 1, "{overlay}: {s} selects one workload");
        let (_, name, pod) = workloads[0];
        if name == "gsrelay" {
            services.push(s);
        }
        let c = &pod["spec"]["containers"][0];
        for p in s["spec"]["ports"].as_array().unwrap() {
            let target = p["targetPort"].as_str().expect("named target port");
            let (number, proto) = container_port(c, target).expect("target port exists");
            assert_eq!(p["protocol"], proto, "{overlay}: {p}");
            assert_eq!(
                p["port"].as_u64(),
                Some(u64::from(number)),
                "{overlay}: {p}"
            );
        }
    }
    assert!(!services.is_empty(), "{overlay}: a Service for the relays");
    for sm in r.all("ServiceMonitor") {
        let matched: Vec<&&Value> = services
            .iter()
            .filter(|s| {
                selects(
                    &sm["spec"]["selector"]["matchLabels"],
                    &s["metadata"]["labels"],
                )
            })
            .collect();
        assert_eq!(
            matched.len(),
            1,
            "{overlay}: the ServiceMonitor selects one Service"
        );
        for e in sm["spec"]["endpoints"].as_array().unwrap() {
            assert_eq!(e["path"], "/metrics");
            let ports = matched[0]["spec"]["ports"].as_array().unwrap();
            assert!(
                ports.iter().any(|p| p["name"] == e["port"]),
                "{overlay}: {e}"
            );
        }
    }
}

#[test]
fn prod_runs_one_relay_per_node_on_the_node_network() {
    let r = Rendered::of("prod");
    let pod = &r.pod()["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    let term = &anti[0];
    assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
    assert!(selects(
        &term["labelSelector"]["matchLabels"],
        &r.pod()["metadata"]["labels"]
    ));
    assert!(r.deployment()["spec"]["replicas"].as_u64().unwrap() >= 2);
    assert_eq!(r.all("ServiceMonitor").count(), 1);
    assert!(
        r.get("Secret", "gsrelay-token").is_none(),
        "no secret in the repository"
    );
    // The directory is the operator's Redis, its URL (and password) a Secret created
    // outside the repository.
    let redis_url = &r.env_entry("GSRELAY_REDIS_URL")["valueFrom"]["secretKeyRef"];
    assert_eq!(redis_url["name"], "gsrelay-redis");
    assert_eq!(redis_url["key"], "url");
    assert!(r.get("Secret", "gsrelay-redis").is_none());
    assert_eq!(r.all("StatefulSet").count(), 0, "no Redis of its own");
    let requests = &r.container()["resources"]["requests"];
    assert_eq!(
        requests,
        &r.container()["resources"]["limits"],
        "guaranteed QoS"
    );
}

#[tokio::test]
async fn dev_runs_its_own_redis_for_the_directory() {
    let r = Rendered::of("dev");
    let sts = r
        .get("StatefulSet", "gsrelay-redis")
        .expect("a StatefulSet gsrelay-redis");
    assert_eq!(sts["spec"]["replicas"], 1);
    let pod = &sts["spec"]["template"];
    let c = container(pod, "redis");
    assert_eq!(c["image"], REDIS_IMAGE);
    let (port, proto) = container_port(c, "redis").expect("port redis");
    assert_eq!((port, proto), (6379, "TCP"));
    for v in pod["spec"]["volumes"].as_array().unwrap() {
        assert!(v["emptyDir"].is_object(), "nothing persisted: {v}");
    }

    // The relays' directory URL names its headless Service and that Service's port.
    let service = r
        .get("Service", sts["spec"]["serviceName"].as_str().unwrap())
        .expect("the StatefulSet's Service");
    assert_eq!(service["metadata"]["name"], "gsrelay-redis");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(
        selected(&r, &service["spec"]["selector"]),
        [("StatefulSet", "gsrelay-redis", pod)]
    );
    assert_eq!(service["spec"]["ports"][0]["port"], port);
    let url = r.env()["GSRELAY_REDIS_URL"].clone();
    assert_eq!(url, format!("redis://gsrelay-redis:{port}/0"));

    // The container's arguments start a Redis (the same major version here) that
    // answers and keeps nothing on disk.
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "redis-server");
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("gsrelay-{}-redis", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = std::process::Command::new("redis-server")
        .args(&args[1..])
        .args(["--port", &free.to_string(), "--bind", "127.0.0.1"])
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (scripts/test.sh installs it)");
    let client = redis::Client::open(format!("redis://127.0.0.1:{free}/0")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (save, appendonly) = loop {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await {
            let save: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("save")
                .query_async(&mut c)
                .await
                .unwrap();
            let aof: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("appendonly")
                .query_async(&mut c)
                .await
                .unwrap();
            break (save[1].clone(), aof[1].clone());
        }
        assert!(Instant::now() < deadline, "redis-server did not answer");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let _ = server.kill();
    let _ = server.wait();
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((save.as_str(), appendonly.as_str()), ("", "no"));
    assert!(left.is_empty(), "redis wrote {left:?}");
}
