//! What the fuzz targets and the seed writer share: how an input's first byte picks a
//! variant, and the fixed SRTP keys.

use gsrelay_core::rtp::{KeyMaterial, SrtpProfile, SrtpSession};
use gsrelay_core::wire::Dialect;

/// The dialect an input's first byte selects (its low bit).
pub fn dialect(selector: u8) -> Dialect {
    if selector & 1 == 0 {
        Dialect::Draft01
    } else {
        Dialect::Gse
    }
}

/// The selector byte for `dialect`, the inverse of [`dialect`].
pub fn dialect_selector(dialect: Dialect) -> u8 {
    match dialect {
        Dialect::Draft01 => 0,
        Dialect::Gse => 1,
    }
}

/// Flags of the `srtp` target's first byte.
pub mod srtp_flags {
    /// AEAD_AES_128_GCM instead of AES_CM_128_HMAC_SHA1_80.
    pub const GCM: u8 = 1;
    /// The packet is SRTCP, not SRTP.
    pub const RTCP: u8 = 2;
    /// The rest is plaintext to protect on the client side first (a round trip), not
    /// bytes to unprotect as they are.
    pub const PROTECT_FIRST: u8 = 4;
}

/// The profile the `srtp` target's first byte selects.
pub fn srtp_profile(flags: u8) -> SrtpProfile {
    if flags & srtp_flags::GCM == 0 {
        SrtpProfile::AesCm128HmacSha1_80
    } else {
        SrtpProfile::AeadAes128Gcm
    }
}

/// Fixed key material (deterministic, so a crash reproduces): `seed` fills every byte.
fn key(profile: SrtpProfile, seed: u8) -> KeyMaterial {
    let bytes: Vec<u8> = (0..profile.key_material_len())
        .map(|i| seed.wrapping_add(i as u8))
        .collect();
    KeyMaterial::from_bytes(profile, &bytes).expect("fixed key has the profile's length")
}

/// The relay's side of a session with the fixed keys: unprotects what the client sends.
pub fn srtp_relay(profile: SrtpProfile) -> SrtpSession {
    SrtpSession::for_relay(profile, &key(profile, CLIENT), &key(profile, RELAY))
        .expect("fixed keys")
}

/// The client's side of the same session: protects what the relay's side unprotects.
pub fn srtp_client(profile: SrtpProfile) -> SrtpSession {
    SrtpSession::for_client(profile, &key(profile, CLIENT), &key(profile, RELAY))
        .expect("fixed keys")
}

/// Seeds of the fixed client and relay keys.
const CLIENT: u8 = 0x10;
const RELAY: u8 = 0x80;
