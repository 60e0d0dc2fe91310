//! Zero-copy RTP header view and header writer (RFC 3550 §5.1, RFC 8285).
//!
//! [`RtpPacket::parse`] validates the whole header once (CSRC list, header extension and its
//! RFC 8285 elements, padding) so that every accessor afterwards is infallible and borrows the
//! input. Parsing never allocates and never panics.

use thiserror::Error;

/// Length of the fixed RTP header, before CSRCs and extension.
pub const FIXED_HEADER_LEN: usize = 12;

/// The P bit of the header's first octet: the packet ends in padding (RFC 3550 §5.1).
pub const PADDING_BIT: u8 = 0x20;
/// Extension profile of RFC 8285 one-byte header elements.
pub const ONE_BYTE_PROFILE: u16 = 0xBEDE;
/// Extension profile of RFC 8285 two-byte header elements, before the 4 "appbits".
pub const TWO_BYTE_PROFILE: u16 = 0x1000;

const VERSION: u8 = 2;
const MAX_CSRCS: usize = 15;

/// Why an RTP packet was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RtpError {
    /// Shorter than the 12-byte fixed header.
    #[error("RTP packet shorter than the fixed header ({0} bytes)")]
    TooShort(usize),
    /// The version field is not 2.
    #[error("RTP version {0}, expected 2")]
    BadVersion(u8),
    /// The CSRC list runs past the end of the packet.
    #[error("RTP CSRC list truncated")]
    TruncatedCsrcs,
    /// The header extension runs past the end of the packet.
    #[error("RTP header extension truncated")]
    TruncatedExtension,
    /// An RFC 8285 extension element runs past the end of the extension, or is not one
    /// (ID 15, or a nonzero octet with ID 0 where padding belongs).
    #[error("RTP header extension element truncated or invalid")]
    BadExtensionElement,
    /// The padding count is zero or larger than the payload it pads.
    #[error("RTP padding count invalid")]
    BadPadding,
}

impl RtpError {
    /// A short stable name for this error, usable as a Prometheus label value.
    pub fn reason(&self) -> &'static str {
        match self {
            RtpError::TooShort(_) => "rtp_too_short",
            RtpError::BadVersion(_) => "rtp_bad_version",
            RtpError::TruncatedCsrcs => "rtp_truncated_csrcs",
            RtpError::TruncatedExtension => "rtp_truncated_extension",
            RtpError::BadExtensionElement => "rtp_bad_extension_element",
            RtpError::BadPadding => "rtp_bad_padding",
        }
    }
}

/// What an incoming datagram on an rtcp-mux port is (RFC 5761 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketClass {
    /// An RTP packet.
    Rtp,
    /// An RTCP (compound) packet.
    Rtcp,
    /// Too short, or not version 2: neither RTP nor RTCP.
    Other,
}

/// Tells RTP from RTCP on a multiplexed port (RFC 5761 §4).
///
/// The second octet of RTCP is its packet type, 192..=223 covers every RTCP type in use; RTP
/// payload types 64..=95 (which would collide there with the marker bit set) must not be used
/// with rtcp-mux, so the test is exact.
pub fn classify(datagram: &[u8]) -> PacketClass {
    match datagram {
        [b0, b1, ..] if b0 >> 6 == VERSION => {
            if (192..=223).contains(b1) {
                PacketClass::Rtcp
            } else {
                PacketClass::Rtp
            }
        }
        _ => PacketClass::Other,
    }
}

/// The SSRC, sequence number and payload length (without padding: what a sender report
/// counts, RFC 3550 §6.4.1) of an RTP packet the relay built, read from its header without
/// validating the rest; `None` if it is shorter than its header and padding.
pub fn ssrc_seq_payload_len(packet: &[u8]) -> Option<(u32, u16, usize)> {
    let first = *packet.first()?;
    let mut len = FIXED_HEADER_LEN + 4 * usize::from(first & 0x0f);
    if first & 0x10 != 0 {
        len += 4 + 4 * usize::from(be16(packet, len + 2)?);
    }
    if first & PADDING_BIT != 0 {
        len += usize::from(*packet.last()?);
    }
    Some((
        be32(packet, 8)?,
        be16(packet, 2)?,
        packet.len().checked_sub(len)?,
    ))
}

/// Reads a big-endian u16 at `at`, or `None` past the end.
fn be16(buf: &[u8], at: usize) -> Option<u16> {
    let b: [u8; 2] = buf.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_be_bytes(b))
}

