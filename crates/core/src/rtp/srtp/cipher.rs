//! The two SRTP transforms, keyed once: AES-128 counter mode with HMAC-SHA1-80
//! (RFC 3711 §4.1.1, §4.2.1) and AES-128-GCM (RFC 7714). Each works in the caller's
//! buffer, given the packet index; choosing and checking indexes is the session's job.
//!
//! Keyed once means: the AES key schedules are expanded when the session is made
//! (RustCrypto's `Aes128Enc` for AES-CM, ring's `LessSafeKey` for GCM), and HMAC's inner
//! and outer pads are hashed then too; each packet clones the AES-CM and HMAC state (a
//! few hundred bytes on the stack, no allocation). GCM is ring's because it measured
//! about 4 times faster than RustCrypto's `aes-gcm` on 1 200-byte packets.
//!
//! On the accelerated backend ([`SrtpBackend::Accelerated`]) AES-CM's keystream comes from
//! the VAES/AVX-512 kernel (`accel`) instead of `aes`; everything else is the same on both
//! backends, because it already runs on the CPU's best instructions: `sha1` picks SHA-NI
//! at run time, and ring's GCM picks its VAES + VPCLMULQDQ code at run time.

use aes::Aes128Enc;
use aes::cipher::{InnerIvInit, KeyInit, StreamCipher};
use hmac::{Hmac, Mac};
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use sha1::Sha1;
use zeroize::Zeroizing;

use super::accel::VaesCtr;
use super::kdf::{Kdf, Label};
use super::{SrtpBackend, SrtpError, SrtpProfile};

/// HMAC-SHA1-80's tag: the left 80 bits.
const HMAC_TAG: usize = 10;
/// GCM's tag (RFC 7714 §5: 16 octets).
const GCM_TAG: usize = 16;
/// The SRTCP word holding the E flag and the 31-bit index.
const SRTCP_WORD: usize = 4;
/// The E flag: the SRTCP payload is encrypted.
pub(super) const SRTCP_E_FLAG: u32 = 1 << 31;
/// RTCP header and sender SSRC: the part of an SRTCP packet never encrypted.
pub(super) const SRTCP_CLEAR: usize = 8;

type Ctr = ctr::Ctr128BE<Aes128Enc>;
type CtrCore = ctr::CtrCore<Aes128Enc, ctr::flavors::Ctr128BE>;

/// The one way GCM sealing fails: a plaintext over 2^36 - 32 bytes, which no datagram is.
const TOO_LONG_FOR_GCM: &str = "too long for AES-GCM";

/// One transform's session keys (SRTP or SRTCP, one direction).
#[expect(
    clippy::large_enum_variant,
    reason = "four per session, inside the session's own box: boxing a variant would add a \
              pointer chase per packet to save a few hundred bytes per session"
)]
pub(super) enum Cipher {
    /// AES_CM_128_HMAC_SHA1_80.
    AesCm {
        aes: AesCm128,
        /// The 112-bit session salt.
        salt: [u8; 14],
        mac: Hmac<Sha1>,
    },
    /// AEAD_AES_128_GCM.
    Gcm {
        aead: LessSafeKey,
        /// The 96-bit session salt.
        salt: [u8; 12],
    },
}

impl Cipher {
    /// Derives the SRTP (`srtcp` false) or SRTCP session keys from a master key and salt.
    pub(super) fn derive(
        profile: SrtpProfile,
        kdf: &Kdf,
        srtcp: bool,
        backend: SrtpBackend,
    ) -> Result<Self, SrtpError> {
        let [enc, auth, salt] = if srtcp {
            [
                Label::SrtcpEncryption,
                Label::SrtcpAuthentication,
                Label::SrtcpSalt,
            ]
        } else {
            [
                Label::SrtpEncryption,
                Label::SrtpAuthentication,
                Label::SrtpSalt,
            ]
        };
        let key = kdf.derive::<16>(enc);
        match profile {
            SrtpProfile::AesCm128HmacSha1_80 => Ok(Self::aes_cm(
                &key,
                &kdf.derive::<14>(salt),
                &kdf.derive::<20>(auth),
                backend,
            )),
            SrtpProfile::AeadAes128Gcm => Self::gcm(&key, &kdf.derive::<12>(salt)),
        }
    }

