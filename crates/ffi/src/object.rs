//! The draft-01 objects as C structs, shaped after the reference implementation's C API
//! (`GS_Object` in cisco/gse's `gs_api.h`): one struct per object type, a tagged union of
//! them, floats as `float` whatever their width on the wire (Float16 fields are widened on
//! decode and rounded on encode), optional parts as a `*_present` flag beside the value.
//!
//! The object's `type` is a [`gsr_object_type`], not its tag: the tag of Mesh1, Hand2 and
//! HeadIPD1 differs between the dialects (128 or 0x8000, ...), the type does not.
//!
//! Pointers in a decoded object (mesh arrays, URLs, an unknown object's bytes, trailing
//! bytes) point into storage the decoder or the poll owns; the caller owns what it passes
//! to an encoder.

#![allow(non_camel_case_types)]

use crate::status::{Error, code};
use gsrelay_core::wire::{
    Finger, GameControl1, Hand1, Hand2, Head1, HeadIpd1, Loc2, Mesh1, Mesh2, Object, Object1,
    Object2, Pointer, Rot1, Rot2, Scale1, SixDof1, Stick, TexCoord, Texture, ThreeDof1, Thumb,
    Transform1, Unknown, Vec3, json::Hex,
};
use std::ffi::{CStr, c_char};
use std::ptr;

/// An object's type, the `type` of a [`gsr_object`].
pub type gsr_object_type = u32;
/// Not an object (an empty [`gsr_object`]).
pub const GSR_OBJECT_NONE: gsr_object_type = 0;
/// Head1.
pub const GSR_OBJECT_HEAD1: gsr_object_type = 1;
/// Hand1.
pub const GSR_OBJECT_HAND1: gsr_object_type = 2;
/// Object1.
pub const GSR_OBJECT_OBJECT1: gsr_object_type = 3;
/// Mesh1.
pub const GSR_OBJECT_MESH1: gsr_object_type = 4;
/// Hand2.
pub const GSR_OBJECT_HAND2: gsr_object_type = 5;
/// HeadIPD1 on its own.
pub const GSR_OBJECT_HEAD_IPD1: gsr_object_type = 6;
/// Object2 (draft-01 only).
pub const GSR_OBJECT_OBJECT2: gsr_object_type = 7;
/// Mesh2 (draft-01 only).
pub const GSR_OBJECT_MESH2: gsr_object_type = 8;
/// GameControl1 (draft-01 only).
pub const GSR_OBJECT_GAME_CONTROL1: gsr_object_type = 9;
/// ThreeDOF1 (draft-01 only).
pub const GSR_OBJECT_THREE_DOF1: gsr_object_type = 10;
/// SixDOF1 (draft-01 only).
pub const GSR_OBJECT_SIX_DOF1: gsr_object_type = 11;
/// An object of a tag the codec does not know: its tag and body bytes.
pub const GSR_OBJECT_UNKNOWN: gsr_object_type = 12;

/// A texture of a mesh: none, a URL, or the RTP payload type of a video stream.
pub type gsr_texture_kind = u32;
/// No texture.
pub const GSR_TEXTURE_NONE: gsr_texture_kind = 0;
/// `texture_url` names it.
pub const GSR_TEXTURE_URL: gsr_texture_kind = 1;
/// `texture_rtp_pt` names the payload type of the RTP stream carrying it.
pub const GSR_TEXTURE_RTP_PT: gsr_texture_kind = 2;

/// Loc1, a position, a scale or a normal: three floats.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_vec3 {
    /// x
    pub x: f32,
    /// y
    pub y: f32,
    /// z
    pub z: f32,
}

/// Loc2: a position and its velocity (Float16 on the wire).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_loc2 {
    /// x
    pub x: f32,
    /// y
    pub y: f32,
    /// z
    pub z: f32,
    /// Velocity along x.
    pub vx: f32,
    /// Velocity along y.
    pub vy: f32,
    /// Velocity along z.
    pub vz: f32,
}

/// Rot1: a rotation as the vector part of a unit quaternion (Float16 on the wire).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_rot1 {
    /// i
    pub i: f32,
    /// j
    pub j: f32,
    /// k
    pub k: f32,
}

/// Rot2: a rotation and its rate (Float16 on the wire).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_rot2 {
    /// si
    pub si: f32,
    /// sj
    pub sj: f32,
    /// sk
    pub sk: f32,
    /// ei
    pub ei: f32,
    /// ej
    pub ej: f32,
    /// ek
    pub ek: f32,
}

