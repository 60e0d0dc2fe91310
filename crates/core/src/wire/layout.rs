//! Where each object's fields sit: the one structural parser shared by the zero-copy
//! scanner (`super::scan`) and the typed decoder (`super::decode`).
//!
//! Everything here borrows the payload and allocates nothing. Fixed-size parts are
//! described by [`Fixed`]; the variable parts (optional TLVs, mesh arrays) are parsed into
//! borrowed views.

use super::dialect::{Dialect, ObjectKind};
use super::error::{DecodeError, ErrorKind};
use super::reader::Reader;

/// Size of Loc2 / Scale2 on the wire.
pub const LOC2: usize = 18;
/// Size of Rot2 on the wire.
pub const ROT2: usize = 12;
/// Size of Rot1 on the wire.
pub const ROT1: usize = 6;
/// Size of Loc1 on the wire.
pub const LOC1: usize = 12;
/// Size of Transform1 on the wire.
pub const TRANSFORM1: usize = 6;
/// Joints in Hand2 (wrist + 4 thumb + 4 × 5 finger joints).
pub const HAND2_JOINTS: usize = 25;

/// The fixed-size part of an object after its objectID.
#[derive(Debug, Clone, Copy)]
pub struct Fixed {
    /// Bytes in the fixed part.
    pub size: usize,
    /// Offset of a Boolean inside it, if any.
    pub bool_at: Option<usize>,
    /// Offset of the position (three Float32) inside it, if any.
    pub pos_at: Option<usize>,
}

impl Fixed {
    /// The fixed layout of `kind` in `dialect`; `None` for variable layouts
    /// (Mesh1, Mesh2, GameControl1, HeadIPD1, unknown).
    pub fn of(kind: ObjectKind, dialect: Dialect) -> Option<Fixed> {
        let f = |size, bool_at, pos_at| {
            Some(Fixed {
                size,
                bool_at,
                pos_at,
            })
        };
        match kind {
            ObjectKind::Head1 => f(2 + LOC2 + ROT2, None, Some(2)),
            ObjectKind::Hand1 => f(3 + LOC2 + ROT2, Some(2), Some(3)),
            ObjectKind::Hand2 => f(
                3 + LOC2 + ROT2 + HAND2_JOINTS * TRANSFORM1,
                Some(2),
                Some(3),
            ),
            ObjectKind::Object1 => match dialect {
                Dialect::Draft01 => f(2 + LOC1 + ROT1 + 2 + 1, Some(22), Some(2)),
                Dialect::Gse => f(2 + LOC1 + ROT1 + 12 + 1, Some(32), Some(2)),
            },
            ObjectKind::Object2 => f(2 + LOC2 + ROT2 + LOC2 + 1, Some(50), Some(2)),
            ObjectKind::ThreeDof1 => f(3 + ROT2, Some(2), None),
            ObjectKind::SixDof1 => f(3 + LOC2 + ROT2, Some(2), Some(3)),
            _ => None,
        }
    }

    /// Takes the fixed part, checking its Boolean; returns it and the position it holds.
    pub fn take<'a>(
        &self,
        r: &mut Reader<'a>,
        dialect: Dialect,
    ) -> Result<(Reader<'a>, Option<[f32; 3]>), DecodeError> {
        let part = r.sub(self.size)?;
        let bytes = part.rest();
        if let Some(at) = self.bool_at {
            let b = bytes.get(at).copied().unwrap_or_default();
            if b > 1 && dialect.strict_booleans() {
                let offset = part.offset() + at;
                return Err(DecodeError::new(offset, ErrorKind::InvalidBoolean(b)));
            }
        }
        let pos = self
            .pos_at
            .and_then(|at| bytes.get(at..at + LOC1))
            .and_then(|p| <[u8; LOC1]>::try_from(p).ok())
            .map(|p| {
                let f = |i: usize| f32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
                [f(0), f(4), f(8)]
            });
        Ok((part, pos))
    }
}

/// An object's outer TLV: tag, and a reader bounded by its Length.
#[derive(Debug, Clone)]
pub struct Tlv<'a> {
    /// Offset of the tag.
    pub start: usize,
    /// The tag.
    pub tag: u64,
    /// The bytes inside the Length.
    pub body: Reader<'a>,
}

