//! The chaos run's short version (`gsrelay bench chaos`, `docs/benchmarks.md`): five
//! `gsrelay serve` processes, a `redis-server` and a Service that probes readiness; 100
//! players in 10 rooms; two minutes of faults drawn from a seed (nodes killed and started
//! again under their names, frozen with SIGSTOP and thawed, Redis killed and started
//! again empty). From the clients: no room split over 1 s, every client of a touched
//! room whole again, no join refused while a node could take it, nothing delivered
//! across rooms, the directory whole again after each Redis restart. The same seed gives
//! the same schedule in another process.

mod support;

use serde_json::Value;
use std::process::Command;
use support::serve::QUEUE_DELAY;

fn gsrelay(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gsrelay"))
        .env(QUEUE_DELAY.0, QUEUE_DELAY.1)
        .args(args)
        .output()
        .unwrap()
}

const RUN: [&str; 10] = [
    "--duration",
    "120",
    "--players",
    "100",
    "--rooms",
    "10",
    "--seed",
    "7",
    "--min-gap",
    "6",
];

#[test]
fn two_minutes_of_faults_break_no_invariant() {
    let dir = std::env::temp_dir().join(format!("gsrelay-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("chaos.json");
    let mut args = vec!["bench", "chaos", "--plain-rtp", "--json"];
    let path = json.to_string_lossy().into_owned();
    args.push(&path);
    args.extend(RUN);
    let out = gsrelay(&args);
    let table = String::from_utf8_lossy(&out.stdout);
    eprintln!("{table}");
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in ["splits", "not_whole", "refused", "cross_room"] {
        assert_eq!(r[key], 0, "{key}: {r}");
    }
    let whole = r["directory_whole_ms"].as_array().unwrap();
    assert!(whole.iter().all(Value::is_number), "{r}");
    let kinds = r["kinds"].as_array().unwrap();
    for kind in kinds {
        assert!(
            kind["faults"].as_u64().unwrap() >= 1,
            "each kind ran: {kind}"
        );
        let samples = kind["whole_again"]["samples"].as_u64().unwrap();
        assert!(samples >= 1, "its clients were timed: {kind}");
    }
    for node in r["memory"].as_array().unwrap() {
        assert!(node["max_rss_mb"].as_f64().unwrap() > 0.0, "{node}");
    }

    let mut schedule_args = vec!["bench", "chaos", "--schedule-only"];
    schedule_args.extend(RUN);
    let printed = gsrelay(&schedule_args);
    assert!(printed.status.success());
    let schedule: Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(schedule, r["schedule"], "the same seed, the same faults");
}
