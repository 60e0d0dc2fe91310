//! SRTP protect and unprotect allocate nothing per packet, counted by a global allocator
//! that tallies the allocations made on the test's own thread; on the SRTP backend the
//! process picks, and again on the portable one (a child process with
//! `GSRELAY_SRTP_PORTABLE=1`).

#[path = "support/srtp_backend.rs"]
mod srtp_backend;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gsrelay::rtp::srtp::{KeyMaterial, SrtpProfile, SrtpSession};

/// The system allocator, counting allocations per thread.
struct Counting;

thread_local! {
    // `const` and without a destructor: touching it never allocates.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the counter is a side effect on a thread-local `Cell`
// that touches no memory handed out and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// An RTP packet of `len` bytes, or with `rtcp`, an RTCP APP packet of about that size.
fn packet(rtcp: bool, seq: u16, len: usize) -> Vec<u8> {
    let mut p = if rtcp {
        let words = (len / 4 - 1) as u16;
        let [w0, w1] = words.to_be_bytes();
        vec![0x80, 204, w0, w1, 0x12, 0x34, 0x56, 0x78]
    } else {
        let [s0, s1] = seq.to_be_bytes();
        vec![0x80, 96, s0, s1, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0x78]
    };
    p.resize(len / 4 * 4, 0x5a);
    p
}

#[test]
fn the_counter_sees_allocations() {
    let before = allocations();
    drop(std::hint::black_box(vec![1u8; 10]));
    assert_eq!(allocations() - before, 1);
}

#[test]
fn protect_and_unprotect_allocate_nothing_per_packet() {
    for profile in SrtpProfile::ALL {
        let client_key = KeyMaterial::generate(profile).unwrap();
        let relay_key = KeyMaterial::generate(profile).unwrap();
        let mut client = SrtpSession::for_client(profile, &client_key, &relay_key).unwrap();
        let mut relay = SrtpSession::for_relay(profile, &client_key, &relay_key).unwrap();
        assert_eq!(relay.backend(), srtp_backend::expected());
        let mut buf = Vec::with_capacity(2048);
        // The first packet of each kind makes its SSRC's window: one map entry each.
        for rtcp in [false, true] {
            buf.clear();
            buf.extend_from_slice(&packet(rtcp, 0, 200));
            if rtcp {
                client.protect_rtcp(&mut buf).unwrap();
                relay.unprotect_rtcp(&mut buf).unwrap();
            } else {
                client.protect_rtp(&mut buf).unwrap();
                relay.unprotect_rtp(&mut buf).unwrap();
            }
        }
        let plain: Vec<_> = (1..=300u16)
            .map(|seq| packet(seq % 3 == 0, seq, if seq % 2 == 0 { 200 } else { 1200 }))
            .collect();
        let before = allocations();
        for (seq, p) in plain.iter().enumerate() {
            buf.clear();
            buf.extend_from_slice(p);
            let len = if seq % 3 == 2 {
                client.protect_rtcp(&mut buf).unwrap();
                relay.unprotect_rtcp(&mut buf).unwrap()
            } else {
                client.protect_rtp(&mut buf).unwrap();
                relay.unprotect_rtp(&mut buf).unwrap()
            };
            assert_eq!(buf[..len], p[..]);
        }
        assert_eq!(allocations() - before, 0, "{profile}");
    }
}

#[test]
fn nothing_is_allocated_per_packet_on_the_portable_backend_either() {
    srtp_backend::rerun_on_the_portable_backend(&[
        "the_counter_sees_allocations",
        "protect_and_unprotect_allocate_nothing_per_packet",
    ]);
}
