//! Interest in the core, with simulated time: areas of interest around a fixed point or
//! one's own avatar, hysteresis, objects entering in full, children and position-less
//! objects following, and FIR snapshots filtered by the area.

mod support;

use gsrelay::wire::{Dialect, Object, Object2, ThreeDof1};
use gsrelay::{Interest, JoinRequest, Joined};
use support::{Sent, World, head};

fn interest(json: &str) -> Interest {
    serde_json::from_str(json).expect("interest JSON")
}

fn join(w: &mut World, publish: bool, subscribe: bool, i: &str) -> Joined {
    let req = JoinRequest {
        room: "r".into(),
        identity: "p".into(),
        publish,
        subscribe,
        interest: interest(i),
        ..JoinRequest::default()
    };
    w.join_with(req).expect("join")
}

/// Objects one session received, in order, with their x.
fn received(out: &[Sent], to: &Joined) -> Vec<(u64, f32)> {
    out.iter()
        .filter(|s| s.to == to.session)
        .flat_map(|s| s.objects(Dialect::Draft01))
        .map(|o| (o.id().unwrap(), o.position().map_or(f32::NAN, |p| p[0])))
        .collect()
}

fn child(id: u64, parent: u64, x: f32) -> Object {
    let mut o = Object2 {
        id,
        parent: Some(parent),
        ..Object2::default()
    };
    o.location.x = x;
    Object::Object2(o)
}

fn controller(id: u64) -> Object {
    Object::ThreeDof1(ThreeDof1 {
        id,
        ..ThreeDof1::default()
    })
}

#[test]
fn avatars_walking_in_and_out_see_each_other_with_hysteresis() {
    let mut w = World::new();
    let a = join(
        &mut w,
        true,
        true,
        r#"{"area":{"radius":10,"exit_radius":12}}"#,
    );
    let b = join(&mut w, true, false, "{}");
    w.publish(&a, &[head(1, 0.0)]);
    w.sent();
    let step = |w: &mut World, x: f32| {
        w.publish(&b, &[head(1, x)]);
        !received(&w.sent(), &a).is_empty()
    };
    assert!(!step(&mut w, 15.0), "15 m: outside");
    assert!(step(&mut w, 9.0), "9 m: enters within 10");
    assert!(step(&mut w, 11.5), "11.5 m: stays until 12");
    assert!(!step(&mut w, 13.0), "13 m: left beyond 12");
    assert!(!step(&mut w, 11.0), "11 m: does not re-enter before 10");
    assert!(step(&mut w, 10.0), "10 m: enters again");
}

#[test]
fn a_subscriber_that_walks_up_to_an_object_gets_it_from_the_store_at_once() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    w.publish(&b, &[head(1, 50.0), head(2, 90.0)]);
    let a = join(&mut w, true, true, r#"{"area":{"radius":10}}"#);
    w.publish(&a, &[head(1, 0.0)]);
    assert!(received(&w.sent(), &a).is_empty());
    // a walks to x=45: b's object 1 at 50 enters although b sends nothing.
    w.publish(&a, &[head(1, 45.0)]);
    assert_eq!(received(&w.sent(), &a), vec![(1, 50.0)]);
    // Small steps do not resend it.
    w.publish(&a, &[head(1, 45.5)]);
    assert!(received(&w.sent(), &a).is_empty());
}

#[test]
fn children_and_position_less_objects_follow_their_parent_and_avatar() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    // b's avatar (head 1) far away, a child of it at local x=0, a 3DOF controller.
    w.publish(&b, &[head(1, 50.0), child(2, 1, 0.0), controller(3)]);
    let a = join(&mut w, true, true, r#"{"area":{"radius":10}}"#);
    w.publish(&a, &[head(1, 0.0)]);
    assert!(
        received(&w.sent(), &a).is_empty(),
        "child at local 0 follows its far parent"
    );
    // b's head walks to x=5: a gets the head with the packet, and the child and the
    // controller from the store at once.
    w.publish(&b, &[head(1, 5.0)]);
    let mut got: Vec<u64> = received(&w.sent(), &a)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    got.sort();
    assert_eq!(got, vec![1, 2, 3]);
    // Later updates of the child and controller flow with their parent's relevance.
    w.publish(&b, &[child(2, 1, 0.0), controller(3)]);
    assert_eq!(received(&w.sent(), &a).len(), 2);
    w.publish(&b, &[head(1, 40.0)]);
    w.sent();
    w.publish(&b, &[child(2, 1, 0.0), controller(3)]);
    assert!(
        received(&w.sent(), &a).is_empty(),
        "parent left: children leave with it"
    );
}

