//! The two wire dialects and the tag numbers each uses for each object type.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The tag of the container object of aggregated delivery (`super::container`), from the
/// First-Come-First-Served range of the draft's Game State Tag Registry: 0x4753, "GS" in
/// a hex dump.
pub const CONTAINER_TAG: u64 = 0x4753;

/// Which reading of the wire format a session speaks (see `docs/wire-format.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// draft-01 as written: IANA tag numbers as prose-form VarUInts, the EBNF layouts.
    #[default]
    Draft01,
    /// Byte-compatible with the reference implementation (cisco/gse).
    Gse,
}

impl Dialect {
    /// Draft01 is strict where the grammar is (Boolean is `00`/`01` only); gse is lenient.
    pub fn strict_booleans(self) -> bool {
        self == Dialect::Draft01
    }

    /// The object type a tag names in this dialect.
    pub fn kind_of(self, tag: u64) -> ObjectKind {
        use ObjectKind::*;
        match (self, tag) {
            (_, 1) => Head1,
            (_, 2) => Hand1,
            (_, 3) => Object1,
            (Dialect::Draft01, 128) | (Dialect::Gse, 0x8000) => Mesh1,
            (Dialect::Draft01, 129) | (Dialect::Gse, 0x8001) => Hand2,
            (Dialect::Draft01, 130) | (Dialect::Gse, 0x8002) => HeadIpd1,
            (Dialect::Draft01, 131) => Object2,
            (Dialect::Draft01, 132) => Mesh2,
            (Dialect::Draft01, 133) => GameControl1,
            (Dialect::Draft01, 134) => ThreeDof1,
            (Dialect::Draft01, 135) => SixDof1,
            (_, CONTAINER_TAG) => Container,
            _ => Unknown,
        }
    }

    /// The tag this dialect writes for an object type, if it has one.
    pub fn tag_of(self, kind: ObjectKind) -> Option<u64> {
        use ObjectKind::*;
        let tag = match (self, kind) {
            (_, Head1) => 1,
            (_, Hand1) => 2,
            (_, Object1) => 3,
            (Dialect::Draft01, Mesh1) => 128,
            (Dialect::Draft01, Hand2) => 129,
            (Dialect::Draft01, HeadIpd1) => 130,
            (Dialect::Draft01, Object2) => 131,
            (Dialect::Draft01, Mesh2) => 132,
            (Dialect::Draft01, GameControl1) => 133,
            (Dialect::Draft01, ThreeDof1) => 134,
            (Dialect::Draft01, SixDof1) => 135,
            (Dialect::Gse, Mesh1) => 0x8000,
            (Dialect::Gse, Hand2) => 0x8001,
            (Dialect::Gse, HeadIpd1) => 0x8002,
            (_, Container) => CONTAINER_TAG,
            _ => return None,
        };
        Some(tag)
    }

    /// Tag of the optional Parent1 part (draft01 only; gse writes a bare VarUInt).
    pub const PARENT1_TAG: u64 = 4;
    /// Tag of the optional 6DOF pointer part (draft01).
    pub const SIXDOF_POINTER1_TAG: u64 = 136;
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Draft01 => "draft01",
            Dialect::Gse => "gse",
        })
    }
}

impl FromStr for Dialect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "draft01" => Ok(Dialect::Draft01),
            "gse" => Ok(Dialect::Gse),
            other => Err(format!(
                "unknown dialect {other:?} (expected draft01 or gse)"
            )),
        }
    }
}

/// The object types the codec understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    /// Player head.
    Head1,
    /// Player hand, simple.
    Hand1,
    /// Player hand, skeletal.
    Hand2,
    /// Generic object, simple.
    Object1,
    /// Generic object with rates.
    Object2,
    /// Small inline mesh.
    Mesh1,
    /// External mesh.
    Mesh2,
    /// Game controller.
    GameControl1,
    /// 3DOF controller.
    ThreeDof1,
    /// 6DOF controller.
    SixDof1,
    /// Interpupillary distance as a top-level object (gse allows this; it has no objectID).
    HeadIpd1,
    /// A relay's container of one sender's objects (aggregated delivery; both dialects).
    Container,
    /// A tag this dialect does not know: kept and forwarded untouched.
    Unknown,
}

impl ObjectKind {
    /// Every kind, for metrics label sets and tests.
    pub const ALL: [ObjectKind; 13] = [
        ObjectKind::Head1,
        ObjectKind::Hand1,
        ObjectKind::Hand2,
        ObjectKind::Object1,
        ObjectKind::Object2,
        ObjectKind::Mesh1,
        ObjectKind::Mesh2,
        ObjectKind::GameControl1,
        ObjectKind::ThreeDof1,
        ObjectKind::SixDof1,
        ObjectKind::HeadIpd1,
        ObjectKind::Container,
        ObjectKind::Unknown,
    ];

    /// Stable lowercase name (metrics label, JSON).
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Head1 => "head1",
            ObjectKind::Hand1 => "hand1",
            ObjectKind::Hand2 => "hand2",
            ObjectKind::Object1 => "object1",
            ObjectKind::Object2 => "object2",
            ObjectKind::Mesh1 => "mesh1",
            ObjectKind::Mesh2 => "mesh2",
            ObjectKind::GameControl1 => "gamecontrol1",
            ObjectKind::ThreeDof1 => "threedof1",
            ObjectKind::SixDof1 => "sixdof1",
            ObjectKind::HeadIpd1 => "headipd1",
            ObjectKind::Container => "container",
            ObjectKind::Unknown => "unknown",
        }
    }
}
