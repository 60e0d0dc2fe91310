//! RTCP compound packets: the reports and feedback a relay acts on, parsed and built.
//!
//! Framing (walking a compound datagram, validating each header, length and padding) is done
//! here by hand; the bodies of SR, RR, SDES, BYE, PLI, FIR and generic NACK are decoded by
//! `rtc-rtcp`, the RTP stack the SRTP and WebRTC transports carry anyway, which also encodes
//! SR, RR, PLI, FIR and NACK. TMMBR/TMMBN (RFC 5104 §4.2) are hand-written because `rtc-rtcp`
//! does not model them, and so are the SDES and BYE writers (see their docs for why).
//!
//! Hand-made framing instead of `rtc_rtcp::packet::unmarshal` because:
//! - `rtc-rtcp` decoders ignore the P bit and read padding octets as FCI (a padded FIR or NACK
//!   gains bogus entries, a padded SDES fails); we strip padding before handing a body over;
//! - packet types the relay ignores (XR, APP, transport-wide CC, REMB...) are reported as
//!   [`RtcpItem::Other`] without being decoded, which keeps their decoders' allocation and
//!   attack surface off the receive path.

use bytes::{Buf, Bytes};
use rtc_rtcp::goodbye::Goodbye;
use rtc_rtcp::payload_feedbacks::full_intra_request::FullIntraRequest;
use rtc_rtcp::payload_feedbacks::picture_loss_indication::PictureLossIndication;
use rtc_rtcp::receiver_report::ReceiverReport;
use rtc_rtcp::sender_report::SenderReport;
use rtc_rtcp::source_description::{SdesType, SourceDescription};
use rtc_rtcp::transport_feedbacks::transport_layer_nack::{
    TransportLayerNack, nack_pairs_from_sequence_numbers,
};
use rtc_shared::marshal::{Marshal, Unmarshal};
use thiserror::Error;

pub mod ccfb;

pub use rtc_rtcp::payload_feedbacks::full_intra_request::FirEntry;
pub use rtc_rtcp::reception_report::ReceptionReport;

/// RTCP packet type: sender report.
pub const PT_SR: u8 = 200;
/// RTCP packet type: receiver report.
pub const PT_RR: u8 = 201;
/// RTCP packet type: source description.
pub const PT_SDES: u8 = 202;
/// RTCP packet type: goodbye.
pub const PT_BYE: u8 = 203;
/// RTCP packet type: application-defined (RFC 3550 §6.7).
pub const PT_APP: u8 = 204;
/// RTCP packet type: transport-layer feedback (RFC 4585).
pub const PT_RTPFB: u8 = 205;
/// RTCP packet type: payload-specific feedback (RFC 4585).
pub const PT_PSFB: u8 = 206;

const FMT_NACK: u8 = 1;
const FMT_TMMBR: u8 = 3;
const FMT_TMMBN: u8 = 4;
const FMT_PLI: u8 = 1;
const FMT_FIR: u8 = 4;

const HEADER_LEN: usize = 4;
/// The largest datagram accepted. No UDP payload is larger, and it bounds every length field
/// below 16384 words, which `rtc-rtcp`'s FIR decoder multiplies by 4 in a `u16`.
pub const MAX_DATAGRAM: usize = 65535;

/// Why an RTCP datagram was rejected. Any error rejects the whole compound packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RtcpError {
    /// The datagram is empty.
    #[error("empty RTCP datagram")]
    Empty,
    /// The datagram is longer than [`MAX_DATAGRAM`].
    #[error("RTCP datagram of {0} bytes is too long")]
    TooLong(usize),
    /// A header, or the length it declares, runs past the end of the datagram.
    #[error("RTCP packet truncated")]
    Truncated,
    /// The version field is not 2.
    #[error("RTCP version {0}, expected 2")]
    BadVersion(u8),
    /// The padding count is zero or larger than the packet body.
    #[error("RTCP padding count invalid")]
    BadPadding,
    /// The body of a packet the relay decodes does not match its type's layout.
    #[error("malformed RTCP packet (type {packet_type}, count/fmt {count})")]
    Malformed {
        /// Packet type of the offending packet.
        packet_type: u8,
        /// Its count (SR, RR, SDES, BYE) or FMT (feedback) field.
        count: u8,
    },
}

