//! Relay core micro-benchmarks, no sockets: the latest-state store update, the per-packet
//! fan-out cost by subscriber count, and a snapshot of 10 000 objects.
//!
//! Run with `cargo bench -p gsrelay-core --bench relay`; `docs/benchmarks.md` records the
//! results.

mod common;

use common::update;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gsrelay_core::rtp::RtpHeader;
use gsrelay_core::rtp::rtcp::{self, FirEntry};
use gsrelay_core::{Input, JoinRequest, Joined, Relay, RelayConfig, Reply};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn relay(max_objects: usize) -> Relay {
    let cfg = RelayConfig {
        max_objects_per_stream: max_objects,
        max_packets_per_sec: u32::MAX,
        max_sessions_per_room: 10_000,
        ..RelayConfig::default()
    };
    Relay::new(cfg, 1)
}

fn join(r: &mut Relay, now: Instant, publish: bool, subscribe: bool) -> Joined {
    let req = JoinRequest {
        room: "bench".into(),
        publish,
        subscribe,
        ..JoinRequest::default()
    };
    r.handle_input(now, Input::Join(req))
        .ok()
        .and_then(Reply::joined)
        .expect("join")
}

fn rtp(ssrc: u32, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 + payload.len());
    let h = RtpHeader {
        marker: false,
        payload_type: 96,
        sequence_number: seq,
        timestamp: u32::from(seq) * 3000,
        ssrc,
        csrcs: &[],
        extension: None,
    };
    h.append_to(&mut p).expect("header");
    p.extend_from_slice(payload);
    p
}

fn drain(r: &mut Relay) -> usize {
    let mut bytes = 0;
    while let Some(t) = r.poll_transmit() {
        bytes += black_box(t.bytes).len();
    }
    bytes
}

/// Packets pre-built with consecutive sequence numbers, cycled through by the bench.
fn packets(ssrc: u32, n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            rtp(
                ssrc,
                i.wrapping_add(1),
                &update(u64::from(i % 200) * 5, f32::from(i)),
            )
        })
        .collect()
}

fn store_update(c: &mut Criterion) {
    let mut g = c.benchmark_group("store_update");
    g.throughput(Throughput::Elements(5));
    let now = Instant::now();
    let mut r = relay(10_000);
    let a = join(&mut r, now, true, false);
    let pkts = packets(a.ssrc, 60_000);
    let mut i = 0usize;
    g.bench_function("5_objects_no_subscribers", |b| {
        b.iter(|| {
            // Sequence numbers must keep increasing; wrap the cycle with a fresh stream.
            let _ = r.handle_input(
                now,
                Input::Rtp {
                    from: a.session,
                    packet: &pkts[i % pkts.len()],
                },
            );
            i += 1;
            drain(&mut r)
        })
    });
    g.finish();
}

fn fan_out(c: &mut Criterion) {
    let mut g = c.benchmark_group("fan_out");
    let now = Instant::now();
    for subs in [1usize, 10, 100, 1000] {
        let mut r = relay(10_000);
        let a = join(&mut r, now, true, false);
        for _ in 0..subs {
            join(&mut r, now, false, true);
        }
        let pkts = packets(a.ssrc, 60_000);
        let mut i = 0usize;
        g.throughput(Throughput::Elements(subs as u64));
        g.bench_with_input(BenchmarkId::new("subscribers", subs), &subs, |b, _| {
            b.iter(|| {
                let _ = r.handle_input(
                    now,
                    Input::Rtp {
                        from: a.session,
                        packet: &pkts[i % pkts.len()],
                    },
                );
                i += 1;
                drain(&mut r)
            })
        });
    }
    g.finish();
}

fn snapshot(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    let now = Instant::now();
    let mut r = relay(20_000);
    let a = join(&mut r, now, true, false);
    // 10 000 objects: 2 000 packets of five.
    for i in 0..2000u16 {
        let pkt = rtp(a.ssrc, i + 1, &update(u64::from(i) * 5, f32::from(i)));
        let _ = r.handle_input(
            now,
            Input::Rtp {
                from: a.session,
                packet: &pkt,
            },
        );
    }
    let sub = join(&mut r, now, false, true);
    assert_eq!(
        r.room_info("bench").expect("room").streams[0].objects,
        10_000
    );
    g.throughput(Throughput::Elements(10_000));
    let mut fir_seq = 0u8;
    let mut t = now;
    g.bench_function("10000_objects", |b| {
        b.iter(|| {
            fir_seq = fir_seq.wrapping_add(1);
            t += Duration::from_micros(1);
            let mut fir = Vec::new();
            rtcp::write_fir(
                &mut fir,
                sub.ssrc,
                &[FirEntry {
                    ssrc: a.ssrc,
                    sequence_number: fir_seq,
                }],
            )
            .expect("fir");
            let _ = r.handle_input(
                t,
                Input::Rtcp {
                    from: sub.session,
                    packet: &fir,
                },
            );
            drain(&mut r)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = store_update, fan_out, snapshot
}
criterion_main!(benches);
