//! Typed encoding: [`Object`]s to payload bytes, in the minimal (canonical) form.

use super::decode::decode_tlv;
use super::dialect::{Dialect, ObjectKind};
use super::json::Hex;
use super::layout;
use super::object::*;
use super::reader::Reader;
use super::writer::WriteExt;
use thiserror::Error;

/// Why an object cannot be written in a dialect.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{object}: {message}")]
pub struct EncodeError {
    /// The object type (and field) concerned.
    pub object: String,
    /// What is wrong.
    pub message: String,
}

fn err(object: &str, message: impl Into<String>) -> EncodeError {
    EncodeError {
        object: object.to_owned(),
        message: message.into(),
    }
}

/// Encodes objects into one payload.
pub fn encode(objects: &[Object], dialect: Dialect) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    let mut body = Vec::new();
    for o in objects {
        encode_object(o, dialect, &mut body, &mut out)?;
    }
    Ok(out)
}

/// Appends one object to `out`; `scratch` is reused for the body.
pub fn encode_object(
    o: &Object,
    d: Dialect,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    scratch.clear();
    let tag = match o {
        Object::Unknown(u) => unknown_tag(u, d)?,
        _ => {
            let kind = kind_of(o);
            let tag = d
                .tag_of(kind)
                .ok_or_else(|| err(kind.name(), format!("not part of the {d} dialect")))?;
            body(o, d, scratch)?;
            tag
        }
    };
    let start = out.len();
    out.put_varuint(tag);
    let data = match o {
        Object::Unknown(u) => &u.data.0[..],
        _ => &scratch[..],
    };
    out.put_blob(data);
    if o.extra().is_some_and(|e| !e.is_empty()) {
        let mut r = Reader::new(&out[start..]);
        if let Err(e) = layout::read_tlv(&mut r).and_then(|tlv| decode_tlv(tlv, d)) {
            out.truncate(start);
            let what = kind_of(o).name();
            return Err(err(
                what,
                format!("`extra` makes the object undecodable: {e}"),
            ));
        }
    }
    Ok(())
}

/// The kind an object encodes as.
pub fn kind_of(o: &Object) -> ObjectKind {
    match o {
        Object::Head1(_) => ObjectKind::Head1,
        Object::Hand1(_) => ObjectKind::Hand1,
        Object::Hand2(_) => ObjectKind::Hand2,
        Object::Object1(_) => ObjectKind::Object1,
        Object::Object2(_) => ObjectKind::Object2,
        Object::Mesh1(_) => ObjectKind::Mesh1,
        Object::Mesh2(_) => ObjectKind::Mesh2,
        Object::GameControl1(_) => ObjectKind::GameControl1,
        Object::ThreeDof1(_) => ObjectKind::ThreeDof1,
        Object::SixDof1(_) => ObjectKind::SixDof1,
        Object::HeadIpd1(_) => ObjectKind::HeadIpd1,
        Object::Container(_) => ObjectKind::Container,
        Object::Unknown(_) => ObjectKind::Unknown,
    }
}

fn unknown_tag(u: &Unknown, d: Dialect) -> Result<u64, EncodeError> {
    match d.kind_of(u.tag) {
        _ if u.tag == 0 => Err(err("Unknown", "tag 0 is tagInvalid")),
        ObjectKind::Unknown => Ok(u.tag),
        k => Err(err(
            "Unknown",
            format!("tag {} is {} in the {d} dialect", u.tag, k.name()),
        )),
    }
}

