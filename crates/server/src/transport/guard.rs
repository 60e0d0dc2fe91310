//! Fault isolation, shared by every transport shell: each input goes to the core inside
//! [`guarded`], so a defect (a panic) while handling one session's input costs that
//! session's room, not the process. Validation is the first line of defence; this is the
//! second, for the defect nobody has found yet.

use crate::metrics::Metrics;
use gsrelay_core::relay::Relay;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// Runs `input` on the core. If it panics, the panic is counted
/// (`gsrelay_internal_errors_total{where=place}`) and logged at error level, the room the
/// core was handling is dropped with what the input queued ([`Relay::quarantine`]), and
/// `None` is returned; the caller goes on with its next input.
pub fn guarded<R>(
    relay: &mut Relay,
    metrics: &Metrics,
    place: &'static str,
    now: Instant,
    input: impl FnOnce(&mut Relay) -> R,
) -> Option<R> {
    let mark = relay.outbox_mark();
    // AssertUnwindSafe: after a panic the state `input` may have left half-updated (the
    // busy room and the outbox tail) is discarded by `quarantine`; nothing else was being
    // mutated, so no broken invariant is observed afterwards.
    match catch_unwind(AssertUnwindSafe(|| input(relay))) {
        Ok(r) => Some(r),
        Err(payload) => {
            metrics.internal_errors.with_label_values(&[place]).inc();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            let room = relay.quarantine(now, mark);
            tracing::error!(
                place,
                room = room.as_deref().unwrap_or("-"),
                panic = message,
                "defect in the relay core: dropped the room it was handling"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsrelay_core::relay::{Event, Input, JoinRequest, RelayConfig, Reply};

    fn join(relay: &mut Relay, room: &str) -> u64 {
        let req = JoinRequest {
            room: room.into(),
            identity: "p".into(),
            publish: true,
            subscribe: true,
            ..JoinRequest::default()
        };
        relay
            .handle_input(Instant::now(), Input::Join(req))
            .ok()
            .and_then(Reply::joined)
            .expect("join")
            .session
    }

    #[test]
    fn a_panic_in_the_core_costs_its_room_and_the_relay_goes_on() {
        let metrics = Metrics::new();
        let mut relay = Relay::new(RelayConfig::default(), 1);
        let a = join(&mut relay, "a");
        let b = join(&mut relay, "b");
        let now = Instant::now();

        let got = guarded(&mut relay, &metrics, "rtp", now, |r| r.inject_fault(a));
        assert!(got.is_none(), "the panic was caught");
        assert_eq!(metrics.internal_errors.with_label_values(&["rtp"]).get(), 1);
        assert!(
            relay.session(a).is_none(),
            "the faulty room's session is gone"
        );
        assert_eq!(
            relay.poll_event(),
            Some(Event::SessionClosed(a)),
            "and reported to the shell"
        );
        assert!(relay.room_info("a").is_none());
        // The other room is untouched and the core still takes input.
        assert!(relay.session(b).is_some());
        assert_eq!(relay.room_info("b").map(|r| r.sessions.len()), Some(1));
        assert_eq!(
            guarded(&mut relay, &metrics, "rtp", now, |r| r.session_count()),
            Some(1)
        );
        join(&mut relay, "a");
        assert_eq!(relay.session_count(), 2);
    }
}