/// Reads a big-endian u32 at `at`, or `None` past the end.
fn be32(buf: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

/// A validated, borrowed view of one RTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpPacket<'a> {
    /// The packet with its padding stripped.
    buf: &'a [u8],
    /// Offset of the payload (end of CSRCs and extension).
    payload_start: usize,
    padding_len: u8,
    extension: Option<HeaderExtension<'a>>,
}

impl<'a> RtpPacket<'a> {
    /// Parses and validates `buf` as an RTP packet.
    pub fn parse(buf: &'a [u8]) -> Result<Self, RtpError> {
        let b0 = *buf.first().ok_or(RtpError::TooShort(0))?;
        if buf.len() < FIXED_HEADER_LEN {
            return Err(RtpError::TooShort(buf.len()));
        }
        if b0 >> 6 != VERSION {
            return Err(RtpError::BadVersion(b0 >> 6));
        }
        let csrc_end = FIXED_HEADER_LEN + 4 * usize::from(b0 & 0x0f);
        if csrc_end > buf.len() {
            return Err(RtpError::TruncatedCsrcs);
        }

        // Padding is stripped first so the extension and payload cannot claim padding octets.
        let (buf, padding_len) = if b0 & PADDING_BIT != 0 {
            let pad = *buf.last().ok_or(RtpError::BadPadding)?;
            let end = buf
                .len()
                .checked_sub(usize::from(pad))
                .filter(|&end| pad != 0 && end >= csrc_end)
                .ok_or(RtpError::BadPadding)?;
            (buf.get(..end).ok_or(RtpError::BadPadding)?, pad)
        } else {
            (buf, 0)
        };

        let (extension, payload_start) = if b0 & 0x10 != 0 {
            let profile = be16(buf, csrc_end).ok_or(RtpError::TruncatedExtension)?;
            let words = be16(buf, csrc_end + 2).ok_or(RtpError::TruncatedExtension)?;
            let start = csrc_end + 4;
            let end = start + 4 * usize::from(words);
            let data = buf.get(start..end).ok_or(RtpError::TruncatedExtension)?;
            let ext = HeaderExtension { profile, data };
            let mut elements = ext.elements();
            while elements.try_next()?.is_some() {}
            (Some(ext), end)
        } else {
            (None, csrc_end)
        };

        Ok(RtpPacket {
            buf,
            payload_start,
            padding_len,
            extension,
        })
    }

    fn byte(&self, at: usize) -> u8 {
        self.buf.get(at).copied().unwrap_or_default()
    }

    /// RTP version; always 2 for a parsed packet.
    pub fn version(&self) -> u8 {
        self.byte(0) >> 6
    }

    /// Whether the padding bit was set.
    pub fn has_padding(&self) -> bool {
        self.byte(0) & PADDING_BIT != 0
    }

    /// Number of padding octets stripped (including the count octet); 0 without padding.
    pub fn padding_len(&self) -> u8 {
        self.padding_len
    }

    /// Whether the header extension bit was set.
    pub fn has_extension(&self) -> bool {
        self.extension.is_some()
    }

    /// The marker bit.
    pub fn marker(&self) -> bool {
        self.byte(1) & 0x80 != 0
    }

    /// The 7-bit payload type.
    pub fn payload_type(&self) -> u8 {
        self.byte(1) & 0x7f
    }

    /// The sequence number.
    pub fn sequence_number(&self) -> u16 {
        be16(self.buf, 2).unwrap_or_default()
    }

    /// The RTP timestamp.
    pub fn timestamp(&self) -> u32 {
        be32(self.buf, 4).unwrap_or_default()
    }

    /// The synchronisation source.
    pub fn ssrc(&self) -> u32 {
        be32(self.buf, 8).unwrap_or_default()
    }

    /// Number of contributing sources.
    pub fn csrc_count(&self) -> usize {
        usize::from(self.byte(0) & 0x0f)
    }

    /// The contributing sources, in order.
    pub fn csrcs(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        let end = FIXED_HEADER_LEN + 4 * self.csrc_count();
        self.buf
            .get(FIXED_HEADER_LEN..end)
            .unwrap_or_default()
            .chunks_exact(4)
            .map(|c| be32(c, 0).unwrap_or_default())
    }

    /// The header extension, if the extension bit was set.
    pub fn extension(&self) -> Option<HeaderExtension<'a>> {
        self.extension
    }

    /// Length of the header: fixed part, CSRCs and extension.
    pub fn header_len(&self) -> usize {
        self.payload_start
    }

    /// The payload, without padding.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(self.payload_start..).unwrap_or_default()
    }
}

/// A header extension: its profile word and its data (a multiple of 4 octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderExtension<'a> {
    profile: u16,
    data: &'a [u8],
}

