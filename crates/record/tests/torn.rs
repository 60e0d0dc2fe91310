//! Crash safety: torn tails found and cut, corrupt segments and foreign files refused,
//! and no input at all makes the scanner panic.

mod common;

use common::{T0, generate, objects, rtp};
use gsrelay_record::{Event, FormatError, Meta, Recording, RecordingError, SegmentWriter, scan};
use proptest::prelude::*;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gsrelay-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small segment; `finish`: with its segment_end.
fn segment(finish: bool) -> Vec<u8> {
    let mut w = SegmentWriter::new("rec", "room", 0);
    w.event(T0, &Event::SegmentStarted { segment: 0 });
    for i in 0..20u16 {
        let payload = objects(&[(u64::from(i % 3), f32::from(i))]).concat();
        w.rtp(T0 + u64::from(i), i % 5 == 4, &rtp(7, i, 0, &payload))
            .unwrap();
    }
    w.event(
        T0 + 30,
        &Event::ParticipantLeft {
            session: 1,
            identity: "a".into(),
        },
    );
    if finish {
        w.finish(T0 + 40);
    }
    w.pending().to_vec()
}

/// The offsets at which each record's block starts, and the end.
fn block_starts(bytes: &[u8]) -> Vec<usize> {
    let s = scan(bytes).unwrap();
    let mut starts: Vec<usize> = s.records().map(|(off, _)| off as usize).collect();
    starts.push(bytes.len());
    starts
}

#[test]
fn every_cut_in_the_last_two_blocks_gives_the_records_before() {
    for finish in [true, false] {
        let whole = segment(finish);
        let starts = block_starts(&whole);
        let n = starts.len() - 1;
        let all: Vec<_> = scan(&whole).unwrap().records().map(|(_, r)| r).collect();
        let from = starts[n - 2];
        for cut in from..whole.len() {
            let bytes = &whole[..cut];
            let s = scan(bytes).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            // The good part ends at the last block start at or before the cut.
            let whole_blocks = starts.iter().filter(|&&b| b <= cut).count() - 1;
            assert_eq!(s.valid_len(), starts[whole_blocks], "cut at {cut}");
            assert_eq!(s.torn(), starts[whole_blocks] != cut, "cut at {cut}");
            assert!(!s.finished(), "cut at {cut}");
            let got: Vec<_> = s.records().map(|(_, r)| r).collect();
            assert_eq!(got, all[..whole_blocks], "cut at {cut}");
        }
    }
}

