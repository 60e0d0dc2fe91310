//! The writer allocates nothing per record once its buffer has grown: counted by a
//! global allocator that wraps the system's.

use gsrelay_record::{Event, SegmentWriter};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Allocations made by this thread (a const-initialised Cell: reading it allocates
    /// nothing, so the allocator can use it).
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds GlobalAlloc's
// contract; the only addition is a thread-local counter that neither allocates nor
// touches the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's guarantees for `layout` are passed on as they are.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout` (above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: as for `dealloc`, and `new_size` is the caller's, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn records_allocate_nothing_once_the_buffer_has_grown() {
    let mut w = SegmentWriter::new("rec", "room", 0);
    let packet = vec![0x80u8; 1200];
    let events = [
        Event::Ownership {
            ssrc: 1,
            object: 2,
            holder: Some(3),
        },
        Event::ParticipantJoined {
            session: 9,
            identity: "alice".into(),
            metadata: Some("{\"team\":2}".into()),
        },
    ];
    let mut file = Vec::with_capacity(1 << 20);
    let batch = |w: &mut SegmentWriter, file: &mut Vec<u8>, n: u64| {
        for i in 0..n {
            w.rtp(1_000 + i, i % 10 == 0, &packet).unwrap();
            w.event(1_000 + i, &events[(i % 2) as usize]);
        }
        file.extend_from_slice(w.pending());
        w.consume();
    };
    // The first batch grows the buffer to a batch's size (and shows the counter counts).
    let start = allocations();
    batch(&mut w, &mut file, 100);
    file.clear();
    assert!(allocations() > start, "the counter sees the buffer grow");
    let before = allocations();
    for _ in 0..20 {
        batch(&mut w, &mut file, 100);
        file.clear();
    }
    assert_eq!(allocations() - before, 0, "allocations for 4 000 records");
    assert_eq!(w.records(), 21 * 200);
}