fn body(o: &Object, d: Dialect, w: &mut Vec<u8>) -> Result<(), EncodeError> {
    match o {
        Object::Head1(h) => {
            w.put_varuint(h.id);
            w.put_u16(h.time);
            loc2(w, &h.location);
            rot2(w, &h.rotation);
            if let Some(ipd) = h.ipd {
                tlv_f16(w, d, ipd);
            }
            extra(w, &h.extra)
        }
        Object::Hand1(h) => {
            w.put_varuint(h.id);
            w.put_u16(h.time);
            w.put_bool(h.left);
            loc2(w, &h.location);
            rot2(w, &h.rotation);
            extra(w, &h.extra)
        }
        Object::Hand2(h) => {
            w.put_varuint(h.id);
            w.put_u16(h.time);
            w.put_bool(h.left);
            loc2(w, &h.location);
            rot2(w, &h.rotation);
            let t = &h.thumb;
            for j in [&h.wrist, &t.tip, &t.ip, &t.mcp, &t.cmc] {
                transform(w, j);
            }
            for f in [&h.index, &h.middle, &h.ring, &h.pinky] {
                for j in [&f.tip, &f.dip, &f.pip, &f.mcp, &f.cmc] {
                    transform(w, j);
                }
            }
            extra(w, &h.extra)
        }
        Object::Object1(o) => object1(w, d, o),
        Object::Object2(o) => {
            w.put_varuint(o.id);
            w.put_u16(o.time);
            loc2(w, &o.location);
            rot2(w, &o.rotation);
            loc2(w, &o.scale);
            w.put_bool(o.active);
            parent_tlv(w, o.parent);
            extra(w, &o.extra)
        }
        Object::Mesh1(m) => mesh1(w, d, m),
        Object::Mesh2(m) => {
            w.put_varuint(m.id);
            loc2(w, &m.location);
            rot2(w, &m.rotation);
            loc2(w, &m.scale);
            w.put_blob(m.mesh_url.as_bytes());
            if let Some(t) = &m.texture {
                texture(w, t);
            }
            parent_tlv(w, m.parent);
            extra(w, &m.extra)
        }
        Object::GameControl1(g) => {
            w.put_varuint(g.id);
            w.put_u16(g.time);
            w.put_varint(g.buttons);
            w.put_u16(g.buttons_time);
            for v in [g.left.x, g.left.y, g.right.x, g.right.y] {
                w.put_f16(v);
            }
            extra(w, &g.extra)
        }
        Object::ThreeDof1(t) => {
            w.put_varuint(t.id);
            w.put_u16(t.time);
            w.put_bool(t.left);
            rot2(w, &t.rotation);
            extra(w, &t.extra)
        }
        Object::SixDof1(s) => {
            w.put_varuint(s.id);
            w.put_u16(s.time);
            w.put_bool(s.left);
            loc2(w, &s.location);
            rot2(w, &s.rotation);
            if let Some(p) = &s.pointer {
                w.put_varuint(super::Dialect::SIXDOF_POINTER1_TAG);
                if !p.bare {
                    w.put_varuint(layout::LOC1 as u64);
                }
                for v in [p.x, p.y, p.z] {
                    w.put_f32(v);
                }
            }
            extra(w, &s.extra)
        }
        Object::HeadIpd1(h) => {
            w.put_f16(h.ipd);
            extra(w, &h.extra)
        }
        Object::Container(c) => encode_container(c, d, w),
        Object::Unknown(_) => Ok(()),
    }
}

fn object1(w: &mut Vec<u8>, d: Dialect, o: &Object1) -> Result<(), EncodeError> {
    w.put_varuint(o.id);
    w.put_u16(o.time);
    for v in [o.position.x, o.position.y, o.position.z] {
        w.put_f32(v);
    }
    for v in [o.rotation.i, o.rotation.j, o.rotation.k] {
        w.put_f16(v);
    }
    match (d, &o.scale) {
        (Dialect::Draft01, Scale1::Uniform(s)) => w.put_f16(*s),
        (Dialect::Gse, Scale1::Axes(s)) => {
            for v in [s.x, s.y, s.z] {
                w.put_f32(v);
            }
        }
        (Dialect::Draft01, Scale1::Axes(_)) => {
            return Err(err(
                "Object1.scale",
                "draft01 has one Float16 scale, not {x,y,z}",
            ));
        }
        (Dialect::Gse, Scale1::Uniform(_)) => {
            return Err(err(
                "Object1.scale",
                "gse has a {x,y,z} scale, not one number",
            ));
        }
    }
    w.put_bool(o.active);
    match d {
        Dialect::Draft01 => parent_tlv(w, o.parent),
        Dialect::Gse => {
            if let Some(p) = o.parent {
                w.put_varuint(p);
            }
        }
    }
    extra(w, &o.extra)
}