#[test]
fn cuts_inside_the_header_are_empty_torn_segments() {
    let whole = segment(true);
    let first_record = block_starts(&whole)[0];
    for cut in 1..first_record {
        let s = scan(&whole[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(s.records().count(), 0);
        // Good up to the last whole header block (section header, interfaces).
        assert!(s.valid_len() <= cut);
        assert_eq!(s.torn(), s.valid_len() != cut);
    }
    let empty = scan(&[]).unwrap();
    assert!(!empty.torn() && !empty.finished() && empty.valid_len() == 0);
}

#[test]
fn open_reports_and_repair_cuts_torn_tails() {
    let dir = scratch("repair");
    let g = generate(2, 4, 2);
    std::fs::write(
        dir.join("recording.json"),
        Meta::new("rec-1", "arena", "n", T0, 1).to_json(),
    )
    .unwrap();
    std::fs::write(dir.join("000000.pcapng"), &g.segments[0]).unwrap();
    let last = &g.segments[1];
    // The writer died 100 bytes short of the end: inside a block.
    let torn = &last[..last.len() - 100];
    std::fs::write(dir.join("000001.pcapng"), torn).unwrap();
    let valid = scan(torn).unwrap().valid_len();
    assert!(valid < torn.len());

    let rec = Recording::open(&dir).unwrap();
    assert_eq!(rec.segments.len(), 2);
    assert!(rec.segments[0].finished);
    assert_eq!(rec.segments[0].torn_bytes, 0);
    assert!(!rec.segments[1].finished);
    assert_eq!(rec.segments[1].torn_bytes, (torn.len() - valid) as u64);
    assert_eq!(rec.segments[1].bytes, torn.len() as u64);
    assert_eq!(
        std::fs::metadata(dir.join("000001.pcapng")).unwrap().len(),
        torn.len() as u64,
        "open changes nothing"
    );
    assert!(rec.duration_ns() > 3 * common::SEC);

    let fixed = Recording::repair(&dir).unwrap();
    assert_eq!(fixed.segments[1].torn_bytes, 0);
    assert_eq!(
        std::fs::read(dir.join("000001.pcapng")).unwrap(),
        &torn[..valid]
    );
    let mut out = Vec::new();
    let n = fixed.export_pcapng(&mut out).unwrap();
    assert_eq!(n as usize, g.segments[0].len() + valid);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn repair_rewrites_a_torn_gz() {
    let dir = scratch("repair-gz");
    let whole = segment(false);
    std::fs::write(
        dir.join("recording.json"),
        Meta::new("rec", "room", "n", T0, 1).to_json(),
    )
    .unwrap();
    let path = dir.join("000000.pcapng");
    std::fs::write(&path, &whole[..whole.len() - 3]).unwrap();
    // compress_segment refuses it (not finished), so gzip it by hand, as a tool might.
    assert!(matches!(
        gsrelay_record::compress_segment(&path),
        Err(RecordingError::NotFinished { .. })
    ));
    let gz = dir.join("000000.pcapng.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &whole[..whole.len() - 3]).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let rec = Recording::open(&dir).unwrap();
    assert!(rec.segments[0].torn_bytes > 0);
    let rec = Recording::repair(&dir).unwrap();
    assert_eq!(rec.segments[0].torn_bytes, 0);
    assert_eq!(
        rec.read_segment(0).unwrap().len(),
        block_starts(&whole).iter().rev().nth(1).copied().unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_changed_byte_is_corruption_not_a_torn_tail() {
    let whole = segment(true);
    let starts = block_starts(&whole);
    // A byte inside the fifth record's packet: its record hash fails, but the segment
    // still ends with its segment_end.
    let mut flipped = whole.clone();
    flipped[starts[5] + 60] ^= 0x40;
    assert!(matches!(scan(&flipped), Err(FormatError::Corrupt { .. })));

    // The same byte with the record's own hash made to match: only the segment's
    // checksum tells.
    let mut forged = flipped.clone();
    let block = starts[5];
    let total = u32::from_le_bytes(forged[block + 4..block + 8].try_into().unwrap()) as usize;
    let captured = u32::from_le_bytes(forged[block + 20..block + 24].try_into().unwrap()) as usize;
    let data = block + 28..block + 28 + captured;
    let crc = crc32fast::hash(&forged[data]);
    let hash_at = block + total - 4 - 4 - 8 + 5; // option header, then algorithm byte
    forged[hash_at..hash_at + 4].copy_from_slice(&crc.to_le_bytes());
    let Err(FormatError::Corrupt { expected, actual }) = scan(&forged) else {
        panic!("a forged record passed")
    };
    assert_ne!(expected, actual);

    let dir = scratch("corrupt");
    std::fs::write(
        dir.join("recording.json"),
        Meta::new("rec", "room", "n", T0, 1).to_json(),
    )
    .unwrap();
    std::fs::write(dir.join("000000.pcapng"), &forged).unwrap();
    let err = Recording::open(&dir).unwrap_err();
    assert!(err.to_string().contains("000000.pcapng"), "{err}");
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert!(
        Recording::repair(&dir).is_err(),
        "repair does not cut a corrupt segment"
    );
    assert_eq!(std::fs::read(dir.join("000000.pcapng")).unwrap(), forged);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn foreign_files_are_errors() {
    assert_eq!(
        scan(b"hello, world, this is not pcapng").unwrap_err(),
        FormatError::Foreign
    );
    // A classic pcap file header.
    let pcap = [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(scan(&pcap).unwrap_err(), FormatError::Foreign);
    assert_eq!(scan(b"x").unwrap_err(), FormatError::Foreign);
    let mut bad_version = segment(true);
    bad_version[12] = 2;
    assert!(matches!(scan(&bad_version), Err(FormatError::BadHeader(_))));
    let mut big_endian = segment(true);
    big_endian[8..12].copy_from_slice(&0x1A2B_3C4Du32.to_be_bytes());
    assert!(matches!(scan(&big_endian), Err(FormatError::BadHeader(_))));

    let dir = scratch("foreign");
    std::fs::write(
        dir.join("recording.json"),
        Meta::new("rec", "room", "n", T0, 1).to_json(),
    )
    .unwrap();
    std::fs::write(
        dir.join("000000.pcapng"),
        b"GIF89a, certainly not a capture",
    )
    .unwrap();
    let err = Recording::open(&dir).unwrap_err();
    assert!(
        err.to_string().contains("000000.pcapng") && err.to_string().contains("not a pcapng"),
        "{err}"
    );
    std::fs::write(dir.join("000000.pcapng"), segment(true)).unwrap();
    std::fs::write(dir.join("000002.pcapng"), segment(true)).unwrap();
    let err = Recording::open(&dir).unwrap_err();
    assert!(
        matches!(err, RecordingError::MissingSegment { index: 1, .. }),
        "{err}"
    );
    std::fs::write(dir.join("recording.json"), b"{\"version\":1").unwrap();
    let err = Recording::open(&dir).unwrap_err();
    assert!(err.to_string().contains("recording.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Scans and reads everything; the point is that it returns.
fn exercise(bytes: &[u8]) {
    if let Ok(s) = scan(bytes) {
        assert!(s.valid_len() <= bytes.len());
        for (off, _) in s.records() {
            assert!((off as usize) < s.valid_len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        exercise(&bytes);
        // The same bytes behind a good header and interfaces.
        let mut framed = SegmentWriter::new("r", "r", 0).pending().to_vec();
        framed.extend_from_slice(&bytes);
        exercise(&framed);
    }

    #[test]
    fn mutated_segments_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        huge in any::<prop::sample::Index>(),
    ) {
        let mut bytes = segment(true);
        for (at, v) in edits {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        // A block length of nearly 4 GB somewhere.
        let i = huge.index(bytes.len() / 4) * 4;
        let mut with_huge = bytes.clone();
        with_huge[i..i + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        exercise(&with_huge);
        bytes.truncate(cut.index(bytes.len() + 1));
        exercise(&bytes);
    }
}
