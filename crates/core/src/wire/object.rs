//! Typed game-state objects, as tools, clients and tests see them.
//!
//! The JSON form (what `gsrelay decode` prints) is the serde form of [`Object`]: an object
//! with a `"type"` field naming the variant. `extra` holds bytes inside an object's Length
//! after the parts this codec knows (optional TLVs of a newer revision); it is written back
//! unchanged so that decode→encode reproduces the input.

use super::json::{Hex, float};
use serde::{Deserialize, Serialize};

/// Three Float32 (Loc1) or three Float16 (Norm1) components.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Vec3 {
    /// x
    #[serde(with = "float")]
    pub x: f32,
    /// y
    #[serde(with = "float")]
    pub y: f32,
    /// z
    #[serde(with = "float")]
    pub z: f32,
}

/// Loc2 / Scale2: a value as Float32 and its rate of change per second as Float16.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Loc2 {
    /// x
    #[serde(with = "float")]
    pub x: f32,
    /// y
    #[serde(with = "float")]
    pub y: f32,
    /// z
    #[serde(with = "float")]
    pub z: f32,
    /// dx/dt
    #[serde(with = "float")]
    pub vx: f32,
    /// dy/dt
    #[serde(with = "float")]
    pub vy: f32,
    /// dz/dt
    #[serde(with = "float")]
    pub vz: f32,
}

impl Loc2 {
    /// The value part.
    pub fn position(&self) -> [f32; 3] {
        [self.x, self.y, self.z]
    }
}

/// Rot1: the vector part of a unit quaternion (the real part is implied).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Rot1 {
    /// i
    #[serde(with = "float")]
    pub i: f32,
    /// j
    #[serde(with = "float")]
    pub j: f32,
    /// k
    #[serde(with = "float")]
    pub k: f32,
}

/// Rot2: current rotation `s` and the rotation `e` expected one second later.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Rot2 {
    /// s.i
    #[serde(with = "float")]
    pub si: f32,
    /// s.j
    #[serde(with = "float")]
    pub sj: f32,
    /// s.k
    #[serde(with = "float")]
    pub sk: f32,
    /// e.i
    #[serde(with = "float")]
    pub ei: f32,
    /// e.j
    #[serde(with = "float")]
    pub ej: f32,
    /// e.k
    #[serde(with = "float")]
    pub ek: f32,
}

/// Transform1: a child's translation from its base, three Float16.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Transform1 {
    /// tx
    #[serde(with = "float")]
    pub tx: f32,
    /// ty
    #[serde(with = "float")]
    pub ty: f32,
    /// tz
    #[serde(with = "float")]
    pub tz: f32,
}

/// An analog stick, two Float16 in -1..1.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Stick {
    /// x
    #[serde(with = "float")]
    pub x: f32,
    /// y
    #[serde(with = "float")]
    pub y: f32,
}

/// Head1: head pose with optional IPD.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Head1 {
    /// objectID
    pub id: u64,
    /// Time1: low 16 bits of ms since the epoch.
    pub time: u16,
    /// Loc2
    pub location: Loc2,
    /// Rot2
    pub rotation: Rot2,
    /// Interpupillary distance (optional part).
    #[serde(default, with = "opt_float", skip_serializing_if = "Option::is_none")]
    pub ipd: Option<f32>,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// Hand1: hand pose.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Hand1 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Left hand (else right).
    pub left: bool,
    /// Loc2
    pub location: Loc2,
    /// Rot2
    pub rotation: Rot2,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// A thumb's four joints.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Thumb {
    /// tip
    pub tip: Transform1,
    /// interphalangeal joint
    pub ip: Transform1,
    /// metacarpophalangeal joint
    pub mcp: Transform1,
    /// carpometacarpal joint
    pub cmc: Transform1,
}

/// A finger's five joints.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Finger {
    /// tip
    pub tip: Transform1,
    /// distal interphalangeal joint
    pub dip: Transform1,
    /// proximal interphalangeal joint
    pub pip: Transform1,
    /// metacarpophalangeal joint
    pub mcp: Transform1,
    /// carpometacarpal joint
    pub cmc: Transform1,
}

