//! The node's Rust side against a real relay on loopback, without Godot: sessions of the
//! C ABI joined as `GsRelayRoom.join()` joins, their events mapped to the node's signals
//! as `_process` maps them, and objects built as `publish_head()` builds them.

use crate::common::{Player, Relay, near, update_of};
use godot::builtin::{Quaternion, Vector3};
use gsrelay_godot::convert::Axes;
use gsrelay_godot::publish::{self, Body, Pose};
use gsrelay_godot::signals::{Detail, Signal};
use std::f32::consts::FRAC_PI_4;

/// A quarter turn about Godot's Y (a player facing -X).
fn quarter_yaw() -> Quaternion {
    Quaternion::new(0.0, FRAC_PI_4.sin(), 0.0, FRAC_PI_4.cos())
}

fn same_rotation(a: Quaternion, b: Quaternion) -> bool {
    // Float16 on the wire: about three decimal digits.
    (a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w).abs() > 0.9999
}

#[test]
fn players_see_each_other_move_and_leave() {
    let relay = Relay::start();
    let mut alice = Player::join(&relay.settings("arena", "alice"));
    let mut bob = Player::join(&relay.settings("arena", "bob"));
    let alice_ssrc = alice.joined();
    bob.joined();

    // Alice's head, as a script passes it in Godot's axes; sent until Bob has it (one
    // datagram on loopback is all it takes; the loop only bounds the wait).
    let pose = Pose {
        position: Vector3::new(1.5, 1.75, -4.0),
        rotation: quarter_yaw(),
        velocity: Vector3::new(0.0, 0.0, -2.0),
        angular_velocity: Vector3::new(0.0, 0.5, 0.0),
    };
    let head = publish::head(Axes::Draft, 1, &pose).unwrap();
    let update = bob.wait_for(
        "Alice's head",
        || alice.session.publish(&[head]).expect("publish"),
        |s| update_of(s, alice_ssrc, 1),
    );
    assert_eq!(update.kind, "head1");
    assert!(near(update.position, pose.position, 1e-3), "{update:?}");
    assert!(same_rotation(update.rotation, pose.rotation), "{update:?}");
    let Some(Detail::Vector3(velocity)) = update.detail("velocity") else {
        panic!("a head has a velocity: {update:?}")
    };
    assert!(near(*velocity, pose.velocity, 1e-3), "{update:?}");
    let Some(Detail::Quaternion(later)) = update.detail("rotation_in_1s") else {
        panic!("a head has its rotation one second on: {update:?}")
    };
    let half_radian_more =
        Quaternion::new(0.0, (FRAC_PI_4 + 0.25).sin(), 0.0, (FRAC_PI_4 + 0.25).cos());
    assert!(same_rotation(*later, half_radian_more), "{update:?}");

    // A crate with a parent and a scale, as publish_object() sends it.
    let body = Body {
        scale: Vector3::new(2.0, 1.0, 0.5),
        active: true,
        parent: 1,
    };
    let crate_pose = Pose {
        position: Vector3::new(-3.0, 0.5, 2.0),
        rotation: Quaternion::IDENTITY,
        velocity: Vector3::ZERO,
        angular_velocity: Vector3::ZERO,
    };
    let object = publish::object2(Axes::Draft, 9, &crate_pose, &body).unwrap();
    let update = bob.wait_for(
        "Alice's crate",
        || alice.session.publish(&[object]).expect("publish"),
        |s| update_of(s, alice_ssrc, 9),
    );
    assert_eq!(update.kind, "object2");
    assert!(
        near(update.position, crate_pose.position, 1e-3),
        "{update:?}"
    );
    assert_eq!(update.detail("scale"), Some(&Detail::Vector3(body.scale)));
    assert_eq!(update.detail("parent"), Some(&Detail::Int(1)));
    assert_eq!(update.detail("active"), Some(&Detail::Bool(true)));

    // A late joiner gets both from the relay's cache, then snapshot_complete.
    let mut carol = Player::join(&relay.settings("arena", "carol"));
    carol.joined();
    carol.wait_for(
        "snapshot_complete",
        || {},
        |s| match s {
            Signal::SnapshotComplete { partial: false } => Some(()),
            _ => None,
        },
    );
    for id in [1, 9] {
        assert!(
            carol
                .signals
                .iter()
                .any(|s| update_of(s, alice_ssrc, id).is_some()),
            "the snapshot holds object {id}: {:?}",
            carol.signals
        );
    }

    // Alice leaves: she gets ended("left"); Bob gets object_removed for each of her
    // objects, then stream_ended.
    alice.session.leave().expect("leave");
    alice.wait_for(
        "Alice's end",
        || {},
        |s| match s {
            Signal::Ended { reason: "left", .. } => Some(()),
            _ => None,
        },
    );
    bob.wait_for(
        "Alice's stream's end",
        || {},
        |s| match s {
            Signal::StreamEnded { ssrc } if *ssrc == alice_ssrc => Some(()),
            _ => None,
        },
    );
    let tail: Vec<&Signal> = bob
        .signals
        .iter()
        .filter(|s| matches!(s, Signal::ObjectRemoved { .. } | Signal::StreamEnded { .. }))
        .collect();
    assert_eq!(
        tail,
        [
            &Signal::ObjectRemoved {
                ssrc: alice_ssrc,
                object_id: 1
            },
            &Signal::ObjectRemoved {
                ssrc: alice_ssrc,
                object_id: 9
            },
            &Signal::StreamEnded { ssrc: alice_ssrc },
        ]
    );

    // Carol leaves: her own end removes what she still showed (Alice's were removed
    // with Alice's stream), then ended("left").
    carol.session.leave().expect("leave");
    carol.wait_for(
        "Carol's end",
        || {},
        |s| match s {
            Signal::Ended { reason: "left", .. } => Some(()),
            _ => None,
        },
    );
}

#[test]
fn a_session_that_ends_removes_every_object_it_showed() {
    let relay = Relay::start();
    let mut alice = Player::join(&relay.settings("hall", "alice"));
    let mut bob = Player::join(&relay.settings("hall", "bob"));
    let alice_ssrc = alice.joined();
    bob.joined();
    let pose = Pose {
        position: Vector3::new(0.0, 1.0, 0.0),
        rotation: Quaternion::IDENTITY,
        velocity: Vector3::ZERO,
        angular_velocity: Vector3::ZERO,
    };
    let hand = publish::hand(Axes::Draft, 4, true, &pose).unwrap();
    let update = bob.wait_for(
        "Alice's hand",
        || alice.session.publish(&[hand]).expect("publish"),
        |s| update_of(s, alice_ssrc, 4),
    );
    assert_eq!(update.kind, "hand1");
    assert_eq!(update.detail("left"), Some(&Detail::Bool(true)));

    bob.session.leave().expect("leave");
    bob.wait_for(
        "Bob's end",
        || {},
        |s| match s {
            Signal::Ended { reason: "left", .. } => Some(()),
            _ => None,
        },
    );
    let n = bob.signals.len();
    assert_eq!(
        bob.signals[n - 2],
        Signal::ObjectRemoved {
            ssrc: alice_ssrc,
            object_id: 4
        },
        "the object goes before the end"
    );
    assert!(matches!(
        bob.signals[n - 1],
        Signal::Ended { reason: "left", .. }
    ));
}