    /// An AES-CM/HMAC-SHA1 transform from its session keys, on `backend`.
    pub(super) fn aes_cm(
        key: &[u8; 16],
        salt: &[u8; 14],
        auth: &[u8; 20],
        backend: SrtpBackend,
    ) -> Self {
        Self::AesCm {
            aes: AesCm128::new(key, backend),
            salt: *salt,
            mac: hmac_sha1(auth),
        }
    }

    /// An AES-GCM transform from its session keys.
    pub(super) fn gcm(key: &[u8; 16], salt: &[u8; 12]) -> Result<Self, SrtpError> {
        let key = UnboundKey::new(&AES_128_GCM, key)
            .map_err(|_| SrtpError::BadKey("AES-128-GCM key is not 16 bytes".into()))?;
        Ok(Self::Gcm {
            aead: LessSafeKey::new(key),
            salt: *salt,
        })
    }

    /// Bytes the tag adds.
    pub(super) fn tag_len(&self) -> usize {
        match self {
            Self::AesCm { .. } => HMAC_TAG,
            Self::Gcm { .. } => GCM_TAG,
        }
    }

    /// Seals an RTP packet in place: `packet` is the `header`-byte RTP header, the payload,
    /// then [`tag_len`](Self::tag_len) bytes for the tag, which this writes.
    pub(super) fn seal_rtp(
        &self,
        packet: &mut [u8],
        header: usize,
        ssrc: u32,
        index: u64,
    ) -> Result<(), SrtpError> {
        let (body, tag) = split_tail(packet, self.tag_len())?;
        match self {
            Self::AesCm { aes, salt, mac } => {
                let payload = body.get_mut(header..).ok_or(SrtpError::TooShort)?;
                keystream(aes, salt, ssrc, index, payload);
                tag.copy_from_slice(&hmac_tag(mac, body, Some(roc(index))));
            }
            Self::Gcm { aead, salt } => {
                let (aad, payload) = split_head(body, header)?;
                let sealed = aead
                    .seal_in_place_separate_tag(
                        rtp_nonce(salt, ssrc, index),
                        Aad::from(aad),
                        payload,
                    )
                    .map_err(|_| SrtpError::Malformed(TOO_LONG_FOR_GCM))?;
                tag.copy_from_slice(sealed.as_ref());
            }
        }
        Ok(())
    }

    /// Authenticates and decrypts an SRTP packet in place; returns the RTP packet's
    /// length. A packet that fails keeps its ciphertext (AES-CM) or has it zeroed (GCM).
    pub(super) fn open_rtp(
        &self,
        packet: &mut [u8],
        header: usize,
        ssrc: u32,
        index: u64,
    ) -> Result<usize, SrtpError> {
        let (body, tag) = split_tail(packet, self.tag_len())?;
        match self {
            Self::AesCm { aes, salt, mac } => {
                verify_hmac(mac, body, Some(roc(index)), tag)?;
                let payload = body.get_mut(header..).ok_or(SrtpError::TooShort)?;
                keystream(aes, salt, ssrc, index, payload);
            }
            Self::Gcm { aead, salt } => {
                let (aad, payload) = split_head(body, header)?;
                let nonce = rtp_nonce(salt, ssrc, index);
                aead.open_in_place_separate_tag(nonce, Aad::from(aad), gcm_tag(tag)?, payload, 0..)
                    .map_err(|_| SrtpError::AuthFailed)?;
            }
        }
        Ok(body.len())
    }

