//! The zero-copy object scanner used on the relay's hot path.
//!
//! For each object it yields the tag, objectID, byte range of the whole TLV, position and
//! parent, validating the object's structure on the way (Length bounds, Booleans, nested
//! optional parts, mesh array counts) without decoding floats it does not need and
//! without allocating.

use super::container;
use super::dialect::{Dialect, ObjectKind};
use super::error::DecodeError;
use super::layout::{self, Fixed, Optional};
use super::reader::Reader;
use std::ops::Range;

/// One object of a payload, by reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectRef {
    /// The tag as sent.
    pub tag: u64,
    /// What the tag names in the payload's dialect.
    pub kind: ObjectKind,
    /// The objectID; `None` for objects that have none (a top-level HeadIPD1, or an
    /// unknown object whose body does not start with a VarUInt).
    pub id: Option<u64>,
    /// Offset of the object's first byte (its tag).
    pub start: usize,
    /// Offset one past its last byte.
    pub end: usize,
    /// Its position (Loc1/Loc2 x, y, z) for the types that have one.
    pub position: Option<[f32; 3]>,
    /// Its parent objectID, if it declares one.
    pub parent: Option<u64>,
}

impl ObjectRef {
    /// The byte range of the whole TLV in the payload.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }

    /// The object's bytes in `payload` (the payload it was scanned from).
    pub fn bytes<'a>(&self, payload: &'a [u8]) -> &'a [u8] {
        payload.get(self.range()).unwrap_or_default()
    }
}

/// Iterator over the objects of a payload. After the first error it yields nothing more.
#[derive(Debug, Clone)]
pub struct Objects<'a> {
    r: Reader<'a>,
    dialect: Dialect,
    failed: bool,
}

/// Scans a payload object by object.
pub fn objects(payload: &[u8], dialect: Dialect) -> Objects<'_> {
    Objects {
        r: Reader::new(payload),
        dialect,
        failed: false,
    }
}

/// Checks a whole payload; returns its object count, or the first error.
pub fn validate(payload: &[u8], dialect: Dialect) -> Result<usize, DecodeError> {
    objects(payload, dialect).try_fold(0, |n, o| o.map(|_| n + 1))
}

impl Iterator for Objects<'_> {
    type Item = Result<ObjectRef, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let item = scan_one(&mut self.r, self.dialect);
        self.failed = item.is_err();
        Some(item)
    }
}

fn scan_one(r: &mut Reader<'_>, dialect: Dialect) -> Result<ObjectRef, DecodeError> {
    let tlv = layout::read_tlv(r)?;
    scan_tlv(tlv, r.offset(), dialect)
}

/// Scans one object whose Tag and Length have been read; `end` is its end offset.
fn scan_tlv(tlv: layout::Tlv<'_>, end: usize, dialect: Dialect) -> Result<ObjectRef, DecodeError> {
    let kind = dialect.kind_of(tlv.tag);
    let mut b = tlv.body;
    let mut o = ObjectRef {
        tag: tlv.tag,
        kind,
        id: None,
        start: tlv.start,
        end,
        position: None,
        parent: None,
    };
    match kind {
        ObjectKind::Unknown => o.id = b.varuint().ok(),
        ObjectKind::Container => {
            o.id = Some(u64::from(container::read_ssrc(&mut b)?));
            while !b.is_empty() {
                let inner = container::inner_tlv(&mut b, dialect)?;
                scan_tlv(inner, b.offset(), dialect)?;
            }
        }
        ObjectKind::HeadIpd1 => {
            b.u16()?;
            layout::trailer(&mut b, Optional::None, dialect)?;
        }
        ObjectKind::Mesh1 => {
            o.id = Some(b.varuint()?);
            layout::mesh1(&mut b, dialect)?;
        }
        ObjectKind::Mesh2 => {
            o.id = Some(b.varuint()?);
            let mut f = b.sub(layout::MESH2_FIXED)?;
            o.position = Some([f.f32()?, f.f32()?, f.f32()?]);
            o.parent = layout::mesh2(&mut b)?.trailer.parent;
        }
        ObjectKind::GameControl1 => {
            o.id = Some(b.varuint()?);
            layout::gamecontrol1(&mut b)?;
            layout::trailer(&mut b, Optional::None, dialect)?;
        }
        _ => {
            o.id = Some(b.varuint()?);
            if let Some(fixed) = Fixed::of(kind, dialect) {
                o.position = fixed.take(&mut b, dialect)?.1;
            }
            o.parent = layout::trailer(&mut b, Optional::of(kind), dialect)?.parent;
        }
    }
    Ok(o)
}
