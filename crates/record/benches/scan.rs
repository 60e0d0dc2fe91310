//! Writes a 100 MB segment of 200-byte RTP packets (an event every 100 packets), then
//! scans it (every record's CRC32, the segment's CRC-32C) and reads its records; prints
//! each pass's speed. Plain timing, best of five: one pass is long enough to time.

use gsrelay_record::{Event, Record, SegmentWriter, scan};
use std::time::Instant;

const TARGET: u64 = 100 * 1024 * 1024;

fn main() {
    let mut packet = vec![0x80u8, 96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
    packet.resize(200, 0x5a);
    let event = Event::Ownership {
        ssrc: 7,
        object: 42,
        holder: Some(9),
    };
    let mut best_write = f64::MAX;
    let mut bytes = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut w = SegmentWriter::new("bench", "room", 0);
        let mut out = Vec::with_capacity(TARGET as usize + 1024 * 1024);
        let mut n = 0u64;
        while w.bytes() < TARGET {
            packet[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            w.rtp(1_795_000_000_000_000_000 + n * 1000, false, &packet)
                .expect("fits");
            if n.is_multiple_of(100) {
                w.event(1_795_000_000_000_000_000 + n * 1000, &event);
            }
            if w.pending().len() > 1 << 20 {
                out.extend_from_slice(w.pending());
                w.consume();
            }
            n += 1;
        }
        w.finish(1_795_000_000_000_000_000 + n * 1000);
        out.extend_from_slice(w.pending());
        best_write = best_write.min(start.elapsed().as_secs_f64());
        bytes = out;
    }
    let mb = bytes.len() as f64 / 1e6;
    let records = scan(&bytes).expect("a segment").records().count();
    println!("segment: {mb:.1} MB, {records} records");
    println!("write:   {:.0} MB/s", mb / best_write);

    let mut best_scan = f64::MAX;
    let mut best_read = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let s = scan(&bytes).expect("a segment");
        assert!(s.finished());
        best_scan = best_scan.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let mut sum = 0usize;
        for (_, r) in s.records() {
            if let Record::Rtp { packet, .. } = r {
                sum += packet.len();
            }
        }
        assert!(sum > 0);
        best_read = best_read.min(start.elapsed().as_secs_f64());
    }
    println!(
        "scan:    {:.0} MB/s (checks every record's CRC32 and the CRC-32C)",
        mb / best_scan
    );
    println!(
        "records: {:.0} MB/s (iterating, events parsed)",
        mb / best_read
    );
}
