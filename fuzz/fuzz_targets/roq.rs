//! RTP-over-QUIC framing (`gsrelay_core::roq`) on arbitrary bytes, read both as a DATAGRAM
//! payload and as a unidirectional stream delivered in two arbitrary pieces.
//!
//! Checks: no panic; a varint re-writes to the bytes it was read from when they are its
//! shortest form, and always reads back as the same value; the datagram's packet is its
//! tail; the stream yields the same packets however it is split, each within the limit.
#![no_main]

use gsrelay_core::roq::{StreamReader, read_varint, split_datagram, write_varint};
use libfuzzer_sys::fuzz_target;

/// The frame limit; small, so the fuzzer meets it.
const MAX_PACKET: usize = 300;

/// Every packet the stream yields, fed as `data[..cut]` then the rest.
fn packets(data: &[u8], cut: usize) -> (Vec<Vec<u8>>, bool) {
    let mut r = StreamReader::new(MAX_PACKET);
    let mut buf = Vec::new();
    let mut got = Vec::new();
    for piece in [&data[..cut], &data[cut..]] {
        buf.extend_from_slice(piece);
        loop {
            match r.next(&buf) {
                Ok(Some(range)) => {
                    assert!(range.len() <= MAX_PACKET && !range.is_empty());
                    got.push(buf[range].to_vec());
                }
                Ok(None) => break,
                Err(_) => return (got, true),
            }
        }
        let n = r.consumed();
        buf.drain(..n);
    }
    (got, false)
}

fuzz_target!(|data: &[u8]| {
    if let Some((v, n)) = read_varint(data) {
        let mut out = Vec::new();
        write_varint(v, &mut out);
        assert_eq!(read_varint(&out), Some((v, out.len())));
        if out.len() == n {
            assert_eq!(out, data[..n]);
        }
    }
    if let Some((_, packet)) = split_datagram(data) {
        assert!(data.ends_with(packet));
    }
    let cut = data
        .first()
        .map_or(0, |b| usize::from(*b) % (data.len() + 1));
    let whole = packets(data, data.len());
    let split = packets(data, cut);
    assert_eq!(whole, split, "the split at {cut} changes nothing");
});
