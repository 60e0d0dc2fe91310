//! The segment reader: walks a segment's blocks, finds its torn tail, checks its checksum.
//!
//! Every length read from the file is checked against the bytes there before it is used,
//! and nothing is allocated by a length read from the file, so any input (random bytes, a
//! file cut anywhere, a length field of 4 GB) gives an answer, never a panic or a huge
//! allocation.

use crate::FormatError;
use crate::event::Event;
use crate::pcapng::*;

/// One record of a segment.
#[derive(Debug, Clone, PartialEq)]
pub enum Record<'a> {
    /// An RTP packet (plaintext: header and payload, without the IPv4 and UDP headers).
    Rtp {
        /// Arrival time, nanoseconds since the Unix epoch.
        at_ns: u64,
        /// Whether it is one of a checkpoint's packets (UDP destination port 5005).
        checkpoint: bool,
        /// The RTP packet.
        packet: &'a [u8],
    },
    /// An event.
    Event {
        /// When it happened, nanoseconds since the Unix epoch.
        at_ns: u64,
        /// What happened.
        event: Event,
    },
}

impl Record<'_> {
    /// The record's time, nanoseconds since the Unix epoch.
    pub fn at_ns(&self) -> u64 {
        match self {
            Record::Rtp { at_ns, .. } | Record::Event { at_ns, .. } => *at_ns,
        }
    }
}

/// The most interfaces a section may declare; a segment has two.
const MAX_INTERFACES: usize = 8;

/// What the interfaces of a section are, as its IDBs declared them. A fixed array, so
/// that the player can copy it to look ahead without allocating.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Interfaces {
    /// Per interface id: its link type and nanoseconds per timestamp unit.
    list: [(u16, u64); MAX_INTERFACES],
    len: usize,
}

impl Interfaces {
    fn get(&self, id: u32) -> Option<(u16, u64)> {
        self.list
            .get(..self.len)?
            .get(usize::try_from(id).ok()?)
            .copied()
    }

    /// Declares the next interface; `None` past [`MAX_INTERFACES`].
    fn push(&mut self, interface: (u16, u64)) -> Option<()> {
        *self.list.get_mut(self.len)? = interface;
        self.len += 1;
        Some(())
    }
}

/// A block's frame: type and body, checked against the bytes.
struct RawBlock<'a> {
    kind: u32,
    body: &'a [u8],
    end: usize,
}

/// The block at `off`, if its frame is sound: total length a multiple of 4 and at least
/// 12, inside `bytes`, trailing length equal to the leading one.
fn raw_block(bytes: &[u8], off: usize) -> Option<RawBlock<'_>> {
    let kind = le32(bytes, off)?;
    let total = usize::try_from(le32(bytes, off.checked_add(4)?)?).ok()?;
    if !total.is_multiple_of(4) || total < BLOCK_OVERHEAD {
        return None;
    }
    let end = off.checked_add(total)?;
    if end > bytes.len() || le32(bytes, end - 4)? as usize != total {
        return None;
    }
    Some(RawBlock {
        kind,
        body: bytes.get(off + 8..end - 4)?,
        end,
    })
}

/// An EPB's packet data and time, its hash checked when `verify`.
fn epb<'a>(body: &'a [u8], ifaces: &Interfaces, verify: bool) -> Option<(u16, u64, &'a [u8])> {
    let interface = le32(body, 0)?;
    let ts = u64::from(le32(body, 4)?) << 32 | u64::from(le32(body, 8)?);
    let captured = usize::try_from(le32(body, 12)?).ok()?;
    let data = body.get(EPB_FIXED..EPB_FIXED.checked_add(captured)?)?;
    let (linktype, unit) = ifaces.get(interface)?;
    if verify {
        let opts = body.get(EPB_FIXED + captured + pad4(captured)..)?;
        let mut good = false;
        let mut bad = false;
        let well_formed = each_option(opts, |code, value| {
            if code == OPT_EPB_HASH && value.first() == Some(&HASH_CRC32) {
                match value.get(1..5).filter(|_| value.len() == 5) {
                    Some(h) if h == crc32fast::hash(data).to_le_bytes() => good = true,
                    _ => bad = true,
                }
            }
        });
        if !well_formed || !good || bad {
            return None;
        }
    }
    Some((linktype, ts.checked_mul(unit)?, data))
}

