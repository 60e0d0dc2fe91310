//! One poll handing over a thousand updates: the queue filled with a thousand Head1
//! updates as the network thread writes them, then `PollSide::poll` (what
//! `gsr_client_poll` runs after its handle look-up) turning them into typed events.
//! Prints the median and 99th percentile over 2 000 polls.
//!
//! `cargo bench -p gsrelay-ffi --bench poll`

#[path = "../tests/common/mod.rs"]
mod common;

use gsrelay_core::wire::Dialect;
use gsrelay_ffi::events::{Batch, PollSide, Queue, gsr_event};
use std::hint::black_box;
use std::time::Instant;

const UPDATES: usize = 1000;
const POLLS: usize = 2000;

fn main() {
    let tlvs = common::heads(UPDATES);
    let queue = Queue::default();
    let mut local = Batch::default();
    let mut side = PollSide::default();
    // SAFETY: gsr_event is plain data; all zeroes is a valid value of it.
    let mut events: Vec<gsr_event> = vec![unsafe { std::mem::zeroed() }; UPDATES];
    let mut times = Vec::with_capacity(POLLS);
    for round in 0..POLLS + 100 {
        common::push_all(&mut local, &tlvs);
        queue.append(&mut local);
        let start = Instant::now();
        let n = side.poll(&queue, Dialect::Draft01, &mut events);
        let took = start.elapsed();
        assert_eq!(black_box(n), UPDATES);
        if round >= 100 {
            times.push(took.as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "poll of {UPDATES} Head1 updates: median {:.1} us, p99 {:.1} us ({:.0} ns per update)",
        times[POLLS / 2],
        times[POLLS * 99 / 100],
        times[POLLS / 2] * 1000.0 / UPDATES as f64
    );
}
