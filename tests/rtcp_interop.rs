//! The relay's RTCP judged by independent implementations, on loopback with plain RTP
//! (`--insecure-plain-rtp` sessions): GStreamer's RTP stack (`rtpbin`, driven by
//! `tests/interop/gst_rtp.py`) as a subscriber and as a publisher, and Wireshark's
//! dissectors (`tshark`) reading every RTCP packet the relay sent.
//!
//! Needs Debian's gstreamer1.0-tools, gstreamer1.0-plugins-good, python3-gi,
//! gir1.2-gstreamer-1.0 and tshark (scripts/test.sh installs them). The GObject script runs
//! under the system python (`GSRELAY_GST_PYTHON`, default `/usr/bin/python3`), which has
//! the `gi` bindings the tools' venv lacks.

mod support;

use gsrelay::client::{Client, Received};
use gsrelay::internal::Metrics;
use gsrelay::internal::command::{JoinAnswer, JoinCommand, TransportRequest};
use gsrelay::internal::shard::{self, ShardTask};
use gsrelay::internal::udp::UdpConfig;
use gsrelay::rtp::rtcp;
use gsrelay::rtp::{PacketClass, RtpHeader, classify};
use gsrelay::wire::{self, Dialect, Head1, Loc2, Object};
use gsrelay::{Delivery, Interest, JoinRequest, Relay, RelayConfig};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::process::Command;
use tokio::time::{Instant, sleep, timeout};

/// The relay's least report interval here (RFC 3550 `Tmin`): short, so tests see several.
const RTCP_MIN: Duration = Duration::from_secs(1);
/// One 90 kHz tick in seconds.
const TICK: f64 = 1.0 / 90_000.0;

struct Harness {
    t: ShardTask,
    metrics: Metrics,
}

async fn relay() -> Harness {
    let metrics = Metrics::new();
    let cfg = RelayConfig {
        rtcp_min_interval: RTCP_MIN,
        ..RelayConfig::default()
    };
    let relay = Relay::new(cfg, 7);
    let udp = UdpConfig {
        insecure_plain_rtp: true,
        ..UdpConfig::new("127.0.0.1:0".parse().unwrap())
    };
    let t = shard::spawn(udp, relay, metrics.clone()).await.unwrap();
    Harness { t, metrics }
}

impl Harness {
    async fn join(&self, publish: bool, subscribe: bool, interest: Interest) -> JoinAnswer {
        let request = JoinRequest {
            room: "r".into(),
            identity: "peer".into(),
            publish,
            subscribe,
            interest,
            ..JoinRequest::default()
        };
        let cmd = JoinCommand {
            request,
            generation: 0,
            metadata: None,
            transport: TransportRequest::Rtp(None),
        };
        self.t.handle.join(cmd).await.unwrap()
    }

    fn reports(&self, kind: &str, direction: &str) -> u64 {
        self.metrics
            .rtcp_reports
            .with_label_values(&[kind, direction])
            .get()
    }
}

