//! Recording in a cluster (`docs/recording.md`, "In a cluster"): two `gsrelay serve`
//! processes sharing a real `redis-server`, a room recorded automatically and held by
//! both. It is recorded once, by the node whose name sorts first; when that node is
//! killed, the other takes the recording over and begins it with the gap.

mod support;

use gsrelay::client::{Client, JoinOptions};
use gsrelay::record::Event;
use std::path::Path;
use std::time::{Duration, Instant};
use support::cluster::{Node, linked, sees};
use support::head;
use support::recording::{Owned, TempDir, records};
use support::redis::Redis;
use support::server::{PUBLISH, SUBSCRIBE, token};

const ROOM: &str = "arena-1";

/// How long a node may take to see another's loss and take a recording over.
const TAKEOVER: Duration = Duration::from_secs(30);

async fn node(redis: &Redis, name: &str, dir: &Path) -> Node {
    let dir = dir.to_str().unwrap();
    let flags = [
        "--node-spill-sessions",
        "1",
        "--record-rooms",
        "arena-*",
        "--recording-dir",
        dir,
        "--recording-checkpoint-secs",
        "1",
    ];
    Node::start(redis, name, &flags).await
}

/// The recordings in `dir`.
fn recordings(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("recording.json").exists())
                .collect()
        })
        .unwrap_or_default();
    all.sort();
    all
}

async fn join(base: &str, rights: gsrelay::token::Rights) -> Client {
    let mut c = Client::join(base, &token(ROOM, rights), ROOM, JoinOptions::default())
        .await
        .unwrap();
    c.send_rr().await.unwrap();
    c
}

#[tokio::test]
async fn a_room_is_recorded_once_and_another_node_takes_over_with_the_gap() {
    let redis = Redis::start().await;
    let (dir_a, dir_b) = (TempDir::new("cluster-rec-a"), TempDir::new("cluster-rec-b"));
    let mut a = node(&redis, "node-a", &dir_a.0).await;
    let b = node(&redis, "node-b", &dir_b.0).await;
    linked(&[&a, &b]).await;
    // One session each: the room is on both nodes.
    let mut publisher = join(&a.base(), PUBLISH).await;
    let mut watcher = join(&b.base(), SUBSCRIBE).await;
    let deadline = Instant::now() + TAKEOVER;
    let mut x = 0.0;
    while recordings(&dir_a.0).is_empty() {
        assert!(Instant::now() < deadline, "node-a never recorded the room");
        x += 1.0;
        publisher.send_objects(&[head(7, x)]).await.unwrap();
        sees(&mut watcher, 7, x).await;
    }
    // node-b follows who records each second: two looks at it, and it records nothing.
    for _ in 0..25 {
        x += 1.0;
        publisher.send_objects(&[head(7, x)]).await.unwrap();
        sees(&mut watcher, 7, x).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recordings(&dir_b.0).is_empty(), "recorded twice");
    assert_eq!(
        b.metric("gsrelay_recordings_started_total").await,
        Some(0.0)
    );

    // node-a dies; node-b still holds the room (its watcher), and takes the recording.
    a.kill();
    let deadline = Instant::now() + TAKEOVER;
    let taken = loop {
        if let Some(r) = recordings(&dir_b.0).first() {
            break r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "node-b never took the recording over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let gap = loop {
        let found = records(&taken).into_iter().find_map(|(_, r)| match r {
            Owned::Event(Event::Gap {
                from_ns,
                to_ns,
                reason,
            }) => Some((from_ns, to_ns, reason)),
            _ => None,
        });
        if let Some(g) = found {
            break g;
        }
        assert!(Instant::now() < deadline, "no gap written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(gap.0 < gap.1, "{gap:?}");
    assert!(gap.2.contains("node-a"), "{gap:?}");
    // node-a's recording opens up to its last record.
    let killed = recordings(&dir_a.0);
    assert_eq!(killed.len(), 1);
    assert!(!records(&killed[0]).is_empty());
}
