//! `gsrelay bench` end to end: a tiny scenario in process and against the baseline, with
//! the JSON report checked key by key, and the impairment proxy's loss share.

mod support;

use gsrelay::bench::impair::{Impairment, ProxyListener};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use support::serve::QUEUE_DELAY;

/// Runs the binary on the tiny scenario (1 room, 1 publisher, 2 subscribers, 1 s) with
/// `extra` flags and returns its JSON report.
fn tiny(extra: &[&str]) -> Value {
    let mut args = vec![
        "--publishers",
        "1",
        "--subscribers",
        "2",
        "--late-joiners",
        "1",
        "--late-join-at",
        "0.6",
    ];
    args.extend_from_slice(extra);
    bench_json(&args)
}

/// Runs a one-second plain-RTP `gsrelay bench` with `args` and returns its JSON report.
fn bench_json(args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("gsrelay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join(format!("{}.json", args.join("_").replace('-', "")));
    let out = Command::new(env!("CARGO_BIN_EXE_gsrelay"))
        // The relays a bench starts as processes take the tests' queueing budget.
        .env(QUEUE_DELAY.0, QUEUE_DELAY.1)
        .args([
            "bench",
            "--duration",
            "1",
            "--warmup",
            "0.3",
            "--plain-rtp",
            "--no-progress",
            "--json",
        ])
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("received pps"), "{table}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{key} missing or not a number in {v}"))
}

/// Checks the keys every report has, and that their values are sane.
fn check_common(r: &Value, target: &str) {
    for key in [
        "scenario",
        "target",
        "duration_s",
        "rooms",
        "publishers",
        "subscribers",
    ] {
        assert!(r.get(key).is_some(), "{key} missing");
    }
    assert_eq!(r["target"], target);
    assert_eq!(num(r, "rooms"), 1.0);
    assert_eq!(num(r, "publishers"), 1.0);
    assert_eq!(num(r, "subscribers"), 2.0);
    assert!(num(r, "sent_pps") > 0.0);
    assert!(num(r, "received_pps") > 0.0);
    let loss = num(r, "loss_ratio");
    assert!((0.0..=1.0).contains(&loss), "loss {loss}");
    let lat = &r["latency_us"];
    let (p50, p90, p99, p999, max) = (
        num(lat, "p50"),
        num(lat, "p90"),
        num(lat, "p99"),
        num(lat, "p999"),
        num(lat, "max"),
    );
    assert!(
        0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max,
        "{lat}"
    );
    assert!(num(r, "relay_cpu_s") >= 0.0);
    let per_update = num(r, "relay_cpu_us_per_update");
    let updates = num(r, "received_objects_per_s") * num(r, "duration_s");
    assert!(
        (per_update * updates / 1e6 - num(r, "relay_cpu_s")).abs() < 1e-6,
        "relay CPU per delivered update is the relay CPU over the updates"
    );
    assert!(num(r, "relay_peak_rss_bytes") > 0.0);
}

#[test]
fn aggregated_delivery_is_measured_like_per_stream() {
    let r = bench_json(&["--players", "4", "--delivery", "aggregated:5"]);
    assert_eq!(r["scenario"]["interest"]["delivery"]["mode"], "aggregated");
    assert_eq!(
        num(&r["scenario"]["interest"]["delivery"], "max_delay_ms"),
        5.0
    );
    // Every publisher's update reaches every subscriber, bench object included, so loss
    // and latency read the same as in per-stream delivery.
    assert!(num(&r, "sent_pps") > 0.0);
    let loss = num(&r, "loss_ratio");
    assert!(loss < 0.05, "loss {loss}");
    assert!(num(&r["latency_us"], "p50") > 0.0);
    assert!(num(&r, "received_objects_per_s") > 0.0);
}