/// Transform1: one joint of a hand (Float16 on the wire).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_transform1 {
    /// tx
    pub tx: f32,
    /// ty
    pub ty: f32,
    /// tz
    pub tz: f32,
}

/// A thumb's joints.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_thumb {
    /// Tip.
    pub tip: gsr_transform1,
    /// Interphalangeal joint.
    pub ip: gsr_transform1,
    /// Metacarpophalangeal joint.
    pub mcp: gsr_transform1,
    /// Carpometacarpal joint.
    pub cmc: gsr_transform1,
}

/// A finger's joints.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_finger {
    /// Tip.
    pub tip: gsr_transform1,
    /// Distal interphalangeal joint.
    pub dip: gsr_transform1,
    /// Proximal interphalangeal joint.
    pub pip: gsr_transform1,
    /// Metacarpophalangeal joint.
    pub mcp: gsr_transform1,
    /// Carpometacarpal joint.
    pub cmc: gsr_transform1,
}

/// A thumbstick's position.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_stick {
    /// x
    pub x: f32,
    /// y
    pub y: f32,
}

/// A texture coordinate: `u`/`v` in draft-01 (Float32), `iu`/`iv` in the gse dialect
/// (VarUInt); the dialect picks which pair is read and written.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_texture_uv {
    /// u (draft-01).
    pub u: f32,
    /// v (draft-01).
    pub v: f32,
    /// u (gse).
    pub iu: u64,
    /// v (gse).
    pub iv: u64,
}

/// Head1: a head's pose, with its inter-pupillary distance when present.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_head1 {
    /// objectID
    pub id: u64,
    /// Time1, in milliseconds (wraps).
    pub time: u16,
    /// Location.
    pub location: gsr_loc2,
    /// Rotation.
    pub rotation: gsr_rot2,
    /// Whether `ipd` is present.
    pub ipd_present: u8,
    /// HeadIPD1, in metres.
    pub ipd: f32,
}

/// Hand1: a hand's pose.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_hand1 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// 1 for the left hand.
    pub left: u8,
    /// Location.
    pub location: gsr_loc2,
    /// Rotation.
    pub rotation: gsr_rot2,
}

/// Hand2: a hand with its joints.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_hand2 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// 1 for the left hand.
    pub left: u8,
    /// Location.
    pub location: gsr_loc2,
    /// Rotation.
    pub rotation: gsr_rot2,
    /// Wrist.
    pub wrist: gsr_transform1,
    /// Thumb.
    pub thumb: gsr_thumb,
    /// Index finger.
    pub index: gsr_finger,
    /// Middle finger.
    pub middle: gsr_finger,
    /// Ring finger.
    pub ring: gsr_finger,
    /// Little finger.
    pub pinky: gsr_finger,
}

/// Object1: a generic object. Its scale is one Float16 in draft-01 (`scale_uniform` = 1,
/// the value in `scale.x`) and three Float32 in the gse dialect (`scale_uniform` = 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_object1 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// Position.
    pub position: gsr_vec3,
    /// Rotation.
    pub rotation: gsr_rot1,
    /// Scale: `scale.x` alone when `scale_uniform` is 1.
    pub scale: gsr_vec3,
    /// 1: the scale is one number (draft-01's Scale1).
    pub scale_uniform: u8,
    /// 1 when active.
    pub active: u8,
    /// Whether `parent` is present.
    pub parent_present: u8,
    /// The parent's objectID.
    pub parent: u64,
}

/// Object2: a generic object with velocities (draft-01).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_object2 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// Location.
    pub location: gsr_loc2,
    /// Rotation.
    pub rotation: gsr_rot2,
    /// Scale and its rate.
    pub scale: gsr_loc2,
    /// 1 when active.
    pub active: u8,
    /// Whether `parent` is present.
    pub parent_present: u8,
    /// The parent's objectID.
    pub parent: u64,
}

/// Mesh1: a small inline triangle mesh. Arrays are `num_*` long.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct gsr_mesh1 {
    /// objectID
    pub id: u64,
    /// The texture's kind (draft-01 only; the gse dialect has none).
    pub texture_kind: gsr_texture_kind,
    /// The texture's URL (NUL-terminated UTF-8) when `texture_kind` is URL.
    pub texture_url: *const c_char,
    /// The texture's RTP payload type when `texture_kind` is RTP_PT.
    pub texture_rtp_pt: u8,
    /// Vertices.
    pub num_vertices: usize,
    /// `num_vertices` positions.
    pub vertices: *const gsr_vec3,
    /// Normals.
    pub num_normals: usize,
    /// `num_normals` normals.
    pub normals: *const gsr_vec3,
    /// Texture coordinates.
    pub num_textures: usize,
    /// `num_textures` coordinates.
    pub textures: *const gsr_texture_uv,
    /// Triangle indexes.
    pub num_triangles: usize,
    /// `num_triangles` indexes, three per triangle.
    pub triangles: *const u64,
}

