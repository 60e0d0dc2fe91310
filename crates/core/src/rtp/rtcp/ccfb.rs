//! RTP Control Protocol Feedback for Congestion Control (RFC 8888): per RTP packet, whether
//! it arrived, its ECN marking and when, relative to the report's timestamp.
//!
//! Wire form (RTPFB, FMT 11): sender SSRC; then per media stream its SSRC, `begin_seq`,
//! `num_reports` and that many 16-bit metric words (R, ECN, 13-bit arrival time offset
//! in 1/1024 s), padded to 32 bits; then the 32-bit report timestamp (the middle of an
//! NTP time, 1/65536 s).

use super::{PT_RTPFB, RtcpError, RtcpWriteError};

/// FMT of congestion control feedback.
pub const FMT_CCFB: u8 = 11;
/// Arrival time offset meaning "too early to express" (RFC 8888 §3.1).
pub const ATO_OVERRANGE: u16 = 0x1fff;

/// One packet's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcfbReport {
    /// The media stream.
    pub ssrc: u32,
    /// The packet's sequence number.
    pub seq: u16,
    /// Whether it arrived.
    pub received: bool,
    /// Its ECN codepoint.
    pub ecn: u8,
    /// How long before the report timestamp it arrived, in 1/1024 s.
    pub ato: u16,
}

/// A decoded CCFB packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ccfb {
    /// Who reports.
    pub sender_ssrc: u32,
    /// Every packet reported, block after block.
    pub reports: Vec<CcfbReport>,
    /// When the report was made: the middle 32 bits of the reporter's NTP time.
    pub report_timestamp: u32,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}

/// Decodes a CCFB body (after the common header, padding stripped).
pub fn decode(body: &[u8]) -> Result<Ccfb, RtcpError> {
    let malformed = RtcpError::Malformed {
        packet_type: PT_RTPFB,
        count: FMT_CCFB,
    };
    let sender_ssrc = be32(body, 0).ok_or(malformed)?;
    let ts_at = body
        .len()
        .checked_sub(4)
        .filter(|t| *t >= 4)
        .ok_or(malformed)?;
    let report_timestamp = be32(body, ts_at).ok_or(malformed)?;
    let mut reports = Vec::new();
    let mut at = 4;
    while at < ts_at {
        let ssrc = be32(body, at).ok_or(malformed)?;
        let begin = be16(body, at + 4).ok_or(malformed)?;
        let n = usize::from(be16(body, at + 6).ok_or(malformed)?);
        at += 8;
        let end = at + (2 * n).next_multiple_of(4);
        if end > ts_at {
            return Err(malformed);
        }
        for i in 0..n {
            let word = be16(body, at + 2 * i).ok_or(malformed)?;
            reports.push(CcfbReport {
                ssrc,
                seq: begin.wrapping_add(i as u16),
                received: word & 0x8000 != 0,
                ecn: ((word >> 13) & 0x3) as u8,
                ato: word & 0x1fff,
            });
        }
        at = end;
    }
    Ok(Ccfb {
        sender_ssrc,
        reports,
        report_timestamp,
    })
}

/// Appends a CCFB for one stream: packets `begin_seq..` with `(received, ato)` each.
pub fn write(
    out: &mut Vec<u8>,
    sender_ssrc: u32,
    media_ssrc: u32,
    begin_seq: u16,
    metrics: &[(bool, u16)],
    report_timestamp: u32,
) -> Result<usize, RtcpWriteError> {
    if metrics.is_empty() {
        return Err(RtcpWriteError::NoEntries);
    }
    let n = u16::try_from(metrics.len()).map_err(|_| RtcpWriteError::TooLong)?;
    let body_len = 4 + 8 + (2 * metrics.len()).next_multiple_of(4) + 4;
    let words = u16::try_from(body_len / 4).map_err(|_| RtcpWriteError::TooLong)?;
    let start = out.len();
    out.extend_from_slice(&[2 << 6 | FMT_CCFB, PT_RTPFB]);
    out.extend_from_slice(&words.to_be_bytes());
    out.extend_from_slice(&sender_ssrc.to_be_bytes());
    out.extend_from_slice(&media_ssrc.to_be_bytes());
    out.extend_from_slice(&begin_seq.to_be_bytes());
    out.extend_from_slice(&n.to_be_bytes());
    for &(received, ato) in metrics {
        let word = u16::from(received) << 15 | (ato & 0x1fff);
        out.extend_from_slice(&word.to_be_bytes());
    }
    out.resize(start + 4 + body_len - 4, 0);
    out.extend_from_slice(&report_timestamp.to_be_bytes());
    Ok(out.len() - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_padding_and_wrap() {
        let mut b = Vec::new();
        let metrics = [(true, 10), (false, 0), (true, ATO_OVERRANGE)];
        write(&mut b, 7, 9, 65_535, &metrics, 0xabcd_0123).unwrap();
        assert_eq!(b.len() % 4, 0);
        let c = decode(&b[4..]).unwrap();
        assert_eq!(c.sender_ssrc, 7);
        assert_eq!(c.report_timestamp, 0xabcd_0123);
        let seqs: Vec<u16> = c.reports.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [65_535, 0, 1]);
        assert!(c.reports[0].received && !c.reports[1].received);
        assert_eq!(c.reports[2].ato, ATO_OVERRANGE);
    }

    #[test]
    fn a_block_past_the_timestamp_is_malformed() {
        let mut b = Vec::new();
        write(&mut b, 7, 9, 0, &[(true, 1); 4], 1).unwrap();
        // Claim 40 reports in the block.
        b[4 + 10..4 + 12].copy_from_slice(&40u16.to_be_bytes());
        assert!(decode(&b[4..]).is_err());
        assert!(decode(&[0; 6]).is_err());
    }
}