/// The RTP packet inside a record of interface 0, and whether it is a checkpoint's.
fn rtp_in_ipv4(data: &[u8]) -> Option<(bool, &[u8])> {
    let b0 = *data.first()?;
    let ihl = usize::from(b0 & 0x0f) * 4;
    if b0 >> 4 != 4 || ihl < IPV4_LEN || *data.get(9)? != 17 {
        return None;
    }
    if usize::from(be16(data, 2)?) != data.len()
        || usize::from(be16(data, ihl + 4)?) != data.len() - ihl
    {
        return None;
    }
    let checkpoint = match be16(data, ihl + 2)? {
        PORT_LIVE => false,
        PORT_CHECKPOINT => true,
        _ => return None,
    };
    Some((checkpoint, data.get(ihl + UDP_LEN..)?))
}

/// The JSON inside an exported PDU of interface 1 (its dissector must be "json").
fn json_in_pdu(mut data: &[u8]) -> Option<&[u8]> {
    let mut json = false;
    loop {
        let tag = be16(data, 0)?;
        let len = usize::from(be16(data, 2)?);
        let value = data.get(4..4 + len)?;
        data = data.get(4 + len..)?;
        match tag {
            EXP_PDU_TAG_END => break,
            EXP_PDU_TAG_DISSECTOR_NAME => {
                let name = value.split(|&c| c == 0).next().unwrap_or_default();
                json = name == b"json";
            }
            _ => {}
        }
    }
    json.then_some(data)
}

/// A record's body, before its event is parsed.
enum Body<'a> {
    Rtp(bool, &'a [u8]),
    Json(&'a [u8]),
}

/// The record in an EPB, its JSON unparsed.
fn record_body<'a>(body: &'a [u8], ifaces: &Interfaces, verify: bool) -> Option<(u64, Body<'a>)> {
    let (linktype, at_ns, data) = epb(body, ifaces, verify)?;
    match linktype {
        LINKTYPE_IPV4 => {
            let (checkpoint, packet) = rtp_in_ipv4(data)?;
            Some((at_ns, Body::Rtp(checkpoint, packet)))
        }
        LINKTYPE_UPPER_PDU => Some((at_ns, Body::Json(json_in_pdu(data)?))),
        _ => None,
    }
}

/// An IDB's link type and nanoseconds per timestamp unit.
fn idb(body: &[u8]) -> Option<(u16, u64)> {
    let linktype = le16(body, 0)?;
    let mut resol = 6u8; // pcapng's default: microseconds
    let well_formed = each_option(body.get(8..)?, |code, value| {
        if code == OPT_IF_TSRESOL
            && let Some(&r) = value.first()
        {
            resol = r;
        }
    });
    // Powers of ten down to nanoseconds; this reader has no use for finer or binary ones.
    if !well_formed || resol > 9 {
        return None;
    }
    Some((linktype, 10u64.pow(u32::from(9 - resol))))
}

/// The step the walker takes at one block.
enum Step<'a> {
    /// A block that is not a record (an IDB, an unknown type): go on.
    Skip,
    /// A record.
    Record(u64, Body<'a>),
}

/// Reads the block at `off` (after the SHB): `None` if it is bad.
fn step<'a>(
    bytes: &'a [u8],
    off: usize,
    ifaces: &mut Interfaces,
    verify: bool,
) -> Option<(Step<'a>, usize)> {
    let raw = raw_block(bytes, off)?;
    let step = match raw.kind {
        IDB => {
            ifaces.push(idb(raw.body)?)?;
            Step::Skip
        }
        EPB => {
            let (at, body) = record_body(raw.body, ifaces, verify)?;
            Step::Record(at, body)
        }
        // One segment is one section: a second header is not part of it.
        SHB => return None,
        _ => Step::Skip,
    };
    Some((step, raw.end))
}

/// Checks the section header at the start of `bytes`; its length, or `Ok(None)` when
/// `bytes` ends inside it (a segment whose writer died at once).
fn section_header(bytes: &[u8]) -> Result<Option<usize>, FormatError> {
    let shb = SHB.to_le_bytes();
    if bytes.len() < 4 {
        return match shb.starts_with(bytes) {
            true => Ok(None),
            false => Err(FormatError::Foreign),
        };
    }
    if le32(bytes, 0) != Some(SHB) {
        return Err(FormatError::Foreign);
    }
    if bytes.len() < 12 {
        return Ok(None);
    }
    match le32(bytes, 8) {
        Some(BYTE_ORDER_MAGIC) => {}
        Some(m) if m == BYTE_ORDER_MAGIC.swap_bytes() => {
            return Err(FormatError::BadHeader("big-endian section"));
        }
        _ => return Err(FormatError::BadHeader("no byte-order magic")),
    }
    let total = le32(bytes, 4).map_or(0, |t| t as usize);
    if !total.is_multiple_of(4) || total < 28 {
        return Err(FormatError::BadHeader("bad block length"));
    }
    if total > bytes.len() {
        return Ok(None);
    }
    let raw = raw_block(bytes, 0).ok_or(FormatError::BadHeader("trailing length differs"))?;
    if le16(raw.body, 4) != Some(1) {
        return Err(FormatError::BadHeader("not pcapng version 1"));
    }
    if !each_option(raw.body.get(16..).unwrap_or_default(), |_, _| {}) {
        return Err(FormatError::BadHeader("bad options"));
    }
    Ok(Some(raw.end))
}