/// Mesh2: a mesh by URL, placed in the world (draft-01).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct gsr_mesh2 {
    /// objectID
    pub id: u64,
    /// Location.
    pub location: gsr_loc2,
    /// Rotation.
    pub rotation: gsr_rot2,
    /// Scale and its rate.
    pub scale: gsr_loc2,
    /// The mesh's URL (NUL-terminated UTF-8).
    pub mesh_url: *const c_char,
    /// The texture's kind.
    pub texture_kind: gsr_texture_kind,
    /// The texture's URL when `texture_kind` is URL.
    pub texture_url: *const c_char,
    /// The texture's RTP payload type when `texture_kind` is RTP_PT.
    pub texture_rtp_pt: u8,
    /// Whether `parent` is present.
    pub parent_present: u8,
    /// The parent's objectID.
    pub parent: u64,
}

/// GameControl1: a game controller's buttons and sticks (draft-01).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_game_control1 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// Buttons, one bit each.
    pub buttons: i64,
    /// When the buttons last changed (Time1).
    pub buttons_time: u16,
    /// Left stick.
    pub left: gsr_stick,
    /// Right stick.
    pub right: gsr_stick,
}

/// ThreeDOF1: a controller's rotation (draft-01).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_three_dof1 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// 1 for the left hand's.
    pub left: u8,
    /// Rotation.
    pub rotation: gsr_rot2,
}

/// SixDOF1's optional pointer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_pointer {
    /// x
    pub x: f32,
    /// y
    pub y: f32,
    /// z
    pub z: f32,
    /// 1: written without its own tag and Length (the draft's grammar as written).
    pub bare: u8,
}

/// SixDOF1: a controller's pose (draft-01).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_six_dof1 {
    /// objectID
    pub id: u64,
    /// Time1.
    pub time: u16,
    /// 1 for the left hand's.
    pub left: u8,
    /// Location.
    pub location: gsr_loc2,
    /// Rotation.
    pub rotation: gsr_rot2,
    /// Whether `pointer` is present.
    pub pointer_present: u8,
    /// The pointer.
    pub pointer: gsr_pointer,
}

/// HeadIPD1 on its own: an inter-pupillary distance.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct gsr_head_ipd1 {
    /// In metres.
    pub ipd: f32,
}

/// An object whose tag the codec does not know.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct gsr_unknown_object {
    /// Its tag.
    pub tag: u64,
    /// Its body's length.
    pub data_length: usize,
    /// Its body (after the Length).
    pub data: *const u8,
}

/// The object, by `type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union gsr_object_union {
    /// GSR_OBJECT_HEAD1
    pub head1: gsr_head1,
    /// GSR_OBJECT_HAND1
    pub hand1: gsr_hand1,
    /// GSR_OBJECT_OBJECT1
    pub object1: gsr_object1,
    /// GSR_OBJECT_MESH1
    pub mesh1: gsr_mesh1,
    /// GSR_OBJECT_HAND2
    pub hand2: gsr_hand2,
    /// GSR_OBJECT_HEAD_IPD1
    pub head_ipd1: gsr_head_ipd1,
    /// GSR_OBJECT_OBJECT2
    pub object2: gsr_object2,
    /// GSR_OBJECT_MESH2
    pub mesh2: gsr_mesh2,
    /// GSR_OBJECT_GAME_CONTROL1
    pub game_control1: gsr_game_control1,
    /// GSR_OBJECT_THREE_DOF1
    pub three_dof1: gsr_three_dof1,
    /// GSR_OBJECT_SIX_DOF1
    pub six_dof1: gsr_six_dof1,
    /// GSR_OBJECT_UNKNOWN
    pub unknown_object: gsr_unknown_object,
}

/// One object: its type, the struct of that type, and any trailing bytes after the parts
/// the codec knows (kept so that an object round-trips byte for byte). Trailing bytes
/// are written as they are: in draft-01 they must be optional parts of the object's
/// grammar (tag, Length, body) or the encoder refuses them; set none unless a decoder
/// handed them to you.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct gsr_object {
    /// Which member of `u` holds it.
    pub r#type: gsr_object_type,
    /// The object.
    pub u: gsr_object_union,
    /// Bytes after the known parts (usually none).
    pub extra_length: usize,
    /// `extra_length` bytes.
    pub extra: *const u8,
}

