//! SRTP micro-benchmarks: protect, and protect then unprotect, of one RTP packet of 200
//! and of 1 200 bytes, for both profiles.
//!
//! Every iteration uses the next sequence number, so the receiver's replay window accepts
//! each packet and the rollover counter advances as it would on a long-lived stream. Each
//! iteration copies the plaintext into a reused buffer (as the relay copies a packet into
//! its send batch) and works there in place.
//!
//! Run with `cargo bench --bench srtp`; `docs/benchmarks.md` records the results.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gsrelay::rtp::srtp::{KeyMaterial, SrtpProfile, SrtpSession};
use std::hint::black_box;
use std::time::Duration;

/// Total RTP packet sizes (12-byte header included).
const SIZES: [usize; 2] = [200, 1200];

/// An RTP packet of `len` bytes with sequence number 0.
fn rtp(len: usize) -> Vec<u8> {
    let mut p = vec![0x80, 96, 0, 0, 0, 0, 0x0b, 0xb8, 0x12, 0x34, 0x56, 0x78];
    p.extend((12..len).map(|i| i as u8));
    p
}

/// A sender and a receiver sharing one key.
fn pair(profile: SrtpProfile) -> (SrtpSession, SrtpSession) {
    let client_key = KeyMaterial::generate(profile).expect("key");
    let relay_key = KeyMaterial::generate(profile).expect("key");
    (
        SrtpSession::for_client(profile, &client_key, &relay_key).expect("session"),
        SrtpSession::for_relay(profile, &client_key, &relay_key).expect("session"),
    )
}

fn bench_srtp(c: &mut Criterion) {
    let mut group = c.benchmark_group("srtp");
    for profile in SrtpProfile::ALL {
        for len in SIZES {
            group.throughput(Throughput::Bytes(len as u64));
            let (mut sender, _) = pair(profile);
            let mut plain = rtp(len);
            let mut buf = Vec::with_capacity(len + profile.rtcp_overhead());
            let mut seq = 0u16;
            group.bench_function(BenchmarkId::new(format!("{profile}/protect"), len), |b| {
                b.iter(|| {
                    seq = seq.wrapping_add(1);
                    plain[2..4].copy_from_slice(&seq.to_be_bytes());
                    buf.clear();
                    buf.extend_from_slice(&plain);
                    sender.protect_rtp(&mut buf).expect("protect");
                    black_box(&buf);
                })
            });
            let (mut sender, mut receiver) = pair(profile);
            let mut seq = 0u16;
            group.bench_function(
                BenchmarkId::new(format!("{profile}/protect+unprotect"), len),
                |b| {
                    b.iter(|| {
                        seq = seq.wrapping_add(1);
                        plain[2..4].copy_from_slice(&seq.to_be_bytes());
                        buf.clear();
                        buf.extend_from_slice(&plain);
                        sender.protect_rtp(&mut buf).expect("protect");
                        black_box(receiver.unprotect_rtp(&mut buf).expect("unprotect"));
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench_srtp
}
criterion_main!(benches);
