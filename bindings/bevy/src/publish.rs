//! Entities the game marks [`Publish`] are sent as objects of the session's stream, at the
//! plugin's rate, in `PostUpdate` (after the game moved them), with Loc2 and Rot2 rates
//! measured from their motion since the last publish so that receivers can predict them.

use crate::client::RelayClient;
use crate::messages::RelayError;
use crate::{RelaySync, time1_now};
use bevy::prelude::*;
use gsrelay_core::wire::predict;
use gsrelay_core::wire::{Hand1, Head1, Loc2, Object, Object2, Rot2, SixDof1};
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// Marks an entity whose `Transform` the plugin publishes as object `object_id` of the
/// session's stream. Its `Transform` is taken as the world pose: publish top-level
/// entities (or ones whose parents do not move).
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish {
    /// The objectID: unique among the session's objects.
    pub object_id: u64,
    /// The draft-01 type it is sent as.
    pub kind: PublishKind,
}

impl Publish {
    /// Object `object_id` sent as a generic object with rates (Object2).
    pub fn object(object_id: u64) -> Self {
        Self {
            object_id,
            kind: PublishKind::Object2,
        }
    }
}

/// The draft-01 types an entity can be published as: those whose pose is a Loc2 and a
/// Rot2, which carry the rates receivers predict with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublishKind {
    /// A generic object (Object2): position, rotation and scale, each with its rate.
    #[default]
    Object2,
    /// A head (Head1).
    Head1,
    /// A hand (Hand1).
    Hand1 {
        /// The left hand (else the right).
        left: bool,
    },
    /// A 6DOF controller (SixDOF1).
    SixDof1 {
        /// The left controller (else the right).
        left: bool,
    },
}

/// What was published of an object last time, to measure its rates.
#[derive(Debug, Clone, Copy)]
struct Sent {
    transform: Transform,
    at: Instant,
}

/// The publisher's memory between frames.
#[derive(Default)]
pub(crate) struct Publisher {
    last: Option<Instant>,
    sent: HashMap<u64, Sent>,
    /// objectIDs already reported as marked on two entities.
    duplicates: HashSet<u64>,
}

/// `PostUpdate`: once per publish interval, sends every marked entity.
pub(crate) fn publish(
    client: Option<Res<RelayClient>>,
    sync: Res<RelaySync>,
    marked: Query<(&Publish, &Transform)>,
    mut state: Local<Publisher>,
    mut errors: MessageWriter<RelayError>,
) {
    let Some(client) = client.filter(|c| c.is_joined()) else {
        return;
    };
    let now = Instant::now();
    if state
        .last
        .is_some_and(|last| now.duration_since(last) < sync.0.publish_interval())
    {
        return;
    }
    state.last = Some(now);
    let time = time1_now();
    let mut objects = Vec::new();
    let mut seen = HashSet::new();
    for (publish, transform) in &marked {
        if !seen.insert(publish.object_id) {
            if state.duplicates.insert(publish.object_id) {
                errors.write(RelayError {
                    message: format!(
                        "objectID {} is marked Publish on more than one entity; one is sent",
                        publish.object_id
                    ),
                });
            }
            continue;
        }
        let before = state.sent.get(&publish.object_id).copied();
        objects.push(object(publish, transform, before, now, time));
        state.sent.insert(
            publish.object_id,
            Sent {
                transform: *transform,
                at: now,
            },
        );
    }
    state.sent.retain(|id, _| seen.contains(id));
    if objects.is_empty() {
        return;
    }
    if let Err(e) = client.publish_objects(objects) {
        errors.write(RelayError {
            message: format!("publishing the marked entities failed: {e}"),
        });
    }
}

/// The object `publish` names, at `transform`, with rates from `before`.
fn object(
    publish: &Publish,
    transform: &Transform,
    before: Option<Sent>,
    now: Instant,
    time: u16,
) -> Object {
    let dt = before
        .map(|b| now.duration_since(b.at).as_secs_f32())
        .filter(|dt| *dt > 0.0);
    let previous = before.map(|b| b.transform);
    let rate = |now: Vec3, then: Option<Vec3>| match (then, dt) {
        (Some(then), Some(dt)) => finite_or_zero((now - then) / dt),
        _ => Vec3::ZERO,
    };
    let location = loc2(
        transform.translation,
        rate(transform.translation, previous.map(|p| p.translation)),
    );
    let rotation = rot2(transform.rotation, previous.map(|p| p.rotation), dt);
    let id = publish.object_id;
    match publish.kind {
        PublishKind::Object2 => Object::Object2(Object2 {
            id,
            time,
            location,
            rotation,
            scale: loc2(
                transform.scale,
                rate(transform.scale, previous.map(|p| p.scale)),
            ),
            active: true,
            ..Object2::default()
        }),
        PublishKind::Head1 => Object::Head1(Head1 {
            id,
            time,
            location,
            rotation,
            ..Head1::default()
        }),
        PublishKind::Hand1 { left } => Object::Hand1(Hand1 {
            id,
            time,
            left,
            location,
            rotation,
            ..Hand1::default()
        }),
        PublishKind::SixDof1 { left } => Object::SixDof1(SixDof1 {
            id,
            time,
            left,
            location,
            rotation,
            ..SixDof1::default()
        }),
    }
}

