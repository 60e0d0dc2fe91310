//! Typed decoding: payload bytes to [`Object`]s.

use super::container;
use super::dialect::{Dialect, ObjectKind};
use super::error::DecodeError;
use super::json::Hex;
use super::layout::{self, Array, Fixed, Optional, TextureRef, Tlv};
use super::object::*;
use super::reader::Reader;

/// Decodes every object of a payload, in wire order. Any malformed object fails the whole
/// payload (objects in one packet are fate-shared).
pub fn decode(payload: &[u8], dialect: Dialect) -> Result<Vec<Object>, DecodeError> {
    let mut r = Reader::new(payload);
    let mut out = Vec::new();
    while !r.is_empty() {
        let tlv = layout::read_tlv(&mut r)?;
        out.push(decode_tlv(tlv, dialect)?);
    }
    Ok(out)
}

/// Decodes one object whose Tag and Length have been read.
pub fn decode_tlv(tlv: Tlv<'_>, dialect: Dialect) -> Result<Object, DecodeError> {
    let mut b = tlv.body;
    let kind = dialect.kind_of(tlv.tag);
    let obj = match kind {
        ObjectKind::Unknown => Object::Unknown(Unknown {
            tag: tlv.tag,
            data: hex(b.take_rest()),
        }),
        ObjectKind::HeadIpd1 => {
            let ipd = b.f16()?;
            let extra = hex(layout::trailer(&mut b, Optional::None, dialect)?.extra);
            Object::HeadIpd1(HeadIpd1 { ipd, extra })
        }
        ObjectKind::Mesh1 => Object::Mesh1(mesh1(&mut b, dialect)?),
        ObjectKind::Mesh2 => Object::Mesh2(mesh2(&mut b)?),
        ObjectKind::GameControl1 => Object::GameControl1(gamecontrol1(&mut b, dialect)?),
        ObjectKind::Container => Object::Container(decode_container(&mut b, dialect)?),
        _ => fixed_object(kind, &mut b, dialect)?,
    };
    Ok(obj)
}

fn hex(bytes: &[u8]) -> Hex {
    Hex(bytes.to_vec())
}

/// Objects whose body is objectID + a fixed part + an optional part.
fn fixed_object(kind: ObjectKind, b: &mut Reader<'_>, d: Dialect) -> Result<Object, DecodeError> {
    let id = b.varuint()?;
    let Some(layout) = Fixed::of(kind, d) else {
        unreachable!("fixed_object is only called for fixed layouts")
    };
    let (mut f, _) = layout.take(b, d)?;
    let t = layout::trailer(b, Optional::of(kind), d)?;
    let strict = d.strict_booleans();
    let extra = hex(t.extra);
    let obj = match kind {
        ObjectKind::Head1 => Object::Head1(Head1 {
            id,
            time: f.u16()?,
            location: loc2(&mut f)?,
            rotation: rot2(&mut f)?,
            ipd: t.ipd.map(super::float16::to_f32),
            extra,
        }),
        ObjectKind::Hand1 => Object::Hand1(Hand1 {
            id,
            time: f.u16()?,
            left: f.boolean(strict)?,
            location: loc2(&mut f)?,
            rotation: rot2(&mut f)?,
            extra,
        }),
        ObjectKind::Hand2 => Object::Hand2(Box::new(Hand2 {
            id,
            time: f.u16()?,
            left: f.boolean(strict)?,
            location: loc2(&mut f)?,
            rotation: rot2(&mut f)?,
            wrist: transform(&mut f)?,
            thumb: Thumb {
                tip: transform(&mut f)?,
                ip: transform(&mut f)?,
                mcp: transform(&mut f)?,
                cmc: transform(&mut f)?,
            },
            index: finger(&mut f)?,
            middle: finger(&mut f)?,
            ring: finger(&mut f)?,
            pinky: finger(&mut f)?,
            extra,
        })),
        ObjectKind::Object1 => Object::Object1(Object1 {
            id,
            time: f.u16()?,
            position: vec3_f32(&mut f)?,
            rotation: Rot1 {
                i: f.f16()?,
                j: f.f16()?,
                k: f.f16()?,
            },
            scale: match d {
                Dialect::Draft01 => Scale1::Uniform(f.f16()?),
                Dialect::Gse => Scale1::Axes(vec3_f32(&mut f)?),
            },
            active: f.boolean(strict)?,
            parent: t.parent,
            extra,
        }),
        ObjectKind::Object2 => Object::Object2(Object2 {
            id,
            time: f.u16()?,
            location: loc2(&mut f)?,
            rotation: rot2(&mut f)?,
            scale: loc2(&mut f)?,
            active: f.boolean(strict)?,
            parent: t.parent,
            extra,
        }),
        ObjectKind::ThreeDof1 => Object::ThreeDof1(ThreeDof1 {
            id,
            time: f.u16()?,
            left: f.boolean(strict)?,
            rotation: rot2(&mut f)?,
            extra,
        }),
        ObjectKind::SixDof1 => Object::SixDof1(SixDof1 {
            id,
            time: f.u16()?,
            left: f.boolean(strict)?,
            location: loc2(&mut f)?,
            rotation: rot2(&mut f)?,
            pointer: match t.pointer {
                Some((bytes, bare)) => {
                    let v = vec3_f32(&mut Reader::new(bytes))?;
                    Some(Pointer {
                        x: v.x,
                        y: v.y,
                        z: v.z,
                        bare,
                    })
                }
                None => None,
            },
            extra,
        }),
        _ => unreachable!("fixed layouts are exactly the kinds above"),
    };
    Ok(obj)
}