impl RtcpError {
    /// A short stable name for this error, usable as a Prometheus label value.
    pub fn reason(&self) -> &'static str {
        match self {
            RtcpError::Empty => "rtcp_empty",
            RtcpError::TooLong(_) => "rtcp_too_long",
            RtcpError::Truncated => "rtcp_truncated",
            RtcpError::BadVersion(_) => "rtcp_bad_version",
            RtcpError::BadPadding => "rtcp_bad_padding",
            RtcpError::Malformed { .. } => "rtcp_malformed",
        }
    }
}

/// Why an RTCP packet could not be built.
#[derive(Debug, PartialEq, Error)]
pub enum RtcpWriteError {
    /// `rtc-rtcp` refused the packet (e.g. more than 31 report blocks).
    #[error(transparent)]
    Marshal(#[from] rtc_shared::error::Error),
    /// The packet would carry no entry where its RFC requires at least one (FIR, NACK, TMMBR).
    #[error("packet needs at least one entry")]
    NoEntries,
    /// More sources than the 5-bit count field can hold (31).
    #[error("more than 31 sources")]
    TooManySources,
    /// An SDES text longer than 255 octets.
    #[error("SDES text longer than 255 octets")]
    TextTooLong,
    /// A packet longer than its 16-bit length field can describe.
    #[error("packet too long for its length field")]
    TooLong,
    /// An APP packet whose subtype passes five bits or whose data is not whole words.
    #[error("APP subtype over 31 or data not a multiple of four octets")]
    Unaligned,
    /// A TMMBR/TMMBN measured overhead above 511 (a 9-bit field).
    #[error("overhead {0} does not fit 9 bits")]
    OverheadTooLarge(u16),
}

/// Sender information of an SR (RFC 3550 §6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderInfo {
    /// NTP timestamp (64-bit fixed point).
    pub ntp_time: u64,
    /// RTP timestamp corresponding to `ntp_time`.
    pub rtp_time: u32,
    /// Packets sent.
    pub packet_count: u32,
    /// Payload octets sent.
    pub octet_count: u32,
}

/// One SDES chunk, reduced to what a relay uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdesChunk {
    /// The source described.
    pub ssrc: u32,
    /// Its CNAME item, if present.
    pub cname: Option<Bytes>,
}

/// One TMMBR/TMMBN FCI entry (RFC 5104 §4.2.1.1 / §4.2.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmmbEntry {
    /// The media sender the entry is about.
    pub ssrc: u32,
    /// Maximum total media bit rate, `mantissa << exponent` on the wire. Saturates at `u64::MAX`.
    pub bitrate_bps: u64,
    /// Measured per-packet overhead in octets (9 bits).
    pub overhead: u16,
}

/// One RTCP packet of a compound, as the relay sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RtcpItem {
    /// SR (RFC 3550 §6.4.1).
    SenderReport {
        /// The sender.
        ssrc: u32,
        /// Its sender information.
        info: SenderInfo,
        /// Reception report blocks.
        reports: Vec<ReceptionReport>,
    },
    /// RR (RFC 3550 §6.4.2).
    ReceiverReport {
        /// The reporter.
        ssrc: u32,
        /// Reception report blocks.
        reports: Vec<ReceptionReport>,
    },
    /// SDES (RFC 3550 §6.5).
    Sdes {
        /// One entry per chunk.
        chunks: Vec<SdesChunk>,
    },
    /// BYE (RFC 3550 §6.6).
    Bye {
        /// Sources leaving.
        ssrcs: Vec<u32>,
    },
    /// Picture loss indication (RFC 4585 §6.3.1).
    Pli {
        /// Who asks.
        sender_ssrc: u32,
        /// The stream asked to refresh.
        media_ssrc: u32,
    },
    /// Full intra request (RFC 5104 §4.3.1).
    Fir {
        /// Who asks.
        sender_ssrc: u32,
        /// One (SSRC, command sequence number) per stream asked to refresh.
        entries: Vec<FirEntry>,
    },
    /// Generic NACK (RFC 4585 §6.2.1).
    Nack {
        /// Who reports the loss.
        sender_ssrc: u32,
        /// The stream the losses are in.
        media_ssrc: u32,
        /// Lost sequence numbers, every PID and BLP bit expanded, in wire order.
        lost: Vec<u16>,
    },
    /// Temporary maximum media stream bit rate request (RFC 5104 §4.2.1).
    Tmmbr {
        /// Who asks.
        sender_ssrc: u32,
        /// Requested limits.
        entries: Vec<TmmbEntry>,
    },
    /// Temporary maximum media stream bit rate notification (RFC 5104 §4.2.2).
    Tmmbn {
        /// Who notifies.
        sender_ssrc: u32,
        /// The bounding set; may be empty.
        entries: Vec<TmmbEntry>,
    },
    /// Congestion control feedback (RFC 8888).
    Ccfb(ccfb::Ccfb),
    /// An application-defined packet (RFC 3550 §6.7).
    App {
        /// Its subtype (the 5-bit count field).
        subtype: u8,
        /// Who sends it.
        ssrc: u32,
        /// Its four-octet name (ASCII by RFC 3550; not checked here).
        name: [u8; 4],
        /// Its application data, a multiple of four octets.
        data: Vec<u8>,
    },
    /// A well-framed packet of a type the relay does not decode (APP, XR, other FMTs...).
    Other {
        /// Its packet type.
        packet_type: u8,
        /// Its count/FMT field.
        count: u8,
    },
}

