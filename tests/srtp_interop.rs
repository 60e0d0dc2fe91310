//! Interop of `gsrelay::rtp::srtp` with libsrtp, an independent SRTP implementation.
//!
//! libsrtp runs through the Python package `pylibsrtp` (`python3 -m pip install pylibsrtp`)
//! in `tests/interop/srtp_peer.py`; packets travel as hex over its stdin and stdout. Both
//! directions, both profiles, with replay protection on both sides, across several
//! sequence-number rollovers. Without the package these tests fail, unless
//! `GSRELAY_SKIP_LIBSRTP=1` is set.
//!
//! Each runs on the SRTP backend the process picks (accelerated where the CPU has VAES and
//! AVX-512), and [`libsrtp_interop_on_the_portable_backend`] runs them all again in a child
//! process with `GSRELAY_SRTP_PORTABLE=1`.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use gsrelay::rtp::srtp::{KeyMaterial, SrtpError, SrtpProfile, SrtpSession};
use support::srtp::Copying;
use support::{libsrtp, srtp_backend};

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/srtp_peer.py");
const SSRC: u32 = 0x0bad_cafe;

#[derive(Clone, Copy)]
enum Kind {
    Rtp,
    Rtcp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Rtp => "rtp",
            Self::Rtcp => "rtcp",
        }
    }
}

