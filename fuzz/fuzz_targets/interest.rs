//! A subscriber's interest as the HTTP API receives it: `serde_json::from_slice` into
//! `relay::Interest`, then `validate()`; a valid interest then answers the questions the
//! relay asks of it (streams, object types, rate tiers at sampled distances, delivery
//! mode and delay).
//!
//! Checks: no panic; a valid interest survives a JSON round trip unchanged; its delivery
//! names a delay only in aggregated mode, and one within `limits::MAX_DELAY_MS`.
#![no_main]

use gsrelay_core::Interest;
use gsrelay_core::relay::pacing;
use gsrelay_core::relay::limits;
use gsrelay_core::wire::ObjectKind;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Ok(interest) = serde_json::from_slice::<Interest>(data) else {
        return;
    };
    if interest.validate().is_err() {
        return;
    }
    let text = serde_json::to_string(&interest).expect("an interest serializes");
    let back: Interest = serde_json::from_str(&text).expect("its JSON parses back");
    assert_eq!(back, interest, "JSON round trip: {text}");
    for kind in ObjectKind::ALL {
        interest.admits_object(1, kind);
    }
    interest.admits_stream(1, false);
    interest.admits_all_objects();
    let delivery = interest.delivery;
    assert!(
        delivery.is_aggregated() || delivery.max_delay_ms.is_none(),
        "a per-stream delivery with a delay: {text}"
    );
    assert!(
        delivery.max_delay() <= Duration::from_millis(u64::from(limits::MAX_DELAY_MS)),
        "delivery delay beyond the limit: {text}"
    );
    for distance in [0.0, 1.0, 1e3, 1e30, f32::MAX, f32::INFINITY] {
        pacing::min_interval(&interest.rates, distance);
    }
});
