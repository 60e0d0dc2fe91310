//! Recording when things go wrong (`docs/recording.md`): the relay killed while it
//! records (the built binary, `kill -KILL`), and a full disk (a tmpfs of a few hundred
//! kilobytes, mounted by the test: it runs as root, as CI does). The recording keeps
//! what it wrote, up to its last complete record; the room goes on.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::record::Recording;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::moving_head;
use support::recording::{TempDir, call, records, relay_admin};
use support::serve::{BIN, Serve};
use support::server::{ADMIN, PUBLISH, SUBSCRIBE, metric, token};
use support::transports::{WAIT, next_objects, player, until_flowing};

/// Every recording directory under `dir`.
fn recording_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes of the segment files under `dir`.
fn segment_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pcapng"))
                .map(|e| e.metadata().map_or(0, |m| m.len()))
                .sum()
        })
        .unwrap_or(0)
}

fn cli(args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn a_relay_killed_while_recording_leaves_a_recording_that_opens() {
    let tmp = TempDir::new("rec-kill");
    let dir = tmp.0.to_str().unwrap();
    let mut relay = Serve::dev(&[
        "--recording-dir",
        dir,
        "--record-rooms",
        "crash-*",
        "--recording-checkpoint-secs",
        "1",
    ]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let t = relay.token("crash-1", "alice", PUBLISH);
    let mut alice = rt
        .block_on(Client::join(
            &relay.base,
            &t,
            "crash-1",
            JoinOptions::default(),
        ))
        .unwrap();
    // Publishes until the recording has written a good deal, then the relay dies
    // mid-stream, as a crash finds it.
    let deadline = std::time::Instant::now() + WAIT * 4;
    let mut i = 0u32;
    let rec = loop {
        rt.block_on(alice.send_objects(&[moving_head(7, i as f32)]))
            .unwrap();
        i += 1;
        if let Some(rec) = recording_dirs(&tmp.0).first()
            && segment_bytes(rec) > 64 * 1024
        {
            break rec.clone();
        }
        assert!(std::time::Instant::now() < deadline, "nothing recorded");
        std::thread::sleep(Duration::from_micros(500));
    };
    relay.serve.signal("KILL");
    assert!(relay.serve.wait_exit(WAIT).is_some());

    // It opens up to its last complete record; repair cuts whatever is torn.
    let opened = Recording::open(&rec).unwrap();
    assert_eq!(opened.meta.stopped_ns, None, "no stop was written");
    let before = records(&rec);
    assert!(before.len() > 100, "{} records", before.len());
    let (ok, text) = cli(&["recording", "repair", rec.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("not stopped"), "{text}");
    let repaired = Recording::open(&rec).unwrap();
    assert!(repaired.segments.iter().all(|s| s.torn_bytes == 0));
    assert_eq!(
        records(&rec).len(),
        before.len(),
        "repair keeps every complete record"
    );
    // And exports to a file tshark reads whole.
    let out = tmp.0.join("crash.pcapng");
    let (ok, text) = cli(&[
        "recording",
        "export",
        rec.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    let tshark = Command::new("tshark")
        .arg("-r")
        .arg(&out)
        .args([
            "-d",
            "udp.port==5004,rtp",
            "-d",
            "udp.port==5005,rtp",
            "-T",
            "fields",
            "-e",
            "_ws.malformed",
        ])
        .output()
        .expect("tshark (scripts/test.sh installs it)");
    assert!(tshark.status.success());
    let lines = String::from_utf8(tshark.stdout).unwrap();
    assert_eq!(lines.lines().count(), before.len());
    assert!(lines.lines().all(str::is_empty), "malformed packets");
}

/// A tmpfs of `bytes` at `dir`, unmounted when dropped.
struct Tmpfs<'a>(&'a Path);

impl<'a> Tmpfs<'a> {
    fn mount(dir: &'a Path, bytes: u64) -> Self {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs needs root (CI runs as root)");
        Self(dir)
    }
}

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[tokio::test]
async fn a_full_disk_stops_the_recording_and_never_the_room() {
    let tmp = TempDir::new("rec-full");
    let disk = tmp.0.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let _tmpfs = Tmpfs::mount(&disk, 256 * 1024);
    let server = support::recording::start(&disk, &[]).await;
    let mut alice = player(&server, "full", "alice", PUBLISH).await;
    let mut bob = player(&server, "full", "bob", SUBSCRIBE).await;
    until_flowing(&mut alice, &mut bob).await;
    let admin = token("full", ADMIN);
    let (status, started) = call(
        &server,
        reqwest::Method::POST,
        "/v1/rooms/full/recording",
        &admin,
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    let path = format!("/v1/recordings/{id}");
    // Publishes (each update forwarded) until the disk is full and the recording says so.
    let deadline = tokio::time::Instant::now() + WAIT * 4;
    let mut i = 0;
    let view = loop {
        i += 1;
        alice
            .send_objects(&[moving_head(7, i as f32)])
            .await
            .unwrap();
        let (_, _, objects) = next_objects(&mut bob).await;
        assert!(!objects.is_empty());
        if i % 50 == 0 {
            let (_, view) = call(&server, reqwest::Method::GET, &path, &admin).await;
            if view["state"] == "failed" {
                break view;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the disk never filled"
        );
    };
    let reason = view["stop_reason"].as_str().unwrap();
    assert!(reason.starts_with("disk_error"), "{reason}");
    assert_eq!(
        metric(
            &server,
            "gsrelay_recordings_failed_total{reason=\"disk_error\"}"
        )
        .await,
        Some(1.0)
    );
    assert_eq!(
        metric(&server, "gsrelay_recordings_active").await,
        Some(0.0)
    );
    // The room goes on.
    for j in 0..10 {
        let x = 10_000.0 + j as f32;
        alice.send_objects(&[moving_head(7, x)]).await.unwrap();
        loop {
            let (_, _, objects) = next_objects(&mut bob).await;
            if objects.contains(&moving_head(7, x)) {
                break;
            }
        }
    }
    // What it wrote opens, up to its last complete record.
    assert!(records(&disk.join(&id)).len() > 10);
    let (status, list) = call(
        &server,
        reqwest::Method::GET,
        "/v1/recordings",
        &relay_admin(),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    assert_eq!(list["recordings"][0]["state"], "failed");
}
