//! The SRTP key derivation function (RFC 3711 §4.3, with the AES-CM PRF of §4.3.3): the
//! session keys and salts of one direction, derived once from its master key and salt.
//!
//! The key derivation rate is 0 (the default, and all the join answer allows), so each
//! session key is derived once, at index 0. The AEAD_AES_128_GCM master salt is 12 bytes
//! (RFC 7714 §11); it is padded with zeros to the PRF's 112 bits, as libsrtp does.

use aes::Aes128;
use aes::cipher::{KeyIvInit, StreamCipher};
use zeroize::Zeroizing;

/// What a derived key is for: the `label` of RFC 3711 §4.3.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Label {
    SrtpEncryption = 0x00,
    SrtpAuthentication = 0x01,
    SrtpSalt = 0x02,
    SrtcpEncryption = 0x03,
    SrtcpAuthentication = 0x04,
    SrtcpSalt = 0x05,
}

/// The longest master salt (AES-CM's 112 bits).
const MAX_SALT: usize = 14;

/// The PRF input is `x * 2^16`: 14 bytes then the 16-bit block counter.
type Ctr = ctr::Ctr128BE<Aes128>;

/// A master key and salt, ready to derive session keys from.
pub(super) struct Kdf {
    key: Zeroizing<[u8; 16]>,
    salt: Zeroizing<[u8; MAX_SALT]>,
}

impl Kdf {
    /// `salt` is the master salt: 14 bytes (AES-CM) or 12 (GCM), at most [`MAX_SALT`].
    pub(super) fn new(key: &[u8; 16], salt: &[u8]) -> Self {
        let mut padded = Zeroizing::new([0; MAX_SALT]);
        let n = salt.len().min(MAX_SALT);
        padded[..n].copy_from_slice(&salt[..n]);
        Self {
            key: Zeroizing::new(*key),
            salt: padded,
        }
    }

    /// Derives the `N`-byte session key for `label`: the AES-CM keystream under the
    /// master key, from `x = master_salt XOR (label || r)` with `r = 0`.
    pub(super) fn derive<const N: usize>(&self, label: Label) -> Zeroizing<[u8; N]> {
        let mut iv = [0u8; 16];
        iv[..MAX_SALT].copy_from_slice(&*self.salt);
        // key_id = label || r (48 bits) is right-aligned on the 112-bit salt.
        iv[MAX_SALT - 7] ^= label as u8;
        let mut out = Zeroizing::new([0u8; N]);
        Ctr::new((&*self.key).into(), &iv.into()).apply_keystream(&mut *out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex<const N: usize>(s: &str) -> [u8; N] {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    /// RFC 3711 Appendix B.3.
    #[test]
    fn rfc_3711_b3_key_derivation() {
        let kdf = Kdf::new(
            &unhex("E1F97A0D3E018BE0D64FA32C06DE4139"),
            &unhex::<14>("0EC675AD498AFEEBB6960B3AABE6"),
        );
        assert_eq!(
            *kdf.derive::<16>(Label::SrtpEncryption),
            unhex::<16>("C61E7A93744F39EE10734AFE3FF7A087")
        );
        assert_eq!(
            *kdf.derive::<14>(Label::SrtpSalt),
            unhex::<14>("30CBBC08863D8C85D49DB34A9AE1")
        );
        assert_eq!(
            *kdf.derive::<20>(Label::SrtpAuthentication),
            unhex::<20>("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4")
        );
    }
}
