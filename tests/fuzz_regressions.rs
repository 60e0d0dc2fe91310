//! Inputs the fuzz targets (`fuzz/`, docs/security.md "Fuzzing") found crashing, fed
//! through the same public API as the target that found them.

use gsrelay::rtp::{KeyMaterial, RtpError, RtpPacket, SrtpProfile, SrtpSession};

/// A client session; the crashes below do not depend on the keys.
fn client(profile: SrtpProfile) -> SrtpSession {
    pair(profile).0
}

/// A client session and the relay's session with the same keys.
fn pair(profile: SrtpProfile) -> (SrtpSession, SrtpSession) {
    let (client, relay) = (
        KeyMaterial::generate(profile).unwrap(),
        KeyMaterial::generate(profile).unwrap(),
    );
    (
        SrtpSession::for_client(profile, &client, &relay).unwrap(),
        SrtpSession::for_relay(profile, &client, &relay).unwrap(),
    )
}

/// Protecting `packet` either refuses it or seals it so that the other side opens exactly
/// the same bytes: SRTP reads the header's length from its fixed fields and the
/// extension's length word alone, as every receiver does, so a malformed element inside an
/// extension can no longer shift what is encrypted.
fn sealed_or_refused(profile: SrtpProfile, packet: &[u8]) {
    let (mut client, mut relay) = pair(profile);
    let mut buf = packet.to_vec();
    if client.protect_rtp(&mut buf).is_ok() {
        let len = relay.unprotect_rtp(&mut buf).unwrap();
        assert_eq!(&buf[..len], packet, "{profile}");
    }
}

/// srtp target: rtc-srtp sized the header from its own parse of a two-byte header
/// extension whose last element runs past the extension into the payload (and past the
/// packet once re-counted), then sliced the packet out of bounds. Protecting now refuses a
/// packet that does not parse as RTP.
#[test]
fn protecting_a_packet_whose_extension_element_overruns_is_refused() {
    let packet = [
        0x10, 0x00, 0x00, 0x00, 0x00, 0x10, 0x28, 0x0a, 0xff, 0xcb, 0xff,
        0xff, // header, V=0, X
        0x10, 0x00, 0x00, 0x01, // two-byte profile, one word
        0x23, 0x00, 0x01, 0x02, // element 0x23 (empty), element 1 claims 2 octets
        0xff, 0xcb, // payload
    ];
    for profile in SrtpProfile::ALL {
        let err = client(profile)
            .protect_rtp(&mut packet.to_vec())
            .unwrap_err();
        assert_eq!(err.reason(), "malformed", "{profile}");
        // The same overrun behind a valid version: sealed whole, or refused.
        let mut v2 = packet;
        v2[0] |= 0x80;
        sealed_or_refused(profile, &v2);
    }
}

/// srtp target: a one-byte header extension holding a nonzero ID-0 octet and an ID 15
/// element. Our parser read the first as padding and stopped at the second; rtc-srtp
/// read the first as an element and re-derived a shorter header, so with GCM the packet it
/// protected did not authenticate on the other side (with AES-CM it encrypted from inside
/// the extension). The relay's parser refuses them (so they are never forwarded), and
/// SRTP, which now reads only the extension's length word, seals them whole.
#[test]
fn extension_elements_the_srtp_library_reads_differently_are_refused() {
    let plain = hex::decode(concat!(
        "932a03e800015f9000005634", // V=2, X, 3 CSRCs
        "781200010002000200000003",
        "bede0005", // one-byte profile, 5 words
        "10aa02",   // element 1, then the octet 02 (ID 0, nonzero)
        "00000000010000020000000000",
        "faffffbf", // fa: ID 15
        "0cef88040701010101000000000000000000000000400c05906003e8",
        "0188040101880400015f901234567810030006c8070381cd00050000",
        "00010000000cb401021981ce00020000000000000000070100010022",
        "00020309",
    ))
    .unwrap();
    for profile in SrtpProfile::ALL {
        sealed_or_refused(profile, &plain);
    }
    let err = RtpPacket::parse(&plain).unwrap_err();
    assert_eq!(err.reason(), "rtp_bad_extension_element");
    // Each on its own, in an otherwise valid one-byte extension.
    for element in [[0x10, 0xaa, 0x02, 0x00], [0x10, 0xaa, 0xf0, 0x00]] {
        let mut p = vec![0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0xbe, 0xde, 0, 1];
        p.extend_from_slice(&element);
        assert_eq!(
            RtpPacket::parse(&p).unwrap_err(),
            RtpError::BadExtensionElement,
            "{element:02x?}"
        );
    }
}