/// One framed packet of a compound: header fields and the body with padding stripped.
struct Framed<'a> {
    count: u8,
    packet_type: u8,
    body: &'a [u8],
}

impl Framed<'_> {
    fn malformed(&self) -> RtcpError {
        RtcpError::Malformed {
            packet_type: self.packet_type,
            count: self.count,
        }
    }

    /// Decodes the body with `rtc-rtcp`'s decoder for `T`.
    ///
    /// The decoder is shown a rewritten header (P bit clear, length of the stripped body) and
    /// the body realigned to 32 bits with zeros: only a BYE reason can leave it unaligned, and
    /// RFC 3550 §6.6 pads that with zeros too.
    fn decode<T: Unmarshal>(&self) -> Result<T, RtcpError> {
        const ZEROS: [u8; 3] = [0; 3];
        let align = self.body.len().next_multiple_of(4) - self.body.len();
        let words = u16::try_from(self.body.len().div_ceil(4)).map_err(|_| self.malformed())?;
        let [len_hi, len_lo] = words.to_be_bytes();
        let header = [2 << 6 | self.count, self.packet_type, len_hi, len_lo];
        let mut buf = header
            .as_slice()
            .chain(self.body)
            .chain(ZEROS.get(..align).unwrap_or_default());
        T::unmarshal(&mut buf).map_err(|_| self.malformed())
    }
}

/// Splits the first packet off a compound datagram.
fn frame(datagram: &[u8]) -> Result<(Framed<'_>, &[u8]), RtcpError> {
    let [b0, packet_type, len_hi, len_lo] = match datagram.get(..HEADER_LEN) {
        Some(&[b0, pt, hi, lo]) => [b0, pt, hi, lo],
        _ => return Err(RtcpError::Truncated),
    };
    if b0 >> 6 != 2 {
        return Err(RtcpError::BadVersion(b0 >> 6));
    }
    let len = HEADER_LEN + 4 * usize::from(u16::from_be_bytes([len_hi, len_lo]));
    let packet = datagram.get(..len).ok_or(RtcpError::Truncated)?;
    let rest = datagram.get(len..).unwrap_or_default();
    let mut body = packet.get(HEADER_LEN..).unwrap_or_default();
    if b0 & 0x20 != 0 {
        // RFC 3550 wants the count to be a multiple of 4, but rtc-rtcp's own BYE writer pads
        // a reason with 1..=3 octets through the P bit; accept any count that fits.
        let pad = usize::from(*body.last().ok_or(RtcpError::BadPadding)?);
        let end = body
            .len()
            .checked_sub(pad)
            .filter(|_| pad != 0)
            .ok_or(RtcpError::BadPadding)?;
        body = body.get(..end).ok_or(RtcpError::BadPadding)?;
    }
    let framed = Framed {
        count: b0 & 0x1f,
        packet_type,
        body,
    };
    Ok((framed, rest))
}