fn finite_or_zero(v: Vec3) -> Vec3 {
    if v.is_finite() { v } else { Vec3::ZERO }
}

fn loc2(value: Vec3, rate: Vec3) -> Loc2 {
    Loc2 {
        x: value.x,
        y: value.y,
        z: value.z,
        vx: rate.x,
        vy: rate.y,
        vz: rate.z,
    }
}

/// Rot2: the rotation now, and where it will be one second later if it keeps turning as
/// it did since `before` (the slerp from `before` to now, carried on to `dt + 1 s`). The
/// draft carries only the vector part with a non-negative real part, so each quaternion
/// is taken on that side (q and -q are the same rotation).
fn rot2(now: Quat, before: Option<Quat>, dt: Option<f32>) -> Rot2 {
    let now = canonical(now);
    let ahead = match (before, dt) {
        (Some(before), Some(dt)) => {
            let q = predict::slerp(wijk(canonical(before)), wijk(now), (dt + 1.0) / dt);
            canonical(Quat::from_xyzw(q[1], q[2], q[3], q[0]))
        }
        _ => now,
    };
    let ahead = if ahead.is_finite() { ahead } else { now };
    Rot2 {
        si: now.x,
        sj: now.y,
        sk: now.z,
        ei: ahead.x,
        ej: ahead.y,
        ek: ahead.z,
    }
}

/// The unit quaternion with a non-negative real part; identity when it is not finite.
fn canonical(q: Quat) -> Quat {
    let q = q.normalize();
    if !q.is_finite() {
        Quat::IDENTITY
    } else if q.w < 0.0 {
        -q
    } else {
        q
    }
}

fn wijk(q: Quat) -> predict::Quat {
    [q.w, q.x, q.y, q.z]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rates_are_measured_from_the_motion_since_the_last_publish() {
        let start = Instant::now();
        let before = Sent {
            transform: Transform::from_xyz(0.0, 0.0, 0.0),
            at: start,
        };
        let now = start + Duration::from_millis(100);
        // 0.1 m along x and 9° about y in 100 ms: 1 m/s and 90°/s.
        let turn = Quat::from_rotation_y(std::f32::consts::FRAC_PI_2 * 0.1);
        let t = Transform::from_xyz(0.1, 0.0, 0.0).with_rotation(turn);
        let Object::Object2(o) = object(&Publish::object(3), &t, Some(before), now, 9) else {
            panic!("Object2");
        };
        assert_eq!((o.id, o.time), (3, 9));
        assert!((o.location.vx - 1.0).abs() < 1e-3, "{:?}", o.location);
        // One second on, it has turned 9° + 90° = 99°.
        let ahead = predict::rot2_at(&o.rotation, 1.0);
        let want = wijk(canonical(Quat::from_rotation_y(
            std::f32::consts::FRAC_PI_2 * 1.1,
        )));
        assert!(
            predict::angle_between(ahead, want) < 1e-3,
            "{ahead:?} {want:?}"
        );
    }

    #[test]
    fn a_first_publish_or_garbage_has_no_rates() {
        let now = Instant::now();
        let t = Transform::from_xyz(f32::NAN, 1.0, 2.0).with_rotation(Quat::from_xyzw(
            f32::NAN,
            0.0,
            0.0,
            1.0,
        ));
        let Object::Hand1(h) = object(
            &Publish {
                object_id: 1,
                kind: PublishKind::Hand1 { left: true },
            },
            &t,
            None,
            now,
            0,
        ) else {
            panic!("Hand1");
        };
        assert!(h.left);
        assert_eq!(
            (h.location.vx, h.location.vy, h.location.vz),
            (0.0, 0.0, 0.0)
        );
        assert_eq!((h.rotation.si, h.rotation.ei), (0.0, 0.0));
    }
}