fn head(x: f32) -> Object {
    Object::Head1(Head1 {
        id: 1,
        time: 1,
        location: Loc2 {
            x,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

/// A loopback port free at the time of asking (GStreamer binds it next).
fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A loopback port that the session `ssrc` is latched to (by an empty RR sent from it),
/// free again for GStreamer: a receive-only rtpsession sends no RTCP before it receives
/// something, and the relay sends nothing before the session latched.
fn latched_port(ssrc: u32, relay: SocketAddr) -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut rr = Vec::new();
    rtcp::write_rr(&mut rr, ssrc, &[]).unwrap();
    s.send_to(&rr, relay).unwrap();
    s.local_addr().unwrap().port()
}

/// Runs `gst_rtp.py` with `args` and returns the JSON it prints.
async fn gst(args: &[String], limit: Duration) -> Value {
    let python = std::env::var("GSRELAY_GST_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/gst_rtp.py");
    let child = Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 with GStreamer (scripts/test.sh installs it)");
    let out = timeout(limit, child.wait_with_output())
        .await
        .expect("gst_rtp.py finished in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gst_rtp.py failed: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("gst_rtp.py output: {e}; stderr: {stderr}"));
    assert_eq!(v["errors"], Value::Array(vec![]), "GStreamer errors");
    v
}

fn common(port: u16, relay: SocketAddr, ssrc: u32) -> Vec<String> {
    vec![
        "--port".into(),
        port.to_string(),
        "--relay".into(),
        relay.to_string(),
        "--ssrc".into(),
        ssrc.to_string(),
        "--rtcp-interval".into(),
        "0.5".into(),
    ]
}

#[tokio::test]
async fn gstreamer_subscriber_sees_no_loss_sane_jitter_and_the_relays_srs() {
    let h = relay().await;
    let publisher = h.join(true, false, Interest::default()).await;
    let mut publisher = Client::from_answer(publisher, Dialect::Draft01)
        .await
        .unwrap();
    let sub = h.join(false, true, Interest::default()).await;
    let (ssrc, addr) = (sub.joined.ssrc, sub.rtp_addr().unwrap());
    let mut args = vec!["subscribe".to_owned()];
    args.extend(common(latched_port(ssrc, addr), addr, ssrc));
    args.extend(["--seconds".into(), "6".into()]);
    let gst = tokio::spawn(async move { gst(&args, Duration::from_secs(30)).await });
    // A clean 50 Hz stream for the subscriber's whole run.
    let end = Instant::now() + Duration::from_secs(6);
    let mut i = 0;
    while Instant::now() < end {
        publisher.send_objects(&[head(i as f32)]).await.unwrap();
        i += 1;
        sleep(Duration::from_millis(20)).await;
    }
    let v = gst.await.unwrap();
    let src = &v["sources"][publisher.ssrc().to_string()];
    let received = src["packets-received"]
        .as_u64()
        .unwrap_or_else(|| panic!("no stats for the stream: {v}"));
    assert!(
        received >= 100,
        "GStreamer received {received} packets: {v}"
    );
    let lost = src["packets-lost"].as_i64().unwrap();
    assert!(lost <= 0, "GStreamer counted {lost} lost: {v}");
    let jitter = src["jitter"].as_u64().unwrap() as f64 * TICK;
    assert!(jitter < 0.010, "jitter {jitter} s on loopback: {v}");
    assert_eq!(
        src["have-sr"],
        Value::Bool(true),
        "no SR reached GStreamer: {v}"
    );
    // GStreamer's own RRs (from the session's SSRC) gave the relay its round trip.
    assert!(h.reports("rr", "in") > 0);
    assert!(h.metrics.session_rtt.get_sample_count() > 0);
    let info = h.t.handle.room_info("r".into()).await.unwrap().unwrap();
    let rtt = info
        .sessions
        .iter()
        .find(|s| s.ssrc == ssrc)
        .and_then(|s| s.rtt_ms)
        .expect("the GStreamer subscriber's RTT in the room info");
    assert!((0.0..100.0).contains(&rtt), "{rtt} ms on loopback");
}

#[tokio::test]
async fn a_gstreamer_publisher_and_the_relays_view_of_it_agree() {
    let h = relay().await;
    let publisher = h.join(true, false, Interest::default()).await;
    let gst_ssrc = publisher.joined.ssrc;
    let sub = h.join(false, true, Interest::default()).await;
    let mut sub = Client::from_answer(sub, Dialect::Draft01).await.unwrap();
    sub.send_rr().await.unwrap();
    let payload = wire::encode(&[head(1.0)], Dialect::Draft01).unwrap();
    let count = 150u64;
    let first_seq = 65_500u64; // wraps: the extended highest sequence number counts a cycle
    let mut args = vec!["publish".to_owned()];
    args.extend(common(free_port(), publisher.rtp_addr().unwrap(), gst_ssrc));
    args.extend([
        "--payload".into(),
        payload.iter().map(|b| format!("{b:02x}")).collect(),
        "--count".into(),
        count.to_string(),
        "--first-seq".into(),
        first_seq.to_string(),
        "--linger".into(),
        "3".into(),
    ]);
    let gst = tokio::spawn(async move { gst(&args, Duration::from_secs(30)).await });
    let mut received = 0u64;
    let deadline = Instant::now() + Duration::from_secs(15);
    while !gst.is_finished() && Instant::now() < deadline {
        if let Some(Received::Rtp { ssrc, .. }) =
            sub.recv(Duration::from_millis(100)).await.unwrap()
        {
            assert_eq!(ssrc, gst_ssrc);
            received += 1;
        }
    }
    let v = gst.await.unwrap();
    // The relay's reports about GStreamer's stream are in the relay's source's rb-* fields.
    let own = &v["sources"][publisher.joined.relay_ssrc.to_string()];
    assert_eq!(v["sent"]["packets"].as_u64(), Some(count));
    assert_eq!(received, count, "the subscriber got every packet");
    // The relay's reception report, as GStreamer read it.
    let last = first_seq + count - 1;
    assert_eq!(own["rb-exthighestseq"].as_u64(), Some(last), "{v}");
    assert_eq!(own["rb-packetslost"].as_i64(), Some(0), "{v}");
    assert_eq!(own["rb-fractionlost"].as_u64(), Some(0), "{v}");
    assert_ne!(
        own["rb-lsr"].as_u64(),
        Some(0),
        "the relay echoed GStreamer's SR: {v}"
    );
    let rtt = own["rb-round-trip"].as_u64().unwrap() as f64 / 65536.0;
    assert!(
        rtt > 0.0 && rtt < 0.1,
        "GStreamer's RTT to the relay {rtt} s: {v}"
    );
    assert!(h.reports("sr", "in") > 0, "the relay read GStreamer's SRs");
    // The relay's SR to the subscriber counts what it was sent of GStreamer's stream.
    let sr = sub
        .sender_report(gst_ssrc)
        .expect("an SR for the forwarded stream");
    assert!(sr.packet_count > 0 && u64::from(sr.packet_count) <= received);
    assert_eq!(
        u64::from(sr.octet_count),
        u64::from(sr.packet_count) * payload.len() as u64
    );
}

/// A plain-RTP session on a raw socket, latched by an empty RR from its SSRC.
async fn raw_session(
    h: &Harness,
    publish: bool,
    subscribe: bool,
    interest: Interest,
) -> (UdpSocket, JoinAnswer) {
    let a = h.join(publish, subscribe, interest).await;
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    s.connect(a.rtp_addr().unwrap()).await.unwrap();
    let mut rr = Vec::new();
    rtcp::write_rr(&mut rr, a.joined.ssrc, &[]).unwrap();
    s.send(&rr).await.unwrap();
    (s, a)
}

/// Writes `packets` as UDP datagrams from port 5004 to 5004 in a pcap file (LINKTYPE_RAW,
/// IPv4), so tshark can read them without capture privileges.
fn write_pcap(path: &std::path::Path, packets: &[Vec<u8>]) {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65_535u32.to_le_bytes());
    f.extend_from_slice(&101u32.to_le_bytes());
    for (i, p) in packets.iter().enumerate() {
        let udp_len = 8 + p.len();
        let ip_len = 20 + udp_len;
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
        ];
        ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        let sum = ip
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum::<u32>();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        ip.extend_from_slice(&5004u16.to_be_bytes());
        ip.extend_from_slice(&5004u16.to_be_bytes());
        ip.extend_from_slice(&(udp_len as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0]);
        ip.extend_from_slice(p);
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        f.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        f.extend_from_slice(&ip);
    }
    std::fs::write(path, f).unwrap();
}

/// tshark's one-line output for `filter` over the capture, one line per matching frame.
async fn tshark(path: &std::path::Path, filter: &str) -> Vec<String> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-d", "udp.port==5004,rtcp", "-Y", filter])
        .args(["-T", "fields", "-e", "frame.number", "-e", "_ws.col.Info"])
        .output()
        .await
        .expect("tshark (scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn tshark_dissects_every_rtcp_packet_the_relay_sends() {
    let h = relay().await;
    let (publisher, p) = raw_session(&h, true, true, Interest::default()).await;
    let (sub, _) = raw_session(&h, false, true, Interest::default()).await;
    let aggregated = Interest {
        delivery: Delivery::aggregated(Some(0)),
        ..Interest::default()
    };
    let (agg, _) = raw_session(&h, false, true, aggregated).await;
    let payload = wire::encode(&[head(2.0)], Dialect::Draft01).unwrap();
    let mut rtcp_seen = Vec::new();
    let mut buf = vec![0; 2048];
    let end = Instant::now() + Duration::from_secs(4);
    let mut seq = 0u16;
    while Instant::now() < end {
        let mut pkt = Vec::new();
        let header = RtpHeader {
            marker: false,
            payload_type: 96,
            sequence_number: seq,
            timestamp: u32::from(seq) * 1800,
            ssrc: p.joined.ssrc,
            csrcs: &[],
            extension: None,
        };
        header.append_to(&mut pkt).unwrap();
        pkt.extend_from_slice(&payload);
        publisher.send(&pkt).await.unwrap();
        seq = seq.wrapping_add(1);
        if seq.is_multiple_of(50) {
            // An SR with an SDES from the publisher: its mapping and CNAME go through.
            let mut sr = Vec::new();
            let info = rtcp::SenderInfo {
                ntp_time: 0xe000_0000_0000_0000 | u64::from(seq),
                rtp_time: u32::from(seq) * 1800,
                packet_count: u32::from(seq),
                octet_count: u32::from(seq) * payload.len() as u32,
            };
            rtcp::write_sr(&mut sr, p.joined.ssrc, info, &[]).unwrap();
            rtcp::write_sdes_cname(&mut sr, p.joined.ssrc, b"publisher@loopback").unwrap();
            publisher.send(&sr).await.unwrap();
        }
        for s in [&publisher, &sub, &agg] {
            while let Ok(n) = s.try_recv(&mut buf) {
                if classify(&buf[..n]) == PacketClass::Rtcp {
                    rtcp::parse_compound(&buf[..n]).unwrap();
                    rtcp_seen.push(buf[..n].to_vec());
                }
            }
        }
        sleep(Duration::from_millis(20)).await;
    }
    let kinds = |pt: u8| rtcp_seen.iter().filter(|p| p[1] == pt).count();
    assert!(
        kinds(rtcp::PT_SR) >= 4,
        "SRs first (subscribers, aggregated)"
    );
    assert!(kinds(rtcp::PT_RR) >= 2, "RRs first (the publisher)");
    let dir = std::env::temp_dir().join(format!("gsrelay-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("relay-rtcp.pcap");
    write_pcap(&path, &rtcp_seen);
    let all = tshark(&path, "rtcp").await;
    assert_eq!(all.len(), rtcp_seen.len(), "every packet dissected as RTCP");
    let bad = tshark(&path, "_ws.malformed || _ws.expert.severity >= \"Warning\"").await;
    assert!(bad.is_empty(), "tshark flags: {bad:?}");
    let srs = tshark(&path, "rtcp.pt == 200 && rtcp.sdes.text").await;
    assert!(!srs.is_empty(), "SR compounds carry CNAMEs");
    std::fs::remove_dir_all(&dir).unwrap();
}