#[test]
fn dense_preset_is_one_room_of_players_at_random_phases() {
    let r = bench_json(&["--players", "3", "--baseline"]);
    let s = &r["scenario"];
    assert_eq!(s["name"], "dense-3");
    assert_eq!(num(s, "publishers"), 3.0);
    assert_eq!(num(s, "subscribers"), 3.0);
    assert_eq!(num(s, "objects"), 1.0);
    assert_eq!(num(s, "rate_hz"), 20.0);
    assert_eq!(s["send_phases"], "random");
    assert_eq!(num(s, "observers"), 4.0);
    assert!(num(&r, "received_pps") > 0.0);
}

#[test]
fn counters_count_while_observers_time() {
    let r = bench_json(&["--players", "6", "--observers", "2"]);
    assert_eq!(num(&r["scenario"], "observers"), 2.0);
    // Every subscriber counts, so delivery is whole; latency comes from the observers.
    assert!(num(&r, "loss_ratio") < 0.5, "{r}");
    assert!(num(&r["latency_us"], "p50") > 0.0);
    assert!(num(&r, "seq_loss_ratio") < 0.01, "{r}");
    let offered = num(&r, "offered_share");
    assert!((0.5..=1.05).contains(&offered), "offered {offered}");
    let shards = r["relay_shard_cpu_s"].as_array().expect("per-shard CPU");
    assert!(!shards.is_empty());
}

#[test]
fn in_process_report_has_every_key() {
    // Through the impairment proxy too (a delay only, so nothing is lost).
    let r = tiny(&["--impair", "delay=1ms"]);
    check_common(&r, "inprocess");
    assert!(
        num(&r["latency_us"], "p50") >= 2000.0,
        "two proxy hops of 1 ms"
    );
    let snap = &r["snapshot_ms"];
    assert_eq!(num(snap, "completed"), 1.0, "{snap}");
    assert!(num(snap, "p50") <= num(snap, "p99") && num(snap, "p99") <= num(snap, "max"));
}

#[test]
fn webrtc_clients_are_measured_like_udp_ones() {
    let r = tiny(&["--transport", "webrtc"]);
    check_common(&r, "inprocess");
    assert_eq!(r["scenario"]["transport"], "webrtc");
    let loss = num(&r, "loss_ratio");
    assert!(loss < 0.05, "loss {loss}");
    let snap = &r["snapshot_ms"];
    assert_eq!(
        num(snap, "completed"),
        1.0,
        "the late joiner's snapshot: {snap}"
    );
}

