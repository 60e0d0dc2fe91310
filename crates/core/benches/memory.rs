//! Memory per cached object: the relay core caches 10 000 objects of one stream, and a
//! counting allocator reports the live heap bytes that added, against the objects' wire
//! size. Also prints the RSS delta, which includes allocator slack.
//!
//! Run with `cargo bench -p gsrelay-core --bench memory`; `docs/benchmarks.md` records the
//! results.

mod common;

use common::update;
use gsrelay_core::rtp::RtpHeader;
use gsrelay_core::{Input, JoinRequest, Relay, RelayConfig, Reply};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the counter is a side effect that touches no memory
// handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const OBJECTS: u64 = 10_000;

fn rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let cfg = RelayConfig {
        max_objects_per_stream: 20_000,
        max_packets_per_sec: u32::MAX,
        ..RelayConfig::default()
    };
    let now = Instant::now();
    let mut relay = Relay::new(cfg, 1);
    let req = JoinRequest {
        room: "mem".into(),
        publish: true,
        ..JoinRequest::default()
    };
    let publisher = relay
        .handle_input(now, Input::Join(req))
        .ok()
        .and_then(Reply::joined)
        .expect("join");
    // Packets built before counting, so only the relay's own allocations are measured.
    let packets: Vec<Vec<u8>> = (0..OBJECTS / 5)
        .map(|i| {
            let mut p = Vec::new();
            RtpHeader {
                marker: false,
                payload_type: 96,
                sequence_number: i as u16 + 1,
                timestamp: i as u32 * 3000,
                ssrc: publisher.ssrc,
                csrcs: &[],
                extension: None,
            }
            .append_to(&mut p)
            .expect("header");
            p.extend_from_slice(&update(i * 5, i as f32));
            p
        })
        .collect();
    let wire_bytes: usize = packets.iter().map(|p| p.len() - 12).sum();
    let (heap0, rss0) = (LIVE.load(Ordering::Relaxed), rss_kib());
    for p in &packets {
        let _ = relay.handle_input(
            now,
            Input::Rtp {
                from: publisher.session,
                packet: p,
            },
        );
        while relay.poll_transmit().is_some() {}
    }
    let (heap1, rss1) = (LIVE.load(Ordering::Relaxed), rss_kib());
    let cached = relay
        .room_info("mem")
        .and_then(|r| r.streams.first().map(|s| s.objects))
        .unwrap_or(0);
    assert_eq!(cached as u64, OBJECTS, "every object cached");
    let heap = (heap1 - heap0) as f64;
    let n = OBJECTS as f64;
    let wire = wire_bytes as f64;
    let budget = 2.0 * wire + 64.0 * n;
    println!("objects cached:              {cached}");
    println!(
        "wire size:                   {wire_bytes} B ({:.1} B/object)",
        wire / n
    );
    println!(
        "heap delta (counting alloc): {heap:.0} B ({:.1} B/object)",
        heap / n
    );
    println!("RSS delta:                   {} KiB", rss1 - rss0);
    println!(
        "target 2 × wire + 64 B/obj:  {budget:.0} B ({:.1} B/object)",
        budget / n
    );
    println!(
        "heap / target:               {:.2} ({})",
        heap / budget,
        if heap <= budget { "met" } else { "missed" }
    );
}
