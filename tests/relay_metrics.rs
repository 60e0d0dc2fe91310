//! What the core counts for the dashboard, in simulated time: objects held back by rate
//! tiers and bandwidth caps, updates coalesced while held back, and snapshot size and
//! paced duration.

mod support;

use gsrelay::{Interest, JoinRequest, Joined};
use std::time::Duration;
use support::{World, head};

fn join(w: &mut World, publish: bool, subscribe: bool, interest: &str) -> Joined {
    let interest: Interest = serde_json::from_str(interest).expect("interest JSON");
    w.join_with(JoinRequest {
        room: "r".into(),
        identity: "p".into(),
        publish,
        subscribe,
        interest,
        ..JoinRequest::default()
    })
    .expect("join")
}

fn deferred(w: &mut World, reason: &str) -> u64 {
    w.metrics()
        .pacing
        .deferred
        .with_label_values(&[reason])
        .get()
}

#[test]
fn a_rate_tier_defers_updates_and_coalesces_the_ones_superseded() {
    let mut w = World::new();
    let publisher = join(&mut w, true, false, "{}");
    let _slow = join(
        &mut w,
        false,
        true,
        r#"{"area":{"center":[0,0,0],"radius":1000},"rates":[{"max_hz":1}]}"#,
    );
    let _full = join(&mut w, false, true, "{}");
    // Three updates of one object within 100 ms: the first goes, the second waits for the
    // 1 Hz tier, the third replaces it while it waits.
    for x in [1.0, 2.0, 3.0] {
        w.advance(Duration::from_millis(50));
        w.publish(&publisher, &[head(1, x)]);
    }
    assert_eq!(deferred(&mut w, "rate_tier"), 2);
    assert_eq!(w.metrics().pacing.coalesced.get(), 1);
    assert_eq!(deferred(&mut w, "bandwidth_cap"), 0);
}

#[test]
fn a_bandwidth_cap_defers_what_does_not_fit() {
    let mut w = World::new();
    let publisher = join(&mut w, true, false, "{}");
    let _capped = join(&mut w, false, true, r#"{"max_bitrate_bps":16000}"#);
    for i in 0..20 {
        w.advance(Duration::from_millis(20));
        let objects: Vec<_> = (0..40).map(|k| head(k, i as f32)).collect();
        w.publish(&publisher, &objects);
        w.sent();
    }
    let capped = deferred(&mut w, "bandwidth_cap");
    // 40 objects of ~40 bytes at 50 Hz is ~640 kbit/s against a 16 kbit/s cap.
    assert!(capped > 400, "{capped} objects deferred by the cap");
    assert!(w.metrics().pacing.coalesced.get() > 0);
    assert_eq!(deferred(&mut w, "rate_tier"), 0);
}

#[test]
fn a_snapshot_records_its_size_and_how_long_its_paced_sending_took() {
    let mut w = World::new();
    let publisher = join(&mut w, true, false, "{}");
    // 200 objects, 20 per packet to stay under the datagram limit.
    for chunk in 0..10 {
        let objects: Vec<_> = (0..20).map(|k| head(chunk * 20 + k, 1.0)).collect();
        w.publish(&publisher, &objects);
    }
    let late = join(&mut w, false, true, r#"{"max_bitrate_bps":64000}"#);
    w.sent();
    w.fir(&late, publisher.ssrc, 1);
    let m = w.metrics();
    assert_eq!(m.snapshot_objects.get_sample_count(), 1);
    assert_eq!(m.snapshot_objects.get_sample_sum(), 200.0);
    let bytes = m.snapshot_bytes.get_sample_sum();
    assert!(bytes > 200.0 * 20.0, "{bytes} bytes for 200 heads");

    // At 64 kbit/s the snapshot takes about bytes * 8 / 64 000 seconds to send.
    let step = Duration::from_millis(10);
    let mut elapsed = Duration::ZERO;
    while w.metrics().snapshot_duration.get_sample_count() == 0 {
        assert!(
            elapsed < Duration::from_secs(30),
            "the snapshot never completed"
        );
        w.advance(step);
        w.sent();
        elapsed += step;
    }
    let took = w.metrics().snapshot_duration.get_sample_sum();
    let paced = bytes * 8.0 / 64_000.0;
    assert!(
        took <= elapsed.as_secs_f64() && took >= paced * 0.5,
        "took {took} s; paced estimate {paced} s, completed within {elapsed:?}"
    );
}
