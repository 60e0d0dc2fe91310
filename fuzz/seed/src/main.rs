//! Writes the fuzz targets' seed corpora, one directory per target under OUT:
//! `gsrelay-fuzz-seed VECTORS OUT` where VECTORS is the interop vector directory
//! (`../shared/interop/gse` from the project root). Nothing here is committed: the seeds
//! are rebuilt from the vectors and from payloads built like the tests build them.
//!
//! - wire: every payload of the reference implementation's object, concatenated, draft-01
//!   and malformed vectors, and an object of every type encoded here, in both dialects;
//! - rtp: those payloads behind RTP headers with CSRCs, both extension forms and padding;
//! - rtcp: a packet from every RTCP writer, and one compound of all of them;
//! - srtp: those RTP and RTCP packets protected with the target's fixed keys (raw mode),
//!   and as plaintext for the round-trip mode, both profiles;
//! - interest: the JSON examples of docs/interest.md and a few edge cases;
//! - link_wire: a frame of every kind of a link between nodes, and a datagram carrying
//!   an RTP packet;
//! - core: none; its input is a structure `arbitrary` reads, which the fuzzer builds up.

use gsrelay_core::rtp::ccfb;
use gsrelay_core::rtp::packet::append_padding;
use gsrelay_core::rtp::rtcp::{self, FirEntry, ReceptionReport, SenderInfo, TmmbEntry};
use gsrelay_core::rtp::{ExtensionElement, ExtensionForm, RtpHeader, SrtpProfile, WriteExtension};
use gsrelay_core::wire::json::Hex;
use gsrelay_core::wire::{self, Dialect, Object};
use gsrelay_fuzz::{dialect_selector, srtp_client, srtp_flags};
use std::path::{Path, PathBuf};
use std::{env, fs};

/// The interop files whose vectors are payloads (the others are single primitives).
const PAYLOAD_FILES: [&str; 5] = [
    "objects",
    "concatenated",
    "draft01_objects_not_in_gse",
    "malformed",
    "tags",
];

fn main() -> Result<(), String> {
    let args: Vec<String> = env::args().skip(1).collect();
    let [vectors, out] = args.as_slice() else {
        return Err("usage: gsrelay-fuzz-seed VECTORS_DIR OUT_DIR".into());
    };
    let out = Corpus(PathBuf::from(out));
    let payloads = interop_payloads(Path::new(vectors))?;
    let built = built_payloads();
    for (d, p) in payloads.iter().chain(&built) {
        let mut input = vec![dialect_selector(*d)];
        input.extend_from_slice(p);
        out.write("wire", &input)?;
    }
    let rtp = rtp_packets(&built);
    for p in &rtp {
        out.write("rtp", p)?;
    }
    let rtcp = rtcp_packets();
    for p in &rtcp {
        out.write("rtcp", p)?;
    }
    srtp_seeds(&out, &rtp, &rtcp)?;
    for json in interest_examples()? {
        out.write("interest", json.as_bytes())?;
    }
    for seed in roq_seeds(&rtp) {
        out.write("roq", &seed)?;
    }
    for seed in link_seeds(&rtp)? {
        out.write("link_wire", &seed)?;
    }
    println!("seeds written under {}", out.0.display());
    Ok(())
}

/// RoQ inputs: a stream (flow identifier, then frames of real RTP packets) and a datagram
/// with a four-byte flow identifier. The target reads each input both ways.
fn roq_seeds(rtp: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut stream = vec![0x40, 0x41];
    for p in rtp.iter().filter(|p| p.len() <= 300).take(4) {
        stream.extend_from_slice(&[0x40 | (p.len() >> 8) as u8, p.len() as u8]);
        stream.extend_from_slice(p);
    }
    let mut datagram = vec![0x80, 0x00, 0x12, 0x34];
    datagram.extend_from_slice(rtp.first().map_or(&[][..], Vec::as_slice));
    vec![stream, datagram]
}

/// Link inputs: each control frame, length first, and a datagram of a real RTP packet.
fn link_seeds(rtp: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    use gsrelay_server::internal::link_wire::{self as w, Control, Datagram, Hello};
    let frames = [
        Control::Hello(Hello {
            node: "node-a".into(),
            ssrcs: vec![0x1234_5678, 0x9abc_def0],
            proof: [7; w::PROOF_LEN],
        }),
        Control::Open {
            from_shard: 0,
            to_shard: 1,
            session: 42,
            room: "arena".into(),
        },
        Control::Close {
            from_shard: 1,
            to_shard: 0,
            session: 42,
        },
        Control::Refuse {
            to_shard: 0,
            session: 7,
        },
    ];
    let mut seeds = Vec::new();
    for f in &frames {
        let mut out = Vec::new();
        w::write_control(f, &mut out).map_err(|e| e.to_string())?;
        seeds.push(out);
    }
    let d = Datagram {
        from_shard: 0,
        to_shard: 1,
        session: 42,
        class: gsrelay_core::rtp::PacketClass::Rtp,
    };
    let mut head = [0u8; w::DATAGRAM_HEADER];
    w::write_datagram_header(&d, &mut head);
    let mut datagram = head.to_vec();
    datagram.extend_from_slice(rtp.first().map_or(&[][..], Vec::as_slice));
    seeds.push(datagram);
    Ok(seeds)
}