/// Hand2: skeletal hand.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Hand2 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Left hand (else right).
    pub left: bool,
    /// Palm Loc2
    pub location: Loc2,
    /// Palm Rot2
    pub rotation: Rot2,
    /// Wrist
    pub wrist: Transform1,
    /// Thumb (tip, IP, MCP, CMC)
    pub thumb: Thumb,
    /// Index finger
    pub index: Finger,
    /// Middle finger
    pub middle: Finger,
    /// Ring finger
    pub ring: Finger,
    /// Little finger
    pub pinky: Finger,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// Object1's scale: draft01 has one Float16 for all axes, gse three Float32.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scale1 {
    /// draft01 Scale1.
    Uniform(#[serde(with = "float")] f32),
    /// gse: x, y, z.
    Axes(Vec3),
}

impl Default for Scale1 {
    fn default() -> Self {
        Scale1::Uniform(1.0)
    }
}

/// Object1: generic object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Object1 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Loc1
    pub position: Vec3,
    /// Rot1
    pub rotation: Rot1,
    /// Scale
    pub scale: Scale1,
    /// Active
    pub active: bool,
    /// Parent objectID (optional part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// Object2: generic object with rates.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Object2 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Loc2
    pub location: Loc2,
    /// Rot2
    pub rotation: Rot2,
    /// Scale2
    pub scale: Loc2,
    /// Active
    pub active: bool,
    /// Parent objectID (optional part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// A texture: a URL or the RTP payload type of a video stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Texture {
    /// TextureUrl1
    #[serde(rename = "url")]
    Url(String),
    /// TextureRtpPT1
    #[serde(rename = "rtpPT")]
    RtpPt(u8),
}

/// One texture coordinate: draft01 has two Float32, gse two VarUInt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TexCoord {
    /// gse: VarUInt u, v.
    Index {
        /// u
        u: u64,
        /// v
        v: u64,
    },
    /// draft01 TextureUV1.
    Float {
        /// u
        #[serde(with = "float")]
        u: f32,
        /// v
        #[serde(with = "float")]
        v: f32,
    },
}

/// Mesh1: small inline triangle mesh.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Mesh1 {
    /// objectID
    pub id: u64,
    /// Texture (draft01 requires one; gse has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texture: Option<Texture>,
    /// Vertexes (Loc1).
    pub vertices: Vec<Vec3>,
    /// Normals (Norm1, Float16).
    pub normals: Vec<Vec3>,
    /// Texture coordinates.
    pub textures: Vec<TexCoord>,
    /// Triangle vertex indexes.
    pub triangles: Vec<u64>,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// Mesh2: external mesh placed in the scene.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Mesh2 {
    /// objectID
    pub id: u64,
    /// Loc2
    pub location: Loc2,
    /// Rot2
    pub rotation: Rot2,
    /// Scale2
    pub scale: Loc2,
    /// MeshUrl1
    #[serde(rename = "meshUrl")]
    pub mesh_url: String,
    /// Optional texture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texture: Option<Texture>,
    /// Parent objectID (optional part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// GameControl1: buttons and two sticks.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GameControl1 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Button bits (VarInt).
    pub buttons: i64,
    /// Time1 of the last button change.
    #[serde(rename = "buttonsTime")]
    pub buttons_time: u16,
    /// Left stick.
    pub left: Stick,
    /// Right stick.
    pub right: Stick,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// ThreeDOF1: orientation-only controller.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThreeDof1 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Left controller (else right).
    pub left: bool,
    /// Rot2
    pub rotation: Rot2,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// The 6DOF controller's pointer intersection point.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Pointer {
    /// x
    #[serde(with = "float")]
    pub x: f32,
    /// y
    #[serde(with = "float")]
    pub y: f32,
    /// z
    #[serde(with = "float")]
    pub z: f32,
    /// Written as the EBNF literally reads (`tag6DOFpointer1 Loc1`, no Length).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bare: bool,
}

/// SixDOF1: pose controller with optional pointer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SixDof1 {
    /// objectID
    pub id: u64,
    /// Time1
    pub time: u16,
    /// Left controller (else right).
    pub left: bool,
    /// Loc2
    pub location: Loc2,
    /// Rot2
    pub rotation: Rot2,
    /// Optional pointer intersection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<Pointer>,
    /// Unparsed optional parts.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// HeadIPD1 sent as a top-level object (it carries no objectID).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HeadIpd1 {
    /// IPD, Float16.
    #[serde(with = "float")]
    pub ipd: f32,
    /// Bytes after the Float16 inside the Length.
    #[serde(default, skip_serializing_if = "Hex::is_empty")]
    pub extra: Hex,
}

