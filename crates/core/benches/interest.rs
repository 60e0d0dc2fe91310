//! Interest at scale: one room, 1 000 subscribers and 10 000 objects (100 publishers ×
//! 100) spread over a 1 km square. Cost of one update (one object moving) with and without
//! areas of interest.
//!
//! Run with `cargo bench -p gsrelay-core --bench interest`; `docs/benchmarks.md` records the
//! results.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gsrelay_core::rtp::RtpHeader;
use gsrelay_core::wire::{self, Dialect, Head1, Loc2, Object};
use gsrelay_core::{Input, Interest, JoinRequest, Joined, Relay, RelayConfig, Reply};
use std::hint::black_box;
use std::time::{Duration, Instant};

const SUBSCRIBERS: usize = 1000;
const PUBLISHERS: usize = 100;
const OBJECTS_PER_PUBLISHER: u64 = 100;
const SIDE: f32 = 1000.0;

/// A deterministic spread of points over the square.
fn point(i: u64) -> [f32; 3] {
    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let x = (h >> 40) as f32 / (1u64 << 24) as f32 * SIDE;
    let z = ((h >> 16) & 0xff_ffff) as f32 / (1u64 << 24) as f32 * SIDE;
    [x, 1.7, z]
}

fn head(id: u64, p: [f32; 3]) -> Object {
    Object::Head1(Head1 {
        id,
        location: Loc2 {
            x: p[0],
            y: p[1],
            z: p[2],
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

fn rtp(ssrc: u32, seq: u16, objects: &[Object]) -> Vec<u8> {
    let mut p = Vec::new();
    let h = RtpHeader {
        marker: false,
        payload_type: 96,
        sequence_number: seq,
        timestamp: u32::from(seq),
        ssrc,
        csrcs: &[],
        extension: None,
    };
    h.append_to(&mut p).expect("header");
    p.extend(wire::encode(objects, Dialect::Draft01).expect("encodes"));
    p
}

fn drain(r: &mut Relay) -> usize {
    let mut n = 0;
    while let Some(t) = r.poll_transmit() {
        n += black_box(t.bytes).len();
    }
    n
}

/// The room, populated; returns the relay and one publisher with its next sequence number.
fn room(area: bool) -> (Relay, Joined, u16) {
    let cfg = RelayConfig {
        max_sessions_per_room: 2000,
        max_packets_per_sec: u32::MAX,
        ..RelayConfig::default()
    };
    let mut r = Relay::new(cfg, 3);
    let now = Instant::now();
    let join = |r: &mut Relay, publish: bool, interest: Interest| {
        let req = JoinRequest {
            room: "big".into(),
            publish,
            subscribe: !publish,
            interest,
            ..JoinRequest::default()
        };
        r.handle_input(now, Input::Join(req))
            .ok()
            .and_then(Reply::joined)
            .expect("join")
    };
    let publishers: Vec<Joined> = (0..PUBLISHERS)
        .map(|_| join(&mut r, true, Interest::default()))
        .collect();
    for (p, who) in publishers.iter().enumerate() {
        let base = p as u64 * OBJECTS_PER_PUBLISHER;
        let objects: Vec<Object> = (0..OBJECTS_PER_PUBLISHER)
            .map(|k| head(k, point(base + k)))
            .collect();
        for (n, chunk) in objects.chunks(20).enumerate() {
            let _ = r.handle_input(
                now,
                Input::Rtp {
                    from: who.session,
                    packet: &rtp(who.ssrc, n as u16 + 1, chunk),
                },
            );
        }
    }
    for s in 0..SUBSCRIBERS {
        let c = point(1_000_000 + s as u64);
        let json = format!(
            r#"{{"area":{{"center":[{},{},{}],"radius":50}}}}"#,
            c[0], c[1], c[2]
        );
        let interest = if area {
            serde_json::from_str(&json).expect("interest")
        } else {
            Interest::default()
        };
        join(&mut r, false, interest);
    }
    drain(&mut r);
    (r, publishers[0].clone(), 6)
}

fn one_update(c: &mut Criterion) {
    let mut g = c.benchmark_group("interest_one_update");
    g.throughput(Throughput::Elements(1));
    for area in [false, true] {
        let (mut r, who, mut seq) = room(area);
        let mut t = Instant::now();
        let mut step = 0u64;
        let name = if area {
            "1000_subscribers_with_aoi"
        } else {
            "1000_subscribers_without_aoi"
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                step += 1;
                t += Duration::from_micros(100);
                // Object 0 of publisher 0 walks slowly across the square.
                let mut p = point(0);
                p[0] = (p[0] + step as f32 * 0.01) % SIDE;
                let _ = r.handle_input(
                    t,
                    Input::Rtp {
                        from: who.session,
                        packet: &rtp(who.ssrc, seq, &[head(0, p)]),
                    },
                );
                seq = seq.wrapping_add(1);
                drain(&mut r)
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = one_update
}
criterion_main!(benches);