    /// Seals an RTCP packet of `len` bytes in place with SRTCP index `index`; `packet` has
    /// room for the E flag and index word and the tag after it.
    pub(super) fn seal_rtcp(
        &self,
        packet: &mut [u8],
        len: usize,
        ssrc: u32,
        index: u32,
    ) -> Result<(), SrtpError> {
        let word = (SRTCP_E_FLAG | index).to_be_bytes();
        match self {
            // RFC 3711 §3.4: header | encrypted | E+index | tag.
            Self::AesCm { aes, salt, mac } => {
                let (signed, tag) = split_tail(packet, HMAC_TAG)?;
                let (plain, word_at) = split_head(signed, len)?;
                let encrypted = plain.get_mut(SRTCP_CLEAR..).ok_or(SrtpError::TooShort)?;
                keystream(aes, salt, ssrc, u64::from(index), encrypted);
                word_at.copy_from_slice(&word);
                tag.copy_from_slice(&hmac_tag(mac, signed, None));
            }
            // RFC 7714 §9: header | encrypted | tag | E+index, with header and E+index as AAD.
            Self::Gcm { aead, salt } => {
                let (rest, word_at) = split_tail(packet, SRTCP_WORD)?;
                let (plain, tag) = split_head(rest, len)?;
                let (clear, encrypted) = split_head(plain, SRTCP_CLEAR)?;
                let aad = Aad::from(srtcp_aad(clear, word));
                let sealed = aead
                    .seal_in_place_separate_tag(rtcp_nonce(salt, ssrc, index), aad, encrypted)
                    .map_err(|_| SrtpError::Malformed(TOO_LONG_FOR_GCM))?;
                tag.copy_from_slice(sealed.as_ref());
                word_at.copy_from_slice(&word);
            }
        }
        Ok(())
    }

    /// The E flag and index word of an SRTCP packet, if it is long enough to hold one.
    pub(super) fn srtcp_word(&self, packet: &[u8]) -> Option<u32> {
        let end = match self {
            Self::AesCm { .. } => packet.len().checked_sub(HMAC_TAG)?,
            Self::Gcm { .. } => packet.len(),
        };
        let at = end.checked_sub(SRTCP_WORD)?;
        Some(u32::from_be_bytes(packet.get(at..end)?.try_into().ok()?))
    }

    /// Authenticates and decrypts an SRTCP packet with the E flag set, in place; returns
    /// the RTCP packet's length. A packet that fails keeps its ciphertext (AES-CM) or has
    /// it zeroed (GCM).
    pub(super) fn open_rtcp(
        &self,
        packet: &mut [u8],
        ssrc: u32,
        index: u32,
    ) -> Result<usize, SrtpError> {
        match self {
            Self::AesCm { aes, salt, mac } => {
                let (signed, tag) = split_tail(packet, HMAC_TAG)?;
                verify_hmac(mac, signed, None, tag)?;
                let (plain, _word) = split_tail(signed, SRTCP_WORD)?;
                let len = plain.len();
                let encrypted = plain.get_mut(SRTCP_CLEAR..).ok_or(SrtpError::TooShort)?;
                keystream(aes, salt, ssrc, u64::from(index), encrypted);
                Ok(len)
            }
            Self::Gcm { aead, salt } => {
                let (rest, word) = split_tail(packet, SRTCP_WORD)?;
                let (plain, tag) = split_tail(rest, GCM_TAG)?;
                let len = plain.len();
                let (clear, encrypted) = split_head(plain, SRTCP_CLEAR)?;
                let word = <[u8; SRTCP_WORD]>::try_from(&*word).map_err(|_| SrtpError::TooShort)?;
                let aad = Aad::from(srtcp_aad(clear, word));
                let nonce = rtcp_nonce(salt, ssrc, index);
                aead.open_in_place_separate_tag(nonce, aad, gcm_tag(tag)?, encrypted, 0..)
                    .map_err(|_| SrtpError::AuthFailed)?;
                Ok(len)
            }
        }
    }
}