/// An object whose tag the dialect does not know: its body bytes, untouched.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Unknown {
    /// The tag.
    pub tag: u64,
    /// Everything after the Length (normally starting with the objectID).
    pub data: Hex,
}

/// Any game-state object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[allow(missing_docs)]
pub enum Object {
    Head1(Head1),
    Hand1(Hand1),
    Hand2(Box<Hand2>),
    Object1(Object1),
    Object2(Object2),
    Mesh1(Mesh1),
    Mesh2(Mesh2),
    GameControl1(GameControl1),
    #[serde(rename = "ThreeDOF1")]
    ThreeDof1(ThreeDof1),
    #[serde(rename = "SixDOF1")]
    SixDof1(SixDof1),
    #[serde(rename = "HeadIPD1")]
    HeadIpd1(HeadIpd1),
    Container(Container),
    Unknown(Unknown),
}

mod opt_float {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    struct W(#[serde(with = "super::float")] f32);

    pub fn serialize<S: Serializer>(v: &Option<f32>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(f) => super::float::serialize(f, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
        Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
    }
}

impl Object {
    /// The objectID (`None` for a top-level HeadIPD1, and for an unknown object whose
    /// body does not start with a VarUInt; a container's is its sender's SSRC).
    pub fn id(&self) -> Option<u64> {
        match self {
            Object::Head1(o) => Some(o.id),
            Object::Hand1(o) => Some(o.id),
            Object::Hand2(o) => Some(o.id),
            Object::Object1(o) => Some(o.id),
            Object::Object2(o) => Some(o.id),
            Object::Mesh1(o) => Some(o.id),
            Object::Mesh2(o) => Some(o.id),
            Object::GameControl1(o) => Some(o.id),
            Object::ThreeDof1(o) => Some(o.id),
            Object::SixDof1(o) => Some(o.id),
            Object::HeadIpd1(_) => None,
            Object::Container(c) => Some(u64::from(c.ssrc)),
            Object::Unknown(u) => super::reader::Reader::new(&u.data.0).varuint().ok(),
        }
    }

    /// The position the relay uses for area-of-interest filtering, if the type has one.
    pub fn position(&self) -> Option<[f32; 3]> {
        match self {
            Object::Head1(o) => Some(o.location.position()),
            Object::Hand1(o) => Some(o.location.position()),
            Object::Hand2(o) => Some(o.location.position()),
            Object::Object1(o) => Some([o.position.x, o.position.y, o.position.z]),
            Object::Object2(o) => Some(o.location.position()),
            Object::Mesh2(o) => Some(o.location.position()),
            Object::SixDof1(o) => Some(o.location.position()),
            _ => None,
        }
    }

    /// The unparsed optional parts, for the types that have them.
    pub fn extra(&self) -> Option<&Hex> {
        match self {
            Object::Head1(o) => Some(&o.extra),
            Object::Hand1(o) => Some(&o.extra),
            Object::Hand2(o) => Some(&o.extra),
            Object::Object1(o) => Some(&o.extra),
            Object::Object2(o) => Some(&o.extra),
            Object::Mesh1(o) => Some(&o.extra),
            Object::Mesh2(o) => Some(&o.extra),
            Object::GameControl1(o) => Some(&o.extra),
            Object::ThreeDof1(o) => Some(&o.extra),
            Object::SixDof1(o) => Some(&o.extra),
            Object::HeadIpd1(o) => Some(&o.extra),
            Object::Container(_) | Object::Unknown(_) => None,
        }
    }

    /// The parent objectID, if the object declares one.
    pub fn parent(&self) -> Option<u64> {
        match self {
            Object::Object1(o) => o.parent,
            Object::Object2(o) => o.parent,
            Object::Mesh2(o) => o.parent,
            _ => None,
        }
    }
}

/// One sender's objects, as the typed decoder and `gsrelay decode` show them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Container {
    /// The sender's SSRC (the container's ObjectID).
    pub ssrc: u32,
    /// The sender's objects, in wire order.
    pub objects: Vec<Object>,
}
