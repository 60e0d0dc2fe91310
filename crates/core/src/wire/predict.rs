//! The draft's Appendix D/E "predicted values at a given time".
//!
//! Loc2/Scale2 carry a rate per second: the value at `t` seconds after the object's
//! Time1 is `x + vx·t` (linear, no acceleration). Rot2 carries the rotation `s` now and
//! `e` one second later; the rotation at `t` is the spherical linear interpolation from
//! `s` toward `e` with parameter `t` (extrapolating past `e` for `t > 1`).
//!
//! Limits: the draft's Rot2 cannot express more than half a turn per second, so the
//! shorter arc from `s` to `e` is taken; quaternion real parts are reconstructed as the
//! non-negative root (q and −q are the same rotation); predictions far beyond a second are
//! extrapolations of a constant-rate model and grow less trustworthy with `t`.

use super::object::{Loc2, Object, Rot1, Rot2};

/// A unit quaternion `[w, i, j, k]`.
pub type Quat = [f32; 4];

/// Signed milliseconds from Time1 `from` to `to`, both the low 16 bits of epoch ms.
/// Wraps so that times within ±32.767 s compare correctly.
pub fn time_delta_ms(from: u16, to: u16) -> i32 {
    i32::from(to.wrapping_sub(from) as i16)
}

/// The position (or scale) `dt` seconds later.
pub fn extrapolate(l: &Loc2, dt: f32) -> [f32; 3] {
    [l.x + l.vx * dt, l.y + l.vy * dt, l.z + l.vz * dt]
}

/// The full quaternion from its vector part, taking the non-negative real part.
/// Vector parts slightly longer than 1 (Float16 rounding) clamp to a real part of 0.
pub fn quat_from_vector(i: f32, j: f32, k: f32) -> Quat {
    let w2 = 1.0 - (i * i + j * j + k * k);
    normalize([w2.max(0.0).sqrt(), i, j, k])
}

/// Rot1 as a quaternion.
pub fn rot1_quat(r: &Rot1) -> Quat {
    quat_from_vector(r.i, r.j, r.k)
}

/// The rotation `dt` seconds after Rot2's `s`, by slerp from `s` toward `e`.
pub fn rot2_at(r: &Rot2, dt: f32) -> Quat {
    slerp(
        quat_from_vector(r.si, r.sj, r.sk),
        quat_from_vector(r.ei, r.ej, r.ek),
        dt,
    )
}

/// Spherical linear interpolation along the shorter arc; `t` outside 0..1 extrapolates.
pub fn slerp(a: Quat, b: Quat, t: f32) -> Quat {
    let mut d = dot(a, b);
    let b = if d < 0.0 {
        d = -d;
        b.map(|c| -c)
    } else {
        b
    };
    // Nearly identical rotations: the sine ratio is ill-conditioned, lerp is exact enough.
    if d > 0.9995 {
        return normalize(std::array::from_fn(|n| a[n] + (b[n] - a[n]) * t));
    }
    let theta = d.min(1.0).acos();
    let s = theta.sin();
    let (wa, wb) = (((1.0 - t) * theta).sin() / s, (t * theta).sin() / s);
    normalize(std::array::from_fn(|n| a[n] * wa + b[n] * wb))
}

/// The angle in radians between two rotations.
pub fn angle_between(a: Quat, b: Quat) -> f32 {
    2.0 * dot(a, b).abs().min(1.0).acos()
}

fn dot(a: Quat, b: Quat) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
}

fn normalize(q: Quat) -> Quat {
    let n = dot(q, q).sqrt();
    if n > 0.0 {
        q.map(|c| c / n)
    } else {
        [1.0, 0.0, 0.0, 0.0]
    }
}

/// What an object is predicted to look like at some time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Prediction {
    /// Position, for objects that have one.
    pub position: Option<[f32; 3]>,
    /// Rotation, for objects that have one.
    pub rotation: Option<Quat>,
    /// Per-axis scale, for objects that have one.
    pub scale: Option<[f32; 3]>,
}

/// Predicts `o` at `now_ms` (low 16 bits of epoch ms, like Time1). Objects without a
/// Time1 (meshes) are returned as sent.
pub fn predict(o: &Object, now_ms: u16) -> Prediction {
    let at = |time: u16| time_delta_ms(time, now_ms) as f32 / 1000.0;
    match o {
        Object::Head1(h) => moving(&h.location, &h.rotation, at(h.time)),
        Object::Hand1(h) => moving(&h.location, &h.rotation, at(h.time)),
        Object::Hand2(h) => moving(&h.location, &h.rotation, at(h.time)),
        Object::SixDof1(s) => moving(&s.location, &s.rotation, at(s.time)),
        Object::Object2(o) => Prediction {
            scale: Some(extrapolate(&o.scale, at(o.time))),
            ..moving(&o.location, &o.rotation, at(o.time))
        },
        Object::Mesh2(m) => Prediction {
            scale: Some(extrapolate(&m.scale, 0.0)),
            ..moving(&m.location, &m.rotation, 0.0)
        },
        Object::ThreeDof1(t) => Prediction {
            rotation: Some(rot2_at(&t.rotation, at(t.time))),
            ..Prediction::default()
        },
        Object::Object1(o) => Prediction {
            position: Some([o.position.x, o.position.y, o.position.z]),
            rotation: Some(rot1_quat(&o.rotation)),
            scale: Some(match o.scale {
                super::object::Scale1::Uniform(s) => [s; 3],
                super::object::Scale1::Axes(v) => [v.x, v.y, v.z],
            }),
        },
        _ => Prediction::default(),
    }
}

fn moving(l: &Loc2, r: &Rot2, dt: f32) -> Prediction {
    Prediction {
        position: Some(extrapolate(l, dt)),
        rotation: Some(rot2_at(r, dt)),
        scale: None,
    }
}
