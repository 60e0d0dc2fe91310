//! Godot's vectors and quaternions to and from the C ABI's draft-01 structs, checked.
//!
//! **Axes.** The draft's default coordinate system is left-handed with Y up and X to the
//! right (so Z points away from the viewer); Godot's is right-handed with Y up, X to the
//! right and -Z forward. With [`Axes::Draft`] (the node's default) the binding mirrors Z
//! both ways, so a Godot game and a Unity game (left-handed, sent as it is) in one room
//! see each other where they are. [`Axes::AsIs`] passes the numbers through, for rooms
//! whose every app is right-handed. Mirroring Z maps a position (x, y, z) to (x, y, -z)
//! and a rotation quaternion (x, y, z, w) to (-x, -y, z, w): the rotation axis is a
//! pseudovector, so it flips opposite to the mirrored axis.
//!
//! **Rotations.** Rot1 and Rot2 carry only a quaternion's vector part; the real part is
//! rebuilt non-negative (`docs/wire-format.md`, "Prediction"), so a quaternion is sent as
//! q or -q (the same rotation), whichever has w >= 0.

use crate::error::BindingError;
use godot::builtin::{Quaternion, Vector2, Vector3};
use gsrelay_ffi::{gsr_loc2, gsr_rot1, gsr_rot2, gsr_stick, gsr_vec3};

/// How positions and rotations are turned between Godot's axes and the wire's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axes {
    /// The draft's left-handed axes on the wire: Z is mirrored both ways.
    Draft,
    /// Godot's numbers on the wire as they are.
    AsIs,
}

/// How far from 1 a rotation's length may be before it is refused: Godot's own
/// quaternions (from a `Basis`, `slerp`) are normalised to float rounding, far within.
const UNIT_TOLERANCE: f32 = 1e-3;

/// Rot2 holds the rotation one second on, and the receiver slerps the shorter arc to it:
/// more than half a turn per second cannot be told from its opposite.
pub const MAX_ANGULAR_SPEED: f32 = std::f32::consts::PI;

impl Axes {
    fn z(self) -> f32 {
        match self {
            Axes::Draft => -1.0,
            Axes::AsIs => 1.0,
        }
    }

    /// A position or velocity for the wire.
    pub fn vec_out(self, v: Vector3) -> gsr_vec3 {
        gsr_vec3 {
            x: v.x,
            y: v.y,
            z: v.z * self.z(),
        }
    }

    /// A position or velocity from the wire.
    pub fn vec_in(self, x: f32, y: f32, z: f32) -> Vector3 {
        Vector3::new(x, y, z * self.z())
    }

    /// A rotation between Godot's axes and the wire's (mirroring is its own inverse).
    fn rotation(self, q: Quaternion) -> Quaternion {
        match self {
            Axes::Draft => Quaternion::new(-q.x, -q.y, q.z, q.w),
            Axes::AsIs => q,
        }
    }

    /// A location with its velocity for the wire (Loc2).
    pub fn loc2_out(self, position: Vector3, velocity: Vector3) -> gsr_loc2 {
        let p = self.vec_out(position);
        let v = self.vec_out(velocity);
        gsr_loc2 {
            x: p.x,
            y: p.y,
            z: p.z,
            vx: v.x,
            vy: v.y,
            vz: v.z,
        }
    }

    /// A location's position and velocity from the wire.
    pub fn loc2_in(self, l: &gsr_loc2) -> (Vector3, Vector3) {
        (self.vec_in(l.x, l.y, l.z), self.vec_in(l.vx, l.vy, l.vz))
    }

    /// A rotation for the wire (Rot1): its vector part, real part made non-negative.
    pub fn rot1_out(self, q: Quaternion) -> gsr_rot1 {
        let q = with_nonnegative_w(self.rotation(q));
        gsr_rot1 {
            i: q.x,
            j: q.y,
            k: q.z,
        }
    }

    /// A rotation from the wire (Rot1).
    pub fn rot1_in(self, r: &gsr_rot1) -> Quaternion {
        self.rotation(from_vector_part(r.i, r.j, r.k))
    }

    /// A rotation and its angular velocity (rad/s, about Godot's axes, as a rigid body's
    /// `angular_velocity`) for the wire (Rot2: now, and one second on).
    pub fn rot2_out(self, now: Quaternion, angular_velocity: Vector3) -> gsr_rot2 {
        let later = turn(angular_velocity) * now;
        let s = self.rot1_out(now);
        let e = self.rot1_out(later);
        gsr_rot2 {
            si: s.i,
            sj: s.j,
            sk: s.k,
            ei: e.i,
            ej: e.j,
            ek: e.k,
        }
    }

    /// A rotation from the wire (Rot2): now, and one second on.
    pub fn rot2_in(self, r: &gsr_rot2) -> (Quaternion, Quaternion) {
        (
            self.rotation(from_vector_part(r.si, r.sj, r.sk)),
            self.rotation(from_vector_part(r.ei, r.ej, r.ek)),
        )
    }
}

/// The quaternion whose vector part is (i, j, k), with the non-negative real part a unit
/// quaternion needs (0 when Float16 rounding made the vector part slightly too long).
fn from_vector_part(i: f32, j: f32, k: f32) -> Quaternion {
    let w = (1.0 - i * i - j * j - k * k).max(0.0).sqrt();
    Quaternion::new(i, j, k, w)
}

fn with_nonnegative_w(q: Quaternion) -> Quaternion {
    if q.w < 0.0 {
        Quaternion::new(-q.x, -q.y, -q.z, -q.w)
    } else {
        q
    }
}

