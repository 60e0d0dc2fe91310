//! Inputs the fuzz targets (`fuzz/`, docs/security.md "Fuzzing") found crashing, fed
//! through the same public API as the target that found them.

use gsrelay::rtp::{KeyMaterial, SrtpProfile, SrtpSession};

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