/// HMAC-SHA1 keyed with a 160-bit key. HMAC pads a key shorter than the hash's 64-byte
/// block with zeros (RFC 2104 §2), which this does itself to use the infallible `new`.
fn hmac_sha1(key: &[u8; 20]) -> Hmac<Sha1> {
    let mut block = Zeroizing::new([0u8; 64]);
    block[..key.len()].copy_from_slice(key);
    <Hmac<Sha1> as KeyInit>::new(&(*block).into())
}

/// The ROC part of an SRTP index.
fn roc(index: u64) -> u32 {
    (index >> 16) as u32 // the index has 48 bits: the ROC is the top 32
}

/// AES-128 keyed once for SRTP's counter mode: RustCrypto's `aes` (AES-NI when the CPU has
/// it), and the VAES/AVX-512 kernel beside it when the backend is accelerated and the CPU
/// has VAES and AVX-512.
pub(super) struct AesCm128 {
    portable: Aes128Enc,
    vaes: Option<VaesCtr>,
}

impl AesCm128 {
    pub(super) fn new(key: &[u8; 16], backend: SrtpBackend) -> Self {
        Self {
            portable: Aes128Enc::new(key.into()),
            vaes: match backend {
                SrtpBackend::Accelerated => VaesCtr::new(key),
                SrtpBackend::Portable => None,
            },
        }
    }

    /// Whether the keystream comes from the VAES kernel.
    #[cfg(test)]
    pub(super) fn accelerated(&self) -> bool {
        self.vaes.is_some()
    }

    /// XORs onto `data` the keystream from the 128-bit counter block `iv`, whose last two
    /// bytes are zero (RFC 3711 §4.1.1: the IV is shifted left 16 bits for the block
    /// counter).
    fn apply(&self, iv: &[u8; 16], data: &mut [u8]) {
        if let Some(vaes) = &self.vaes {
            let mut prefix = [0u8; 14];
            prefix.copy_from_slice(&iv[..14]);
            // Only an input of over 2^16 blocks, which no datagram is, goes on below.
            if vaes.apply(&prefix, data) {
                return;
            }
        }
        let core = CtrCore::inner_iv_init(self.portable.clone(), &(*iv).into());
        Ctr::from_core(core).apply_keystream(data);
    }
}

/// XORs the AES-CM keystream for (`ssrc`, `index`) onto `data` (RFC 3711 §4.1.1):
/// `IV = (k_s * 2^16) XOR (SSRC * 2^64) XOR (i * 2^16)`.
fn keystream(aes: &AesCm128, salt: &[u8; 14], ssrc: u32, index: u64, data: &mut [u8]) {
    let mut iv = [0u8; 16];
    iv[..14].copy_from_slice(salt);
    xor(&mut iv[4..8], &ssrc.to_be_bytes());
    xor(&mut iv[8..14], &index.to_be_bytes()[2..]);
    aes.apply(&iv, data);
}

/// The keyed HMAC-SHA1 state `mac` (cloned) over `data`, then the ROC for SRTP.
fn hmac(mac: &Hmac<Sha1>, data: &[u8], roc: Option<u32>) -> Hmac<Sha1> {
    let mut mac = mac.clone();
    mac.update(data);
    if let Some(roc) = roc {
        mac.update(&roc.to_be_bytes());
    }
    mac
}

/// The 80-bit HMAC-SHA1 tag (RFC 3711 §4.2.1).
fn hmac_tag(mac: &Hmac<Sha1>, data: &[u8], roc: Option<u32>) -> [u8; HMAC_TAG] {
    let full = hmac(mac, data, roc).finalize().into_bytes();
    let mut tag = [0u8; HMAC_TAG];
    tag.copy_from_slice(&full[..HMAC_TAG]);
    tag
}

