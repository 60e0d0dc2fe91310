//! The room's objects as entities: one per (stream SSRC, objectID), spawned on its first
//! update, its [`RemoteObject`] replaced on every later one, its `Transform` predicted
//! from the last update's rates every frame, despawned when its stream or the session
//! ends or it times out.

use crate::client::RelayClient;
use crate::messages::*;
use crate::net::{EndReason, NetEvent};
use crate::{RelaySync, time1_now};
use bevy::prelude::*;
use gsrelay_core::wire::Object;
use gsrelay_core::wire::predict::{self, Prediction};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A remote object's entity marker and state: which object it is, and its last update.
#[derive(Component, Debug, Clone, PartialEq)]
pub struct RemoteObject {
    /// The stream it is in.
    pub ssrc: u32,
    /// Its objectID within the stream.
    pub object_id: u64,
    /// The last update, as decoded.
    pub object: Object,
    /// When the last update arrived (drained from the network thread).
    pub updated_at: Instant,
    /// Updates received.
    pub updates: u64,
}

/// Which entity is which remote object, by stream, then objectID.
#[derive(Resource, Debug, Default)]
pub struct RemoteObjects {
    streams: HashMap<u32, HashMap<u64, Entity>>,
}

impl RemoteObjects {
    /// The entity of object `object_id` of stream `ssrc`, if it has one.
    pub fn get(&self, ssrc: u32, object_id: u64) -> Option<Entity> {
        self.streams.get(&ssrc)?.get(&object_id).copied()
    }

