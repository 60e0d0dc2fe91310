//! Polling allocates nothing per update in steady state: a queue of a thousand Head1
//! updates is handed over, decoded into typed events, round after round, and once the
//! buffers have grown to the load the poll makes no allocation at all (counted by the
//! global allocator). One test in this binary, so nothing else allocates meanwhile.

mod common;

use gsrelay_core::wire::Dialect;
use gsrelay_ffi::GSR_OBJECT_HEAD1;
use gsrelay_ffi::events::{Batch, PollSide, Queue, gsr_event};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the counter is a side
// effect that touches no memory the allocator hands out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const UPDATES: usize = 1000;

#[test]
fn a_poll_of_a_thousand_updates_allocates_nothing_in_steady_state() {
    let tlvs = common::heads(UPDATES);
    let queue = Queue::default();
    let mut local = Batch::default();
    let mut side = PollSide::default();
    // SAFETY: gsr_event is plain old data (integers, floats, pointers); all zeroes is a
    // valid value of it, and the poll overwrites every slot it hands out.
    let mut events: Vec<gsr_event> = vec![unsafe { std::mem::zeroed() }; UPDATES];
    let mut during_polls = 0;
    for round in 0..20 {
        common::push_all(&mut local, &tlvs);
        queue.append(&mut local);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let n = side.poll(&queue, Dialect::Draft01, &mut events);
        let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(n, UPDATES);
        let e = &events[UPDATES - 1];
        assert_eq!(e.object.r#type, GSR_OBJECT_HEAD1);
        // SAFETY: the type says the union holds a Head1.
        assert_eq!(unsafe { e.object.u.head1.location.x }, (UPDATES - 1) as f32);
        if round >= 3 {
            during_polls += allocated;
        }
    }
    assert_eq!(during_polls, 0, "allocations in steady-state polls");
}