#[test]
fn baseline_report_has_every_key() {
    let r = tiny(&["--baseline"]);
    check_common(&r, "baseline");
    // The reflector keeps no state, so there is no snapshot to time.
    assert!(r["snapshot_ms"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_drops_about_the_configured_share() {
    let sink = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let listener = ProxyListener::bind().await.unwrap();
    let front = listener.local_addr();
    let impairment: Impairment = "loss=10%".parse().unwrap();
    let proxy = listener.start(sink.local_addr().unwrap(), impairment, 42);
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(front).await.unwrap();
    let n = 4000u32;
    // Received as they come: a small socket buffer would drop a backlog.
    let counter = tokio::spawn(async move {
        let mut got = 0u32;
        let mut buf = [0u8; 16];
        while let Ok(Ok(_)) =
            tokio::time::timeout(Duration::from_millis(500), sink.recv(&mut buf)).await
        {
            got += 1;
        }
        got
    });
    for i in 0..n {
        client.send(&i.to_be_bytes()).await.unwrap();
        if i % 100 == 99 {
            // Paced, so that socket buffers never drop anything themselves.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let got = counter.await.unwrap();
    let dropped = proxy
        .stats
        .dropped
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(u64::from(n - got), dropped, "only the proxy drops");
    // Binomial sd at n = 4000, p = 0.1 is 0.47%; ±2% is over four of them (and the seed
    // makes the run repeat exactly anyway).
    let share = f64::from(n - got) / f64::from(n);
    assert!((share - 0.10).abs() < 0.02, "dropped {share}");
    proxy.stop();
}

#[test]
fn slow_subscribers_are_capped_and_reported_apart() {
    let r = tiny(&["--slow-subscribers", "1", "--slow-max-bitrate", "32000"]);
    assert_eq!(r["slow_subscribers"], 1);
    let slow = num(&r, "slow_received_objects_per_s");
    let each = num(&r, "received_objects_per_s") / 3.0; // 2 subscribers + 1 late joiner
    assert!(slow > 0.0, "the slow subscriber still receives");
    assert!(slow < each, "capped: {slow} < {each} objects/s");
    assert!(
        num(&r, "loss_ratio") < 0.05,
        "the others lose nothing to it"
    );
}

/// Runs `gsrelay bench SUBCOMMAND` with `args` and `--json`, and returns the report (the
/// cluster runs need `redis-server`, as `tests/cluster.rs` does).
fn subcommand_json(subcommand: &str, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("gsrelay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join(format!("{subcommand}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_gsrelay"))
        // The relays a bench starts as processes take the tests' queueing budget.
        .env(QUEUE_DELAY.0, QUEUE_DELAY.1)
        .args(["bench", subcommand, "--plain-rtp", "--json"])
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

#[test]
fn a_room_across_three_nodes_is_measured_per_count_of_remote_subscribers() {
    let r = subcommand_json(
        "nodes",
        &[
            "--duration",
            "1",
            "--warmup",
            "0.3",
            "--remote-subscribers",
            "1,4",
            "--late-objects",
            "500",
        ],
    );
    assert_eq!(num(&r, "node_count"), 3.0);
    let runs = r["runs"].as_array().expect("one run per count");
    assert_eq!(runs.len(), 2);
    for (run, (remote, nodes)) in runs.iter().zip([(1.0, 1.0), (4.0, 2.0)]) {
        assert_eq!(num(run, "remote_subscribers"), remote);
        assert_eq!(num(run, "remote_nodes"), nodes);
        assert!(num(run, "link_bytes_per_s") > 0.0, "{run}");
        assert!(num(run, "remote_received_bytes_per_s") > 0.0, "{run}");
        assert!(num(&run["remote_latency_us"], "p50") > 0.0, "{run}");
        assert!(num(run, "remote_loss_ratio") < 0.05, "{run}");
    }
    let late = &r["late_join"];
    assert_eq!(num(late, "objects"), 500.0);
    assert!(num(late, "whole_ms") > 0.0, "{late}");
    assert_eq!(num(late, "home_snapshots"), 0.0, "{late}");
}

#[test]
fn a_killed_nodes_subscribers_are_timed_until_whole_again() {
    let r = subcommand_json("failover", &["--kills", "2", "--static-objects", "20"]);
    let kills = r["kills"].as_array().expect("one entry per kill");
    assert_eq!(kills.len(), 2);
    let recovery = &r["recovery_ms"];
    assert!(num(recovery, "samples") >= 2.0, "{r}");
    assert!(num(recovery, "p50") > 0.0 && num(recovery, "p50") <= num(recovery, "max"));
    assert_eq!(num(&r, "not_whole"), 0.0, "{r}");
    assert_eq!(num(&r, "objects_lost"), 0.0, "{r}");
}

/// `gsrelay bench ffi`: a subscriber through the C ABI in a small dense room receives the
/// publishers' updates, and the report says what each cost it.
#[test]
fn the_c_abi_subscriber_is_measured_per_update() {
    let r = subcommand_json("ffi", &["--players", "4", "--rate", "20", "--seconds", "1"]);
    assert_eq!(num(&r, "players"), 4.0);
    // Four publishers at 20 Hz for a second: most of 80 updates arrive.
    assert!(num(&r, "updates") >= 40.0, "{r}");
    assert!(num(&r, "us_per_update") > 0.0, "{r}");
    let parts = num(&r, "net_us_per_update") + num(&r, "poll_us_per_update");
    assert!((parts - num(&r, "us_per_update")).abs() < 1e-6, "{r}");
    assert!(num(&r, "max_events_per_poll") >= 1.0, "{r}");
}