/// Parses a compound RTCP datagram (or a reduced-size one, RFC 5506) into its items, in order.
///
/// The compound rules of RFC 3550 §6.1 (SR/RR first) are not enforced, so RFC 5506 feedback
/// alone is accepted. Any malformed packet rejects the whole datagram.
pub fn parse_compound(datagram: &[u8]) -> Result<Vec<RtcpItem>, RtcpError> {
    if datagram.is_empty() {
        return Err(RtcpError::Empty);
    }
    if datagram.len() > MAX_DATAGRAM {
        return Err(RtcpError::TooLong(datagram.len()));
    }
    let mut items = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        let (packet, tail) = frame(rest)?;
        items.push(decode(&packet)?);
        rest = tail;
    }
    Ok(items)
}

fn decode(p: &Framed<'_>) -> Result<RtcpItem, RtcpError> {
    Ok(match (p.packet_type, p.count) {
        (PT_SR, _) => {
            let sr: SenderReport = p.decode()?;
            RtcpItem::SenderReport {
                ssrc: sr.ssrc,
                info: SenderInfo {
                    ntp_time: sr.ntp_time,
                    rtp_time: sr.rtp_time,
                    packet_count: sr.packet_count,
                    octet_count: sr.octet_count,
                },
                reports: sr.reports,
            }
        }
        (PT_RR, _) => {
            let rr: ReceiverReport = p.decode()?;
            RtcpItem::ReceiverReport {
                ssrc: rr.ssrc,
                reports: rr.reports,
            }
        }
        (PT_SDES, _) => {
            let sdes: SourceDescription = p.decode()?;
            let chunks = sdes
                .chunks
                .into_iter()
                .map(|c| SdesChunk {
                    ssrc: c.source,
                    cname: c
                        .items
                        .into_iter()
                        .find(|i| i.sdes_type == SdesType::SdesCname)
                        .map(|i| i.text),
                })
                .collect();
            RtcpItem::Sdes { chunks }
        }
        (PT_BYE, _) => {
            let bye: Goodbye = p.decode()?;
            RtcpItem::Bye { ssrcs: bye.sources }
        }
        (PT_PSFB, FMT_PLI) => {
            let pli: PictureLossIndication = p.decode()?;
            RtcpItem::Pli {
                sender_ssrc: pli.sender_ssrc,
                media_ssrc: pli.media_ssrc,
            }
        }
        (PT_PSFB, FMT_FIR) => {
            let fir: FullIntraRequest = p.decode()?;
            RtcpItem::Fir {
                sender_ssrc: fir.sender_ssrc,
                entries: fir.fir,
            }
        }
        (PT_RTPFB, FMT_NACK) => {
            let nack: TransportLayerNack = p.decode()?;
            RtcpItem::Nack {
                sender_ssrc: nack.sender_ssrc,
                media_ssrc: nack.media_ssrc,
                lost: nack.nacks.into_iter().flatten().collect(),
            }
        }
        (PT_RTPFB, FMT_TMMBR) => {
            let (sender_ssrc, entries) = decode_tmmb(p)?;
            if entries.is_empty() {
                // RFC 5104 §4.2.1.2: a TMMBR carries one or more FCI entries.
                return Err(p.malformed());
            }
            RtcpItem::Tmmbr {
                sender_ssrc,
                entries,
            }
        }
        (PT_RTPFB, ccfb::FMT_CCFB) => RtcpItem::Ccfb(ccfb::decode(p.body)?),
        (PT_RTPFB, FMT_TMMBN) => {
            let (sender_ssrc, entries) = decode_tmmb(p)?;
            RtcpItem::Tmmbn {
                sender_ssrc,
                entries,
            }
        }
        (PT_APP, subtype) => {
            let (head, data) = p.body.split_at_checked(8).ok_or_else(|| p.malformed())?;
            if !data.len().is_multiple_of(4) {
                return Err(p.malformed());
            }
            let [a, b, c, d, n0, n1, n2, n3] = *head else {
                return Err(p.malformed());
            };
            RtcpItem::App {
                subtype,
                ssrc: u32::from_be_bytes([a, b, c, d]),
                name: [n0, n1, n2, n3],
                data: data.to_vec(),
            }
        }
        (packet_type, count) => RtcpItem::Other { packet_type, count },
    })
}

