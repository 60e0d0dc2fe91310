//! The container object: one sender's objects inside a relay's aggregated packet.
//!
//! A relay in aggregated delivery (RFC 7667 §3.6, the relay as a mixer) sends one RTP
//! stream whose packets carry many senders' objects. Each sender's objects travel inside
//! an object of the draft's own grammar, so no new framing is needed:
//!
//! ```text
//! Container ::= Tag(18259) Length ObjectID(= sender's SSRC) Object*
//! ```
//!
//! Tag 18259 (0x4753, "GS") is in the draft's First-Come-First-Served range; it is
//! written `c0 47 53` (prose-form VarUInt) in both dialects, which read tags, Lengths and
//! objectIDs alike. (16384, the range's first value, is what the reference
//! implementation's vectors use as an unknown object, so it is left alone.) The objects inside are the sender's original TLVs, byte for byte, in
//! the dialect of the receiving session. A decoder that does not know the tag skips the
//! whole container by its Length, as for any unknown object. A container never holds a
//! container. See `docs/wire-format.md` §8.

use super::dialect::{Dialect, ObjectKind};
use super::error::{DecodeError, ErrorKind};
use super::layout;
use super::reader::Reader;
use super::writer::{WriteExt, varuint_len};

pub use super::dialect::CONTAINER_TAG;
pub use super::object::Container;

/// Bytes a container of `objects_len` bytes of objects takes on the wire.
pub fn container_len(ssrc: u32, objects_len: usize) -> usize {
    let length = varuint_len(u64::from(ssrc)) + objects_len;
    varuint_len(CONTAINER_TAG) + varuint_len(length as u64) + length
}

/// Appends a container's Tag, Length and ObjectID; `objects_len` bytes of objects must
/// follow.
pub fn write_header(out: &mut Vec<u8>, ssrc: u32, objects_len: usize) {
    out.put_varuint(CONTAINER_TAG);
    out.put_varuint((varuint_len(u64::from(ssrc)) + objects_len) as u64);
    out.put_varuint(u64::from(ssrc));
}

/// Zero-copy view of one container TLV (its bytes from the tag to the end of its
/// Length, e.g. an [`ObjectRef`](super::ObjectRef)'s range): the sender's SSRC and the
/// bytes of its objects. `None` when the bytes are not a well-formed container header.
pub fn split(tlv: &[u8]) -> Option<(u32, &[u8])> {
    let mut r = Reader::new(tlv);
    let t = layout::read_tlv(&mut r).ok()?;
    if t.tag != CONTAINER_TAG {
        return None;
    }
    let mut body = t.body;
    let ssrc = read_ssrc(&mut body).ok()?;
    Some((ssrc, body.rest()))
}

/// Reads the container's ObjectID, which must be an SSRC (32 bits).
pub(super) fn read_ssrc(b: &mut Reader<'_>) -> Result<u32, DecodeError> {
    let at = b.offset();
    let id = b.varuint()?;
    u32::try_from(id).map_err(|_| DecodeError::new(at, ErrorKind::ContainerId(id)))
}

/// Reads the next object inside a container, refusing a nested container.
pub(super) fn inner_tlv<'a>(
    b: &mut Reader<'a>,
    dialect: Dialect,
) -> Result<layout::Tlv<'a>, DecodeError> {
    let tlv = layout::read_tlv(b)?;
    if dialect.kind_of(tlv.tag) == ObjectKind::Container {
        return Err(DecodeError::new(tlv.start, ErrorKind::NestedContainer));
    }
    Ok(tlv)
}
