//! RTP over QUIC framing (draft-ietf-avtcore-rtp-over-quic), sans-I/O: QUIC
//! variable-length integers (RFC 9000 §16), the flow identifier that prefixes every
//! datagram, and the (length, packet) frames of a unidirectional stream.
//!
//! Nothing here allocates or panics on input; the QUIC shell and the client share it, and
//! the fuzz target `roq` drives it with arbitrary bytes.

/// The ALPN of RTP over QUIC.
pub const ALPN: &str = "roq";

/// What the WebTransport ends agree on: RoQ framing inside a WebTransport session on the
/// relay's QUIC endpoint.
pub mod webtransport {
    /// The path of the WebTransport endpoint in join answers' `url`; a CONNECT to any other
    /// path is answered 404.
    pub const PATH: &str = "/webtransport";

    /// What every datagram of a session starts with: the quarter stream id of its CONNECT
    /// stream. The server takes the CONNECT on the first bidirectional stream it accepts on a
    /// fresh connection, which is the client's first, stream 0; so the id is 0 and its varint
    /// the single byte 0.
    pub const DATAGRAM_HEADER: &[u8] = &[0];

    /// The `url` of a join answer for the QUIC endpoint at `authority` (`host:port`).
    pub fn url(authority: &str) -> String {
        format!("https://{authority}{PATH}")
    }
}

/// The largest value a QUIC varint holds (2^62 - 1).
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// Reads a varint at the start of `buf`: its value and its length in bytes, or `None`
/// when `buf` is shorter than the varint says.
pub fn read_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for b in bytes.get(1..).unwrap_or_default() {
        v = (v << 8) | u64::from(*b);
    }
    Some((v, len))
}

/// How many bytes [`write_varint`] uses for `v` (values above [`VARINT_MAX`] are clamped).
pub fn varint_len(v: u64) -> usize {
    match v {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Appends `v` (clamped to [`VARINT_MAX`]) in its shortest encoding.
pub fn write_varint(v: u64, out: &mut impl Extend<u8>) {
    let v = v.min(VARINT_MAX);
    let len = varint_len(v);
    let tag = (len.trailing_zeros() as u64) << (8 * len - 2);
    let bytes = (v | tag).to_be_bytes();
    out.extend(bytes.get(8 - len..).unwrap_or_default().iter().copied());
}

/// Splits a DATAGRAM frame's payload into its flow identifier and the RTP/RTCP packet.
pub fn split_datagram(datagram: &[u8]) -> Option<(u64, &[u8])> {
    let (flow, at) = read_varint(datagram)?;
    Some((flow, datagram.get(at..)?))
}

/// Why a stream's bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame announced more bytes than the receiver accepts in one packet.
    #[error("a stream frame is larger than the packet limit")]
    Oversized,
    /// A zero-length frame: RoQ carries no empty packets.
    #[error("a stream frame is empty")]
    Empty,
}

/// Incremental reader of one RoQ unidirectional stream: the flow identifier, then
/// (varint length, packet) frames. The caller appends what the stream delivered to its
/// buffer and calls [`StreamReader::next`] until it answers `Ok(None)` (more bytes
/// needed), then drops the consumed prefix ([`StreamReader::consumed`]).
#[derive(Debug, Clone)]
pub struct StreamReader {
    flow: Option<u64>,
    max_packet: usize,
    pos: usize,
}

impl StreamReader {
    /// A reader refusing frames longer than `max_packet` bytes.
    pub fn new(max_packet: usize) -> Self {
        Self {
            flow: None,
            max_packet,
            pos: 0,
        }
    }

    /// The stream's flow identifier, once read.
    pub fn flow(&self) -> Option<u64> {
        self.flow
    }

    /// The next complete packet in `buf` (which always starts at the stream bytes not yet
    /// consumed), as a range of `buf`.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<std::ops::Range<usize>>, FrameError> {
        let rest = buf.get(self.pos..).unwrap_or_default();
        if self.flow.is_none() {
            let Some((flow, n)) = read_varint(rest) else {
                return Ok(None);
            };
            self.flow = Some(flow);
            self.pos += n;
            return self.next(buf);
        }
        let Some((len, n)) = read_varint(rest) else {
            return Ok(None);
        };
        if len == 0 {
            return Err(FrameError::Empty);
        }
        let len = usize::try_from(len).map_err(|_| FrameError::Oversized)?;
        if len > self.max_packet {
            return Err(FrameError::Oversized);
        }
        let start = self.pos + n;
        if buf.len() < start + len {
            return Ok(None);
        }
        self.pos = start + len;
        Ok(Some(start..start + len))
    }

    /// Bytes of `buf` fully read; the caller drops them and the reader starts over at 0.
    pub fn consumed(&mut self) -> usize {
        std::mem::take(&mut self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_length() {
        for v in [
            0,
            37,
            63,
            64,
            15_293,
            16_383,
            16_384,
            494_878_333,
            VARINT_MAX,
        ] {
            let mut out = Vec::new();
            write_varint(v, &mut out);
            assert_eq!(out.len(), varint_len(v));
            assert_eq!(read_varint(&out), Some((v, out.len())));
        }
        // RFC 9000 §A.1 examples.
        assert_eq!(read_varint(&[0x7b, 0xbd]), Some((15_293, 2)));
        assert_eq!(
            read_varint(&[0x9d, 0x7f, 0x3e, 0x7d]),
            Some((494_878_333, 4))
        );
        assert_eq!(read_varint(&[0x9d, 0x7f]), None);
    }

    #[test]
    fn a_stream_split_anywhere_yields_the_same_packets() {
        let mut stream = Vec::new();
        write_varint(300, &mut stream);
        for p in [&b"abc"[..], &[7; 100][..]] {
            write_varint(p.len() as u64, &mut stream);
            stream.extend_from_slice(p);
        }
        for cut in 0..stream.len() {
            let mut r = StreamReader::new(1500);
            let mut buf = stream[..cut].to_vec();
            let mut got = Vec::new();
            while let Some(range) = r.next(&buf).expect("valid") {
                got.push(buf[range].to_vec());
            }
            let n = r.consumed();
            buf.drain(..n);
            buf.extend_from_slice(&stream[cut..]);
            while let Some(range) = r.next(&buf).expect("valid") {
                got.push(buf[range].to_vec());
            }
            assert_eq!(r.flow(), Some(300));
            assert_eq!(got, vec![b"abc".to_vec(), vec![7; 100]], "cut at {cut}");
        }
    }

    #[test]
    fn oversized_and_empty_frames_are_refused() {
        let mut r = StreamReader::new(10);
        assert_eq!(r.next(&[0, 11]), Err(FrameError::Oversized));
        let mut r = StreamReader::new(10);
        assert_eq!(r.next(&[0, 0]), Err(FrameError::Empty));
    }
}