impl Default for gsr_object {
    fn default() -> Self {
        Self {
            r#type: GSR_OBJECT_NONE,
            u: gsr_object_union {
                head1: gsr_head1::default(),
            },
            extra_length: 0,
            extra: ptr::null(),
        }
    }
}

/// Where a decoded object's arrays, strings and bytes go: kept until the decoder or the
/// poll that made it is called again, so the pointers stay valid that long. Each vector is
/// reserved before any pointer into it is taken ([`Storage::reserve_for`]), so none moves
/// while the objects of one call are written.
#[derive(Default)]
pub struct Storage {
    vec3s: Vec<gsr_vec3>,
    uvs: Vec<gsr_texture_uv>,
    indexes: Vec<u64>,
    bytes: Vec<u8>,
}

impl Storage {
    /// Forgets what the last call stored (keeping the capacity).
    pub fn clear(&mut self) {
        self.vec3s.clear();
        self.uvs.clear();
        self.indexes.clear();
        self.bytes.clear();
    }

    /// Makes room for what `objects` will store, so no pointer taken while they are
    /// written is moved by a later one.
    pub fn reserve_for<'a>(&mut self, objects: impl Iterator<Item = &'a Object>) {
        let (mut v, mut t, mut i, mut b) = (0, 0, 0, 0);
        for o in objects {
            b += extra_of(o).map_or(0, |e| e.0.len());
            match o {
                Object::Mesh1(m) => {
                    v += m.vertices.len() + m.normals.len();
                    t += m.textures.len();
                    i += m.triangles.len();
                    b += texture_len(m.texture.as_ref());
                }
                Object::Mesh2(m) => b += m.mesh_url.len() + 1 + texture_len(m.texture.as_ref()),
                Object::Unknown(u) => b += u.data.0.len(),
                _ => {}
            }
        }
        self.vec3s.reserve(v);
        self.uvs.reserve(t);
        self.indexes.reserve(i);
        self.bytes.reserve(b);
    }

    fn vec3s(&mut self, from: &[Vec3]) -> *const gsr_vec3 {
        let at = self.vec3s.len();
        self.vec3s.extend(from.iter().map(|v| vec3(*v)));
        self.vec3s[at..].as_ptr()
    }

    fn bytes(&mut self, from: &[u8]) -> *const u8 {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(from);
        self.bytes[at..].as_ptr()
    }

    /// `s` with a NUL after it. A string holding a NUL is cut there by C readers; the
    /// codec's own strings come from UTF-8 on the wire, where a NUL is legal but rare.
    fn c_string(&mut self, s: &str) -> *const c_char {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.bytes[at..].as_ptr().cast()
    }
}

fn texture_len(t: Option<&Texture>) -> usize {
    match t {
        Some(Texture::Url(u)) => u.len() + 1,
        _ => 0,
    }
}

fn extra_of(o: &Object) -> Option<&Hex> {
    Some(match o {
        Object::Head1(x) => &x.extra,
        Object::Hand1(x) => &x.extra,
        Object::Hand2(x) => &x.extra,
        Object::Object1(x) => &x.extra,
        Object::Object2(x) => &x.extra,
        Object::Mesh1(x) => &x.extra,
        Object::Mesh2(x) => &x.extra,
        Object::GameControl1(x) => &x.extra,
        Object::ThreeDof1(x) => &x.extra,
        Object::SixDof1(x) => &x.extra,
        Object::HeadIpd1(x) => &x.extra,
        Object::Container(_) | Object::Unknown(_) => return None,
    })
}

fn vec3(v: Vec3) -> gsr_vec3 {
    gsr_vec3 {
        x: v.x,
        y: v.y,
        z: v.z,
    }
}

fn loc2(l: Loc2) -> gsr_loc2 {
    gsr_loc2 {
        x: l.x,
        y: l.y,
        z: l.z,
        vx: l.vx,
        vy: l.vy,
        vz: l.vz,
    }
}

fn rot2(r: Rot2) -> gsr_rot2 {
    gsr_rot2 {
        si: r.si,
        sj: r.sj,
        sk: r.sk,
        ei: r.ei,
        ej: r.ej,
        ek: r.ek,
    }
}

fn transform(t: Transform1) -> gsr_transform1 {
    gsr_transform1 {
        tx: t.tx,
        ty: t.ty,
        tz: t.tz,
    }
}

fn finger(f: &Finger) -> gsr_finger {
    gsr_finger {
        tip: transform(f.tip),
        dip: transform(f.dip),
        pip: transform(f.pip),
        mcp: transform(f.mcp),
        cmc: transform(f.cmc),
    }
}

