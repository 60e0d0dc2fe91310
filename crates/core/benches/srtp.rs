//! SRTP micro-benchmarks: protect, and unprotect, of one RTP packet with a payload of 100,
//! 300 and 1 200 bytes (after a 12-byte header), for both profiles, and protect then
//! unprotect of a 1 200-byte one as the older figures were taken.
//!
//! Every protect uses the next sequence number, so the receiver's replay window accepts
//! each packet and the rollover counter advances as it would on a long-lived stream. Each
//! protect copies the plaintext into a reused buffer (as the relay copies a packet into its
//! send batch) and works there in place. Unprotect is timed alone: criterion's batches seal
//! the packets first, untimed, and the timed routine opens each where it lies.
//!
//! Run with `cargo bench -p gsrelay-core --bench srtp`;
//! `GSRELAY_SRTP_PORTABLE=1 cargo bench -p gsrelay-core --bench srtp` measures the portable
//! primitives on the same build. `docs/benchmarks.md` records the results.

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gsrelay_core::rtp::srtp::{KeyMaterial, SrtpProfile, SrtpSession};
use std::hint::black_box;
use std::time::Duration;

/// RTP payload sizes: a small state update, a typical one, and one near the MTU.
const PAYLOADS: [usize; 3] = [100, 300, 1200];
/// The fixed RTP header the packets carry.
const HEADER: usize = 12;

/// An RTP packet with a `payload`-byte payload and sequence number 0.
fn rtp(payload: usize) -> Vec<u8> {
    let mut p = vec![0x80, 96, 0, 0, 0, 0, 0x0b, 0xb8, 0x12, 0x34, 0x56, 0x78];
    p.extend((0..payload).map(|i| i as u8));
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

/// Seals `plain` with the next sequence number into `buf`.
fn seal_next(sender: &mut SrtpSession, plain: &mut [u8], seq: &mut u16, buf: &mut Vec<u8>) {
    *seq = seq.wrapping_add(1);
    plain[2..4].copy_from_slice(&seq.to_be_bytes());
    buf.clear();
    buf.extend_from_slice(plain);
    sender.protect_rtp(buf).expect("protect");
}

fn bench_srtp(c: &mut Criterion) {
    let mut group = c.benchmark_group("srtp");
    for profile in SrtpProfile::ALL {
        for payload in PAYLOADS {
            group.throughput(Throughput::Bytes((HEADER + payload) as u64));
            let (mut sender, _) = pair(profile);
            let mut plain = rtp(payload);
            let mut buf = Vec::with_capacity(HEADER + payload + profile.rtcp_overhead());
            let mut seq = 0u16;
            group.bench_function(
                BenchmarkId::new(format!("{profile}/protect"), payload),
                |b| {
                    b.iter(|| {
                        seal_next(&mut sender, &mut plain, &mut seq, &mut buf);
                        black_box(&buf);
                    })
                },
            );
            let (mut sender, mut receiver) = pair(profile);
            let mut seq = 0u16;
            group.bench_function(
                BenchmarkId::new(format!("{profile}/unprotect"), payload),
                |b| {
                    b.iter_batched_ref(
                        || {
                            let mut sealed = Vec::with_capacity(buf.capacity());
                            seal_next(&mut sender, &mut plain, &mut seq, &mut sealed);
                            sealed
                        },
                        |sealed| black_box(receiver.unprotect_rtp(sealed).expect("unprotect")),
                        BatchSize::SmallInput,
                    )
                },
            );
        }
        let payload = 1200;
        let (mut sender, mut receiver) = pair(profile);
        let mut plain = rtp(payload);
        let mut buf = Vec::with_capacity(HEADER + payload + profile.rtcp_overhead());
        let mut seq = 0u16;
        group.throughput(Throughput::Bytes((HEADER + payload) as u64));
        group.bench_function(
            BenchmarkId::new(format!("{profile}/protect+unprotect"), payload),
            |b| {
                b.iter(|| {
                    seal_next(&mut sender, &mut plain, &mut seq, &mut buf);
                    black_box(receiver.unprotect_rtp(&mut buf).expect("unprotect"));
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench_srtp
}
criterion_main!(benches);