impl<'a> HeaderExtension<'a> {
    /// The 16-bit "defined by profile" word.
    pub fn profile(&self) -> u16 {
        self.profile
    }

    /// The extension data, after the 4-octet extension header.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Which RFC 8285 form the elements use, if any.
    pub fn form(&self) -> Option<ExtensionForm> {
        if self.profile == ONE_BYTE_PROFILE {
            Some(ExtensionForm::OneByte)
        } else if self.profile & 0xfff0 == TWO_BYTE_PROFILE {
            Some(ExtensionForm::TwoByte)
        } else {
            None
        }
    }

    /// The RFC 8285 elements; empty for a profile that is not RFC 8285.
    ///
    /// Padding octets are skipped. A one-byte element with ID 15 ends the list (RFC 8285 §4.2;
    /// [`RtpPacket::parse`] refuses it).
    pub fn elements(&self) -> ExtensionElements<'a> {
        ExtensionElements {
            form: self.form(),
            data: self.data,
        }
    }
}

/// The two element layouts of RFC 8285.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionForm {
    /// Profile 0xBEDE: 4-bit ID, 4-bit length-minus-one, 1..=16 data octets, IDs 1..=14.
    OneByte,
    /// Profile 0x100X: 8-bit ID, 8-bit length, 0..=255 data octets, IDs 1..=255.
    TwoByte,
}

/// One RFC 8285 header extension element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionElement<'a> {
    /// Local identifier.
    pub id: u8,
    /// Element data.
    pub data: &'a [u8],
}

/// Iterator over RFC 8285 elements; see [`HeaderExtension::elements`].
#[derive(Debug, Clone)]
pub struct ExtensionElements<'a> {
    form: Option<ExtensionForm>,
    data: &'a [u8],
}

impl<'a> ExtensionElements<'a> {
    /// The next element, or an error if it runs past the end of the extension.
    fn try_next(&mut self) -> Result<Option<ExtensionElement<'a>>, RtpError> {
        let Some(form) = self.form else {
            return Ok(None);
        };
        loop {
            let Some((&first, rest)) = self.data.split_first() else {
                return Ok(None);
            };
            let (id, len, rest) = match form {
                ExtensionForm::OneByte => {
                    let id = first >> 4;
                    // ID 15 "MUST NOT be used" and padding octets are zero (RFC 8285 §4.2).
                    // Both are refused, not read leniently: the SRTP library re-derives the
                    // header length its own way (ID 15 ends it early, a nonzero ID-0 octet
                    // is an element to it), so it would encrypt (AES-CM) or authenticate
                    // (GCM) a forwarded packet from another offset than the receiver.
                    if id == 15 || (id == 0 && first != 0) {
                        return Err(RtpError::BadExtensionElement);
                    }
                    (id, usize::from(first & 0x0f) + 1, rest)
                }
                // A two-byte padding octet has no length octet, so check for it before reading one.
                ExtensionForm::TwoByte if first == 0 => (0, 0, rest),
                ExtensionForm::TwoByte => {
                    let (&len, rest) = rest.split_first().ok_or(RtpError::BadExtensionElement)?;
                    (first, usize::from(len), rest)
                }
            };
            if id == 0 {
                // Padding octet (RFC 8285 §4.1): always a single octet.
                self.data = rest;
                continue;
            }
            let data = rest.get(..len).ok_or(RtpError::BadExtensionElement)?;
            self.data = rest.get(len..).unwrap_or_default();
            return Ok(Some(ExtensionElement { id, data }));
        }
    }
}

impl<'a> Iterator for ExtensionElements<'a> {
    type Item = ExtensionElement<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        // Parsing already validated the elements, so an error cannot happen for a parsed packet.
        self.try_next().ok().flatten()
    }
}

/// Why an RTP header could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RtpWriteError {
    /// The output slice is shorter than the header.
    #[error("buffer too small: need {needed} bytes")]
    BufferTooSmall {
        /// Bytes the header needs.
        needed: usize,
    },
    /// More than 15 CSRCs.
    #[error("more than 15 CSRCs")]
    TooManyCsrcs,
    /// Payload type above 127.
    #[error("payload type above 127")]
    BadPayloadType,
    /// An element's ID or length does not fit its RFC 8285 form.
    #[error("extension element id or length out of range for its form")]
    BadExtensionElement,
    /// Raw extension data not a multiple of 4 octets, or longer than 65535 words.
    #[error("extension data not a multiple of 4 octets or too long")]
    BadExtensionLength,
    /// Padding of zero octets requested.
    #[error("padding length must be at least 1")]
    BadPadding,
}

