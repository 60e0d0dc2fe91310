//! An object's motion read straight from its TLV bytes, without a full decode: what the
//! relay needs to tell whether a subscriber can already extrapolate an update.

use super::dialect::{Dialect, ObjectKind};
use super::layout::{self, Fixed, LOC2, MESH2_FIXED};
use super::predict::{self, Quat};
use super::reader::Reader;

/// Position, velocity and rotation (now and one second ahead) of an object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Motion {
    /// Position.
    pub position: [f32; 3],
    /// Velocity per second (zero for Loc1 objects).
    pub velocity: [f32; 3],
    /// Rotation now.
    pub rotation: Quat,
    /// Rotation expected one second later (equal to `rotation` for Rot1 objects).
    pub rotation_ahead: Quat,
}

impl Motion {
    /// Where the object is expected `dt` seconds after this state.
    pub fn position_at(&self, dt: f32) -> [f32; 3] {
        std::array::from_fn(|i| self.position[i] + self.velocity[i] * dt)
    }

    /// Its expected rotation `dt` seconds after this state.
    pub fn rotation_at(&self, dt: f32) -> Quat {
        predict::slerp(self.rotation, self.rotation_ahead, dt)
    }
}

/// The motion of one object (a whole TLV, as the scanner's range gives it), for the kinds
/// whose layout starts with Loc2 Rot2 (after Time1 and a Boolean where they have them),
/// and Object1. `None` for other kinds and malformed bytes.
pub fn motion(tlv: &[u8], kind: ObjectKind, dialect: Dialect) -> Option<Motion> {
    let mut r = Reader::new(tlv);
    let mut body = layout::read_tlv(&mut r).ok()?.body;
    body.varuint().ok()?;
    let fixed_at = |kind| Fixed::of(kind, dialect).and_then(|f| f.pos_at);
    let at = match kind {
        ObjectKind::Mesh2 => 0,
        ObjectKind::Object1 => return object1(&mut body, fixed_at(kind)?),
        _ => fixed_at(kind)?,
    };
    let size = if kind == ObjectKind::Mesh2 {
        MESH2_FIXED
    } else {
        at + LOC2 + layout::ROT2
    };
    let mut f = body.sub(size).ok()?;
    f.take(at).ok()?;
    let position = [f.f32().ok()?, f.f32().ok()?, f.f32().ok()?];
    let velocity = [f.f16().ok()?, f.f16().ok()?, f.f16().ok()?];
    let s = [f.f16().ok()?, f.f16().ok()?, f.f16().ok()?];
    let e = [f.f16().ok()?, f.f16().ok()?, f.f16().ok()?];
    Some(Motion {
        position,
        velocity,
        rotation: predict::quat_from_vector(s[0], s[1], s[2]),
        rotation_ahead: predict::quat_from_vector(e[0], e[1], e[2]),
    })
}

fn object1(body: &mut Reader<'_>, at: usize) -> Option<Motion> {
    body.take(at).ok()?;
    let position = [body.f32().ok()?, body.f32().ok()?, body.f32().ok()?];
    let rotation = predict::quat_from_vector(body.f16().ok()?, body.f16().ok()?, body.f16().ok()?);
    Some(Motion {
        position,
        velocity: [0.0; 3],
        rotation,
        rotation_ahead: rotation,
    })
}
