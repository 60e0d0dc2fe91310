//! SRTP and SRTCP unprotect (`rtp::srtp`) on arbitrary bytes, both profiles, fixed keys.
//! The first byte picks the profile, RTP or RTCP, and the mode (`gsrelay_fuzz::srtp_flags`).
//!
//! Raw mode unprotects the rest as it is: no panic, and a packet that authenticates is
//! refused when replayed. Protect-first mode protects the rest on the client side and
//! unprotects it on the relay's: the plaintext comes back unchanged.
#![no_main]

use gsrelay::rtp::SrtpSession;
use gsrelay_fuzz::{srtp_client, srtp_flags, srtp_profile, srtp_relay};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, packet)) = data.split_first() else {
        return;
    };
    let profile = srtp_profile(flags);
    let mut relay = srtp_relay(profile);
    let rtcp = flags & srtp_flags::RTCP != 0;
    let unprotect = |s: &mut SrtpSession, p: &[u8]| {
        if rtcp {
            s.unprotect_rtcp(p)
        } else {
            s.unprotect_rtp(p)
        }
    };
    if flags & srtp_flags::PROTECT_FIRST != 0 {
        let mut client = srtp_client(profile);
        let protected = if rtcp {
            client.protect_rtcp(packet)
        } else {
            client.protect_rtp(packet)
        };
        let Ok(protected) = protected else {
            return;
        };
        let plain = unprotect(&mut relay, &protected).expect("own protected packet unprotects");
        assert_eq!(&plain[..], packet, "round trip");
    } else if unprotect(&mut relay, packet).is_ok() {
        assert!(
            unprotect(&mut relay, packet).is_err(),
            "a replayed packet is refused"
        );
    }
});
