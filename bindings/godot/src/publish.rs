//! The objects a script publishes, built from Godot's types and checked: the C ABI's
//! draft-01 structs (`gsr_head1`, `gsr_hand1`, `gsr_object2`, `gsr_game_control1`),
//! with Time1 stamped now.

use crate::convert::{Axes, angular, finite, finite2, stick_out, unit};
use crate::error::BindingError;
use crate::signals::int_to_id;
use godot::builtin::{Quaternion, Vector2, Vector3};
use gsrelay_ffi::{
    GSR_OBJECT_GAME_CONTROL1, GSR_OBJECT_HAND1, GSR_OBJECT_HEAD1, GSR_OBJECT_OBJECT2,
    gsr_game_control1, gsr_hand1, gsr_head1, gsr_loc2, gsr_object, gsr_object_union, gsr_object2,
};
use std::time::{SystemTime, UNIX_EPOCH};

/// A pose as a script gives it, in Godot's axes: position and rotation, and how they
/// change (velocity in m/s, angular velocity in rad/s about Godot's axes).
#[derive(Debug, Clone, Copy)]
pub struct Pose {
    /// Where.
    pub position: Vector3,
    /// How it is turned (a unit quaternion).
    pub rotation: Quaternion,
    /// Metres per second.
    pub velocity: Vector3,
    /// Radians per second, about its axis (at most PI: Rot2's limit).
    pub angular_velocity: Vector3,
}

/// A pose checked: finite numbers, a unit rotation, an angular speed Rot2 can hold.
struct Checked {
    position: Vector3,
    rotation: Quaternion,
    velocity: Vector3,
    angular_velocity: Vector3,
}

impl Pose {
    fn check(&self) -> Result<Checked, BindingError> {
        Ok(Checked {
            position: finite("position", self.position)?,
            rotation: unit("rotation", self.rotation)?,
            velocity: finite("velocity", self.velocity)?,
            angular_velocity: angular("angular_velocity", self.angular_velocity)?,
        })
    }
}

/// Time1 now: the low 16 bits of milliseconds since the Unix epoch.
pub fn time_now() -> u16 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    (ms & 0xffff) as u16
}

fn loc2(axes: Axes, p: &Checked) -> gsr_loc2 {
    axes.loc2_out(p.position, p.velocity)
}

fn object(r#type: u32, u: gsr_object_union) -> gsr_object {
    gsr_object {
        r#type,
        u,
        ..gsr_object::default()
    }
}

/// A Head1.
pub fn head(axes: Axes, id: i64, pose: &Pose) -> Result<gsr_object, BindingError> {
    let p = pose.check()?;
    let head1 = gsr_head1 {
        id: int_to_id(id),
        time: time_now(),
        location: loc2(axes, &p),
        rotation: axes.rot2_out(p.rotation, p.angular_velocity),
        ..gsr_head1::default()
    };
    Ok(object(GSR_OBJECT_HEAD1, gsr_object_union { head1 }))
}

/// A Hand1.
pub fn hand(axes: Axes, id: i64, left: bool, pose: &Pose) -> Result<gsr_object, BindingError> {
    let p = pose.check()?;
    let hand1 = gsr_hand1 {
        id: int_to_id(id),
        time: time_now(),
        left: u8::from(left),
        location: loc2(axes, &p),
        rotation: axes.rot2_out(p.rotation, p.angular_velocity),
    };
    Ok(object(GSR_OBJECT_HAND1, gsr_object_union { hand1 }))
}

/// An Object2's own parts beside its pose.
#[derive(Debug, Clone, Copy)]
pub struct Body {
    /// Size per axis (never mirrored).
    pub scale: Vector3,
    /// Whether it is active.
    pub active: bool,
    /// The objectID of its parent on the same stream; negative for none.
    pub parent: i64,
}

/// An Object2 (Loc2, Rot2, Scale2, active, optional parent).
pub fn object2(axes: Axes, id: i64, pose: &Pose, body: &Body) -> Result<gsr_object, BindingError> {
    let p = pose.check()?;
    let scale = finite("scale", body.scale)?;
    let object2 = gsr_object2 {
        id: int_to_id(id),
        time: time_now(),
        location: loc2(axes, &p),
        rotation: axes.rot2_out(p.rotation, p.angular_velocity),
        scale: gsr_loc2 {
            x: scale.x,
            y: scale.y,
            z: scale.z,
            ..gsr_loc2::default()
        },
        active: u8::from(body.active),
        parent_present: u8::from(body.parent >= 0),
        parent: int_to_id(body.parent.max(0)),
    };
    Ok(object(GSR_OBJECT_OBJECT2, gsr_object_union { object2 }))
}

/// A GameControl1: buttons as a bit set, two sticks in [-1, 1].
pub fn game_control(
    id: i64,
    buttons: i64,
    left_stick: Vector2,
    right_stick: Vector2,
) -> Result<gsr_object, BindingError> {
    let left = finite2("left_stick", left_stick)?;
    let right = finite2("right_stick", right_stick)?;
    let time = time_now();
    let game_control1 = gsr_game_control1 {
        id: int_to_id(id),
        time,
        buttons,
        buttons_time: time,
        left: stick_out(left),
        right: stick_out(right),
    };
    Ok(object(
        GSR_OBJECT_GAME_CONTROL1,
        gsr_object_union { game_control1 },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pose() -> Pose {
        Pose {
            position: Vector3::new(1.0, 2.0, 3.0),
            rotation: Quaternion::IDENTITY,
            velocity: Vector3::ZERO,
            angular_velocity: Vector3::ZERO,
        }
    }

    #[test]
    fn a_head_is_written_in_the_wire_axes() {
        let o = head(Axes::Draft, 7, &pose()).unwrap();
        assert_eq!(o.r#type, GSR_OBJECT_HEAD1);
        // SAFETY: the type says the union holds a Head1.
        let h = unsafe { o.u.head1 };
        assert_eq!((h.id, h.location.x, h.location.z), (7, 1.0, -3.0));
    }

    #[test]
    fn bad_poses_are_refused_before_the_library() {
        let mut p = pose();
        p.position.y = f32::NAN;
        let Err(e) = head(Axes::Draft, 1, &p) else {
            panic!("a NaN position is refused")
        };
        assert!(e.message.contains("position must be finite"), "{e}");
        let mut p = pose();
        p.rotation = Quaternion::new(0.0, 0.0, 0.0, 2.0);
        assert!(hand(Axes::Draft, 1, true, &p).is_err());
        let body = Body {
            scale: Vector3::new(f32::INFINITY, 1.0, 1.0),
            active: true,
            parent: -1,
        };
        let Err(e) = object2(Axes::Draft, 1, &pose(), &body) else {
            panic!("an infinite scale is refused")
        };
        assert!(e.message.contains("scale must be finite"), "{e}");
        let nan = Vector2::new(f32::NAN, 0.0);
        assert!(game_control(1, 0, nan, Vector2::ZERO).is_err());
    }

    #[test]
    fn an_object_without_a_parent_says_so() {
        let body = Body {
            scale: Vector3::ONE,
            active: true,
            parent: -1,
        };
        let o = object2(Axes::Draft, 3, &pose(), &body).unwrap();
        // SAFETY: the type says the union holds an Object2.
        let b = unsafe { o.u.object2 };
        assert_eq!((b.parent_present, b.active, b.scale.x), (0, 1, 1.0));
    }
}