/// Reads one top-level object's Tag and Length.
pub fn read_tlv<'a>(r: &mut Reader<'a>) -> Result<Tlv<'a>, DecodeError> {
    let start = r.offset();
    let tag = r.varuint()?;
    if tag == 0 {
        return Err(DecodeError::new(start, ErrorKind::TagZero));
    }
    let len = r.length()?;
    let body = r.sub(len)?;
    Ok(Tlv { start, tag, body })
}

/// The optional parts at the end of an object.
#[derive(Debug, Clone, Default)]
pub struct Trailer<'a> {
    /// HeadIPD1 (Float16 bits).
    pub ipd: Option<u16>,
    /// Parent objectID.
    pub parent: Option<u64>,
    /// 6DOF pointer: Loc1 bytes, and whether it was written without a Length.
    pub pointer: Option<(&'a [u8], bool)>,
    /// Everything after the known optional part, kept verbatim.
    pub extra: &'a [u8],
}

/// Which optional part an object type may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optional {
    /// None (extensions only).
    None,
    /// HeadIPD1 (Head1).
    Ipd,
    /// Parent1 (Object1, Object2, Mesh2).
    Parent,
    /// 6DOF pointer (SixDOF1).
    Pointer,
}

impl Optional {
    /// The optional part `kind` may end with.
    pub fn of(kind: ObjectKind) -> Optional {
        match kind {
            ObjectKind::Head1 => Optional::Ipd,
            ObjectKind::Object1 | ObjectKind::Object2 | ObjectKind::Mesh2 => Optional::Parent,
            ObjectKind::SixDof1 => Optional::Pointer,
            _ => Optional::None,
        }
    }
}

/// Parses the rest of an object as its optional parts, consuming the reader.
pub fn trailer<'a>(
    r: &mut Reader<'a>,
    opt: Optional,
    dialect: Dialect,
) -> Result<Trailer<'a>, DecodeError> {
    match dialect {
        Dialect::Draft01 => draft01_trailer(r, opt),
        Dialect::Gse => gse_trailer(r, opt),
    }
}

/// draft01: the known optional TLV (if first), then extension TLVs kept verbatim.
fn draft01_trailer<'a>(r: &mut Reader<'a>, opt: Optional) -> Result<Trailer<'a>, DecodeError> {
    let mut t = Trailer::default();
    if r.is_empty() {
        return Ok(t);
    }
    let mut peek = r.clone();
    let tag = peek.varuint()?;
    let ipd_tag = Dialect::Draft01.tag_of(ObjectKind::HeadIpd1);
    match opt {
        Optional::Ipd if Some(tag) == ipd_tag => {
            let mut v = nested(&mut peek, tag, 2)?;
            t.ipd = Some(v.u16()?);
            *r = peek;
        }
        Optional::Parent if tag == Dialect::PARENT1_TAG => {
            let mut v = nested(&mut peek, tag, 1)?;
            t.parent = Some(v.varuint()?);
            expect_end(&v)?;
            *r = peek;
        }
        Optional::Pointer if tag == Dialect::SIXDOF_POINTER1_TAG => {
            // The EBNF gives this part no Length; the other optional parts have one.
            // The outer Length tells the two apart: exactly one Loc1 left means "bare".
            if peek.remaining() == LOC1 {
                t.pointer = Some((peek.take(LOC1)?, true));
            } else {
                let v = nested(&mut peek, tag, LOC1)?;
                t.pointer = Some((v.rest(), false));
            }
            *r = peek;
        }
        _ => {}
    }
    t.extra = extensions(r)?;
    Ok(t)
}

/// Reads a nested optional TLV's Length and value; the value must be exactly `size` bytes
/// (for Parent1, at least one).
fn nested<'a>(r: &mut Reader<'a>, tag: u64, size: usize) -> Result<Reader<'a>, DecodeError> {
    let at = r.offset();
    let len = r.varuint()?;
    let exact = tag != Dialect::PARENT1_TAG;
    let ok = if exact {
        len == size as u64
    } else {
        len >= size as u64
    };
    if !ok {
        return Err(DecodeError::new(
            at,
            ErrorKind::OptionalTooShort { tag, length: len },
        ));
    }
    r.sub(len as usize)
}

