//! The pcapng blocks a segment is made of, and the synthetic IPv4/UDP and exported-PDU
//! framing around its records: the constants and the byte layouts the writer and the
//! reader share (docs/recording-format.md describes them byte by byte).

/// Section Header Block type; the same bytes in either byte order.
pub const SHB: u32 = 0x0A0D_0D0A;
/// Interface Description Block type.
pub const IDB: u32 = 1;
/// Enhanced Packet Block type.
pub const EPB: u32 = 6;
/// The byte-order magic, written little-endian.
pub const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

/// LINKTYPE_IPV4: raw IPv4, interface 0 (the RTP records).
pub const LINKTYPE_IPV4: u16 = 228;
/// LINKTYPE_WIRESHARK_UPPER_PDU: exported PDUs, interface 1 (the events).
pub const LINKTYPE_UPPER_PDU: u16 = 252;
/// Interface 0: RTP.
pub const IF_RTP: u32 = 0;
/// Interface 1: events.
pub const IF_EVENTS: u32 = 1;

/// opt_endofopt.
pub const OPT_END: u16 = 0;
/// opt_comment.
pub const OPT_COMMENT: u16 = 1;
/// shb_userappl.
pub const OPT_SHB_USERAPPL: u16 = 4;
/// if_name.
pub const OPT_IF_NAME: u16 = 2;
/// if_tsresol.
pub const OPT_IF_TSRESOL: u16 = 9;
/// epb_hash.
pub const OPT_EPB_HASH: u16 = 3;
/// epb_hash's algorithm number for CRC32.
pub const HASH_CRC32: u8 = 2;

/// EXP_PDU_TAG_END_OF_OPT.
pub const EXP_PDU_TAG_END: u16 = 0;
/// EXP_PDU_TAG_DISSECTOR_NAME.
pub const EXP_PDU_TAG_DISSECTOR_NAME: u16 = 12;
/// The exported-PDU header every event record starts with: the dissector name "json"
/// (tag 12, length 4) and the end tag (0, length 0), big-endian as Wireshark reads them.
pub const EVENT_PDU_HEADER: [u8; 12] = [0, 12, 0, 4, b'j', b's', b'o', b'n', 0, 0, 0, 0];

/// Length of the synthetic IPv4 header (no options).
pub const IPV4_LEN: usize = 20;
/// Length of the UDP header.
pub const UDP_LEN: usize = 8;
/// The source address of every RTP record: 198.18.0.1 (RFC 2544 benchmarking range, so
/// it can never be mistaken for a real host).
pub const SRC_ADDR: [u8; 4] = [198, 18, 0, 1];
/// The destination address: 198.18.0.2.
pub const DST_ADDR: [u8; 4] = [198, 18, 0, 2];
/// The UDP source port, and the destination port of live packets.
pub const PORT_LIVE: u16 = 5004;
/// The UDP destination port of checkpoint packets.
pub const PORT_CHECKPOINT: u16 = 5005;
/// The longest RTP packet a record holds: what fits a UDP datagram over IPv4.
pub const MAX_RTP: usize = 65_535 - IPV4_LEN - UDP_LEN;

/// Block header (type, total length) plus trailing length.
pub const BLOCK_OVERHEAD: usize = 12;
/// An EPB's fixed fields after the block header: interface, timestamp (2 words),
/// captured and original length.
pub const EPB_FIXED: usize = 20;

/// Bytes of padding that bring `len` to a multiple of 4.
pub fn pad4(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// The ones'-complement checksum of an IPv4 header (RFC 791) whose checksum field is zero.
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(c.get(1).copied().unwrap_or(0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Appends the IPv4 and UDP headers of an RTP record carrying `rtp_len` bytes.
pub fn push_ip_udp(out: &mut Vec<u8>, rtp_len: usize, checkpoint: bool) {
    let total = (IPV4_LEN + UDP_LEN + rtp_len) as u16;
    let mut ip = [0u8; IPV4_LEN];
    ip[0] = 0x45; // version 4, IHL 5
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF, fragment offset 0
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&SRC_ADDR);
    ip[16..20].copy_from_slice(&DST_ADDR);
    let sum = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    out.extend_from_slice(&ip);
    let dst = if checkpoint {
        PORT_CHECKPOINT
    } else {
        PORT_LIVE
    };
    out.extend_from_slice(&PORT_LIVE.to_be_bytes());
    out.extend_from_slice(&dst.to_be_bytes());
    out.extend_from_slice(&((UDP_LEN + rtp_len) as u16).to_be_bytes());
    // Checksum 0: none, which UDP over IPv4 allows; computing it would cost a pass over
    // every packet for nothing the per-record CRC32 does not already cover.
    out.extend_from_slice(&[0, 0]);
}

/// Appends one option (code, length, value, padding).
pub fn push_option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    out.extend(std::iter::repeat_n(0u8, pad4(value.len())));
}

/// Reads a little-endian u16 at `at`, or `None` past the end.
pub fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Reads a little-endian u32 at `at`, or `None` past the end.
pub fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Reads a big-endian u16 at `at`, or `None` past the end.
pub fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Walks an option list, calling `each(code, value)` for every option before
/// opt_endofopt (or the end of `b`); `false` when the list is malformed (an option runs
/// past the end). A callback rather than a collection: the scanner runs it per record.
pub fn each_option(mut b: &[u8], mut each: impl FnMut(u16, &[u8])) -> bool {
    while !b.is_empty() {
        let (Some(code), Some(len)) = (le16(b, 0), le16(b, 2)) else {
            return false;
        };
        if code == OPT_END {
            return true;
        }
        let len = usize::from(len);
        let Some(value) = b.get(4..4 + len) else {
            return false;
        };
        each(code, value);
        let Some(rest) = b.get(4 + len + pad4(len)..) else {
            return false;
        };
        b = rest;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_checksum_matches_a_known_header() {
        // A header from the wild (Wikipedia's worked example): checksum 0xB861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(
            ipv4_checksum(&h),
            0,
            "a header with its checksum sums to zero"
        );
    }

    #[test]
    fn options_running_past_the_end_are_malformed() {
        let mut b = Vec::new();
        push_option(&mut b, OPT_COMMENT, b"hello");
        push_option(&mut b, OPT_END, &[]);
        let mut seen = Vec::new();
        assert!(each_option(&b, |c, v| seen.push((c, v.to_vec()))));
        assert_eq!(seen, [(OPT_COMMENT, b"hello".to_vec())]);
        assert!(!each_option(&b[..6], |_, _| {}));
        assert!(!each_option(&[1, 0, 0xff, 0xff, 0, 0], |_, _| {}));
        assert!(each_option(&[], |_, _| {}));
    }
}