/// The header extension to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteExtension<'a> {
    /// RFC 8285 elements in the given form; the writer pads the data to 4 octets with zeros.
    Elements {
        /// One-byte or two-byte element layout.
        form: ExtensionForm,
        /// The 4 "appbits" of a two-byte profile (0x100X); ignored for one-byte.
        app_bits: u8,
        /// Elements, written in order.
        elements: &'a [ExtensionElement<'a>],
    },
    /// An opaque extension, e.g. forwarded from a parsed packet unchanged.
    Raw {
        /// The profile word.
        profile: u16,
        /// Extension data; must be a multiple of 4 octets.
        data: &'a [u8],
    },
}

impl<'a> From<HeaderExtension<'a>> for WriteExtension<'a> {
    fn from(ext: HeaderExtension<'a>) -> Self {
        WriteExtension::Raw {
            profile: ext.profile,
            data: ext.data,
        }
    }
}

impl WriteExtension<'_> {
    /// Length in 32-bit words of the extension data (without its 4-octet header), padded.
    fn words(&self) -> Result<u16, RtpWriteError> {
        let len = match *self {
            WriteExtension::Raw { data, .. } if data.len() % 4 == 0 => data.len(),
            WriteExtension::Raw { .. } => return Err(RtpWriteError::BadExtensionLength),
            WriteExtension::Elements { form, elements, .. } => {
                let mut len = 0;
                for e in elements {
                    let ok = match form {
                        ExtensionForm::OneByte => {
                            (1..=14).contains(&e.id) && (1..=16).contains(&e.data.len())
                        }
                        ExtensionForm::TwoByte => e.id != 0 && e.data.len() <= 255,
                    };
                    if !ok {
                        return Err(RtpWriteError::BadExtensionElement);
                    }
                    len += e.data.len() + if form == ExtensionForm::OneByte { 1 } else { 2 };
                }
                len.next_multiple_of(4)
            }
        };
        u16::try_from(len / 4).map_err(|_| RtpWriteError::BadExtensionLength)
    }
}

/// The fields of an RTP header to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtpHeader<'a> {
    /// Marker bit.
    pub marker: bool,
    /// Payload type, 0..=127.
    pub payload_type: u8,
    /// Sequence number.
    pub sequence_number: u16,
    /// RTP timestamp.
    pub timestamp: u32,
    /// Synchronisation source.
    pub ssrc: u32,
    /// Contributing sources, at most 15.
    pub csrcs: &'a [u32],
    /// Header extension, if any.
    pub extension: Option<WriteExtension<'a>>,
}

/// A bounds-checked forward writer over a slice, so a length mistake is an error, not a panic.
struct Cursor<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), RtpWriteError> {
        let end = self.pos + bytes.len();
        let dst = self
            .buf
            .get_mut(self.pos..end)
            .ok_or(RtpWriteError::BufferTooSmall { needed: end })?;
        dst.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }
}