fn mesh1(w: &mut Vec<u8>, d: Dialect, m: &Mesh1) -> Result<(), EncodeError> {
    w.put_varuint(m.id);
    match (d, &m.texture) {
        (Dialect::Draft01, Some(t)) => texture(w, t),
        (Dialect::Gse, None) => {}
        (Dialect::Draft01, None) => return Err(err("Mesh1.texture", "draft01 requires a texture")),
        (Dialect::Gse, Some(_)) => return Err(err("Mesh1.texture", "gse Mesh1 has no texture")),
    }
    w.put_varuint(m.vertices.len() as u64);
    for v in &m.vertices {
        for c in [v.x, v.y, v.z] {
            w.put_f32(c);
        }
    }
    w.put_varuint(m.normals.len() as u64);
    for n in &m.normals {
        for c in [n.x, n.y, n.z] {
            w.put_f16(c);
        }
    }
    w.put_varuint(m.textures.len() as u64);
    for t in &m.textures {
        match (d, *t) {
            (Dialect::Draft01, TexCoord::Float { u, v }) => {
                w.put_f32(u);
                w.put_f32(v);
            }
            (Dialect::Draft01, TexCoord::Index { u, v }) => {
                w.put_f32(u as f32);
                w.put_f32(v as f32);
            }
            (Dialect::Gse, TexCoord::Index { u, v }) => {
                w.put_varuint(u);
                w.put_varuint(v);
            }
            (Dialect::Gse, TexCoord::Float { u, v }) => {
                let (Some(u), Some(v)) = (whole(u), whole(v)) else {
                    return Err(err(
                        "Mesh1.textures",
                        "gse texture coordinates are VarUInts",
                    ));
                };
                w.put_varuint(u);
                w.put_varuint(v);
            }
        }
    }
    w.put_varuint(m.triangles.len() as u64);
    for t in &m.triangles {
        w.put_varuint(*t);
    }
    extra(w, &m.extra)
}

/// A float that is exactly a non-negative integer.
fn whole(f: f32) -> Option<u64> {
    (f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f32).then_some(f as u64)
}

fn texture(w: &mut Vec<u8>, t: &Texture) {
    match t {
        Texture::Url(u) => w.put_blob(u.as_bytes()),
        Texture::RtpPt(pt) => w.push(*pt),
    }
}

fn tlv_f16(w: &mut Vec<u8>, d: Dialect, v: f32) {
    w.put_varuint(d.tag_of(ObjectKind::HeadIpd1).unwrap_or_default());
    w.put_varuint(2);
    w.put_f16(v);
}

fn parent_tlv(w: &mut Vec<u8>, parent: Option<u64>) {
    if let Some(p) = parent {
        let mut id = Vec::with_capacity(9);
        id.put_varuint(p);
        w.put_varuint(super::Dialect::PARENT1_TAG);
        w.put_blob(&id);
    }
}

/// Appends an object's `extra` bytes verbatim; [`encode_object`] then checks that the
/// object still decodes (extension TLVs must not collide with its own optional part).
fn extra(w: &mut Vec<u8>, extra: &Hex) -> Result<(), EncodeError> {
    w.extend_from_slice(&extra.0);
    Ok(())
}

fn loc2(w: &mut Vec<u8>, l: &Loc2) {
    for v in [l.x, l.y, l.z] {
        w.put_f32(v);
    }
    for v in [l.vx, l.vy, l.vz] {
        w.put_f16(v);
    }
}

fn rot2(w: &mut Vec<u8>, r: &Rot2) {
    for v in [r.si, r.sj, r.sk, r.ei, r.ej, r.ek] {
        w.put_f16(v);
    }
}

fn transform(w: &mut Vec<u8>, t: &Transform1) {
    for v in [t.tx, t.ty, t.tz] {
        w.put_f16(v);
    }
}

/// Encodes a container's body (what its Length counts).
fn encode_container(c: &Container, d: Dialect, w: &mut Vec<u8>) -> Result<(), EncodeError> {
    w.put_varuint(u64::from(c.ssrc));
    let mut scratch = Vec::new();
    for o in &c.objects {
        if matches!(o, Object::Container(_)) {
            return Err(EncodeError {
                object: "Container".into(),
                message: "a container cannot hold a container".into(),
            });
        }
        encode_object(o, d, &mut scratch, w)?;
    }
    Ok(())
}
