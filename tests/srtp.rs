//! Behaviour of `gsrelay::rtp::srtp`: profiles, key material, and a session's SRTP/SRTCP.

mod support;

use std::str::FromStr;

use gsrelay::rtp::srtp::{KeyMaterial, REPLAY_WINDOW, SrtpError, SrtpProfile, SrtpSession};
use proptest::prelude::*;
use support::srtp::Copying;

const SSRC: u32 = 0x1234_5678;

fn rtp(seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut packet = vec![0x80, 96];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&0xdead_beef_u32.to_be_bytes());
    packet.extend_from_slice(&SSRC.to_be_bytes());
    packet.extend_from_slice(payload);
    packet
}

/// An RTCP APP packet (PT 204) with 8 bytes of application data.
fn rtcp(data: [u8; 8]) -> Vec<u8> {
    let mut packet = vec![0x80, 204, 0, 4];
    packet.extend_from_slice(&SSRC.to_be_bytes());
    packet.extend_from_slice(b"GSRL");
    packet.extend_from_slice(&data);
    packet
}

struct Pair {
    client: SrtpSession,
    relay: SrtpSession,
}

fn pair(profile: SrtpProfile) -> Pair {
    let client_key = KeyMaterial::generate(profile).unwrap();
    let relay_key = KeyMaterial::generate(profile).unwrap();
    Pair {
        client: SrtpSession::for_client(profile, &client_key, &relay_key).unwrap(),
        relay: SrtpSession::for_relay(profile, &client_key, &relay_key).unwrap(),
    }
}

#[test]
fn profile_names_match_the_join_answer() {
    for (profile, name) in [
        (SrtpProfile::AesCm128HmacSha1_80, "AES_CM_128_HMAC_SHA1_80"),
        (SrtpProfile::AeadAes128Gcm, "AEAD_AES_128_GCM"),
    ] {
        assert_eq!(profile.to_string(), name);
        assert_eq!(SrtpProfile::from_str(name).unwrap(), profile);
        let json = format!("\"{name}\"");
        assert_eq!(serde_json::to_string(&profile).unwrap(), json);
        assert_eq!(serde_json::from_str::<SrtpProfile>(&json).unwrap(), profile);
    }
    assert_eq!(SrtpProfile::default(), SrtpProfile::AesCm128HmacSha1_80);
    let err = SrtpProfile::from_str("aes_cm_128_hmac_sha1_80").unwrap_err();
    assert_eq!(err.reason(), "unknown_profile");
    assert!(serde_json::from_str::<SrtpProfile>("\"AES_CM_128_HMAC_SHA1_32\"").is_err());
}

#[test]
fn profile_lengths_follow_rfc_3711_and_7714() {
    let cm = SrtpProfile::AesCm128HmacSha1_80;
    let gcm = SrtpProfile::AeadAes128Gcm;
    assert_eq!((cm.master_key_len(), cm.master_salt_len()), (16, 14));
    assert_eq!((gcm.master_key_len(), gcm.master_salt_len()), (16, 12));
    assert_eq!((cm.rtp_overhead(), cm.rtcp_overhead()), (10, 14));
    assert_eq!((gcm.rtp_overhead(), gcm.rtcp_overhead()), (16, 20));
}

#[test]
fn generated_keys_are_fresh_and_round_trip_through_base64() {
    for profile in SrtpProfile::ALL {
        let key = KeyMaterial::generate(profile).unwrap();
        let other = KeyMaterial::generate(profile).unwrap();
        let encoded = key.to_base64();
        assert_ne!(encoded, other.to_base64());
        assert_eq!(encoded.len(), 40, "RFC 4568 inline keys are 40 characters");
        let decoded = KeyMaterial::from_base64(profile, &encoded).unwrap();
        assert_eq!(decoded.to_base64(), encoded);
        assert_eq!(decoded.profile(), profile);
    }
}