/// Validates the rest as a sequence of TLVs (tag ≠ 0, Length in bounds) and returns it.
pub fn extensions<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let all = r.rest();
    while !r.is_empty() {
        read_tlv(r)?;
    }
    Ok(all)
}

/// gse: what the reference decoder accepts after each object's fixed part.
fn gse_trailer<'a>(r: &mut Reader<'a>, opt: Optional) -> Result<Trailer<'a>, DecodeError> {
    let mut t = Trailer::default();
    if r.is_empty() {
        return Ok(t);
    }
    match opt {
        Optional::Ipd => {
            let at = r.offset();
            let tag = r.varuint()?;
            if Some(tag) != Dialect::Gse.tag_of(ObjectKind::HeadIpd1) {
                return Err(DecodeError::new(at, ErrorKind::UnexpectedOptional(tag)));
            }
            let len_at = r.offset();
            let len = r.length()?;
            if len < 2 {
                let length = len as u64;
                return Err(DecodeError::new(
                    len_at,
                    ErrorKind::OptionalTooShort { tag, length },
                ));
            }
            // gse skips bytes after the Float16 inside the nested Length.
            let mut v = r.sub(len)?;
            t.ipd = Some(v.u16()?);
            expect_end(r)?;
        }
        Optional::Parent => {
            t.parent = Some(r.varuint()?);
            expect_end(r)?;
        }
        // gse skips whatever else its Length covers.
        Optional::None | Optional::Pointer => t.extra = r.take_rest(),
    }
    Ok(t)
}

/// Fails with `TrailingBytes` unless the reader is exhausted.
pub fn expect_end(r: &Reader<'_>) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(r.error(ErrorKind::TrailingBytes(r.remaining())))
    }
}

/// A borrowed texture choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextureRef<'a> {
    /// TextureUrl1
    Url(&'a str),
    /// TextureRtpPT1
    RtpPt(u8),
}

/// A counted array of fixed-size elements.
#[derive(Debug, Clone, Copy, Default)]
pub struct Array<'a> {
    /// Element count.
    pub count: usize,
    /// The elements' bytes.
    pub bytes: &'a [u8],
}

/// Reads `count` then `count × size` bytes.
fn fixed_array<'a>(r: &mut Reader<'a>, size: usize) -> Result<Array<'a>, DecodeError> {
    let at = r.offset();
    let count = r.length()?;
    let n = count
        .checked_mul(size)
        .filter(|n| *n <= r.remaining())
        .ok_or_else(|| DecodeError::new(at, ErrorKind::CountTooLarge(count as u64)))?;
    Ok(Array {
        count,
        bytes: r.take(n)?,
    })
}

/// Reads `count` then `count × per` VarUInts.
fn varuint_array<'a>(r: &mut Reader<'a>, per: usize) -> Result<Array<'a>, DecodeError> {
    let at = r.offset();
    let count = r.length()?;
    let values = count
        .checked_mul(per)
        .filter(|n| *n <= r.remaining())
        .ok_or_else(|| DecodeError::new(at, ErrorKind::CountTooLarge(count as u64)))?;
    let start = r.clone();
    for _ in 0..values {
        r.skip_varuint()?;
    }
    let used = start.remaining() - r.remaining();
    Ok(Array {
        count,
        bytes: start.rest().get(..used).unwrap_or_default(),
    })
}

/// Mesh1's parts, borrowed.
#[derive(Debug, Clone, Default)]
pub struct Mesh1Layout<'a> {
    /// Texture (draft01 only).
    pub texture: Option<TextureRef<'a>>,
    /// Vertexes, Loc1 each.
    pub vertices: Array<'a>,
    /// Normals, Norm1 (3 × Float16) each.
    pub normals: Array<'a>,
    /// Texture coordinates: 2 × Float32 (draft01) or 2 × VarUInt (gse) each.
    pub uvs: Array<'a>,
    /// Triangle indexes, VarUInt each.
    pub triangles: Array<'a>,
    /// Trailing bytes kept verbatim.
    pub extra: &'a [u8],
}

