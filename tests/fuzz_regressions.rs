//! Inputs the fuzz targets (`fuzz/`, docs/security.md "Fuzzing") found crashing, fed
//! through the same public API as the target that found them.

use gsrelay::rtp::{KeyMaterial, RtpError, RtpPacket, SrtpProfile, SrtpSession};

/// A client session; the crashes below do not depend on the keys.
fn client(profile: SrtpProfile) -> SrtpSession {
    let (client, relay) = (
        KeyMaterial::generate(profile),
        KeyMaterial::generate(profile),
    );
    SrtpSession::for_client(profile, &client.unwrap(), &relay.unwrap()).unwrap()
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
        let err = client(profile).protect_rtp(&packet).unwrap_err();
        assert_eq!(err.reason(), "malformed", "{profile}");
        // The same overrun behind a valid version is refused too.
        let mut v2 = packet;
        v2[0] |= 0x80;
        let err = client(profile).protect_rtp(&v2).unwrap_err();
        assert_eq!(err.reason(), "malformed", "{profile}");
    }
}

/// srtp target: a one-byte header extension holding a nonzero ID-0 octet and an ID 15
/// element. Our parser read the first as padding and stopped at the second; rtc-srtp
/// read the first as an element and re-derived a shorter header, so with GCM the packet it
/// protected did not authenticate on the other side (with AES-CM it encrypted from inside
/// the extension). Both are now malformed: parsing and protecting refuse them.
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
        let err = client(profile).protect_rtp(&plain).unwrap_err();
        assert_eq!(err.reason(), "malformed", "{profile}");
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
