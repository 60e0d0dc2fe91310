//! The Kubernetes manifests as `kubectl kustomize` renders each overlay: every object
//! valid for a pinned Kubernetes version (kubernetes-validate, strict), and no drift
//! between the manifests and the binary: the configuration the pod would run with is
//! resolved by `serve`'s own code, and ports, probes, advertised address, environment and
//! grace period are checked against it and against a relay started with it.

mod support;

use clap::Parser;
use gsrelay::serve::{self as server, STOP_TIMEOUT};
use gsrelay::serve::{ServeArgs, ServeConfig};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use support::serve::BIN;
use support::tools::{run, tool, yaml_documents};

const OVERLAYS: &[&str] = &["dev", "prod"];
/// The Kubernetes version the manifests are validated against.
const KUBERNETES: &str = "1.32.0";
/// Custom resources, which kubernetes-validate has no schema for: checked here instead.
const CUSTOM_KINDS: &[&str] = &["ServiceMonitor"];
/// What the downward API would give the pod as its IP.
const POD_IP: &str = "10.1.2.3";
/// Stands in for a token secret kept outside the repository (prod).
const EXTERNAL_SECRET: &str = "an-external-secret-0123456789abcdef";

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
        let containers = self.pod()["spec"]["containers"].as_array().unwrap();
        containers
            .iter()
            .find(|c| c["name"] == "gsrelay")
            .expect("a container gsrelay")
    }

    /// The container port named `name`: (number, protocol).
    fn port(&self, name: &str) -> Option<(u16, &str)> {
        let ports = self.container()["ports"].as_array()?;
        let p = ports.iter().find(|p| p["name"] == name)?;
        let number = u16::try_from(p["containerPort"].as_u64()?).ok()?;
        Some((number, p["protocol"].as_str().unwrap_or("TCP")))
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
                assert_eq!(field, "status.podIP", "{}: {name}", self.overlay);
                POD_IP.to_owned()
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
                EXTERNAL_SECRET.to_owned()
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
        assert_eq!(
            c["ports"].as_array().unwrap().len(),
            3 + shards,
            "{overlay}: only http, quic, webrtc and one rtp port per shard"
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
        // configuration (on loopback port 0) answers them.
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
        let running = server::start(ServeConfig {
            http_addr: local,
            rtp_addr: local,
            quic_addr: local,
            webrtc_addr: local,
            ..cfg.clone()
        })
        .await
        .unwrap();
        for path in [&ready_path, &live_path, scrape_path] {
            let url = format!("http://{}{path}", running.http_addr);
            let status = reqwest::get(&url).await.unwrap().status();
            assert_eq!(status, reqwest::StatusCode::OK, "{overlay}: {url}");
        }
        running.shutdown().await.unwrap();

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

/// Services, the disruption budget and the ServiceMonitor point at the relay's pods and
/// ports.
fn check_selectors_and_services(r: &Rendered) {
    let overlay = r.overlay;
    let labels = &r.pod()["metadata"]["labels"];
    let d = r.deployment();
    assert!(selects(&d["spec"]["selector"]["matchLabels"], labels));
    let pdb = r.get("PodDisruptionBudget", "gsrelay").expect("a PDB");
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
    let services: Vec<&Value> = r.all("Service").collect();
    assert!(!services.is_empty());
    for s in &services {
        assert!(selects(&s["spec"]["selector"], labels), "{overlay}: {s}");
        for p in s["spec"]["ports"].as_array().unwrap() {
            let target = p["targetPort"].as_str().expect("named target port");
            let (number, proto) = r.port(target).expect("target port exists");
            assert_eq!(p["protocol"], proto, "{overlay}: {p}");
            assert_eq!(
                p["port"].as_u64(),
                Some(u64::from(number)),
                "{overlay}: {p}"
            );
        }
    }
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
    let requests = &r.container()["resources"]["requests"];
    assert_eq!(
        requests,
        &r.container()["resources"]["limits"],
        "guaranteed QoS"
    );
}