/// A directory of corpora; each seed is named by its content, so reruns overwrite.
struct Corpus(PathBuf);

impl Corpus {
    fn write(&self, target: &str, bytes: &[u8]) -> Result<(), String> {
        let dir = self.0.join(target);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("seed-{:016x}", fnv1a(bytes)));
        fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every payload of the interop vectors, once per dialect.
fn interop_payloads(dir: &Path) -> Result<Vec<(Dialect, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for name in PAYLOAD_FILES {
        let path = dir.join(format!("{name}.json"));
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let vectors = doc["vectors"].as_array().cloned().unwrap_or_default();
        for v in vectors {
            let Some(bytes) = v["hex"].as_str().and_then(|h| hex::decode(h).ok()) else {
                continue;
            };
            for d in [Dialect::Draft01, Dialect::Gse] {
                out.push((d, bytes.clone()));
            }
        }
    }
    if out.is_empty() {
        return Err(format!("no payload vectors under {}", dir.display()));
    }
    Ok(out)
}

/// An object of every type, as the tests build them, encoded in each dialect that has it.
fn built_payloads() -> Vec<(Dialect, Vec<u8>)> {
    let loc = wire::Loc2 {
        x: 1.5,
        y: -2.0,
        z: 0.25,
        vx: 0.5,
        ..Default::default()
    };
    let objects = vec![
        Object::Head1(wire::Head1 {
            id: 1,
            time: 5,
            location: loc,
            ipd: Some(0.063),
            ..Default::default()
        }),
        Object::Hand1(wire::Hand1 {
            id: 2,
            left: true,
            location: loc,
            ..Default::default()
        }),
        Object::Hand2(Box::default()),
        Object::Object1(wire::Object1 {
            id: 3,
            parent: Some(1),
            ..Default::default()
        }),
        Object::Object2(wire::Object2 {
            id: 4,
            parent: Some(3),
            ..Default::default()
        }),
        Object::Mesh1(Default::default()),
        Object::Mesh2(Default::default()),
        Object::GameControl1(wire::GameControl1 {
            id: 5,
            buttons: -3,
            ..Default::default()
        }),
        Object::ThreeDof1(Default::default()),
        Object::SixDof1(wire::SixDof1 {
            id: 6,
            pointer: Some(Default::default()),
            ..Default::default()
        }),
        Object::HeadIpd1(wire::HeadIpd1 {
            ipd: 0.06,
            extra: Hex(Vec::new()),
        }),
        Object::Unknown(wire::Unknown {
            tag: 5000,
            data: Hex(vec![7, 1, 2, 3]),
        }),
    ];
    let mut out = Vec::new();
    for d in [Dialect::Draft01, Dialect::Gse] {
        let mut all = Vec::new();
        for o in &objects {
            if let Ok(bytes) = wire::encode(std::slice::from_ref(o), d) {
                all.extend_from_slice(&bytes);
                out.push((d, bytes));
            }
        }
        out.push((d, all));
    }
    out
}

/// The payloads behind a plain header, and a few behind every header feature.
fn rtp_packets(payloads: &[(Dialect, Vec<u8>)]) -> Vec<Vec<u8>> {
    let one_byte = [
        ExtensionElement {
            id: 1,
            data: &[0xaa],
        },
        ExtensionElement {
            id: 14,
            data: &[1; 16],
        },
    ];
    let two_byte = [ExtensionElement {
        id: 200,
        data: &[2; 20],
    }];
    let plain = RtpHeader {
        marker: false,
        payload_type: 96,
        sequence_number: 1000,
        timestamp: 90_000,
        ssrc: 0x1234_5678,
        csrcs: &[],
        extension: None,
    };
    let headers = [
        plain,
        RtpHeader {
            marker: true,
            csrcs: &[1, 2, 3],
            extension: Some(WriteExtension::Elements {
                form: ExtensionForm::OneByte,
                app_bits: 0,
                elements: &one_byte,
            }),
            ..plain
        },
        RtpHeader {
            extension: Some(WriteExtension::Elements {
                form: ExtensionForm::TwoByte,
                app_bits: 3,
                elements: &two_byte,
            }),
            ..plain
        },
        RtpHeader {
            extension: Some(WriteExtension::Raw {
                profile: 0x1234,
                data: &[9; 8],
            }),
            ..plain
        },
    ];
    let mut out = Vec::new();
    for (i, (_, payload)) in payloads.iter().enumerate() {
        let header = headers[i % headers.len()];
        let mut p = Vec::new();
        if header.append_to(&mut p).is_err() {
            continue;
        }
        p.extend_from_slice(payload);
        if i % 3 == 0 {
            // Padding is optional decoration: a packet without it is still a seed.
            let _ = append_padding(&mut p, 4);
        }
        out.push(p);
    }
    out
}

/// Appends one RTCP packet.
type Writer<'a> = Box<dyn Fn(&mut Vec<u8>) -> Result<usize, rtcp::RtcpWriteError> + 'a>;

/// A packet from every RTCP writer, and their compound.
fn rtcp_packets() -> Vec<Vec<u8>> {
    let reports = [ReceptionReport {
        ssrc: 7,
        fraction_lost: 3,
        total_lost: 10,
        last_sequence_number: 5000,
        jitter: 20,
        last_sender_report: 1,
        delay: 2,
    }];
    let info = SenderInfo {
        ntp_time: 1 << 40,
        rtp_time: 90_000,
        packet_count: 10,
        octet_count: 1000,
    };
    let tmmb = [TmmbEntry {
        ssrc: 9,
        bitrate_bps: 300_000,
        overhead: 40,
    }];
    let fir = [FirEntry {
        ssrc: 9,
        sequence_number: 4,
    }];
    let ccfb_metrics = [(true, 10), (false, 0), (true, ccfb::ATO_OVERRANGE)];
    let writers: Vec<Writer> = vec![
        Box::new(|o| rtcp::write_sr(o, 1, info, &reports)),
        Box::new(|o| rtcp::write_rr(o, 1, &reports)),
        Box::new(|o| rtcp::write_sdes_cname(o, 1, b"player@example")),
        Box::new(|o| rtcp::write_bye(o, &[1, 2])),
        Box::new(|o| rtcp::write_pli(o, 1, 9)),
        Box::new(|o| rtcp::write_fir(o, 1, &fir)),
        Box::new(|o| rtcp::write_nack(o, 1, 9, &[100, 101, 117, 300])),
        Box::new(|o| rtcp::write_tmmbr(o, 1, &tmmb)),
        Box::new(|o| rtcp::write_tmmbn(o, 1, &tmmb)),
        Box::new(|o| ccfb::write(o, 1, 9, 65_535, &ccfb_metrics, 0x1234_5678)),
    ];
    let mut out = Vec::new();
    let mut compound = Vec::new();
    for write in &writers {
        let mut p = Vec::new();
        if write(&mut p).is_ok() {
            compound.extend_from_slice(&p);
            out.push(p);
        }
    }
    out.push(compound);
    out
}

/// Protected packets for the raw mode, plaintext for the round-trip mode.
fn srtp_seeds(out: &Corpus, rtp: &[Vec<u8>], rtcp: &[Vec<u8>]) -> Result<(), String> {
    for profile in SrtpProfile::ALL {
        let gcm = if profile == SrtpProfile::AeadAes128Gcm {
            srtp_flags::GCM
        } else {
            0
        };
        for (packets, class) in [(rtp, 0), (rtcp, srtp_flags::RTCP)] {
            // One client session per profile and class, so indexes advance like a stream's.
            let mut client = srtp_client(profile);
            for p in packets {
                let mut protected = p.clone();
                let sealed = if class == 0 {
                    client.protect_rtp(&mut protected)
                } else {
                    client.protect_rtcp(&mut protected)
                };
                if sealed.is_err() {
                    continue;
                }
                out.write("srtp", &[&[gcm | class], &protected[..]].concat())?;
                out.write(
                    "srtp",
                    &[&[gcm | class | srtp_flags::PROTECT_FIRST], &p[..]].concat(),
                )?;
            }
        }
    }
    Ok(())
}

/// The JSON examples of docs/interest.md, and edge cases around the validation.
fn interest_examples() -> Result<Vec<String>, String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/interest.md");
    let text = fs::read_to_string(&doc).map_err(|e| format!("{}: {e}", doc.display()))?;
    let mut out: Vec<String> = text
        .split("```json")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .map(str::to_owned)
        .collect();
    out.extend(
        [
            "{}",
            r#"{"echo":true,"streams":{"deny":[0]},"types":{"allow":[1,"head1"]}}"#,
            r#"{"area":{"half_extents":[1,2,3],"exit_half_extents":[2,3,4],"avatar":7}}"#,
            r#"{"area":{"radius":1e-3},"rates":[{"within":1,"max_hz":1e3},{"max_hz":0.5}]}"#,
            r#"{"delivery":{"mode":"aggregated","max_delay_ms":0}}"#,
            r#"{"delivery":{"mode":"per_stream","max_delay_ms":5}}"#,
            r#"{"prediction":{"tolerance":0,"tolerance_per_meter":0,"rotation_tolerance_deg":0,"heartbeat_hz":30}}"#,
        ]
        .map(str::to_owned),
    );
    Ok(out)
}