/// Checks an 80-bit HMAC-SHA1 tag in constant time.
fn verify_hmac(
    mac: &Hmac<Sha1>,
    data: &[u8],
    roc: Option<u32>,
    tag: &[u8],
) -> Result<(), SrtpError> {
    hmac(mac, data, roc)
        .verify_truncated_left(tag)
        .map_err(|_| SrtpError::AuthFailed)
}

/// RFC 7714 §8.1: `IV = (00 00 || SSRC || ROC || SEQ) XOR salt`; ROC || SEQ is the index.
fn rtp_nonce(salt: &[u8; 12], ssrc: u32, index: u64) -> Nonce {
    let mut iv = [0u8; 12];
    iv[2..6].copy_from_slice(&ssrc.to_be_bytes());
    iv[6..12].copy_from_slice(&index.to_be_bytes()[2..]);
    xor(&mut iv, salt);
    // Unique per key: the session never seals an (SSRC, index) twice.
    Nonce::assume_unique_for_key(iv)
}

/// RFC 7714 §9.1: `IV = (00 00 || SSRC || 00 00 || 0 || SRTCP index) XOR salt`.
fn rtcp_nonce(salt: &[u8; 12], ssrc: u32, index: u32) -> Nonce {
    let mut iv = [0u8; 12];
    iv[2..6].copy_from_slice(&ssrc.to_be_bytes());
    iv[8..12].copy_from_slice(&index.to_be_bytes());
    xor(&mut iv, salt);
    // Unique per key: the session never seals an (SSRC, index) twice.
    Nonce::assume_unique_for_key(iv)
}

/// RFC 7714 §9.2: the SRTCP AAD is the clear header and sender SSRC, then E+index.
fn srtcp_aad(clear: &[u8], word: [u8; SRTCP_WORD]) -> [u8; SRTCP_CLEAR + SRTCP_WORD] {
    let mut aad = [0u8; SRTCP_CLEAR + SRTCP_WORD];
    aad[..SRTCP_CLEAR].copy_from_slice(clear);
    aad[SRTCP_CLEAR..].copy_from_slice(&word);
    aad
}

/// A received GCM tag.
fn gcm_tag(tag: &[u8]) -> Result<Tag, SrtpError> {
    Tag::try_from(tag).map_err(|_| SrtpError::TooShort)
}