/// Decodes a TMMBR/TMMBN body: sender SSRC, media SSRC (unused, RFC 5104 §4.2.1.2), entries.
fn decode_tmmb(p: &Framed<'_>) -> Result<(u32, Vec<TmmbEntry>), RtcpError> {
    let Some((&[s0, s1, s2, s3, ..], fci)) = p.body.split_first_chunk::<8>() else {
        return Err(p.malformed());
    };
    let (fci, []) = fci.as_chunks::<8>() else {
        return Err(p.malformed());
    };
    let entries = fci
        .iter()
        .map(|e| {
            let &[e0, e1, e2, e3, w0, w1, w2, w3] = e;
            let word = u32::from_be_bytes([w0, w1, w2, w3]);
            let exp = word >> 26;
            let mantissa = u64::from((word >> 9) & 0x1_ffff);
            // A 17-bit mantissa shifted by up to 63 can exceed u64: saturate ("no limit").
            let bitrate_bps = if mantissa.leading_zeros() >= exp {
                mantissa << exp
            } else {
                u64::MAX
            };
            TmmbEntry {
                ssrc: u32::from_be_bytes([e0, e1, e2, e3]),
                bitrate_bps,
                overhead: (word & 0x1ff) as u16,
            }
        })
        .collect();
    Ok((u32::from_be_bytes([s0, s1, s2, s3]), entries))
}

/// Appends an `rtc-rtcp` packet to `out`; returns its length.
fn append(out: &mut Vec<u8>, packet: &impl Marshal) -> Result<usize, RtcpWriteError> {
    let start = out.len();
    out.resize(start + packet.marshal_size(), 0);
    let written = packet.marshal_to(out.get_mut(start..).unwrap_or_default());
    if written.is_err() {
        out.truncate(start);
    }
    Ok(written?)
}

/// Appends an SR to `out`; returns its length. At most 31 report blocks (the count
/// field has 5 bits).
///
/// Hand-written, as RR is: `rtc-rtcp` wants the blocks in a `Vec` of its own, one
/// allocation per report.
pub fn write_sr(
    out: &mut Vec<u8>,
    ssrc: u32,
    info: SenderInfo,
    reports: &[ReceptionReport],
) -> Result<usize, RtcpWriteError> {
    let count = report_count(reports)?;
    append_packet(out, count, PT_SR, 24 + 24 * reports.len(), |out| {
        out.extend_from_slice(&ssrc.to_be_bytes());
        out.extend_from_slice(&info.ntp_time.to_be_bytes());
        out.extend_from_slice(&info.rtp_time.to_be_bytes());
        out.extend_from_slice(&info.packet_count.to_be_bytes());
        out.extend_from_slice(&info.octet_count.to_be_bytes());
        write_blocks(out, reports);
    })
}

/// Appends an RR to `out`; returns its length. At most 31 report blocks.
pub fn write_rr(
    out: &mut Vec<u8>,
    ssrc: u32,
    reports: &[ReceptionReport],
) -> Result<usize, RtcpWriteError> {
    let count = report_count(reports)?;
    append_packet(out, count, PT_RR, 4 + 24 * reports.len(), |out| {
        out.extend_from_slice(&ssrc.to_be_bytes());
        write_blocks(out, reports);
    })
}

/// The 5-bit report count of `reports`.
fn report_count(reports: &[ReceptionReport]) -> Result<u8, RtcpWriteError> {
    u8::try_from(reports.len())
        .ok()
        .filter(|&n| n <= 31)
        .ok_or(RtcpWriteError::TooManySources)
}

/// Report blocks (RFC 3550 §6.4.1): SSRC, fraction lost and 24-bit cumulative loss,
/// extended highest sequence number, jitter, LSR, DLSR.
fn write_blocks(out: &mut Vec<u8>, reports: &[ReceptionReport]) {
    for r in reports {
        out.extend_from_slice(&r.ssrc.to_be_bytes());
        let lost = r.total_lost & 0x00ff_ffff;
        out.extend_from_slice(&(u32::from(r.fraction_lost) << 24 | lost).to_be_bytes());
        out.extend_from_slice(&r.last_sequence_number.to_be_bytes());
        out.extend_from_slice(&r.jitter.to_be_bytes());
        out.extend_from_slice(&r.last_sender_report.to_be_bytes());
        out.extend_from_slice(&r.delay.to_be_bytes());
    }
}