impl RtpHeader<'_> {
    /// The number of octets [`write_to`](Self::write_to) writes, after validating the fields.
    pub fn header_len(&self) -> Result<usize, RtpWriteError> {
        if self.csrcs.len() > MAX_CSRCS {
            return Err(RtpWriteError::TooManyCsrcs);
        }
        if self.payload_type > 0x7f {
            return Err(RtpWriteError::BadPayloadType);
        }
        let ext = match &self.extension {
            Some(e) => 4 + 4 * usize::from(e.words()?),
            None => 0,
        };
        Ok(FIXED_HEADER_LEN + 4 * self.csrcs.len() + ext)
    }

    /// Writes the header at the start of `buf`; returns the header length.
    pub fn write_to(&self, buf: &mut [u8]) -> Result<usize, RtpWriteError> {
        let needed = self.header_len()?;
        let buf = buf
            .get_mut(..needed)
            .ok_or(RtpWriteError::BufferTooSmall { needed })?;
        // Extension data is padded with zeros: pre-zero the area instead of writing pad octets.
        buf.fill(0);
        let mut w = Cursor { buf, pos: 0 };

        let ext_bit = if self.extension.is_some() { 0x10 } else { 0 };
        // csrcs.len() <= 15 and payload_type <= 127 were checked by header_len.
        w.put(&[
            VERSION << 6 | ext_bit | self.csrcs.len() as u8,
            u8::from(self.marker) << 7 | self.payload_type,
        ])?;
        w.put(&self.sequence_number.to_be_bytes())?;
        w.put(&self.timestamp.to_be_bytes())?;
        w.put(&self.ssrc.to_be_bytes())?;
        for csrc in self.csrcs {
            w.put(&csrc.to_be_bytes())?;
        }
        if let Some(ext) = &self.extension {
            let words = ext.words()?;
            match *ext {
                WriteExtension::Raw { profile, data } => {
                    w.put(&profile.to_be_bytes())?;
                    w.put(&words.to_be_bytes())?;
                    w.put(data)?;
                }
                WriteExtension::Elements {
                    form,
                    app_bits,
                    elements,
                } => {
                    let profile = match form {
                        ExtensionForm::OneByte => ONE_BYTE_PROFILE,
                        ExtensionForm::TwoByte => TWO_BYTE_PROFILE | u16::from(app_bits & 0x0f),
                    };
                    w.put(&profile.to_be_bytes())?;
                    w.put(&words.to_be_bytes())?;
                    // Lengths were range-checked by words(), so the casts are exact.
                    for e in elements {
                        match form {
                            ExtensionForm::OneByte => {
                                w.put(&[e.id << 4 | (e.data.len() - 1) as u8])?
                            }
                            ExtensionForm::TwoByte => w.put(&[e.id, e.data.len() as u8])?,
                        }
                        w.put(e.data)?;
                    }
                }
            }
        }
        Ok(needed)
    }

    /// Appends the header to `out`; returns the header length.
    ///
    /// Does not allocate when `out` has the spare capacity.
    pub fn append_to(&self, out: &mut Vec<u8>) -> Result<usize, RtpWriteError> {
        let start = out.len();
        out.resize(start + self.header_len()?, 0);
        let written = self.write_to(out.get_mut(start..).unwrap_or_default());
        if written.is_err() {
            out.truncate(start);
        }
        written
    }
}

/// Pads a complete RTP packet in `packet` with `len` octets and sets its padding bit.
///
/// The last padding octet holds the count, as RFC 3550 §5.1 requires; the others are zero.
pub fn append_padding(packet: &mut Vec<u8>, len: u8) -> Result<(), RtpWriteError> {
    append_padding_at(packet, 0, len)
}

/// [`append_padding`] for the packet that starts at `start` in `buf` and runs to its end
/// (one packet among others in an output buffer).
pub fn append_padding_at(buf: &mut Vec<u8>, start: usize, len: u8) -> Result<(), RtpWriteError> {
    let Some(first) = buf.get_mut(start) else {
        return Err(RtpWriteError::BufferTooSmall {
            needed: FIXED_HEADER_LEN,
        });
    };
    if len == 0 {
        return Err(RtpWriteError::BadPadding);
    }
    *first |= PADDING_BIT;
    buf.resize(buf.len() + usize::from(len) - 1, 0);
    buf.push(len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a sender report counts of a packet: its payload, not its padding.
    #[test]
    fn the_payload_length_leaves_padding_out() {
        let header = RtpHeader {
            marker: false,
            payload_type: 96,
            sequence_number: 7,
            timestamp: 1,
            ssrc: 0x1234_5678,
            csrcs: &[1, 2],
            extension: None,
        };
        let mut packet = Vec::new();
        header.append_to(&mut packet).unwrap();
        packet.extend_from_slice(&[9; 30]);
        assert_eq!(ssrc_seq_payload_len(&packet), Some((0x1234_5678, 7, 30)));
        append_padding(&mut packet, 11).unwrap();
        assert_eq!(ssrc_seq_payload_len(&packet), Some((0x1234_5678, 7, 30)));
    }

    #[test]
    fn two_byte_padding_octet_needs_no_length_octet() {
        // Element id 1 len 1, then a lone padding octet at the very end.
        let ext = HeaderExtension {
            profile: 0x1000,
            data: &[1, 1, 0xaa, 0],
        };
        let got: Vec<_> = ext.elements().collect();
        assert_eq!(
            got,
            [ExtensionElement {
                id: 1,
                data: &[0xaa]
            }]
        );
    }

    #[test]
    fn one_byte_id_15_stops_iteration() {
        let ext = HeaderExtension {
            profile: ONE_BYTE_PROFILE,
            data: &[0x10, 0xaa, 0xf0, 0x10],
        };
        let got: Vec<_> = ext.elements().collect();
        assert_eq!(
            got,
            [ExtensionElement {
                id: 1,
                data: &[0xaa]
            }]
        );
    }

    #[test]
    fn unknown_profile_has_no_elements() {
        let ext = HeaderExtension {
            profile: 0x1234,
            data: &[1, 2, 3, 4],
        };
        assert_eq!(ext.form(), None);
        assert_eq!(ext.elements().count(), 0);
    }
}