/// The rotation an angular velocity makes in one second (about its axis, by its length).
fn turn(angular_velocity: Vector3) -> Quaternion {
    let angle = angular_velocity.length();
    if angle == 0.0 {
        return Quaternion::IDENTITY;
    }
    let axis = angular_velocity / angle;
    let (sin, cos) = (angle / 2.0).sin_cos();
    Quaternion::new(axis.x * sin, axis.y * sin, axis.z * sin, cos)
}

/// A stick's position on the wire.
pub fn stick_out(v: Vector2) -> gsr_stick {
    gsr_stick { x: v.x, y: v.y }
}

/// `what` as a finite vector, or why not.
pub fn finite(what: &str, v: Vector3) -> Result<Vector3, BindingError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(BindingError::argument(format!(
            "{what} must be finite, got {v:?}"
        )))
    }
}

/// `what` as a finite 2D vector, or why not.
pub fn finite2(what: &str, v: Vector2) -> Result<Vector2, BindingError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(BindingError::argument(format!(
            "{what} must be finite, got {v:?}"
        )))
    }
}

/// `what` as a unit quaternion (normalised), or why not.
pub fn unit(what: &str, q: Quaternion) -> Result<Quaternion, BindingError> {
    if !q.is_finite() {
        return Err(BindingError::argument(format!(
            "{what} must be finite, got {q:?}"
        )));
    }
    let length = (q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w).sqrt();
    if (length - 1.0).abs() > UNIT_TOLERANCE {
        return Err(BindingError::argument(format!(
            "{what} must be a unit quaternion (call normalized()), its length is {length}"
        )));
    }
    Ok(Quaternion::new(
        q.x / length,
        q.y / length,
        q.z / length,
        q.w / length,
    ))
}

/// `what` as an angular velocity Rot2 can carry, or why not.
pub fn angular(what: &str, v: Vector3) -> Result<Vector3, BindingError> {
    let v = finite(what, v)?;
    if v.length() > MAX_ANGULAR_SPEED {
        return Err(BindingError::argument(format!(
            "{what} must be at most PI rad/s (Rot2 holds at most half a turn per second), got {}",
            v.length()
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Quaternion, b: Quaternion) -> bool {
        // q and -q are one rotation.
        let d = (a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w).abs();
        (d - 1.0).abs() < 1e-5
    }

    #[test]
    fn positions_mirror_z_with_draft_axes_and_pass_through_as_is() {
        let v = Vector3::new(1.0, 2.0, 3.0);
        let out = Axes::Draft.vec_out(v);
        assert_eq!((out.x, out.y, out.z), (1.0, 2.0, -3.0));
        assert_eq!(Axes::Draft.vec_in(out.x, out.y, out.z), v);
        let out = Axes::AsIs.vec_out(v);
        assert_eq!((out.x, out.y, out.z), (1.0, 2.0, 3.0));
    }

    #[test]
    fn a_yaw_mirrored_turns_the_mirrored_point_where_the_original_went() {
        // A quarter turn about +Y in Godot takes +X to -Z; mirrored, +X goes to +Z.
        let yaw = Quaternion::new(
            0.0,
            (std::f32::consts::FRAC_PI_4).sin(),
            0.0,
            (std::f32::consts::FRAC_PI_4).cos(),
        );
        let godot = yaw * Vector3::new(1.0, 0.0, 0.0);
        let wire = Axes::Draft.rot1_in(&Axes::Draft.rot1_out(yaw));
        assert!(close(wire, yaw), "{wire:?} round-trips to {yaw:?}");
        let r = Axes::Draft.rot1_out(yaw);
        let on_wire = from_vector_part(r.i, r.j, r.k) * Vector3::new(1.0, 0.0, 0.0);
        assert!((godot.z + 1.0).abs() < 1e-5 && (on_wire.z - 1.0).abs() < 1e-5);
    }

    #[test]
    fn rotations_round_trip_whatever_the_sign_of_w() {
        for axes in [Axes::Draft, Axes::AsIs] {
            let q = Quaternion::new(0.5, -0.5, 0.5, -0.5);
            assert!(close(axes.rot1_in(&axes.rot1_out(q)), q));
        }
    }

    #[test]
    fn rot2_carries_the_rotation_one_second_on() {
        let now = Quaternion::IDENTITY;
        let r = Axes::AsIs.rot2_out(now, Vector3::new(0.0, 1.0, 0.0));
        let (s, e) = Axes::AsIs.rot2_in(&r);
        assert!(close(s, now));
        let want = Quaternion::new(0.0, 0.5f32.sin(), 0.0, 0.5f32.cos());
        assert!(close(e, want), "{e:?} is one radian about Y");
    }

    #[test]
    fn garbage_is_refused_with_the_reason() {
        let nan = Vector3::new(f32::NAN, 0.0, 0.0);
        assert!(
            finite("position", nan)
                .unwrap_err()
                .message
                .contains("position must be finite")
        );
        let long = Quaternion::new(1.0, 1.0, 0.0, 0.0);
        assert!(
            unit("rotation", long)
                .unwrap_err()
                .message
                .contains("unit quaternion")
        );
        let zero = Quaternion::new(0.0, 0.0, 0.0, 0.0);
        assert!(unit("rotation", zero).is_err());
        let inf = Quaternion::new(f32::INFINITY, 0.0, 0.0, 1.0);
        assert!(
            unit("rotation", inf)
                .unwrap_err()
                .message
                .contains("finite")
        );
        let fast = Vector3::new(0.0, 4.0, 0.0);
        assert!(
            angular("angular_velocity", fast)
                .unwrap_err()
                .message
                .contains("PI rad/s")
        );
        assert!(finite2("stick", Vector2::new(0.0, f32::NAN)).is_err());
    }
}
