//! A running relay against an independent client: `tests/interop/libsrtp_client.py` joins
//! over real HTTP and speaks SRTP through libsrtp (the Python package `pylibsrtp`), with
//! RTP and RTCP framed by hand. Rust [`Client`]s are the other side.
//!
//! - libsrtp publishes, a Rust subscriber receives: the relay unprotects libsrtp's SRTP.
//! - A Rust client publishes, libsrtp subscribes (SRTCP RR, SRTCP FIR): libsrtp unprotects
//!   the relay's SRTP snapshot.
//!
//! Both for both SRTP profiles, and on both SRTP backends: the relay's sessions run on the
//! one the process picks (accelerated where the CPU has VAES and AVX-512), and
//! [`relay_libsrtp_on_the_portable_backend`] runs both tests again in a child process with
//! `GSRELAY_SRTP_PORTABLE=1`. Without `pylibsrtp` these tests fail with the install hint,
//! unless `GSRELAY_SKIP_LIBSRTP=1` is set (then they say loudly that they skipped).

mod support;

use gsrelay::client::{Client, JoinOptions, Received};
use gsrelay::rtp::SrtpProfile;
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::{self, Dialect, Hand1, Head1, Loc2, Object, Rot2};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;
use support::server::{PUBLISH, SUBSCRIBE, base, start, token};
use support::{libsrtp, srtp_backend};
use tokio::process::Command;

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/interop/libsrtp_client.py"
);
const ROOM: &str = "interop";
/// How long one packet may take to arrive.
const WAIT: Duration = Duration::from_secs(5);
/// How long the Python client may run in all.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

async fn rust_client(server: &Server, rights: Rights, profile: SrtpProfile) -> Client {
    let opts = JoinOptions {
        profile: Some(profile),
        ..JoinOptions::default()
    };
    Client::join(&base(server), &token(ROOM, rights), ROOM, opts)
        .await
        .unwrap()
}