/// Parses Mesh1 after its objectID.
pub fn mesh1<'a>(r: &mut Reader<'a>, dialect: Dialect) -> Result<Mesh1Layout<'a>, DecodeError> {
    match dialect {
        Dialect::Gse => mesh1_arrays(r, dialect, None),
        Dialect::Draft01 => {
            // The draft gives ( TextureUrl1 | TextureRtpPT1 ) no discriminator: take the
            // URL reading if the rest then parses, else the payload-type reading.
            let mut as_url = r.clone();
            if let Ok(url) = as_url.string()
                && let Ok(m) = mesh1_arrays(&mut as_url, dialect, Some(TextureRef::Url(url)))
            {
                *r = as_url;
                return Ok(m);
            }
            let pt = r.u8()?;
            mesh1_arrays(r, dialect, Some(TextureRef::RtpPt(pt)))
        }
    }
}

fn mesh1_arrays<'a>(
    r: &mut Reader<'a>,
    dialect: Dialect,
    texture: Option<TextureRef<'a>>,
) -> Result<Mesh1Layout<'a>, DecodeError> {
    let vertices = fixed_array(r, LOC1)?;
    let normals = fixed_array(r, 6)?;
    let uvs = match dialect {
        Dialect::Draft01 => fixed_array(r, 8)?,
        Dialect::Gse => varuint_array(r, 2)?,
    };
    let triangles = varuint_array(r, 1)?;
    let extra = trailer(r, Optional::None, dialect)?.extra;
    Ok(Mesh1Layout {
        texture,
        vertices,
        normals,
        uvs,
        triangles,
        extra,
    })
}

/// Mesh2's variable parts, borrowed (the Loc2/Rot2/Scale2 prefix is fixed).
#[derive(Debug, Clone, Default)]
pub struct Mesh2Layout<'a> {
    /// MeshUrl1.
    pub mesh_url: &'a str,
    /// Optional texture.
    pub texture: Option<TextureRef<'a>>,
    /// Parent and extensions.
    pub trailer: Trailer<'a>,
}

/// Size of Mesh2's fixed prefix (Loc2 Rot2 Scale2).
pub const MESH2_FIXED: usize = LOC2 + ROT2 + LOC2;

/// Parses Mesh2 after its fixed prefix.
pub fn mesh2<'a>(r: &mut Reader<'a>) -> Result<Mesh2Layout<'a>, DecodeError> {
    let mesh_url = r.string()?;
    // The optional texture has no tag either. Readings, in order of preference: no
    // texture when nothing or a Parent1 follows; a URL; a payload type; no texture with
    // extension TLVs. The first after which the rest parses as optional TLVs wins.
    let read = |texture: u8, plain: bool| {
        let mut c = r.clone();
        let texture = match texture {
            0 => None,
            1 => Some(TextureRef::Url(c.string()?)),
            _ => Some(TextureRef::RtpPt(c.u8()?)),
        };
        let t = trailer(&mut c, Optional::Parent, Dialect::Draft01)?;
        if plain && t.parent.is_none() && !t.extra.is_empty() {
            return Err(c.error(ErrorKind::TrailingBytes(t.extra.len())));
        }
        Ok::<_, DecodeError>((c, texture, t))
    };
    let (rest, texture, trailer) = read(0, true)
        .or_else(|_| read(1, false))
        .or_else(|_| read(2, false))
        .or_else(|_| read(0, false))?;
    *r = rest;
    Ok(Mesh2Layout {
        mesh_url,
        texture,
        trailer,
    })
}

/// GameControl1 after its objectID: Time1, VarInt buttons, Time1, 4 × Float16.
pub fn gamecontrol1<'a>(r: &mut Reader<'a>) -> Result<(u16, i64, u16, Reader<'a>), DecodeError> {
    let time = r.u16()?;
    let buttons = r.varint()?;
    let buttons_time = r.u16()?;
    let sticks = r.sub(8)?;
    Ok((time, buttons, buttons_time, sticks))
}