/// A scanned segment: how much of it is good, and its records.
#[derive(Debug, Clone)]
pub struct Scan<'a> {
    bytes: &'a [u8],
    /// Offset of the first block after the section header.
    body_start: usize,
    valid_len: usize,
    finished: bool,
    summary: Summary,
}

/// What the scan learned on the way, for `SegmentInfo`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Summary {
    /// The earliest and the latest record time; `None` without records.
    pub span: Option<(u64, u64)>,
    /// Times of the checkpoints whose packets are all in the segment.
    pub checkpoints: Vec<u64>,
}

/// Scans a segment's bytes: walks its blocks up to the first bad one (the start of the
/// torn tail) or to `segment_end`, whose checksum it checks.
///
/// Errors: the bytes are not pcapng at all ([`FormatError::Foreign`]), the section header
/// is bad ([`FormatError::BadHeader`]), or the segment is finished and its checksum does
/// not match ([`FormatError::Corrupt`]). A file that ends inside its section header (its
/// writer died at once) is not an error: it has no records and a torn tail.
pub fn scan(bytes: &[u8]) -> Result<Scan<'_>, FormatError> {
    let Some(body_start) = section_header(bytes)? else {
        return Ok(Scan {
            bytes,
            body_start: 0,
            valid_len: 0,
            finished: false,
            summary: Summary::default(),
        });
    };
    let mut ifaces = Interfaces::default();
    let mut summary = Summary::default();
    let mut open_checkpoint: Option<(u64, u32)> = None;
    let mut records = 0u64;
    let mut off = body_start;
    let mut finished = false;
    while let Some((step, end)) = step(bytes, off, &mut ifaces, true) {
        let mut ends_segment = false;
        if let Step::Record(at, body) = step {
            let (first, last) = summary.span.unwrap_or((at, at));
            summary.span = Some((first.min(at), last.max(at)));
            match body {
                Body::Rtp(true, _) => {
                    if let Some((ck, left)) = open_checkpoint.as_mut() {
                        *left = left.saturating_sub(1);
                        if *left == 0 {
                            summary.checkpoints.push(*ck);
                            open_checkpoint = None;
                        }
                    }
                }
                Body::Rtp(false, _) => {}
                Body::Json(json) => match serde_json::from_slice::<Event>(json) {
                    Err(_) => break,
                    Ok(Event::Checkpoint { packets: 0 }) => summary.checkpoints.push(at),
                    Ok(Event::Checkpoint { packets }) => open_checkpoint = Some((at, packets)),
                    Ok(Event::SegmentEnd { records: n, crc32c }) => {
                        let actual = format!(
                            "{:08x}",
                            crc32c::crc32c(bytes.get(..off).unwrap_or_default())
                        );
                        if crc32c != actual || n != records {
                            return Err(FormatError::Corrupt {
                                expected: crc32c,
                                actual,
                            });
                        }
                        ends_segment = true;
                    }
                    Ok(_) => {}
                },
            }
            records += 1;
        }
        off = end;
        if ends_segment {
            finished = true;
            break;
        }
    }
    if !finished && off < bytes.len() {
        corrupt_before_end(bytes, &ifaces)?;
    }
    Ok(Scan {
        bytes,
        body_start,
        valid_len: off,
        finished,
        summary,
    })
}