/// Runs every packet through libsrtp in order and returns its results.
fn libsrtp(mode: &str, key: &KeyMaterial, packets: &[(Kind, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut child = Command::new("python3")
        .arg(PEER)
        .args([mode, key.profile().name(), &key.to_base64()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3");
    let input: String = packets
        .iter()
        .map(|(kind, packet)| format!("{} {}\n", kind.name(), hex::encode(packet)))
        .collect();
    // The peer reads all of stdin before the test reads its output; the input is small
    // enough for the pipe, and dropping stdin closes it.
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("write to srtp_peer.py");
    let output = child.wait_with_output().expect("wait for srtp_peer.py");
    assert!(
        output.status.success(),
        "srtp_peer.py {mode} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Vec<u8>> = String::from_utf8(output.stdout)
        .expect("hex output")
        .lines()
        .map(|line| hex::decode(line).expect("hex line"))
        .collect();
    assert_eq!(lines.len(), packets.len(), "one output line per packet");
    lines
}

fn rtp(seq: u16, payload_len: usize) -> Vec<u8> {
    let mut packet = vec![0x80, 96];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&(u32::from(seq) * 3000).to_be_bytes());
    packet.extend_from_slice(&SSRC.to_be_bytes());
    packet.extend((0..payload_len).map(|i| (i as u8) ^ (seq as u8)));
    packet
}

/// RTP with one CSRC and an RFC 8285 one-byte header extension, so both sides must agree
/// on where the header ends.
fn rtp_with_extension(seq: u16) -> Vec<u8> {
    let mut packet = vec![0x91, 0xe0];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&7u32.to_be_bytes());
    packet.extend_from_slice(&SSRC.to_be_bytes());
    packet.extend_from_slice(&0x1111_2222_u32.to_be_bytes());
    packet.extend_from_slice(&[0xbe, 0xde, 0x00, 0x01, 0x10, 0xaa, 0x00, 0x00]);
    packet.extend_from_slice(b"extended game state");
    packet
}

/// An RTCP APP packet (PT 204) carrying `words` 32-bit words of data.
fn rtcp_app(words: u8) -> Vec<u8> {
    let mut packet = vec![0x80, 204, 0, 2 + words];
    packet.extend_from_slice(&SSRC.to_be_bytes());
    packet.extend_from_slice(b"GSRL");
    packet.extend((0..4 * words).map(|i| i.wrapping_mul(37)));
    packet
}

/// Mixed RTP and RTCP, crossing a sequence-number rollover so both sides must agree on
/// the rollover counter.
fn traffic() -> Vec<(Kind, Vec<u8>)> {
    vec![
        (Kind::Rtp, rtp(65533, 1)),
        (Kind::Rtcp, rtcp_app(1)),
        (Kind::Rtp, rtp(65534, 200)),
        (Kind::Rtp, rtp(65535, 0)),
        (Kind::Rtp, rtp(0, 1200)),
        (Kind::Rtcp, rtcp_app(0)),
        (Kind::Rtp, rtp_with_extension(1)),
        (Kind::Rtp, rtp(2, 33)),
        (Kind::Rtcp, rtcp_app(50)),
    ]
}

/// Fresh keys for both sides and the relay's session with them: (client key, relay key,
/// relay session).
fn relay_session(profile: SrtpProfile) -> (KeyMaterial, KeyMaterial, SrtpSession) {
    let client_key = KeyMaterial::generate(profile).unwrap();
    let relay_key = KeyMaterial::generate(profile).unwrap();
    let relay = SrtpSession::for_relay(profile, &client_key, &relay_key).unwrap();
    assert_eq!(relay.backend(), srtp_backend::expected());
    (client_key, relay_key, relay)
}

/// Asserts that packet `i` of the traffic came out as it went in.
fn assert_same_packet(profile: SrtpProfile, i: usize, kind: Kind, got: &[u8], expected: &[u8]) {
    assert_eq!(
        hex::encode(got),
        hex::encode(expected),
        "{profile} packet {i} ({})",
        kind.name()
    );
}

/// Sequence numbers wrapping 65535 → 0 four times, with jumps of up to 30 000 and RTCP
/// between: each round's payloads differ, so a wrong rollover counter cannot pass.
fn rollover_traffic() -> Vec<(Kind, Vec<u8>)> {
    (0..4)
        .flat_map(|round| {
            [30_000, 60_000, 65_534, 65_535, 0, 1]
                .into_iter()
                .map(move |seq| (Kind::Rtp, rtp(seq, 40 + round)))
                .chain([(Kind::Rtcp, rtcp_app(1 + round as u8))])
        })
        .collect()
}

/// The relay protects `plain` and libsrtp must unprotect each packet to its original.
fn check_libsrtp_unprotects(plain: &[(Kind, Vec<u8>)]) {
    for profile in SrtpProfile::ALL {
        let (_, relay_key, mut relay) = relay_session(profile);
        let protected: Vec<_> = plain
            .iter()
            .map(|(kind, packet)| {
                let out = match kind {
                    Kind::Rtp => relay.seal_rtp(packet),
                    Kind::Rtcp => relay.seal_rtcp(packet),
                };
                (*kind, out.unwrap())
            })
            .collect();
        let unprotected = libsrtp("unprotect", &relay_key, &protected);
        for (i, ((kind, expected), got)) in plain.iter().zip(&unprotected).enumerate() {
            assert_same_packet(profile, i, *kind, got, expected);
        }
    }
}

/// libsrtp protects `plain` and the relay must unprotect each packet to its original,
/// then refuse each of the last three again as a replay.
fn check_relay_unprotects(plain: &[(Kind, Vec<u8>)]) {
    for profile in SrtpProfile::ALL {
        let (client_key, _, mut relay) = relay_session(profile);
        let protected = libsrtp("protect", &client_key, plain);
        let mut open = |kind: Kind, packet: &[u8]| match kind {
            Kind::Rtp => relay.open_rtp(packet),
            Kind::Rtcp => relay.open_rtcp(packet),
        };
        for (i, ((kind, expected), packet)) in plain.iter().zip(&protected).enumerate() {
            let got = open(*kind, packet)
                .unwrap_or_else(|e| panic!("{profile} packet {i} ({}): {e}", kind.name()));
            assert_same_packet(profile, i, *kind, &got, expected);
        }
        let recent = plain.len().saturating_sub(3);
        for ((kind, _), packet) in plain.iter().zip(&protected).skip(recent) {
            let again = open(*kind, packet);
            assert!(
                matches!(again, Err(SrtpError::Replay)),
                "{profile} {} replayed: {again:?}",
                kind.name()
            );
        }
    }
}

#[test]
fn libsrtp_unprotects_what_the_relay_protects() {
    if libsrtp::available("libsrtp interop test") {
        check_libsrtp_unprotects(&traffic());
    }
}

#[test]
fn relay_unprotects_what_libsrtp_protects() {
    if libsrtp::available("libsrtp interop test") {
        check_relay_unprotects(&traffic());
    }
}

#[test]
fn libsrtp_follows_the_relays_rollover_counter() {
    if libsrtp::available("libsrtp interop test") {
        check_libsrtp_unprotects(&rollover_traffic());
    }
}

#[test]
fn relay_follows_libsrtps_rollover_counter() {
    if libsrtp::available("libsrtp interop test") {
        check_relay_unprotects(&rollover_traffic());
    }
}

/// The four tests above, again on the portable backend (a no-op in that re-run itself).
#[test]
fn libsrtp_interop_on_the_portable_backend() {
    if libsrtp::available("libsrtp interop test") {
        srtp_backend::rerun_on_the_portable_backend(&[
            "libsrtp_unprotects_what_the_relay_protects",
            "relay_unprotects_what_libsrtp_protects",
            "libsrtp_follows_the_relays_rollover_counter",
            "relay_follows_libsrtps_rollover_counter",
        ]);
    }
}
