//! Payloads shared by the relay benchmarks.

use gsrelay_core::wire::{self, Dialect, Head1, Loc2, Object, Object2, Rot2};

/// A typical update packet: a head and four generic objects of one player.
pub fn update(base_id: u64, x: f32) -> Vec<u8> {
    let loc = Loc2 {
        x,
        y: 1.7,
        z: -3.0,
        vx: 0.5,
        vy: 0.0,
        vz: 0.25,
    };
    let mut objects = vec![Object::Head1(Head1 {
        id: base_id,
        time: 7,
        location: loc,
        rotation: Rot2::default(),
        ..Head1::default()
    })];
    for k in 1..5 {
        objects.push(Object::Object2(Object2 {
            id: base_id + k,
            time: 7,
            location: loc,
            scale: loc,
            active: true,
            ..Object2::default()
        }));
    }
    wire::encode(&objects, Dialect::Draft01).expect("encodes")
}