/// Tells a torn tail from damage in the middle: when the walk stopped at a bad block but
/// the file still ends with a sound `segment_end`, the writer finished the segment and
/// its bytes changed since, so the segment is corrupt (its checksum cannot match), not
/// torn; cutting it there would throw good records away.
fn corrupt_before_end(bytes: &[u8], ifaces: &Interfaces) -> Result<(), FormatError> {
    let Some(total) = bytes.len().checked_sub(4).and_then(|at| le32(bytes, at)) else {
        return Ok(());
    };
    let Some(start) = bytes.len().checked_sub(total as usize) else {
        return Ok(());
    };
    let Some(raw) = raw_block(bytes, start).filter(|r| r.kind == EPB) else {
        return Ok(());
    };
    let Some((_, Body::Json(json))) = record_body(raw.body, ifaces, true) else {
        return Ok(());
    };
    match serde_json::from_slice(json) {
        Ok(Event::SegmentEnd {
            crc32c: expected, ..
        }) => Err(FormatError::Corrupt {
            expected,
            actual: format!(
                "{:08x}",
                crc32c::crc32c(bytes.get(..start).unwrap_or_default())
            ),
        }),
        _ => Ok(()),
    }
}

impl<'a> Scan<'a> {
    /// The good records, each with the offset of its block in the segment.
    pub fn records(&self) -> impl Iterator<Item = (u64, Record<'a>)> + '_ {
        let mut cursor = Cursor::new(self);
        std::iter::from_fn(move || {
            let record = cursor.next(self.bytes)?;
            Some((cursor.last as u64, record))
        })
    }

    /// How many bytes from the start are good: the segment without its torn tail.
    pub fn valid_len(&self) -> usize {
        self.valid_len
    }

    /// Whether the segment has a torn tail: bytes after the last good block.
    pub fn torn(&self) -> bool {
        self.valid_len < self.bytes.len()
    }

    /// Whether the segment ends with a `segment_end` whose checksum matched.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// What the walk learned: the records' time span and the complete checkpoints.
    pub(crate) fn summary(&self) -> &Summary {
        &self.summary
    }
}

/// A position among a scanned segment's records, which the player keeps across calls
/// without borrowing the segment.
#[derive(Debug, Clone)]
pub(crate) struct Cursor {
    ifaces: Interfaces,
    /// Offset of the next block.
    off: usize,
    /// Offset of the block of the record last read.
    last: usize,
    /// Where the good blocks end.
    end: usize,
}

impl Cursor {
    /// A cursor on the first record of `scan`.
    pub fn new(scan: &Scan<'_>) -> Cursor {
        Cursor {
            // IDBs are read again as the cursor passes them.
            ifaces: Interfaces::default(),
            off: scan.body_start,
            last: scan.body_start,
            end: scan.valid_len,
        }
    }

    /// The time of the next record, without moving.
    pub fn peek_at(&self, bytes: &[u8]) -> Option<u64> {
        let mut ifaces = self.ifaces;
        let mut off = self.off;
        while off < self.end {
            let (step, end) = step(bytes, off, &mut ifaces, false)?;
            if let Step::Record(at, _) = step {
                return Some(at);
            }
            off = end;
        }
        None
    }

    /// The next record, moving past it; `None` at the end of the good blocks.
    pub fn next<'a>(&mut self, bytes: &'a [u8]) -> Option<Record<'a>> {
        Some(match self.next_item(bytes)? {
            Item::Rtp {
                at_ns,
                checkpoint,
                packet,
            } => Record::Rtp {
                at_ns,
                checkpoint,
                packet: bytes.get(packet)?,
            },
            Item::Event { at_ns, event } => Record::Event { at_ns, event },
        })
    }

    /// The next record, its packet as a range of `bytes` (so that the player can keep it
    /// without keeping a borrow).
    pub fn next_item(&mut self, bytes: &[u8]) -> Option<Item> {
        while self.off < self.end {
            let (step, end) = step(bytes, self.off, &mut self.ifaces, false)?;
            self.last = self.off;
            self.off = end;
            match step {
                Step::Skip => {}
                Step::Record(at_ns, Body::Rtp(checkpoint, packet)) => {
                    // `packet` is a sub-slice of `bytes`: its offset is the distance
                    // between their starts.
                    let start = packet.as_ptr() as usize - bytes.as_ptr() as usize;
                    return Some(Item::Rtp {
                        at_ns,
                        checkpoint,
                        packet: start..start + packet.len(),
                    });
                }
                Step::Record(at_ns, Body::Json(json)) => {
                    // Parsed once already by the scan; the fallback keeps this total.
                    let event = serde_json::from_slice(json)
                        .unwrap_or(Event::Other(serde_json::Value::Null));
                    return Some(Item::Event { at_ns, event });
                }
            }
        }
        None
    }
}

/// A record as [`Cursor::next_item`] gives it.
pub(crate) enum Item {
    /// An RTP packet at `packet` in the segment's bytes.
    Rtp {
        at_ns: u64,
        checkpoint: bool,
        packet: std::ops::Range<usize>,
    },
    /// An event.
    Event { at_ns: u64, event: Event },
}
