//! The real tshark reads what the writer writes, and what export writes: no malformed
//! packet, the RTP fields as written, the events dissected as JSON.

mod common;

use common::{Generated, generate};
use gsrelay_record::{Meta, Recording};
use std::path::{Path, PathBuf};
use std::process::Command;

/// tshark, or `None` (with the reason printed) when it is not installed.
fn tshark() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("tshark"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!("SKIPPED: tshark is not on PATH (scripts/test.sh installs it)");
    }
    found
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gsrelay-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One line per packet: interface, dst port, ssrc, seq, malformed, protocols, expert
/// severity, IPv4 header checksum status (1: good).
fn dissect(tshark: &Path, file: &Path) -> Vec<Vec<String>> {
    let out = Command::new(tshark)
        .arg("-r")
        .arg(file)
        .args(["-d", "udp.port==5004,rtp", "-d", "udp.port==5005,rtp"])
        .args(["-o", "ip.check_checksum:TRUE"])
        .args(["-T", "fields", "-E", "separator=|"])
        .args([
            "-e",
            "frame.interface_id",
            "-e",
            "udp.dstport",
            "-e",
            "rtp.ssrc",
        ])
        .args([
            "-e",
            "rtp.seq",
            "-e",
            "_ws.malformed",
            "-e",
            "frame.protocols",
        ])
        .args(["-e", "_ws.expert.severity", "-e", "ip.checksum.status"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tshark failed on {}: {stderr}",
        file.display()
    );
    // Its warning about running as root is about the machine, not the file.
    let complaints: Vec<_> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Running as user"))
        .collect();
    assert!(
        complaints.is_empty(),
        "tshark complained on {}: {complaints:?}",
        file.display()
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}

/// Checks tshark's view of `file` against what was generated.
fn check(tshark: &Path, file: &Path, g: &Generated) {
    let rows = dissect(tshark, file);
    assert!(!rows.is_empty());
    let mut live = g.live.iter();
    let mut events = 0;
    let mut checkpoint_packets = 0;
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[4], "", "frame {} malformed: {r:?}", i + 1);
        assert_eq!(r[6], "", "frame {} has an expert note: {r:?}", i + 1);
        match r[0].as_str() {
            "0" => {
                assert!(r[5].ends_with("ip:udp:rtp"), "frame {}: {r:?}", i + 1);
                assert_eq!(r[7], "1", "frame {}: IPv4 header checksum", i + 1);
                if r[1] == "5005" {
                    checkpoint_packets += 1;
                    continue;
                }
                assert_eq!(r[1], "5004");
                let &(_, ssrc, seq) = live.next().expect("more live packets than written");
                assert_eq!(r[2], format!("0x{ssrc:08x}"), "frame {}", i + 1);
                assert_eq!(r[3], seq.to_string(), "frame {}", i + 1);
            }
            "1" => {
                assert!(r[5].contains("exported_pdu:json"), "frame {}: {r:?}", i + 1);
                events += 1;
            }
            other => panic!("frame {} on interface {other}", i + 1),
        }
    }
    assert!(
        live.next().is_none(),
        "live packets missing in tshark's view"
    );
    assert!(checkpoint_packets > 0);
    assert!(events >= g.events.len());
}

#[test]
fn tshark_reads_segments_and_export() {
    let Some(tshark) = tshark() else { return };
    let g = generate(3, 6, 2);
    assert_eq!(g.segments.len(), 3);
    let dir = scratch("tshark");
    let meta = Meta::new("rec-1", "arena", "node-a", common::T0, 1);
    std::fs::write(dir.join("recording.json"), meta.to_json()).unwrap();
    for (i, s) in g.segments.iter().enumerate() {
        std::fs::write(dir.join(format!("{i:06}.pcapng")), s).unwrap();
    }
    // One segment alone: its live packets are a prefix of the whole.
    let first = dissect(&tshark, &dir.join("000000.pcapng"));
    assert!(first.iter().all(|r| r[4].is_empty()));
    // The second compressed: Wireshark reads gzip natively.
    gsrelay_record::compress_segment(&dir.join("000001.pcapng")).unwrap();
    let gz = dissect(&tshark, &dir.join("000001.pcapng.gz"));
    assert!(!gz.is_empty() && gz.iter().all(|r| r[4].is_empty()));

    let rec = Recording::open(&dir).unwrap();
    let export = dir.join("export.pcapng");
    let mut f = std::fs::File::create(&export).unwrap();
    let n = rec.export_pcapng(&mut f).unwrap();
    drop(f);
    assert_eq!(n, g.segments.iter().map(|s| s.len() as u64).sum::<u64>());
    check(&tshark, &export, &g);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tshark_dissects_events_as_json() {
    let Some(tshark) = tshark() else { return };
    let g = generate(2, 1, 10);
    let dir = scratch("json");
    let file = dir.join("000000.pcapng");
    std::fs::write(&file, &g.segments[0]).unwrap();
    let out = Command::new(&tshark)
        .arg("-r")
        .arg(&file)
        .args([
            "-Y",
            "frame.interface_id == 1",
            "-T",
            "fields",
            "-e",
            "json.member_with_value",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("type:recording_started"), "{text}");
    assert!(text.contains("room:arena"), "{text}");
    assert!(text.contains("type:stream_started"), "{text}");
    assert!(text.contains("type:segment_end"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tshark_reads_the_blocks_and_their_hashes() {
    let Some(tshark) = tshark() else { return };
    let g = generate(2, 1, 10);
    let dir = scratch("blocks");
    let file = dir.join("000000.pcapng");
    std::fs::write(&file, &g.segments[0]).unwrap();
    // Wireshark's own pcapng dissector, reading the file as a file format.
    let out = Command::new(&tshark)
        .arg("-r")
        .arg(&file)
        .args(["-X", "read_format:MIME Files Format", "-T", "fields"])
        .args([
            "-e",
            "pcapng.block.type",
            "-e",
            "pcapng.options.option.data.packet.hash.algorithm",
        ])
        .args(["-e", "_ws.malformed"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let row: Vec<&str> = text.lines().next().unwrap().split('\t').collect();
    let types: Vec<&str> = row[0].split(',').collect();
    let epbs = types.iter().filter(|t| **t == "0x00000006").count();
    assert_eq!(types[0], "0x0a0d0d0a");
    assert_eq!(&types[1..3], ["0x00000001", "0x00000001"]);
    assert_eq!(epbs, types.len() - 3);
    let hashes: Vec<&str> = row[1].split(',').collect();
    assert_eq!(hashes.len(), epbs);
    assert!(hashes.iter().all(|h| *h == "2"), "{hashes:?}");
    assert_eq!(row[2], "", "malformed");
    std::fs::remove_dir_all(&dir).unwrap();
}