fn xor(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

/// `buf` split before its last `n` bytes.
fn split_tail(buf: &mut [u8], n: usize) -> Result<(&mut [u8], &mut [u8]), SrtpError> {
    let at = buf.len().checked_sub(n).ok_or(SrtpError::TooShort)?;
    Ok(buf.split_at_mut(at))
}

/// `buf` split after its first `n` bytes.
fn split_head(buf: &mut [u8], n: usize) -> Result<(&mut [u8], &mut [u8]), SrtpError> {
    buf.split_at_mut_checked(n).ok_or(SrtpError::TooShort)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s.split_whitespace().collect::<String>()).unwrap()
    }

    fn array<const N: usize>(s: &str) -> [u8; N] {
        unhex(s).try_into().unwrap()
    }

    /// RFC 7714 §16.1.1 and §17.1 session key and salt ("Quid pro quo").
    fn rfc_7714() -> Cipher {
        Cipher::gcm(
            &array("000102030405060708090a0b0c0d0e0f"),
            &array("517569642070726f2071756f"),
        )
        .unwrap()
    }

    /// RFC 3711 Appendix B.2: SSRC 0 and index 0 turn zeros into the keystream itself; on
    /// both backends.
    #[test]
    fn rfc_3711_b2_aes_cm_keystream() {
        for backend in SrtpBackend::ALL {
            let aes = AesCm128::new(&array("2B7E151628AED2A6ABF7158809CF4F3C"), backend);
            let mut data = [0u8; 48];
            keystream(
                &aes,
                &array("F0F1F2F3F4F5F6F7F8F9FAFBFCFD"),
                0,
                0,
                &mut data,
            );
            let expected = unhex(
                "E03EAD0935C95E80E166B16DD92B4EB4 D23513162B02D0F72A43A2FE4A5F97AB
                 41E95B3BB0A2E8DD477901E4FCA894C0",
            );
            assert_eq!(data[..], expected[..], "{backend:?}");
        }
    }

    /// RFC 7714 §16.1.1: an RTP packet with ROC 0, sequence number 0xf17b.
    #[test]
    fn rfc_7714_16_1_1_rtp() {
        let plain = unhex(
            "8040f17b 8041f8d3 5501a0b2 47616c6c 69612065 7374206f 6d6e6973 20646976
             69736120 696e2070 61727465 73207472 6573",
        );
        let protected = unhex(
            "8040f17b 8041f8d3 5501a0b2 f24de3a3 fb34de6c acba861c 9d7e4bca be633bd5
             0d294e6f 42a5f47a 51c7d19b 36de3adf 8833899d 7f27beb1 6a9152cf 765ee439
             0cce",
        );
        let (ssrc, index) = (0x5501_a0b2, 0xf17b);
        let mut buf = plain.clone();
        buf.resize(protected.len(), 0);
        rfc_7714().seal_rtp(&mut buf, 12, ssrc, index).unwrap();
        assert_eq!(hex::encode(&buf), hex::encode(&protected));
        let len = rfc_7714().open_rtp(&mut buf, 12, ssrc, index).unwrap();
        assert_eq!(buf[..len], plain[..]);
    }

    /// RFC 7714 §17.1: an SRTCP packet with SRTCP index 0x5d4.
    #[test]
    fn rfc_7714_17_1_rtcp() {
        let plain = unhex(
            "81c8000d 4d617273 4e545031 4e545032 52545020 0000042a 0000e930 4c756e61
             deadbeef deadbeef deadbeef deadbeef deadbeef",
        );
        let protected = unhex(
            "81c8000d 4d617273 63e94885 dcdab67c a727d766 2f6b7e99 7ff5c0f7 6c06f32d
             c676a5f1 730d6fda 4ce09b46 86303ded 0bb9275b c84aa458 96cf4d2f c5abf872
             45d9eade 800005d4",
        );
        let (ssrc, index) = (0x4d61_7273, 0x5d4);
        let mut buf = plain.clone();
        buf.resize(protected.len(), 0);
        rfc_7714()
            .seal_rtcp(&mut buf, plain.len(), ssrc, index)
            .unwrap();
        assert_eq!(hex::encode(&buf), hex::encode(&protected));
        assert_eq!(rfc_7714().srtcp_word(&buf), Some(SRTCP_E_FLAG | index));
        let len = rfc_7714().open_rtcp(&mut buf, ssrc, index).unwrap();
        assert_eq!(buf[..len], plain[..]);
    }

    #[test]
    fn a_failed_open_reveals_no_plaintext() {
        let portable = Cipher::aes_cm(&[1; 16], &[2; 14], &[3; 20], SrtpBackend::Portable);
        let fast = Cipher::aes_cm(&[1; 16], &[2; 14], &[3; 20], SrtpBackend::Accelerated);
        for cipher in [portable, fast, rfc_7714()] {
            let mut packet = vec![0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7];
            packet.extend_from_slice(b"payload");
            packet.resize(packet.len() + cipher.tag_len(), 0);
            cipher.seal_rtp(&mut packet, 12, 7, 1).unwrap();
            let last = packet.len() - 1;
            packet[last] ^= 1;
            assert!(matches!(
                cipher.open_rtp(&mut packet, 12, 7, 1),
                Err(SrtpError::AuthFailed)
            ));
            assert!(!packet.windows(7).any(|w| w == b"payload"));
        }
    }
}

/// The accelerated and the portable backend give the same bytes: random keys, packets,
/// header lengths, SSRCs and indexes, both profiles, RTP and RTCP, sealing and opening.
#[cfg(test)]
mod backend_props {
    use super::*;
    use proptest::prelude::*;

