//! Recording and replay on a whole relay: a recordings directory of a test's own, the
//! server API's calls, and a recording read back whole.

use gsrelay::record::{Event, Record, Recording, scan};
use gsrelay::serve::{self as server, Server};
use gsrelay::token::Tokens;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::path::{Path, PathBuf};

use super::server::{ADMIN, SECRET, base, config, now};

/// A directory of its own under the system's temporary one, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("gsrelay-{name}-{}-{}", std::process::id(), now()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub async fn start(dir: &Path, auto: &[&str]) -> Server {
    let cfg = gsrelay::serve::ServeConfig {
        recording_dir: dir.to_path_buf(),
        record_rooms: auto.iter().map(|s| s.to_string()).collect(),
        recording_checkpoint_secs: 1,
        // One shard: a replay and the room it recorded share one, as they do on a
        // one-core relay (SSRCs are per shard).
        shards: 1,
        ..config(1)
    };
    server::start(cfg).await.unwrap()
}

pub fn relay_admin() -> String {
    Tokens::new(SECRET.as_bytes())
        .unwrap()
        .issue("*", "backend", ADMIN, 600, now())
        .unwrap()
}

pub async fn call(server: &Server, method: Method, path: &str, token: &str) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .request(method, format!("{}{path}", base(server)))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Every record of a recording, in order: `(at_ns, record)` with owned bytes.
pub fn records(dir: &Path) -> Vec<(u64, Owned)> {
    let rec = Recording::open(dir).unwrap();
    let mut out = Vec::new();
    for seg in &rec.segments {
        let bytes = rec.read_segment(seg.index).unwrap();
        let s = scan(&bytes).unwrap();
        for (_, r) in s.records() {
            out.push(match r {
                Record::Rtp {
                    at_ns,
                    checkpoint,
                    packet,
                } => (at_ns, Owned::Rtp(checkpoint, packet.to_vec())),
                Record::Event { at_ns, event } => (at_ns, Owned::Event(event)),
            });
        }
    }
    out
}

#[derive(Debug)]
pub enum Owned {
    Rtp(bool, Vec<u8>),
    Event(Event),
}