#[test]
fn key_material_is_validated() {
    let cm = SrtpProfile::AesCm128HmacSha1_80;
    let gcm = SrtpProfile::AeadAes128Gcm;
    let cm_key = KeyMaterial::generate(cm).unwrap().to_base64();
    // 30 bytes is a valid AES-CM key but 2 bytes too long for GCM.
    for (profile, encoded) in [
        (gcm, cm_key.as_str()),
        (cm, ""),
        (cm, &cm_key[..36]),
        (cm, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"),
    ] {
        let err = KeyMaterial::from_base64(profile, encoded).unwrap_err();
        assert!(matches!(err, SrtpError::BadKey(_)), "{encoded:?}: {err}");
        assert_eq!(err.reason(), "bad_key");
    }
    assert!(KeyMaterial::from_bytes(cm, &[0; 29]).is_err());
    assert!(KeyMaterial::from_bytes(gcm, &[0; 28]).is_ok());
}

#[test]
fn debug_output_does_not_reveal_key_bytes() {
    let key = KeyMaterial::from_bytes(SrtpProfile::AeadAes128Gcm, &[0xab; 28]).unwrap();
    let debug = format!("{key:?}");
    assert!(debug.contains("redacted"), "{debug}");
    assert!(!debug.contains("171") && !debug.to_lowercase().contains("ab, "));
    assert!(!debug.contains(&key.to_base64()));
}

#[test]
fn session_rejects_keys_for_another_profile() {
    let cm = KeyMaterial::generate(SrtpProfile::AesCm128HmacSha1_80).unwrap();
    let gcm = KeyMaterial::generate(SrtpProfile::AeadAes128Gcm).unwrap();
    let err = SrtpSession::for_relay(SrtpProfile::AeadAes128Gcm, &cm, &gcm).unwrap_err();
    assert!(matches!(err, SrtpError::BadKey(_)), "{err}");
}

#[test]
fn rtp_round_trips_both_ways_for_both_profiles() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        for seq in [1, 2, 3] {
            let plain = rtp(seq, b"game state object");
            let protected = client.seal_rtp(&plain).unwrap();
            assert_eq!(protected.len(), plain.len() + profile.rtp_overhead());
            assert_eq!(protected[..12], plain[..12], "header stays in clear");
            assert_ne!(
                protected[12..plain.len()],
                plain[12..],
                "payload is encrypted"
            );
            assert_eq!(relay.open_rtp(&protected).unwrap(), plain[..]);

            let back = relay.seal_rtp(&plain).unwrap();
            assert_ne!(back, protected, "each direction has its own key");
            assert_eq!(client.open_rtp(&back).unwrap(), plain[..]);
        }
    }
}

#[test]
fn rtcp_round_trips_both_ways_for_both_profiles() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        for n in 0..3u8 {
            let plain = rtcp([n; 8]);
            let protected = client.seal_rtcp(&plain).unwrap();
            assert_eq!(protected.len(), plain.len() + profile.rtcp_overhead());
            assert_ne!(
                protected[8..plain.len()],
                plain[8..],
                "payload is encrypted"
            );
            assert_eq!(relay.open_rtcp(&protected).unwrap(), plain[..]);

            let back = relay.seal_rtcp(&plain).unwrap();
            assert_eq!(client.open_rtcp(&back).unwrap(), plain[..]);
        }
    }
}

#[test]
fn wrong_key_is_an_auth_failure() {
    for profile in SrtpProfile::ALL {
        let Pair { mut client, .. } = pair(profile);
        let Pair {
            relay: mut stranger,
            ..
        } = pair(profile);
        let err = stranger
            .open_rtp(&client.seal_rtp(&rtp(1, b"x")).unwrap())
            .unwrap_err();
        assert!(matches!(err, SrtpError::AuthFailed), "{profile}: {err}");
        assert_eq!(err.reason(), "auth_failed");
        let err = stranger
            .open_rtcp(&client.seal_rtcp(&rtcp([1; 8])).unwrap())
            .unwrap_err();
        assert!(matches!(err, SrtpError::AuthFailed), "{profile}: {err}");
    }
}