#[test]
fn fir_snapshot_and_live_updates_honour_a_fixed_box_area() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    w.publish(&b, &[head(1, 1.0), head(2, 4.0), head(3, 9.0)]);
    let a = join(
        &mut w,
        false,
        true,
        r#"{"area":{"center":[0,0,0],"half_extents":[5,5,5]}}"#,
    );
    w.sent();
    w.fir(&a, w.relay.relay_ssrc(), 1);
    let mut snap = received(&w.sent(), &a);
    snap.sort_by_key(|(id, _)| *id);
    assert_eq!(snap, vec![(1, 1.0), (2, 4.0)]);
    w.publish(&b, &[head(1, 1.5), head(3, 9.5)]);
    assert_eq!(received(&w.sent(), &a), vec![(1, 1.5)]);
}

#[test]
fn nothing_positional_arrives_before_the_subscribers_avatar_is_known() {
    let mut w = World::new();
    let a = join(&mut w, true, true, r#"{"area":{"radius":10}}"#);
    let b = join(&mut w, true, false, "{}");
    w.publish(&b, &[head(1, 1.0)]);
    assert!(received(&w.sent(), &a).is_empty());
    w.publish(&a, &[head(7, 0.0)]);
    assert_eq!(
        received(&w.sent(), &a),
        vec![(1, 1.0)],
        "entering on a's first avatar position"
    );
}

#[test]
fn invalid_areas_are_refused_naming_the_field() {
    let bad = [
        (r#"{"area":{}}"#, "interest.area"),
        (r#"{"area":{"radius":-1}}"#, "interest.area.radius"),
        (
            r#"{"area":{"radius":5,"exit_radius":4}}"#,
            "interest.area.exit_radius",
        ),
        (
            r#"{"area":{"radius":5,"half_extents":[1,1,1]}}"#,
            "interest.area",
        ),
        (
            r#"{"area":{"half_extents":[1,0,1]}}"#,
            "interest.area.half_extents",
        ),
    ];
    for (json, field) in bad {
        let err = interest(json).validate().unwrap_err();
        assert!(err.starts_with(field), "{json}: {err}");
    }
    assert!(serde_json::from_str::<Interest>(r#"{"area":{"radius":5,"bogus":1}}"#).is_err());
}

/// Publishes `objects(step)` every `period` for `steps`, advancing simulated time and
/// letting the relay pace; returns everything sent.
fn run(
    w: &mut World,
    from: &Joined,
    steps: u32,
    period: std::time::Duration,
    objects: impl Fn(u32) -> Vec<Object>,
) -> Vec<Sent> {
    let mut all = Vec::new();
    for i in 0..steps {
        w.advance(period);
        w.publish(from, &objects(i));
        all.extend(w.sent());
    }
    all
}

fn count(out: &[Sent], to: &Joined, id: u64) -> usize {
    received(out, to).iter().filter(|(i, _)| *i == id).count()
}

#[test]
fn rate_tiers_hold_the_measured_rates_and_deliver_the_latest_value() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    let rates = r#"{"area":{"center":[0,0,0],"radius":1000},
        "rates":[{"within":10},{"within":50,"max_hz":5},{"max_hz":1}]}"#;
    let a = join(&mut w, false, true, rates);
    // 50 Hz for 10 s: object 1 near (full rate), 2 in the middle tier, 3 far.
    let step = std::time::Duration::from_millis(20);
    let out = run(&mut w, &b, 500, step, |i| {
        vec![head(1, 5.0), head(2, 30.0 + i as f32 * 1e-3), head(3, 80.0)]
    });
    let (near, mid, far) = (count(&out, &a, 1), count(&out, &a, 2), count(&out, &a, 3));
    assert_eq!(near, 500);
    assert!((45..=55).contains(&mid), "5 Hz over 10 s: {mid}");
    assert!((9..=11).contains(&far), "1 Hz over 10 s: {far}");
    // The last update of the middle tier arrives once its interval has passed, newest value.
    w.advance(std::time::Duration::from_millis(300));
    let last = received(&w.sent(), &a);
    let expect = 30.0 + 499.0 * 1e-3;
    assert!(
        last.iter().any(|(id, x)| *id == 2 && *x == expect),
        "{last:?}"
    );
}

#[test]
fn a_starved_budget_still_delivers_every_object_within_a_bounded_time() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    // About 40 bytes per Head1: 40 objects at 20 Hz need ~260 kbit/s; give it 16 kbit/s.
    let a = join(&mut w, false, true, r#"{"max_bitrate_bps":16000}"#);
    let step = std::time::Duration::from_millis(50);
    let out = run(&mut w, &b, 200, step, |i| {
        (0..40).map(|k| head(k, i as f32)).collect()
    });
    let counts: Vec<usize> = (0..40).map(|k| count(&out, &a, k)).collect();
    let bytes: usize = out
        .iter()
        .filter(|s| s.to == a.session)
        .map(|s| s.bytes.len())
        .sum();
    let bps = bytes as f64 * 8.0 / 10.0;
    assert!(bps <= 16000.0 * 1.15, "cap held: {bps} bit/s");
    assert!(
        counts.iter().all(|c| *c >= 3),
        "every object keeps coming: {counts:?}"
    );
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(*max <= *min * 3, "no object starves: {counts:?}");
    // What arrives is recent state, never a backlog: the last value seen is from the last second.
    let latest = received(&out, &a)
        .iter()
        .rev()
        .take(40)
        .map(|(_, x)| *x)
        .fold(f32::MIN, f32::max);
    assert!(latest >= 180.0, "{latest}");
}

#[test]
fn a_capped_subscriber_does_not_change_what_the_others_receive() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    let fast = join(&mut w, false, true, "{}");
    let slow = join(&mut w, false, true, r#"{"max_bitrate_bps":2000}"#);
    let step = std::time::Duration::from_millis(20);
    let out = run(&mut w, &b, 250, step, |i| {
        (0..10).map(|k| head(k, i as f32)).collect()
    });
    assert_eq!(
        received(&out, &fast).len(),
        2500,
        "every update reaches the unconstrained subscriber"
    );
    assert!(
        received(&out, &slow).len() < 300,
        "the slow one gets a trickle"
    );
}

#[test]
fn tmmbr_lowers_the_cap() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    let a = join(&mut w, false, true, "{}");
    let step = std::time::Duration::from_millis(20);
    let before = run(&mut w, &b, 50, step, |i| {
        (0..10).map(|k| head(k, i as f32)).collect()
    });
    assert_eq!(received(&before, &a).len(), 500);
    let relay_ssrc = w.relay.relay_ssrc();
    w.rtcp(&a, |buf| {
        let e = gsrelay::rtp::rtcp::TmmbEntry {
            ssrc: relay_ssrc,
            bitrate_bps: 4000,
            overhead: 0,
        };
        gsrelay::rtp::rtcp::write_tmmbr(buf, a.ssrc, &[e]).unwrap();
    });
    let after = run(&mut w, &b, 50, step, |i| {
        (0..10).map(|k| head(k, i as f32)).collect()
    });
    assert!(
        received(&after, &a).len() < 100,
        "{}",
        received(&after, &a).len()
    );
}

#[test]
fn invalid_rates_are_refused_naming_the_field() {
    let bad = [
        (r#"{"rates":[{"max_hz":1}]}"#, "interest.rates"),
        (
            r#"{"area":{"radius":5},"rates":[{"within":5},{"within":3}]}"#,
            "interest.rates[1].within",
        ),
        (
            r#"{"area":{"radius":5},"rates":[{"max_hz":1},{"within":3}]}"#,
            "interest.rates[0].within",
        ),
        (
            r#"{"area":{"radius":5},"rates":[{"within":5,"max_hz":0}]}"#,
            "interest.rates[0].max_hz",
        ),
        (r#"{"max_bitrate_bps":0}"#, "interest.max_bitrate_bps"),
    ];
    for (json, field) in bad {
        let err = interest(json).validate().unwrap_err();
        assert!(err.starts_with(field), "{json}: {err}");
    }
}

fn moving_head(id: u64, x: f32, vx: f32) -> Object {
    let mut o = gsrelay::wire::Head1 {
        id,
        ..Default::default()
    };
    o.location.x = x;
    o.location.vx = vx;
    Object::Head1(o)
}

#[test]
fn prediction_gating_sends_fewer_updates_and_keeps_extrapolation_within_tolerance() {
    let mut w = World::new();
    let b = join(&mut w, true, false, "{}");
    let a = join(
        &mut w,
        false,
        true,
        r#"{"prediction":{"tolerance":0.05,"heartbeat_hz":2}}"#,
    );
    let dt = 0.02f32;
    // 5 s at 50 Hz moving at 2 m/s, then stopping dead for 1 s.
    let truth = |i: u32| {
        if i < 250 {
            2.0 * dt * i as f32
        } else {
            2.0 * dt * 250.0
        }
    };
    let speed = |i: u32| if i < 250 { 2.0 } else { 0.0 };
    let mut last: Option<(f32, f32, u32)> = None; // (x, vx, step) as a last received it
    let mut got = 0;
    let mut worst = 0.0f32;
    for i in 0..300u32 {
        w.advance(std::time::Duration::from_millis(20));
        w.publish(&b, &[moving_head(1, truth(i), speed(i))]);
        for s in w.sent().iter().filter(|s| s.to == a.session) {
            for o in s.objects(Dialect::Draft01) {
                let Object::Head1(h) = o else { continue };
                last = Some((h.location.x, h.location.vx, i));
                got += 1;
            }
        }
        let (x, vx, at) = last.expect("the first update always goes");
        let predicted = x + vx * dt * (i - at) as f32;
        worst = worst.max((predicted - truth(i)).abs());
    }
    assert!(got < 30, "far fewer than the 300 published: {got}");
    assert!(
        got >= 12,
        "heartbeats at 2 Hz over 6 s, plus the stop: {got}"
    );
    assert!(
        worst <= 0.05 + 1e-3,
        "a's extrapolation strayed {worst} m from the truth"
    );
}

#[test]
fn invalid_prediction_settings_are_refused() {
    let err = interest(r#"{"prediction":{"heartbeat_hz":0}}"#)
        .validate()
        .unwrap_err();
    assert!(err.starts_with("interest.prediction.heartbeat_hz"), "{err}");
    let err = interest(r#"{"prediction":{"tolerance":-1}}"#)
        .validate()
        .unwrap_err();
    assert!(err.starts_with("interest.prediction.tolerance"), "{err}");
}

#[test]
fn updates_reach_only_the_subscribers_near_the_object() {
    let mut w = World::with(gsrelay::RelayConfig {
        max_sessions_per_room: 300,
        ..Default::default()
    });
    let b = join(&mut w, true, false, "{}");
    // 200 subscribers with 10 m areas on a line, 50 m apart.
    let subs: Vec<Joined> = (0..200)
        .map(|i| {
            join(
                &mut w,
                false,
                true,
                &format!(
                    r#"{{"area":{{"center":[{},0,0],"radius":10}}}}"#,
                    i as f32 * 50.0
                ),
            )
        })
        .collect();
    w.publish(&b, &[head(1, 1003.0)]);
    let out = w.sent();
    let got: Vec<usize> = subs
        .iter()
        .enumerate()
        .filter(|(_, s)| !received(&out, s).is_empty())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(got, vec![20], "only the subscriber centred at 1000 m");
    // Moving away far enough leaves the area; coming back to 11 m does not re-enter.
    w.publish(&b, &[head(1, 1100.0)]);
    w.sent();
    w.publish(&b, &[head(1, 1011.0)]);
    assert!(
        received(&w.sent(), &subs[20]).is_empty(),
        "left, and 11 m is outside the enter radius"
    );
}
