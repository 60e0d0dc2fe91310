//! RTP over QUIC against an independent stack: `tests/interop/roq_peer.py` on aioquic
//! (installed by `scripts/test.sh`) joins over HTTP, connects with ALPN `roq`, pins the
//! certificate, presents its token and frames RoQ itself. It publishes Head1 objects in
//! datagrams to a Rust UDP/SRTP subscriber, and subscribes with a FIR to receive the
//! snapshot of a Rust UDP publisher's objects.

mod support;

use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::serve::Server;
use gsrelay::wire::{self, Dialect, Object};
use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;
use support::moving_head;
use support::server::{PUBLISH, SUBSCRIBE, base, start, token};
use support::tools::tool;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/roq_peer.py");

/// How long the peer or a packet may take.
const WAIT: Duration = Duration::from_secs(20);

/// Starts the aioquic peer in `mode` for `room` with the extra `args`.
fn peer(
    server: &Server,
    mode: &str,
    room: &str,
    rights: gsrelay::token::Rights,
    args: &[String],
) -> Child {
    Command::new(tool("python3"))
        .arg(PEER)
        .args([mode, &base(server), &token(room, rights), room])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start python3 (scripts/test.sh installs aioquic into .venv)")
}

/// The peer's stdout lines until it exits, which it must do successfully.
async fn lines(mut child: Child) -> Vec<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout).lines();
    let mut out = Vec::new();
    let read = async {
        while let Some(line) = reader.next_line().await.expect("peer output") {
            out.push(line);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the peer finishes in time");
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("exit")
        .expect("wait");
    assert!(
        status.success(),
        "roq_peer.py failed: {status}; output {out:?}"
    );
    out
}

#[tokio::test]
async fn an_aioquic_publisher_reaches_a_udp_srtp_subscriber() {
    let server = start().await;
    let mut sub = Client::join(
        &base(&server),
        &token("interop", SUBSCRIBE),
        "interop",
        JoinOptions::default(),
    )
    .await
    .unwrap();
    sub.send_rr().await.unwrap();
    let object = moving_head(42, 3.5);
    let payload = wire::encode(std::slice::from_ref(&object), Dialect::default()).unwrap();
    let child = peer(
        &server,
        "publish",
        "interop",
        PUBLISH,
        &[hex::encode(&payload), "20".into()],
    );

    let mut received = 0;
    let mut ssrcs = BTreeSet::new();
    while received < 10 {
        match sub.recv(WAIT).await.unwrap() {
            Some(Received::Rtp { ssrc, payload, .. }) => {
                assert_eq!(
                    wire::decode(&payload, Dialect::default()).unwrap(),
                    vec![object.clone()]
                );
                ssrcs.insert(ssrc);
                received += 1;
            }
            Some(Received::Rtcp(_)) => {}
            None => panic!("no RTP from the aioquic publisher"),
        }
    }
    let out = lines(child).await;
    let announced: u32 = out
        .iter()
        .find_map(|l| l.strip_prefix("ssrc "))
        .expect("the peer names its SSRC")
        .parse()
        .unwrap();
    assert_eq!(
        ssrcs,
        BTreeSet::from([announced]),
        "forwarded with the publisher's SSRC"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_aioquic_subscriber_gets_the_snapshot_it_asks_for_with_a_fir() {
    let server = start().await;
    let mut publisher = Client::join(
        &base(&server),
        &token("snap", PUBLISH),
        "snap",
        JoinOptions::default(),
    )
    .await
    .unwrap();
    let objects: Vec<Object> = (0..50).map(|id| moving_head(id, id as f32)).collect();
    for chunk in objects.chunks(5) {
        publisher.send_objects(chunk).await.unwrap();
    }
    // Let the relay cache them: a UDP subscriber joining now sees all 50 in its snapshot.
    let mut probe = Client::join(
        &base(&server),
        &token("snap", SUBSCRIBE),
        "snap",
        JoinOptions::default(),
    )
    .await
    .unwrap();
    let relay_ssrc = probe.relay_ssrc();
    probe.send_fir(relay_ssrc).await.unwrap();
    let mut cached = BTreeSet::new();
    while cached.len() < objects.len() {
        let (_, got) = probe
            .recv_objects(WAIT)
            .await
            .unwrap()
            .expect("snapshot for the probe");
        cached.extend(got.into_iter().filter_map(|o| match o {
            Object::Head1(h) => Some(h.id),
            _ => None,
        }));
    }

    let child = peer(&server, "subscribe", "snap", SUBSCRIBE, &[]);
    let out = lines(child).await;
    let mut seen = BTreeSet::new();
    for line in &out {
        let mut parts = line.split(' ');
        assert_eq!(parts.next(), Some("rtp"));
        let ssrc: u32 = parts.next().unwrap().parse().unwrap();
        assert_eq!(ssrc, publisher.ssrc());
        let payload = hex::decode(parts.next().unwrap()).unwrap();
        for o in wire::decode(&payload, Dialect::default()).unwrap() {
            assert!(objects.contains(&o), "an object the publisher sent: {o:?}");
            if let Object::Head1(h) = o {
                seen.insert(h.id);
            }
        }
    }
    assert!(
        !seen.is_empty(),
        "the snapshot carried the publisher's objects"
    );
    server.shutdown().await.unwrap();
}