/// Appends an SDES with one chunk holding a CNAME to `out`; returns its length.
pub fn write_sdes_cname(
    out: &mut Vec<u8>,
    ssrc: u32,
    cname: &[u8],
) -> Result<usize, RtcpWriteError> {
    write_sdes_cnames(out, [(ssrc, cname)])
}

/// Appends an SDES with one CNAME chunk per (SSRC, CNAME), at most 31, to `out`; returns
/// its length. Nothing is appended on error.
///
/// Hand-written: `rtc-rtcp` ends a chunk's null padding with a pad count octet, where
/// RFC 3550 §6.5 wants null octets only.
pub fn write_sdes_cnames<'a>(
    out: &mut Vec<u8>,
    chunks: impl IntoIterator<Item = (u32, &'a [u8])>,
) -> Result<usize, RtcpWriteError> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    let mut count = 0u8;
    for (ssrc, cname) in chunks {
        let Ok(len) = u8::try_from(cname.len()) else {
            out.truncate(start);
            return Err(RtcpWriteError::TextTooLong);
        };
        if count == 31 {
            out.truncate(start);
            return Err(RtcpWriteError::TooManySources);
        }
        count += 1;
        // SSRC, CNAME type and length, text, then at least one null octet (END) up to
        // 32 bits.
        let chunk_start = out.len();
        out.extend_from_slice(&ssrc.to_be_bytes());
        out.extend_from_slice(&[SdesType::SdesCname as u8, len]);
        out.extend_from_slice(cname);
        out.resize(
            chunk_start + (4 + 2 + cname.len() + 1).next_multiple_of(4),
            0,
        );
    }
    let len = out.len() - start;
    let Ok(words) = u16::try_from((len - HEADER_LEN) / 4) else {
        out.truncate(start);
        return Err(RtcpWriteError::TooLong);
    };
    let [hi, lo] = words.to_be_bytes();
    if let Some(header) = out.get_mut(start..start + HEADER_LEN) {
        header.copy_from_slice(&[2 << 6 | count, PT_SDES, hi, lo]);
    }
    Ok(len)
}

/// Appends a BYE for `ssrcs` (at most 31), without a reason, to `out`; returns its length.
///
/// Hand-written: `rtc-rtcp` always writes a reason length octet, so even a BYE without a
/// reason gets a padded extra word.
pub fn write_bye(out: &mut Vec<u8>, ssrcs: &[u32]) -> Result<usize, RtcpWriteError> {
    let count = u8::try_from(ssrcs.len())
        .ok()
        .filter(|&c| c <= 31)
        .ok_or(RtcpWriteError::TooManySources)?;
    append_packet(out, count, PT_BYE, 4 * ssrcs.len(), |out| {
        for ssrc in ssrcs {
            out.extend_from_slice(&ssrc.to_be_bytes());
        }
    })
}

/// Appends an APP packet (RFC 3550 §6.7) to `out`; returns its length. `subtype` must
/// fit five bits and `data` be a multiple of four octets.
pub fn write_app(
    out: &mut Vec<u8>,
    subtype: u8,
    ssrc: u32,
    name: [u8; 4],
    data: &[u8],
) -> Result<usize, RtcpWriteError> {
    if subtype > 31 || !data.len().is_multiple_of(4) {
        return Err(RtcpWriteError::Unaligned);
    }
    append_packet(out, subtype, PT_APP, 8 + data.len(), |out| {
        out.extend_from_slice(&ssrc.to_be_bytes());
        out.extend_from_slice(&name);
        out.extend_from_slice(data);
    })
}

/// Appends a PLI to `out`; returns its length.
pub fn write_pli(
    out: &mut Vec<u8>,
    sender_ssrc: u32,
    media_ssrc: u32,
) -> Result<usize, RtcpWriteError> {
    append(
        out,
        &PictureLossIndication {
            sender_ssrc,
            media_ssrc,
        },
    )
}