#[test]
fn replayed_packets_are_rejected() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        let packet = client.seal_rtp(&rtp(7, b"once")).unwrap();
        relay.open_rtp(&packet).unwrap();
        let err = relay.open_rtp(&packet).unwrap_err();
        assert!(matches!(err, SrtpError::Replay), "{profile}: {err}");
        assert_eq!(err.reason(), "replay");

        let packet = client.seal_rtcp(&rtcp([7; 8])).unwrap();
        relay.open_rtcp(&packet).unwrap();
        let err = relay.open_rtcp(&packet).unwrap_err();
        assert!(matches!(err, SrtpError::Replay), "{profile}: {err}");
    }
}

#[test]
fn reordering_within_the_window_is_accepted_and_older_is_replay() {
    let Pair {
        mut client,
        mut relay,
    } = pair(SrtpProfile::default());
    // Sealed first: the sender refuses to seal what is already behind its own window.
    let too_old = 1000 - REPLAY_WINDOW as u16 - 10;
    let late = client.seal_rtp(&rtp(too_old, b"late")).unwrap();
    // 900 is 100 behind the newest: outside a 64-packet window, inside ours.
    for seq in [1000, 998, 999, 900] {
        let packet = client.seal_rtp(&rtp(seq, b"r")).unwrap();
        assert!(relay.open_rtp(&packet).is_ok(), "seq {seq}");
    }
    assert!(matches!(relay.open_rtp(&late), Err(SrtpError::Replay)));
}

#[test]
fn the_sender_never_seals_an_index_twice() {
    for profile in SrtpProfile::ALL {
        let Pair { mut client, .. } = pair(profile);
        client.seal_rtp(&rtp(500, b"first")).unwrap();
        let mut again = rtp(500, b"other");
        let err = client.protect_rtp(&mut again).unwrap_err();
        assert!(matches!(err, SrtpError::IndexReuse), "{profile}: {err}");
        assert_eq!(err.reason(), "index_reuse");
        assert_eq!(again, rtp(500, b"other"), "left as it was");
        // Reordered but unused is fine; behind the window is not.
        client.seal_rtp(&rtp(499, b"reordered")).unwrap();
        client.seal_rtp(&rtp(700, b"ahead")).unwrap();
        let behind = 700 - REPLAY_WINDOW as u16;
        assert!(matches!(
            client.seal_rtp(&rtp(behind, b"old")),
            Err(SrtpError::IndexReuse)
        ));
        // After a rollover the same sequence number is a new index.
        for seq in [30_000, 60_000, 500] {
            client.seal_rtp(&rtp(seq, b"next round")).unwrap();
        }
    }
}

/// Sequence numbers wrap 65535 → 0 four times, in both directions: each side keeps its
/// rollover counter and the other follows it, through reordering across the wrap and
/// jumps of up to 30 000.
#[test]
fn sequence_rollover_carries_the_roc_both_ways() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        let mut first_round = None;
        for round in 0..4u8 {
            let payload = [round; 20];
            // The last one is new in each round, so round 0's stays unreplayed.
            for seq in [
                30_000,
                60_000,
                65_534,
                0,
                65_535,
                1,
                2,
                3 + u16::from(round),
            ] {
                let plain = rtp(seq, &payload);
                let up = client.seal_rtp(&plain).unwrap();
                assert_eq!(
                    relay.open_rtp(&up).unwrap(),
                    plain,
                    "{profile} up {round}/{seq}"
                );
                let down = relay.seal_rtp(&plain).unwrap();
                assert_eq!(
                    client.open_rtp(&down).unwrap(),
                    plain,
                    "{profile} down {round}/{seq}"
                );
                if seq == 3 {
                    first_round = Some(up);
                }
            }
        }
        // Round 0's seq 3 now maps to ROC 4, a fresh index: its tag (made with ROC 1)
        // fails.
        let stale = first_round.unwrap();
        assert!(matches!(relay.open_rtp(&stale), Err(SrtpError::AuthFailed)));
    }
}