fn stick(s: Stick) -> gsr_stick {
    gsr_stick { x: s.x, y: s.y }
}

/// A texture's C fields: kind, URL, payload type.
fn texture(t: Option<&Texture>, store: &mut Storage) -> (gsr_texture_kind, *const c_char, u8) {
    match t {
        None => (GSR_TEXTURE_NONE, ptr::null(), 0),
        Some(Texture::Url(u)) => (GSR_TEXTURE_URL, store.c_string(u), 0),
        Some(Texture::RtpPt(pt)) => (GSR_TEXTURE_RTP_PT, ptr::null(), *pt),
    }
}

/// `o` as a C object, its arrays and bytes in `store` (reserved for it beforehand).
/// A container is not an object a C caller receives (the poll unpacks containers), so it
/// becomes an empty object.
pub fn to_c(o: &Object, store: &mut Storage) -> gsr_object {
    let mut out = gsr_object::default();
    write_c(o, store, &mut out);
    out
}

/// [`to_c`] into `out` in place: writes the type, the trailing bytes and the one member
/// of the union that holds the object, no more (a poll writes a thousand of these).
pub fn write_c(o: &Object, store: &mut Storage, out: &mut gsr_object) {
    out.extra_length = 0;
    out.extra = ptr::null();
    if let Some(extra) = extra_of(o).filter(|e| !e.0.is_empty()) {
        out.extra_length = extra.0.len();
        out.extra = store.bytes(&extra.0);
    }
    let ty = match o {
        Object::Head1(h) => {
            out.u.head1 = gsr_head1 {
                id: h.id,
                time: h.time,
                location: loc2(h.location),
                rotation: rot2(h.rotation),
                ipd_present: u8::from(h.ipd.is_some()),
                ipd: h.ipd.unwrap_or_default(),
            };
            GSR_OBJECT_HEAD1
        }
        Object::Hand1(h) => {
            out.u.hand1 = gsr_hand1 {
                id: h.id,
                time: h.time,
                left: u8::from(h.left),
                location: loc2(h.location),
                rotation: rot2(h.rotation),
            };
            GSR_OBJECT_HAND1
        }
        Object::Hand2(h) => {
            out.u.hand2 = gsr_hand2 {
                id: h.id,
                time: h.time,
                left: u8::from(h.left),
                location: loc2(h.location),
                rotation: rot2(h.rotation),
                wrist: transform(h.wrist),
                thumb: gsr_thumb {
                    tip: transform(h.thumb.tip),
                    ip: transform(h.thumb.ip),
                    mcp: transform(h.thumb.mcp),
                    cmc: transform(h.thumb.cmc),
                },
                index: finger(&h.index),
                middle: finger(&h.middle),
                ring: finger(&h.ring),
                pinky: finger(&h.pinky),
            };
            GSR_OBJECT_HAND2
        }
        Object::Object1(x) => {
            let (scale, uniform) = match x.scale {
                Scale1::Uniform(s) => (gsr_vec3 { x: s, y: s, z: s }, 1),
                Scale1::Axes(v) => (vec3(v), 0),
            };
            {
                out.u.object1 = gsr_object1 {
                    id: x.id,
                    time: x.time,
                    position: vec3(x.position),
                    rotation: gsr_rot1 {
                        i: x.rotation.i,
                        j: x.rotation.j,
                        k: x.rotation.k,
                    },
                    scale,
                    scale_uniform: uniform,
                    active: u8::from(x.active),
                    parent_present: u8::from(x.parent.is_some()),
                    parent: x.parent.unwrap_or_default(),
                };
                GSR_OBJECT_OBJECT1
            }
        }
        Object::Object2(x) => {
            out.u.object2 = gsr_object2 {
                id: x.id,
                time: x.time,
                location: loc2(x.location),
                rotation: rot2(x.rotation),
                scale: loc2(x.scale),
                active: u8::from(x.active),
                parent_present: u8::from(x.parent.is_some()),
                parent: x.parent.unwrap_or_default(),
            };
            GSR_OBJECT_OBJECT2
        }
        Object::Mesh1(m) => {
            let (texture_kind, texture_url, texture_rtp_pt) = texture(m.texture.as_ref(), store);
            let vertices = store.vec3s(&m.vertices);
            let normals = store.vec3s(&m.normals);
            let at = store.uvs.len();
            store.uvs.extend(m.textures.iter().map(|t| match *t {
                TexCoord::Index { u, v } => gsr_texture_uv {
                    iu: u,
                    iv: v,
                    ..Default::default()
                },
                TexCoord::Float { u, v } => gsr_texture_uv {
                    u,
                    v,
                    ..Default::default()
                },
            }));
            let textures = store.uvs[at..].as_ptr();
            let at = store.indexes.len();
            store.indexes.extend_from_slice(&m.triangles);
            let triangles = store.indexes[at..].as_ptr();
            {
                out.u.mesh1 = gsr_mesh1 {
                    id: m.id,
                    texture_kind,
                    texture_url,
                    texture_rtp_pt,
                    num_vertices: m.vertices.len(),
                    vertices,
                    num_normals: m.normals.len(),
                    normals,
                    num_textures: m.textures.len(),
                    textures,
                    num_triangles: m.triangles.len(),
                    triangles,
                };
                GSR_OBJECT_MESH1
            }
        }
        Object::Mesh2(m) => {
            let mesh_url = store.c_string(&m.mesh_url);
            let (texture_kind, texture_url, texture_rtp_pt) = texture(m.texture.as_ref(), store);
            {
                out.u.mesh2 = gsr_mesh2 {
                    id: m.id,
                    location: loc2(m.location),
                    rotation: rot2(m.rotation),
                    scale: loc2(m.scale),
                    mesh_url,
                    texture_kind,
                    texture_url,
                    texture_rtp_pt,
                    parent_present: u8::from(m.parent.is_some()),
                    parent: m.parent.unwrap_or_default(),
                };
                GSR_OBJECT_MESH2
            }
        }
        Object::GameControl1(g) => {
            out.u.game_control1 = gsr_game_control1 {
                id: g.id,
                time: g.time,
                buttons: g.buttons,
                buttons_time: g.buttons_time,
                left: stick(g.left),
                right: stick(g.right),
            };
            GSR_OBJECT_GAME_CONTROL1
        }
        Object::ThreeDof1(t) => {
            out.u.three_dof1 = gsr_three_dof1 {
                id: t.id,
                time: t.time,
                left: u8::from(t.left),
                rotation: rot2(t.rotation),
            };
            GSR_OBJECT_THREE_DOF1
        }
        Object::SixDof1(s) => {
            let p = s.pointer.unwrap_or_default();
            {
                out.u.six_dof1 = gsr_six_dof1 {
                    id: s.id,
                    time: s.time,
                    left: u8::from(s.left),
                    location: loc2(s.location),
                    rotation: rot2(s.rotation),
                    pointer_present: u8::from(s.pointer.is_some()),
                    pointer: gsr_pointer {
                        x: p.x,
                        y: p.y,
                        z: p.z,
                        bare: u8::from(p.bare),
                    },
                };
                GSR_OBJECT_SIX_DOF1
            }
        }
        Object::HeadIpd1(h) => {
            out.u.head_ipd1 = gsr_head_ipd1 { ipd: h.ipd };
            GSR_OBJECT_HEAD_IPD1
        }
        Object::Unknown(u) => {
            out.u.unknown_object = gsr_unknown_object {
                tag: u.tag,
                data_length: u.data.0.len(),
                data: store.bytes(&u.data.0),
            };
            GSR_OBJECT_UNKNOWN
        }
        Object::Container(_) => GSR_OBJECT_NONE,
    };
    out.r#type = ty;
}

