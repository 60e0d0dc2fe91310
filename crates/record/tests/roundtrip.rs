//! Writer -> scan: every record kind comes back as written.

mod common;

use common::{MS, T0, objects, rtp};
use gsrelay_record::{Event, FormatError, MAX_RTP, Record, SegmentWriter, scan};

fn every_kind() -> Vec<(u64, Event)> {
    vec![
        Event::RecordingStarted {
            recording: "r".into(),
            room: "room \"quoted\" ü".into(),
            node: "n".into(),
            checkpoint_secs: 5,
        },
        Event::SegmentStarted { segment: 3 },
        Event::ParticipantJoined {
            session: 7,
            identity: "alice".into(),
            metadata: Some("{\"team\":1}".into()),
        },
        Event::ParticipantJoined {
            session: 8,
            identity: "bob".into(),
            metadata: None,
        },
        Event::ParticipantLeft {
            session: 8,
            identity: "bob".into(),
        },
        Event::StreamStarted {
            ssrc: 0xdead_beef,
            session: 7,
        },
        Event::StreamEnded {
            ssrc: 0xdead_beef,
            session: 7,
        },
        Event::Ownership {
            ssrc: 1,
            object: 42,
            holder: Some(2),
        },
        Event::Ownership {
            ssrc: 1,
            object: 42,
            holder: None,
        },
        Event::Checkpoint { packets: 1 },
        Event::Gap {
            from_ns: T0,
            to_ns: T0 + 5,
            reason: "node died".into(),
        },
        Event::Dropped {
            records: 12,
            reason: "queue full".into(),
        },
        Event::RecordingStopped {
            reason: "api".into(),
        },
        Event::Other(serde_json::json!({"type": "from_the_future", "x": [1, 2]})),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, e)| (T0 + i as u64 * MS, e))
    .collect()
}

#[test]
fn every_record_kind_round_trips() {
    let mut w = SegmentWriter::new("r", "room", 3);
    let events = every_kind();
    let payload = objects(&[(1, 1.5), (2, 2.5)]).concat();
    let live = rtp(0x1234_5678, 65_535, 90_000, &payload);
    let ckpt = rtp(0x1234_5678, 0, 0, &payload);
    for (at, e) in &events {
        w.event(*at, e);
    }
    w.rtp(T0 + 100 * MS, false, &live).unwrap();
    w.rtp(T0 + 101 * MS, true, &ckpt).unwrap();
    // Every length modulo 4, so that every padding is exercised.
    for n in 0..4 {
        w.rtp(T0 + 102 * MS, false, &rtp(9, n, 0, &vec![0xab; n as usize]))
            .unwrap();
    }
    let records_before_end = w.records();
    w.finish(T0 + 200 * MS);
    assert_eq!(w.records(), records_before_end + 1);
    let bytes = w.pending().to_vec();
    assert_eq!(w.bytes(), bytes.len() as u64);
    assert_eq!(bytes.len() % 4, 0);

    let s = scan(&bytes).unwrap();
    assert!(s.finished());
    assert!(!s.torn());
    assert_eq!(s.valid_len(), bytes.len());
    let got: Vec<_> = s.records().map(|(_, r)| r).collect();
    assert_eq!(got.len() as u64, records_before_end + 1);
    for (i, (at, e)) in events.iter().enumerate() {
        assert_eq!(
            got[i],
            Record::Event {
                at_ns: *at,
                event: e.clone()
            }
        );
    }
    let n = events.len();
    assert_eq!(
        got[n],
        Record::Rtp {
            at_ns: T0 + 100 * MS,
            checkpoint: false,
            packet: &live
        }
    );
    assert_eq!(
        got[n + 1],
        Record::Rtp {
            at_ns: T0 + 101 * MS,
            checkpoint: true,
            packet: &ckpt
        }
    );
    for k in 0..4usize {
        let Record::Rtp { packet, .. } = &got[n + 2 + k] else {
            panic!("record {} is not RTP", n + 2 + k)
        };
        assert_eq!(packet.len(), 12 + k);
    }
    let Record::Event {
        event: Event::SegmentEnd { records, crc32c },
        ..
    } = &got[n + 6]
    else {
        panic!("no segment_end last: {:?}", got[n + 6])
    };
    assert_eq!(*records, records_before_end);
    assert_eq!(crc32c.len(), 8);
}

#[test]
fn offsets_point_at_blocks() {
    let mut w = SegmentWriter::new("r", "room", 0);
    w.rtp(T0, false, &rtp(1, 1, 1, b"")).unwrap();
    w.event(T0, &Event::SegmentStarted { segment: 0 });
    let bytes = w.pending().to_vec();
    let s = scan(&bytes).unwrap();
    for (off, _) in s.records() {
        let off = off as usize;
        assert_eq!(&bytes[off..off + 4], &6u32.to_le_bytes(), "an EPB at {off}");
    }
    assert!(!s.finished());
}

#[test]
fn writer_refuses_what_does_not_fit() {
    let mut w = SegmentWriter::new("r", "room", 0);
    let big = vec![0u8; MAX_RTP + 1];
    assert_eq!(
        w.rtp(T0, false, &big),
        Err(FormatError::TooLong(MAX_RTP + 1))
    );
    let biggest = rtp(1, 1, 1, &vec![7u8; MAX_RTP - 12]);
    w.rtp(T0, false, &biggest).unwrap();
    w.finish(T0);
    assert_eq!(w.rtp(T0, false, b"x"), Err(FormatError::Finished));
    let before = w.bytes();
    w.event(T0, &Event::SegmentStarted { segment: 1 });
    w.finish(T0);
    assert_eq!(w.bytes(), before, "nothing after segment_end");
    let bytes = w.pending().to_vec();
    let s = scan(&bytes).unwrap();
    assert!(s.finished());
    let (_, Record::Rtp { packet, .. }) = s.records().next().unwrap() else {
        panic!("not RTP")
    };
    assert_eq!(packet, &biggest[..]);
}

#[test]
fn consume_keeps_counting() {
    let mut w = SegmentWriter::new("r", "room", 0);
    let mut file = Vec::new();
    for i in 0..1000u16 {
        w.rtp(T0 + u64::from(i), false, &rtp(1, i, 0, &[1, 2, 3]))
            .unwrap();
        if i % 7 == 0 {
            file.extend_from_slice(w.pending());
            w.consume();
        }
    }
    w.finish(T0 + 1000);
    file.extend_from_slice(w.pending());
    w.consume();
    assert!(w.pending().is_empty());
    assert_eq!(w.bytes(), file.len() as u64);
    let s = scan(&file).unwrap();
    assert!(s.finished());
    assert_eq!(s.records().count(), 1001);
}

#[test]
fn unknown_and_extended_events_are_kept() {
    let future =
        serde_json::json!({"type": "stream_started", "ssrc": 5, "session": 6, "codec": "x"});
    let parsed: Event = serde_json::from_value(future).unwrap();
    assert_eq!(
        parsed,
        Event::StreamStarted {
            ssrc: 5,
            session: 6
        }
    );
    let odd = serde_json::json!({"type": "stream_started", "ssrc": "not a number"});
    let parsed: Event = serde_json::from_value(odd.clone()).unwrap();
    assert_eq!(parsed, Event::Other(odd));
}