/// Before the first genuine packet, forgeries with any sequence number or SRTCP index
/// leave no state behind: the genuine packets that follow all pass.
#[test]
fn forgeries_before_the_first_packet_leave_the_windows_alone() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        let Pair {
            client: mut forger, ..
        } = pair(profile);
        let first: u16 = 40_000;
        for seq in [
            first,
            first + 1,
            first + 200,
            first.wrapping_add(0x8000),
            first - 1_000,
        ] {
            let forged = forger.seal_rtp(&rtp(seq, b"forged")).unwrap();
            assert!(matches!(
                relay.open_rtp(&forged),
                Err(SrtpError::AuthFailed)
            ));
        }
        for _ in 0..3 {
            let mut forged = forger.seal_rtcp(&rtcp([9; 8])).unwrap();
            assert!(matches!(
                relay.open_rtcp(&forged),
                Err(SrtpError::AuthFailed)
            ));
            // The same with the largest SRTCP index.
            let word_at = match profile {
                SrtpProfile::AesCm128HmacSha1_80 => forged.len() - 14,
                SrtpProfile::AeadAes128Gcm => forged.len() - 4,
            };
            forged[word_at..word_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
            assert!(matches!(
                relay.open_rtcp(&forged),
                Err(SrtpError::AuthFailed)
            ));
        }
        for seq in first..first + 3 {
            let plain = rtp(seq, b"genuine");
            let packet = client.seal_rtp(&plain).unwrap();
            assert_eq!(
                relay.open_rtp(&packet).unwrap(),
                plain,
                "{profile} seq {seq}"
            );
            let plain = rtcp([seq as u8; 8]);
            let packet = client.seal_rtcp(&plain).unwrap();
            assert_eq!(relay.open_rtcp(&packet).unwrap(), plain, "{profile} rtcp");
        }
    }
}

#[test]
fn a_forged_packet_does_not_use_up_its_sequence_number() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        let genuine = client.seal_rtp(&rtp(5, b"genuine")).unwrap();
        let mut forged = genuine.clone();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        assert!(matches!(
            relay.open_rtp(&forged),
            Err(SrtpError::AuthFailed)
        ));
        assert_eq!(relay.open_rtp(&genuine).unwrap(), rtp(5, b"genuine")[..]);
    }
}

/// Our peers always encrypt SRTCP, so a clear E flag is refused whatever its tag.
#[test]
fn srtcp_claiming_to_be_unencrypted_is_refused() {
    for profile in SrtpProfile::ALL {
        let Pair { mut relay, .. } = pair(profile);
        let index_word = 1u32.to_be_bytes(); // E = 0, index 1
        let tag = vec![0; profile.rtp_overhead()];
        let mut forged = rtcp([0; 8]);
        // RFC 7714 puts the GCM tag before the index word, RFC 3711 the HMAC tag after it.
        match profile {
            SrtpProfile::AesCm128HmacSha1_80 => forged.extend([&index_word[..], &tag].concat()),
            SrtpProfile::AeadAes128Gcm => forged.extend([&tag[..], &index_word].concat()),
        }
        let err = relay.open_rtcp(&forged).unwrap_err();
        assert!(matches!(err, SrtpError::AuthFailed), "{profile}: {err}");
    }
}