/// Runs the Python client to completion and returns its JSON lines; panics with its stderr
/// when it fails or overruns [`CLIENT_TIMEOUT`].
async fn run_client(args: &[String]) -> Vec<Value> {
    let child = Command::new("python3")
        .arg(CLIENT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start python3");
    let output = tokio::time::timeout(CLIENT_TIMEOUT, child.wait_with_output())
        .await
        .expect("libsrtp_client.py timed out")
        .expect("wait for libsrtp_client.py");
    assert!(
        output.status.success(),
        "libsrtp_client.py {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn head(id: u64, x: f32) -> Object {
    Object::Head1(Head1 {
        id,
        time: 1234,
        location: Loc2 {
            x,
            y: 1.625,
            z: -0.5,
            vx: 0.25,
            ..Loc2::default()
        },
        rotation: Rot2 {
            sj: 0.5,
            ..Rot2::default()
        },
        ipd: Some(0.0625),
        ..Head1::default()
    })
}

fn hand(id: u64, left: bool, y: f32) -> Object {
    Object::Hand1(Hand1 {
        id,
        time: 1234,
        left,
        location: Loc2 {
            x: if left { -0.25 } else { 0.25 },
            y,
            ..Loc2::default()
        },
        ..Hand1::default()
    })
}

fn payload(objects: &[Object]) -> Vec<u8> {
    wire::encode(objects, Dialect::Draft01).unwrap()
}

fn hex_field(v: &Value, field: &str) -> Vec<u8> {
    hex::decode(
        v[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {v}")),
    )
    .unwrap()
}

#[tokio::test]
async fn relay_unprotects_libsrtp_publisher() {
    if !libsrtp::available("relay/libsrtp interop test") {
        return;
    }
    srtp_backend::expected();
    for profile in SrtpProfile::ALL {
        let server = start().await;
        let mut sub = rust_client(&server, SUBSCRIBE, profile).await;
        // The relay reads its socket in order: the RR latches before libsrtp's RTP arrives.
        sub.send_rr().await.unwrap();
        let sent = [
            payload(&[head(1, 0.5)]),
            payload(&[head(1, 0.75), hand(2, true, 1.0), hand(3, false, 1.25)]),
        ];
        let mut args = vec![
            "publish".to_owned(),
            base(&server),
            ROOM.to_owned(),
            token(ROOM, PUBLISH),
            profile.name().to_owned(),
        ];
        args.extend(sent.iter().map(hex::encode));
        let lines = run_client(&args).await;
        assert_eq!(lines[0]["profile"], profile.name(), "{lines:?}");
        let publisher = u32::try_from(lines[0]["ssrc"].as_u64().unwrap()).unwrap();
        assert_eq!(lines.len(), 1 + sent.len(), "{lines:?}");

        let mut last_seq = None;
        for (i, want) in sent.iter().enumerate() {
            match sub.recv(WAIT).await.unwrap() {
                Some(Received::Rtp {
                    ssrc, seq, payload, ..
                }) => {
                    assert_eq!(ssrc, publisher, "{profile} packet {i}");
                    assert_eq!(
                        hex::encode(&payload),
                        hex::encode(want),
                        "{profile} packet {i}"
                    );
                    if let Some(last) = last_seq {
                        assert_eq!(seq, u16::wrapping_add(last, 1), "{profile} packet {i}");
                    }
                    last_seq = Some(seq);
                }
                other => panic!("{profile} packet {i}: expected RTP, got {other:?}"),
            }
        }
        assert_eq!(
            server
                .metrics
                .dropped
                .with_label_values(&["auth_failed"])
                .get(),
            0,
            "{profile}"
        );
        assert_eq!(sub.rejected(), 0, "{profile}");
        server.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn libsrtp_unprotects_relay_snapshots() {
    if !libsrtp::available("relay/libsrtp interop test") {
        return;
    }
    srtp_backend::expected();
    for profile in SrtpProfile::ALL {
        let server = start().await;
        let mut publisher = rust_client(&server, PUBLISH, profile).await;
        let mut early = rust_client(&server, SUBSCRIBE, profile).await;
        early.send_rr().await.unwrap();
        let first = [head(1, 0.5), hand(2, true, 1.0), hand(3, false, 1.25)];
        let update = [head(1, 2.5), hand(3, false, 1.5)];
        publisher.send_objects(&first).await.unwrap();
        publisher.send_objects(&update).await.unwrap();
        // Once the early subscriber has both packets the relay has stored them.
        for want in [&first[..], &update[..]] {
            assert_eq!(
                early.recv_objects(WAIT).await.unwrap(),
                Some((publisher.ssrc(), want.to_vec())),
                "{profile}"
            );
        }
        let latest: HashMap<u64, Object> = first
            .iter()
            .chain(&update)
            .map(|o| (o.id().unwrap(), o.clone()))
            .collect();

        // One FIR naming the publisher's stream, one naming the relay (every stream).
        let args = vec![
            "subscribe".to_owned(),
            base(&server),
            ROOM.to_owned(),
            token(ROOM, SUBSCRIBE),
            profile.name().to_owned(),
            publisher.ssrc().to_string(),
            "relay".to_owned(),
        ];
        let lines = run_client(&args).await;
        assert_eq!(lines[0]["profile"], profile.name(), "{lines:?}");
        let rtp: Vec<&Value> = lines[1..]
            .iter()
            .filter(|l| l.get("payload").is_some())
            .collect();
        assert_eq!(rtp.len(), 2, "one snapshot per FIR: {lines:?}");
        let mut last_seq = None;
        for (i, line) in rtp.iter().enumerate() {
            assert_eq!(
                line["ssrc"].as_u64(),
                Some(u64::from(publisher.ssrc())),
                "{profile} snapshot {i}"
            );
            let got: HashMap<u64, Object> =
                wire::decode(&hex_field(line, "payload"), Dialect::Draft01)
                    .unwrap()
                    .into_iter()
                    .map(|o| (o.id().unwrap(), o))
                    .collect();
            assert_eq!(got, latest, "{profile} snapshot {i}");
            let seq = u16::try_from(line["seq"].as_u64().unwrap()).unwrap();
            if let Some(last) = last_seq {
                assert_eq!(seq, u16::wrapping_add(last, 1), "{profile} snapshot {i}");
            }
            last_seq = Some(seq);
        }
        assert_eq!(server.metrics.snapshots.get(), 2, "{profile}");
        server.shutdown().await.unwrap();
    }
}

/// Both tests above, again with the relay on the portable SRTP backend (a no-op in that
/// re-run itself).
#[test]
fn relay_libsrtp_on_the_portable_backend() {
    if libsrtp::available("relay/libsrtp interop test") {
        srtp_backend::rerun_on_the_portable_backend(&[
            "relay_unprotects_libsrtp_publisher",
            "libsrtp_unprotects_relay_snapshots",
        ]);
    }
}