    /// One transform on each backend from the same session keys.
    fn pair(profile: SrtpProfile, key: [u8; 16], salt: [u8; 14], auth: [u8; 20]) -> [Cipher; 2] {
        SrtpBackend::ALL.map(|backend| match profile {
            SrtpProfile::AesCm128HmacSha1_80 => Cipher::aes_cm(&key, &salt, &auth, backend),
            SrtpProfile::AeadAes128Gcm => {
                let mut gcm_salt = [0u8; 12];
                gcm_salt.copy_from_slice(&salt[..12]);
                Cipher::gcm(&key, &gcm_salt).expect("16-byte key")
            }
        })
    }

    fn profile() -> impl Strategy<Value = SrtpProfile> {
        prop_oneof![
            Just(SrtpProfile::AesCm128HmacSha1_80),
            Just(SrtpProfile::AeadAes128Gcm)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn rtp_is_the_same_on_both_backends(
            profile in profile(),
            key: [u8; 16],
            salt: [u8; 14],
            auth: [u8; 20],
            header_words in 3usize..8,
            payload in proptest::collection::vec(any::<u8>(), 0..1500),
            ssrc: u32,
            index in 0u64..(1 << 48),
        ) {
            let [fast, portable] = pair(profile, key, salt, auth);
            prop_assert_eq!(fast.tag_len(), portable.tag_len());
            let header = 4 * header_words;
            let mut plain = vec![0x80u8; header];
            plain.extend_from_slice(&payload);
            plain.resize(plain.len() + fast.tag_len(), 0);
            let (mut a, mut b) = (plain.clone(), plain.clone());
            fast.seal_rtp(&mut a, header, ssrc, index).expect("seal");
            portable.seal_rtp(&mut b, header, ssrc, index).expect("seal");
            prop_assert_eq!(&a, &b);
            // Each opens what the other sealed.
            let len = fast.open_rtp(&mut b, header, ssrc, index).expect("open");
            prop_assert_eq!(&b[..len], &plain[..len]);
            let len = portable.open_rtp(&mut a, header, ssrc, index).expect("open");
            prop_assert_eq!(&a[..len], &plain[..len]);
        }

        #[test]
        fn rtcp_is_the_same_on_both_backends(
            profile in profile(),
            key: [u8; 16],
            salt: [u8; 14],
            auth: [u8; 20],
            body in proptest::collection::vec(any::<u8>(), SRTCP_CLEAR..1500),
            ssrc: u32,
            index in 0u32..(1 << 31),
        ) {
            let [fast, portable] = pair(profile, key, salt, auth);
            let len = body.len();
            let mut plain = body;
            plain.resize(len + SRTCP_WORD + fast.tag_len(), 0);
            let (mut a, mut b) = (plain.clone(), plain.clone());
            fast.seal_rtcp(&mut a, len, ssrc, index).expect("seal");
            portable.seal_rtcp(&mut b, len, ssrc, index).expect("seal");
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(fast.open_rtcp(&mut b, ssrc, index).expect("open"), len);
            prop_assert_eq!(&b[..len], &plain[..len]);
            prop_assert_eq!(portable.open_rtcp(&mut a, ssrc, index).expect("open"), len);
            prop_assert_eq!(&a[..len], &plain[..len]);
        }
    }

    /// On a CPU with VAES and AVX-512 the accelerated transform really is the VAES one, so
    /// the properties above compare two different implementations.
    #[test]
    fn the_accelerated_backend_uses_vaes_where_the_cpu_has_it() {
        let [fast, portable] = pair(SrtpProfile::AesCm128HmacSha1_80, [1; 16], [2; 14], [3; 20]);
        let (Cipher::AesCm { aes: fast, .. }, Cipher::AesCm { aes: portable, .. }) =
            (fast, portable)
        else {
            unreachable!("AES-CM transforms")
        };
        assert_eq!(fast.accelerated(), SrtpBackend::Accelerated.supported());
        assert!(!portable.accelerated());
    }
}