/// Appends a FIR with one or more entries to `out`; returns its length.
///
/// The media SSRC field is 0, as RFC 5104 §4.3.1.2 requires.
pub fn write_fir(
    out: &mut Vec<u8>,
    sender_ssrc: u32,
    entries: &[FirEntry],
) -> Result<usize, RtcpWriteError> {
    if entries.is_empty() {
        return Err(RtcpWriteError::NoEntries);
    }
    let fir = FullIntraRequest {
        sender_ssrc,
        media_ssrc: 0,
        fir: entries.to_vec(),
    };
    append(out, &fir)
}

/// Appends a generic NACK reporting `lost` to `out`; returns its length.
///
/// Losses within 16 of each other share a PID+BLP pair when `lost` is in ascending order.
pub fn write_nack(
    out: &mut Vec<u8>,
    sender_ssrc: u32,
    media_ssrc: u32,
    lost: &[u16],
) -> Result<usize, RtcpWriteError> {
    if lost.is_empty() {
        return Err(RtcpWriteError::NoEntries);
    }
    let nack = TransportLayerNack {
        sender_ssrc,
        media_ssrc,
        nacks: nack_pairs_from_sequence_numbers(lost),
    };
    append(out, &nack)
}

/// Appends a TMMBR with one or more entries to `out`; returns its length.
///
/// Bit rates are encoded with the smallest exponent that fits a 17-bit mantissa; a rate with
/// more significant bits is rounded down, which keeps it a valid upper bound.
pub fn write_tmmbr(
    out: &mut Vec<u8>,
    sender_ssrc: u32,
    entries: &[TmmbEntry],
) -> Result<usize, RtcpWriteError> {
    if entries.is_empty() {
        return Err(RtcpWriteError::NoEntries);
    }
    write_tmmb(out, FMT_TMMBR, sender_ssrc, entries)
}

/// Appends a TMMBN (the bounding set, possibly empty) to `out`; returns its length.
///
/// Bit rates are encoded as by [`write_tmmbr`].
pub fn write_tmmbn(
    out: &mut Vec<u8>,
    sender_ssrc: u32,
    entries: &[TmmbEntry],
) -> Result<usize, RtcpWriteError> {
    write_tmmb(out, FMT_TMMBN, sender_ssrc, entries)
}

fn write_tmmb(
    out: &mut Vec<u8>,
    fmt: u8,
    sender_ssrc: u32,
    entries: &[TmmbEntry],
) -> Result<usize, RtcpWriteError> {
    if let Some(e) = entries.iter().find(|e| e.overhead > 0x1ff) {
        return Err(RtcpWriteError::OverheadTooLarge(e.overhead));
    }
    let body_len = entries
        .len()
        .checked_mul(8)
        .and_then(|n| n.checked_add(8))
        .ok_or(RtcpWriteError::TooLong)?;
    append_packet(out, fmt, PT_RTPFB, body_len, |out| {
        out.extend_from_slice(&sender_ssrc.to_be_bytes());
        // Media SSRC: unused, 0 (RFC 5104 §4.2.1.2, §4.2.2.2).
        out.extend_from_slice(&0u32.to_be_bytes());
        for e in entries {
            // Shift out just enough low bits for the mantissa to fit 17 bits (exp <= 47).
            let exp = (64 - e.bitrate_bps.leading_zeros()).saturating_sub(17);
            let mantissa = (e.bitrate_bps >> exp) as u32;
            let word = exp << 26 | mantissa << 9 | u32::from(e.overhead);
            out.extend_from_slice(&e.ssrc.to_be_bytes());
            out.extend_from_slice(&word.to_be_bytes());
        }
    })
}

/// Appends a hand-written packet: header, then whatever `body` writes, zero-filled up to
/// `body_len` (a multiple of 4). Returns the packet length.
fn append_packet(
    out: &mut Vec<u8>,
    count: u8,
    packet_type: u8,
    body_len: usize,
    body: impl FnOnce(&mut Vec<u8>),
) -> Result<usize, RtcpWriteError> {
    let words = u16::try_from(body_len / 4).map_err(|_| RtcpWriteError::TooLong)?;
    let start = out.len();
    out.extend_from_slice(&[2 << 6 | count, packet_type]);
    out.extend_from_slice(&words.to_be_bytes());
    body(out);
    out.resize(start + HEADER_LEN + body_len, 0);
    Ok(HEADER_LEN + body_len)
}