#[test]
fn short_input_is_too_short() {
    for profile in SrtpProfile::ALL {
        let Pair {
            mut client,
            mut relay,
        } = pair(profile);
        for len in [0, 1, 11] {
            let junk = vec![0x80; len];
            let err = relay.open_rtp(&junk).unwrap_err();
            assert!(matches!(err, SrtpError::TooShort), "rtp {len}: {err}");
            assert_eq!(err.reason(), "too_short");
            assert!(matches!(client.seal_rtp(&junk), Err(SrtpError::TooShort)));
        }
        // A bare RTP header with no room for the tag.
        let header_only = client.seal_rtp(&rtp(1, b"")).unwrap();
        let cut = &header_only[..header_only.len() - 1];
        let err = relay.open_rtp(cut).unwrap_err();
        assert!(matches!(err, SrtpError::TooShort), "{profile}: {err:?}");
        for len in [0, 7, 8 + profile.rtcp_overhead() - 1] {
            let junk = vec![0x80; len];
            let err = relay.open_rtcp(&junk).unwrap_err();
            assert!(matches!(err, SrtpError::TooShort), "rtcp {len}: {err}");
        }
        assert!(matches!(
            client.seal_rtcp(&[0x80, 200, 0]),
            Err(SrtpError::TooShort)
        ));
    }
}

fn any_profile() -> impl Strategy<Value = SrtpProfile> {
    prop::sample::select(SrtpProfile::ALL.to_vec())
}

proptest! {
    #[test]
    fn protecting_into_any_buffer_is_a_result_not_a_panic(
        profile in any_profile(),
        mut buf in prop::collection::vec(any::<u8>(), 0..80),
        len in 0..100usize,
    ) {
        let Pair { mut client, .. } = pair(profile);
        if let Ok(n) = client.protect_rtp_slice(&mut buf, len) {
            prop_assert_eq!(n, len + profile.rtp_overhead());
        }
        if let Ok(n) = client.protect_rtcp_slice(&mut buf, len) {
            prop_assert_eq!(n, len + profile.rtcp_overhead());
        }
    }

    #[test]
    fn a_truncated_packet_is_rejected(
        profile in any_profile(),
        rtcp_packet in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let Pair { mut client, mut relay } = pair(profile);
        let protected = if rtcp_packet {
            client.seal_rtcp(&rtcp([3; 8])).unwrap()
        } else {
            client.seal_rtp(&rtp(9, b"some payload bytes")).unwrap()
        };
        let short = &protected[..cut.index(protected.len())];
        let result = if rtcp_packet { relay.open_rtcp(short) } else { relay.open_rtp(short) };
        prop_assert!(result.is_err());
        // The whole packet still passes: the attempts moved no state.
        let result = if rtcp_packet { relay.open_rtcp(&protected) } else { relay.open_rtp(&protected) };
        prop_assert!(result.is_ok());
    }

    #[test]
    fn random_bytes_are_an_error_not_a_panic(
        profile in any_profile(),
        bytes in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let Pair { mut client, mut relay } = pair(profile);
        prop_assert!(relay.open_rtp(&bytes).is_err());
        prop_assert!(relay.open_rtcp(&bytes).is_err());
        // Outbound input is the relay's own, but it must not panic either.
        let _ = client.seal_rtp(&bytes);
        let _ = client.seal_rtcp(&bytes);
    }

    #[test]
    fn any_single_byte_change_is_rejected(
        profile in any_profile(),
        rtcp_packet in any::<bool>(),
        payload in prop::collection::vec(any::<u8>(), 8..64),
        at in any::<prop::sample::Index>(),
        flip in 1..=255u8,
    ) {
        let Pair { mut client, mut relay } = pair(profile);
        let mut protected = if rtcp_packet {
            let mut plain = rtcp([0; 8]);
            plain.extend_from_slice(&payload[..8]);
            plain[3] = 6;
            client.seal_rtcp(&plain).unwrap()
        } else {
            client.seal_rtp(&rtp(1, &payload)).unwrap()
        };
        let at = at.index(protected.len());
        protected[at] ^= flip;
        let result = if rtcp_packet {
            relay.open_rtcp(&protected)
        } else {
            relay.open_rtp(&protected)
        };
        prop_assert!(result.is_err(), "byte {} changed yet accepted", at);
    }
}