    /// The streams with objects, in no particular order.
    pub fn streams(&self) -> impl Iterator<Item = u32> + '_ {
        self.streams.keys().copied()
    }

    /// Objects held, over every stream.
    pub fn len(&self) -> usize {
        self.streams.values().map(HashMap::len).sum()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

/// How often objects are looked at for the timeout: a timeout is seconds long, and a scan
/// of every object each frame would cost a game with many of them for nothing.
const EXPIRY_SCAN: Duration = Duration::from_millis(250);

/// What `receive` keeps between frames.
#[derive(Resource, Default)]
pub(crate) struct Receiver {
    /// The events drained this frame (kept to reuse its allocation).
    drained: Vec<NetEvent>,
    /// A `RelayClient` was there last frame.
    connected: bool,
    /// When objects were last looked at for the timeout.
    scanned: Option<Instant>,
}

/// `PreUpdate`: drains the network thread's events without waiting, and turns them into
/// entities and messages. Exclusive, so that an object spawned by one packet is updated
/// in place by the next packet of the same frame.
pub(crate) fn receive(world: &mut World) {
    let now = Instant::now();
    let mut state = std::mem::take(&mut *world.resource_mut::<Receiver>());
    let end = match world.get_resource_mut::<RelayClient>() {
        Some(mut client) => client.drain(&mut state.drained),
        // The game removed the connection (which leaves the room): its objects go with it.
        None if state.connected => Some((
            EndReason::Left,
            "the RelayClient resource was removed".to_owned(),
        )),
        None => None,
    };
    state.connected = world.contains_resource::<RelayClient>();
    world.resource_scope(|world, mut index: Mut<RemoteObjects>| {
        for event in state.drained.drain(..) {
            apply_event(world, &mut index, event, now);
        }
        if let Some((reason, message)) = end {
            for (ssrc, objects) in std::mem::take(&mut index.streams) {
                for (object_id, entity) in objects {
                    despawn(world, entity, ssrc, object_id, Removal::SessionEnded);
                }
            }
            world.write_message(SessionEnded { reason, message });
        }
        let timeout = world.resource::<RelaySync>().0.object_timeout;
        let due = state
            .scanned
            .is_none_or(|at| now.saturating_duration_since(at) >= EXPIRY_SCAN);
        if let (Some(timeout), true) = (timeout, due) {
            state.scanned = Some(now);
            expire(world, &mut index, now, timeout);
        }
    });
    *world.resource_mut::<Receiver>() = state;
}

/// One event from the network thread: entities changed, and its message written.
fn apply_event(world: &mut World, index: &mut RemoteObjects, event: NetEvent, now: Instant) {
    match event {
        NetEvent::Joined { ssrc, session } => {
            world.write_message(Joined { ssrc, session });
        }
        NetEvent::Objects { ssrc, objects } => {
            for object in objects {
                update(world, index, ssrc, object, now);
            }
        }
        NetEvent::StreamEnded(ssrc) => {
            for (object_id, entity) in index.streams.remove(&ssrc).unwrap_or_default() {
                despawn(world, entity, ssrc, object_id, Removal::StreamEnded);
            }
            world.write_message(StreamEnded { ssrc });
        }
        NetEvent::Ownership(n) => {
            world.write_message(Ownership {
                ssrc: n.entry.ssrc,
                object_id: n.entry.object,
                kind: n.kind,
                reason: n.entry.reason,
            });
        }
        NetEvent::Reconnected { ssrc, how } => {
            world.write_message(Reconnected { ssrc, how });
        }
        NetEvent::Error(message) => {
            world.write_message(RelayError { message });
        }
    }
}

/// Applies one object's update to its entity, spawning it on the first.
fn update(world: &mut World, index: &mut RemoteObjects, ssrc: u32, object: Object, now: Instant) {
    // Objects without an objectID (a top-level HeadIPD1) name no entity.
    let Some(object_id) = object.id() else {
        return;
    };
    if let Some(entity) = index.get(ssrc, object_id)
        && let Some(mut remote) = world.get_mut::<RemoteObject>(entity)
    {
        remote.object = object;
        remote.updated_at = now;
        remote.updates += 1;
        world.write_message(ObjectUpdated {
            entity,
            ssrc,
            object_id,
            spawned: false,
        });
        return;
    }
    // New, or its entity was despawned by the game: (re)spawn it.
    let mut transform = Transform::default();
    apply(&predict::predict(&object, time1_now()), &mut transform);
    let entity = world
        .spawn((
            RemoteObject {
                ssrc,
                object_id,
                object,
                updated_at: now,
                updates: 1,
            },
            transform,
            Name::new(format!("gsrelay {ssrc:08x}/{object_id}")),
        ))
        .id();
    index
        .streams
        .entry(ssrc)
        .or_default()
        .insert(object_id, entity);
    world.write_message(ObjectUpdated {
        entity,
        ssrc,
        object_id,
        spawned: true,
    });
}

/// Despawns `entity` if the game has not already, and tells why.
fn despawn(world: &mut World, entity: Entity, ssrc: u32, object_id: u64, why: Removal) {
    // The game may have despawned it itself: then only the message remains to write.
    let _ = world.try_despawn(entity);
    world.write_message(ObjectRemoved {
        entity,
        ssrc,
        object_id,
        why,
    });
}

/// Despawns the objects not updated for `timeout`.
fn expire(
    world: &mut World,
    index: &mut RemoteObjects,
    now: Instant,
    timeout: std::time::Duration,
) {
    let mut gone = Vec::new();
    for (&ssrc, objects) in &index.streams {
        for (&object_id, &entity) in objects {
            let stale = world
                .get::<RemoteObject>(entity)
                .is_none_or(|r| now.saturating_duration_since(r.updated_at) >= timeout);
            if stale {
                gone.push((ssrc, object_id, entity));
            }
        }
    }
    for (ssrc, object_id, entity) in gone {
        if let Some(objects) = index.streams.get_mut(&ssrc) {
            objects.remove(&object_id);
            if objects.is_empty() {
                index.streams.remove(&ssrc);
            }
        }
        despawn(world, entity, ssrc, object_id, Removal::TimedOut);
    }
}

/// `PreUpdate`, after [`receive`]: every remote object's `Transform` where its last
/// update's rates put it now (Loc2's velocity, Rot2's rotation one second ahead; the
/// draft's Appendix D/E, `gsrelay_core::wire::predict`), at most
/// [`SyncSettings::max_prediction`](crate::SyncSettings::max_prediction) past the update.
pub(crate) fn predict_transforms(
    sync: Res<RelaySync>,
    mut objects: Query<(&RemoteObject, &mut Transform)>,
) {
    let now = time1_now();
    let cap = i32::try_from(sync.0.max_prediction.as_millis()).unwrap_or(i32::MAX);
    for (remote, mut transform) in &mut objects {
        let at = predicted_time(&remote.object, now, cap);
        apply(&predict::predict(&remote.object, at), &mut transform);
    }
}

/// The Time1 to predict `object` at: now, but no more than `cap_ms` after its own Time1
/// and never before it (a sender whose clock runs ahead is shown where it said it was).
fn predicted_time(object: &Object, now: u16, cap_ms: i32) -> u16 {
    let Some(time) = time1_of(object) else {
        return now;
    };
    let ahead = predict::time_delta_ms(time, now).clamp(0, cap_ms.min(i32::from(i16::MAX)));
    // In 0..=i16::MAX, so it fits a u16.
    time.wrapping_add(ahead as u16)
}

/// An object's Time1, for the types that carry one.
fn time1_of(object: &Object) -> Option<u16> {
    Some(match object {
        Object::Head1(o) => o.time,
        Object::Hand1(o) => o.time,
        Object::Hand2(o) => o.time,
        Object::Object1(o) => o.time,
        Object::Object2(o) => o.time,
        Object::SixDof1(o) => o.time,
        Object::ThreeDof1(o) => o.time,
        Object::GameControl1(o) => o.time,
        _ => return None,
    })
}

/// Writes a prediction into a `Transform`, part by part: a type without a position leaves
/// the translation alone, and a value that is not finite (a sender's garbage) is skipped
/// rather than written into the game's world.
pub(crate) fn apply(p: &Prediction, transform: &mut Transform) {
    if let Some(v) = p.position.map(Vec3::from_array).filter(|v| v.is_finite()) {
        transform.translation = v;
    }
    if let Some(q) = p
        .rotation
        .map(|[w, i, j, k]| Quat::from_xyzw(i, j, k, w))
        .filter(|q| q.is_finite())
    {
        transform.rotation = q;
    }
    if let Some(s) = p.scale.map(Vec3::from_array).filter(|v| v.is_finite()) {
        transform.scale = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsrelay_core::wire::{Loc2, Object2, Rot2};

    fn moving(time: u16, vx: f32) -> Object {
        Object::Object2(Object2 {
            id: 7,
            time,
            location: Loc2 {
                x: 1.0,
                vx,
                ..Loc2::default()
            },
            scale: Loc2 {
                x: 1.0,
                y: 1.0,
                z: 1.0,
                ..Loc2::default()
            },
            rotation: Rot2::default(),
            ..Object2::default()
        })
    }

    #[test]
    fn a_prediction_goes_forward_from_time1_and_stops_at_the_cap() {
        let o = moving(65_000, 2.0);
        // 500 ms later, across the 16-bit wrap: x = 1 + 2 * 0.5.
        let at = predicted_time(&o, 65_000u16.wrapping_add(500), 1000);
        let mut t = Transform::default();
        apply(&predict::predict(&o, at), &mut t);
        assert!((t.translation.x - 2.0).abs() < 1e-3, "{t:?}");
        // 5 s later, capped at 1 s: x = 3.
        let at = predicted_time(&o, 65_000u16.wrapping_add(5000), 1000);
        apply(&predict::predict(&o, at), &mut t);
        assert!((t.translation.x - 3.0).abs() < 1e-3, "{t:?}");
        // A sender ahead of us: shown where it said it was.
        let at = predicted_time(&o, 64_000, 1000);
        apply(&predict::predict(&o, at), &mut t);
        assert!((t.translation.x - 1.0).abs() < 1e-3, "{t:?}");
    }

    #[test]
    fn garbage_values_are_not_written_into_the_transform() {
        let o = moving(0, f32::NAN);
        let mut t = Transform::from_xyz(5.0, 5.0, 5.0);
        apply(&predict::predict(&o, 100), &mut t);
        assert_eq!(t.translation, Vec3::splat(5.0));
        assert!(t.rotation.is_finite());
    }
}