fn mesh1(b: &mut Reader<'_>, d: Dialect) -> Result<Mesh1, DecodeError> {
    let id = b.varuint()?;
    let m = layout::mesh1(b, d)?;
    let textures = match d {
        Dialect::Draft01 => each(m.uvs, |r| {
            Ok(TexCoord::Float {
                u: r.f32()?,
                v: r.f32()?,
            })
        })?,
        Dialect::Gse => each(m.uvs, |r| {
            Ok(TexCoord::Index {
                u: r.varuint()?,
                v: r.varuint()?,
            })
        })?,
    };
    Ok(Mesh1 {
        id,
        texture: m.texture.map(texture),
        vertices: each(m.vertices, vec3_f32)?,
        normals: each(m.normals, |r| {
            Ok(Vec3 {
                x: r.f16()?,
                y: r.f16()?,
                z: r.f16()?,
            })
        })?,
        textures,
        triangles: each(m.triangles, |r| r.varuint())?,
        extra: hex(m.extra),
    })
}

fn mesh2(b: &mut Reader<'_>) -> Result<Mesh2, DecodeError> {
    let id = b.varuint()?;
    let mut f = b.sub(layout::MESH2_FIXED)?;
    let m = layout::mesh2(b)?;
    Ok(Mesh2 {
        id,
        location: loc2(&mut f)?,
        rotation: rot2(&mut f)?,
        scale: loc2(&mut f)?,
        mesh_url: m.mesh_url.to_owned(),
        texture: m.texture.map(texture),
        parent: m.trailer.parent,
        extra: hex(m.trailer.extra),
    })
}

fn gamecontrol1(b: &mut Reader<'_>, d: Dialect) -> Result<GameControl1, DecodeError> {
    let id = b.varuint()?;
    let (time, buttons, buttons_time, mut s) = layout::gamecontrol1(b)?;
    let t = layout::trailer(b, Optional::None, d)?;
    Ok(GameControl1 {
        id,
        time,
        buttons,
        buttons_time,
        left: Stick {
            x: s.f16()?,
            y: s.f16()?,
        },
        right: Stick {
            x: s.f16()?,
            y: s.f16()?,
        },
        extra: hex(t.extra),
    })
}

fn texture(t: TextureRef<'_>) -> Texture {
    match t {
        TextureRef::Url(u) => Texture::Url(u.to_owned()),
        TextureRef::RtpPt(pt) => Texture::RtpPt(pt),
    }
}

/// Decodes each element of a counted array already bounds-checked by the layout.
fn each<T>(
    a: Array<'_>,
    mut f: impl FnMut(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut r = Reader::new(a.bytes);
    (0..a.count).map(|_| f(&mut r)).collect()
}

fn vec3_f32(r: &mut Reader<'_>) -> Result<Vec3, DecodeError> {
    Ok(Vec3 {
        x: r.f32()?,
        y: r.f32()?,
        z: r.f32()?,
    })
}

fn loc2(r: &mut Reader<'_>) -> Result<Loc2, DecodeError> {
    Ok(Loc2 {
        x: r.f32()?,
        y: r.f32()?,
        z: r.f32()?,
        vx: r.f16()?,
        vy: r.f16()?,
        vz: r.f16()?,
    })
}

fn rot2(r: &mut Reader<'_>) -> Result<Rot2, DecodeError> {
    Ok(Rot2 {
        si: r.f16()?,
        sj: r.f16()?,
        sk: r.f16()?,
        ei: r.f16()?,
        ej: r.f16()?,
        ek: r.f16()?,
    })
}

fn transform(r: &mut Reader<'_>) -> Result<Transform1, DecodeError> {
    Ok(Transform1 {
        tx: r.f16()?,
        ty: r.f16()?,
        tz: r.f16()?,
    })
}

fn finger(r: &mut Reader<'_>) -> Result<Finger, DecodeError> {
    Ok(Finger {
        tip: transform(r)?,
        dip: transform(r)?,
        pip: transform(r)?,
        mcp: transform(r)?,
        cmc: transform(r)?,
    })
}

/// Decodes a container's body (after its Length).
fn decode_container(b: &mut Reader<'_>, dialect: Dialect) -> Result<Container, DecodeError> {
    let ssrc = container::read_ssrc(b)?;
    let mut objects = Vec::new();
    while !b.is_empty() {
        let tlv = container::inner_tlv(b, dialect)?;
        objects.push(decode_tlv(tlv, dialect)?);
    }
    Ok(Container { ssrc, objects })
}
