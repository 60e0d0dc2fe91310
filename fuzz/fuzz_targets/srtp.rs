//! SRTP and SRTCP unprotect (`rtp::srtp`) on arbitrary bytes, both profiles, fixed keys.
//! The first byte picks the profile, RTP or RTCP, and the mode (`gsrelay_fuzz::srtp_flags`).
//! Unprotecting works in place: the plaintext packet is the returned length at the start
//! of the buffer.
//!
//! Raw mode unprotects the rest as it is: no panic, the returned length fits the buffer,
//! and a packet that authenticates is refused when replayed. Protect-first mode protects
//! the rest on the client side and unprotects it on the relay's: the plaintext comes back
//! unchanged.
#![no_main]

use gsrelay_core::rtp::{SrtpError, SrtpSession};
use gsrelay_fuzz::{srtp_client, srtp_flags, srtp_profile, srtp_relay};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, packet)) = data.split_first() else {
        return;
    };
    let profile = srtp_profile(flags);
    let mut relay = srtp_relay(profile);
    let rtcp = flags & srtp_flags::RTCP != 0;
    // Unprotects a copy of `p` in place; the plaintext on success.
    let unprotect = |s: &mut SrtpSession, p: &[u8]| -> Result<Vec<u8>, SrtpError> {
        let mut buf = p.to_vec();
        let len = if rtcp {
            s.unprotect_rtcp(&mut buf)
        } else {
            s.unprotect_rtp(&mut buf)
        }?;
        assert!(len <= p.len(), "plaintext of {len} bytes from {}", p.len());
        buf.truncate(len);
        Ok(buf)
    };
    if flags & srtp_flags::PROTECT_FIRST != 0 {
        let mut client = srtp_client(profile);
        let mut protected = packet.to_vec();
        let sealed = if rtcp {
            client.protect_rtcp(&mut protected)
        } else {
            client.protect_rtp(&mut protected)
        };
        if sealed.is_err() {
            assert_eq!(protected, packet, "a refused packet is left unchanged");
            return;
        }
        let plain = unprotect(&mut relay, &protected).expect("own protected packet unprotects");
        assert_eq!(plain, packet, "round trip");
    } else if unprotect(&mut relay, packet).is_ok() {
        assert!(
            unprotect(&mut relay, packet).is_err(),
            "a replayed packet is refused"
        );
    }
});