/// Bytes at `p`, `len` long; an empty slice for a length of 0 whatever the pointer.
///
/// # Safety
/// `p` must point at `len` readable bytes when `len > 0`.
unsafe fn bytes_at<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: the caller promises `len` readable bytes at the non-null `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `len` items at `p`, as [`bytes_at`] for bytes.
///
/// # Safety
/// `p` must point at `len` readable, initialised `T`s when `len > 0`.
pub(crate) unsafe fn items_at<'a, T>(
    p: *const T,
    len: usize,
    what: &str,
) -> Result<&'a [T], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    if len > isize::MAX as usize / size_of::<T>().max(1) {
        return Err(Error::new(
            code::SIZE,
            format!("{what}: {len} items is too many"),
        ));
    }
    // SAFETY: the caller promises `len` readable items at the non-null, aligned `p` (a C
    // array of the type), and the length fits the address space (checked above).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A NUL-terminated UTF-8 string at `p`.
///
/// # Safety
/// `p` must be null or point at a NUL-terminated string.
pub unsafe fn str_at<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: the caller promises a NUL-terminated string at the non-null `p`.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Error::new(code::UTF8, format!("{what} is not valid UTF-8")))
}

/// A C flag: 0 or 1, anything else refused.
pub(crate) fn flag(v: u8, what: &str) -> Result<bool, Error> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(Error::argument(format!("{what} is {v}, not 0 or 1"))),
    }
}

fn w_vec3(v: gsr_vec3) -> Vec3 {
    Vec3 {
        x: v.x,
        y: v.y,
        z: v.z,
    }
}

fn w_loc2(l: gsr_loc2) -> Loc2 {
    Loc2 {
        x: l.x,
        y: l.y,
        z: l.z,
        vx: l.vx,
        vy: l.vy,
        vz: l.vz,
    }
}

fn w_rot2(r: gsr_rot2) -> Rot2 {
    Rot2 {
        si: r.si,
        sj: r.sj,
        sk: r.sk,
        ei: r.ei,
        ej: r.ej,
        ek: r.ek,
    }
}

fn w_transform(t: gsr_transform1) -> Transform1 {
    Transform1 {
        tx: t.tx,
        ty: t.ty,
        tz: t.tz,
    }
}

fn w_finger(f: gsr_finger) -> Finger {
    Finger {
        tip: w_transform(f.tip),
        dip: w_transform(f.dip),
        pip: w_transform(f.pip),
        mcp: w_transform(f.mcp),
        cmc: w_transform(f.cmc),
    }
}

/// A C texture as the codec's.
///
/// # Safety
/// `url` must be null or a NUL-terminated string.
unsafe fn w_texture(
    kind: gsr_texture_kind,
    url: *const c_char,
    pt: u8,
) -> Result<Option<Texture>, Error> {
    Ok(match kind {
        GSR_TEXTURE_NONE => None,
        // SAFETY: the caller's promise on `url`.
        GSR_TEXTURE_URL => Some(Texture::Url(
            unsafe { str_at(url, "texture_url") }?.to_owned(),
        )),
        GSR_TEXTURE_RTP_PT => Some(Texture::RtpPt(pt)),
        k => {
            return Err(Error::argument(format!(
                "texture_kind {k} is not a texture kind"
            )));
        }
    })
}

/// A C object as the codec's, for `dialect`'s encoder (which picks the texture coordinate
/// pair to read). Every flag must be 0 or 1, every pointer with a non-zero count valid.
///
/// # Safety
/// The pointers of `o` (mesh arrays, strings, unknown data, extra) must be valid for the
/// counts beside them, as the header documents.
pub unsafe fn from_c(o: &gsr_object, gse: bool) -> Result<Object, Error> {
    // SAFETY (every union read below): `type` says which member the caller wrote, and
    // every member is plain old data, so reading it is defined whatever bytes it holds.
    // SAFETY: the caller's promise on `extra`.
    let extra = Hex(unsafe { bytes_at(o.extra, o.extra_length, "extra") }?.to_vec());
    Ok(match o.r#type {
        GSR_OBJECT_HEAD1 => {
            let h = unsafe { o.u.head1 };
            Object::Head1(Head1 {
                id: h.id,
                time: h.time,
                location: w_loc2(h.location),
                rotation: w_rot2(h.rotation),
                ipd: flag(h.ipd_present, "ipd_present")?.then_some(h.ipd),
                extra,
            })
        }
        GSR_OBJECT_HAND1 => {
            let h = unsafe { o.u.hand1 };
            Object::Hand1(Hand1 {
                id: h.id,
                time: h.time,
                left: flag(h.left, "left")?,
                location: w_loc2(h.location),
                rotation: w_rot2(h.rotation),
                extra,
            })
        }
        GSR_OBJECT_HAND2 => {
            let h = unsafe { o.u.hand2 };
            Object::Hand2(Box::new(Hand2 {
                id: h.id,
                time: h.time,
                left: flag(h.left, "left")?,
                location: w_loc2(h.location),
                rotation: w_rot2(h.rotation),
                wrist: w_transform(h.wrist),
                thumb: Thumb {
                    tip: w_transform(h.thumb.tip),
                    ip: w_transform(h.thumb.ip),
                    mcp: w_transform(h.thumb.mcp),
                    cmc: w_transform(h.thumb.cmc),
                },
                index: w_finger(h.index),
                middle: w_finger(h.middle),
                ring: w_finger(h.ring),
                pinky: w_finger(h.pinky),
                extra,
            }))
        }
        GSR_OBJECT_OBJECT1 => {
            let x = unsafe { o.u.object1 };
            Object::Object1(Object1 {
                id: x.id,
                time: x.time,
                position: w_vec3(x.position),
                rotation: Rot1 {
                    i: x.rotation.i,
                    j: x.rotation.j,
                    k: x.rotation.k,
                },
                scale: if flag(x.scale_uniform, "scale_uniform")? {
                    Scale1::Uniform(x.scale.x)
                } else {
                    Scale1::Axes(w_vec3(x.scale))
                },
                active: flag(x.active, "active")?,
                parent: flag(x.parent_present, "parent_present")?.then_some(x.parent),
                extra,
            })
        }
        GSR_OBJECT_OBJECT2 => {
            let x = unsafe { o.u.object2 };
            Object::Object2(Object2 {
                id: x.id,
                time: x.time,
                location: w_loc2(x.location),
                rotation: w_rot2(x.rotation),
                scale: w_loc2(x.scale),
                active: flag(x.active, "active")?,
                parent: flag(x.parent_present, "parent_present")?.then_some(x.parent),
                extra,
            })
        }
        GSR_OBJECT_MESH1 => {
            let m = unsafe { o.u.mesh1 };
            // SAFETY: the caller's promise on the arrays and the URL.
            let (vertices, normals, uvs, triangles, texture) = unsafe {
                (
                    items_at(m.vertices, m.num_vertices, "vertices")?,
                    items_at(m.normals, m.num_normals, "normals")?,
                    items_at(m.textures, m.num_textures, "textures")?,
                    items_at(m.triangles, m.num_triangles, "triangles")?,
                    w_texture(m.texture_kind, m.texture_url, m.texture_rtp_pt)?,
                )
            };
            Object::Mesh1(Mesh1 {
                id: m.id,
                texture,
                vertices: vertices.iter().copied().map(w_vec3).collect(),
                normals: normals.iter().copied().map(w_vec3).collect(),
                textures: uvs
                    .iter()
                    .map(|t| match gse {
                        true => TexCoord::Index { u: t.iu, v: t.iv },
                        false => TexCoord::Float { u: t.u, v: t.v },
                    })
                    .collect(),
                triangles: triangles.to_vec(),
                extra,
            })
        }
        GSR_OBJECT_MESH2 => {
            let m = unsafe { o.u.mesh2 };
            // SAFETY: the caller's promise on the strings.
            let (url, texture) = unsafe {
                (
                    str_at(m.mesh_url, "mesh_url")?,
                    w_texture(m.texture_kind, m.texture_url, m.texture_rtp_pt)?,
                )
            };
            Object::Mesh2(Mesh2 {
                id: m.id,
                location: w_loc2(m.location),
                rotation: w_rot2(m.rotation),
                scale: w_loc2(m.scale),
                mesh_url: url.to_owned(),
                texture,
                parent: flag(m.parent_present, "parent_present")?.then_some(m.parent),
                extra,
            })
        }
        GSR_OBJECT_GAME_CONTROL1 => {
            let g = unsafe { o.u.game_control1 };
            Object::GameControl1(GameControl1 {
                id: g.id,
                time: g.time,
                buttons: g.buttons,
                buttons_time: g.buttons_time,
                left: Stick {
                    x: g.left.x,
                    y: g.left.y,
                },
                right: Stick {
                    x: g.right.x,
                    y: g.right.y,
                },
                extra,
            })
        }
        GSR_OBJECT_THREE_DOF1 => {
            let t = unsafe { o.u.three_dof1 };
            Object::ThreeDof1(ThreeDof1 {
                id: t.id,
                time: t.time,
                left: flag(t.left, "left")?,
                rotation: w_rot2(t.rotation),
                extra,
            })
        }
        GSR_OBJECT_SIX_DOF1 => {
            let s = unsafe { o.u.six_dof1 };
            let pointer = Pointer {
                x: s.pointer.x,
                y: s.pointer.y,
                z: s.pointer.z,
                bare: flag(s.pointer.bare, "pointer.bare")?,
            };
            Object::SixDof1(SixDof1 {
                id: s.id,
                time: s.time,
                left: flag(s.left, "left")?,
                location: w_loc2(s.location),
                rotation: w_rot2(s.rotation),
                pointer: flag(s.pointer_present, "pointer_present")?.then_some(pointer),
                extra,
            })
        }
        GSR_OBJECT_HEAD_IPD1 => {
            let h = unsafe { o.u.head_ipd1 };
            Object::HeadIpd1(HeadIpd1 { ipd: h.ipd, extra })
        }
        GSR_OBJECT_UNKNOWN => {
            let u = unsafe { o.u.unknown_object };
            // SAFETY: the caller's promise on `data`.
            let data = unsafe { bytes_at(u.data, u.data_length, "data") }?;
            Object::Unknown(Unknown {
                tag: u.tag,
                data: Hex(data.to_vec()),
            })
        }
        t => return Err(Error::argument(format!("type {t} is not an object type"))),
    })
}
