//! Encryption at rest of closed segments (`docs/recording.md`, "Player data and
//! encryption at rest"): AES-256-GCM (ring's, which the core already links), the segment
//! sealed in chunks so that neither side holds more than a chunk's worth twice.
//!
//! A sealed segment (`NNNNNN.pcapng.enc`, or `.pcapng.gz.enc`) is:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `GSRENC01` |
//! | 4 | a random salt |
//! | then, per chunk of at most 1 MiB of plaintext | the chunk's ciphertext and its 16-byte tag |
//!
//! Chunk *i* (from 0) is sealed with nonce = salt ‖ *i* (64-bit big-endian) and
//! additional data = magic ‖ salt ‖ one byte, 1 for the last chunk and 0 for the others:
//! a chunk moved, cut or dropped, or a file cut at a chunk's end, fails to open.

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

const MAGIC: &[u8; 8] = b"GSRENC01";
const SALT: usize = 4;
const HEADER: usize = MAGIC.len() + SALT;
const CHUNK: usize = 1 << 20;
const TAG: usize = 16;

/// A recording key: 32 bytes for AES-256-GCM.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(redacted)")
    }
}

/// Why sealed bytes could not be opened, or a key read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptError {
    /// Not 64 hexadecimal digits.
    #[error("a recording key is 64 hexadecimal digits (32 bytes)")]
    BadKey,
    /// Not a sealed segment.
    #[error("not an encrypted segment (no GSRENC01 header)")]
    NotSealed,
    /// The key is not the one it was sealed with, or the bytes were changed or cut.
    #[error("cannot decrypt: another key, or the file was changed or cut")]
    Open,
    /// The system's random source failed.
    #[error("no randomness for a salt")]
    Random,
}

impl Key {
    /// A key from 64 hexadecimal digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Key, CryptError> {
        let text = text.trim();
        let mut key = [0u8; 32];
        if text.len() != 64 {
            return Err(CryptError::BadKey);
        }
        for (i, b) in key.iter_mut().enumerate() {
            let pair = text.get(2 * i..2 * i + 2).ok_or(CryptError::BadKey)?;
            *b = u8::from_str_radix(pair, 16).map_err(|_| CryptError::BadKey)?;
        }
        Ok(Key(key))
    }

    fn aead(&self) -> Result<LessSafeKey, CryptError> {
        let k = UnboundKey::new(&AES_256_GCM, &self.0).map_err(|_| CryptError::BadKey)?;
        Ok(LessSafeKey::new(k))
    }
}

fn nonce(salt: &[u8], i: u64) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[..SALT].copy_from_slice(salt);
    n[SALT..].copy_from_slice(&i.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

fn aad(header: &[u8], last: bool) -> Vec<u8> {
    let mut a = header.to_vec();
    a.push(u8::from(last));
    a
}

/// `plain`, sealed.
pub fn seal(key: &Key, plain: &[u8]) -> Result<Vec<u8>, CryptError> {
    let aead = key.aead()?;
    let mut salt = [0u8; SALT];
    SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| CryptError::Random)?;
    let mut out = Vec::with_capacity(HEADER + plain.len() + (plain.len() / CHUNK + 1) * TAG);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&salt);
    let header = out.clone();
    let chunks: Vec<&[u8]> = match plain.is_empty() {
        true => vec![&[][..]],
        false => plain.chunks(CHUNK).collect(),
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut buf = chunk.to_vec();
        let tag = aead
            .seal_in_place_separate_tag(
                nonce(&salt, i as u64),
                Aad::from(aad(&header, i == last)),
                &mut buf,
            )
            .map_err(|_| CryptError::Open)?;
        out.extend_from_slice(&buf);
        out.extend_from_slice(tag.as_ref());
    }
    Ok(out)
}

/// What [`seal`] sealed, with the same key.
pub fn open(key: &Key, sealed: &[u8]) -> Result<Vec<u8>, CryptError> {
    let aead = key.aead()?;
    let header = sealed.get(..HEADER).ok_or(CryptError::NotSealed)?;
    if !header.starts_with(MAGIC) {
        return Err(CryptError::NotSealed);
    }
    let salt = &header[MAGIC.len()..];
    let body = &sealed[HEADER..];
    let chunks: Vec<&[u8]> = body.chunks(CHUNK + TAG).collect();
    if chunks.is_empty() {
        return Err(CryptError::Open);
    }
    let last = chunks.len() - 1;
    let mut out = Vec::with_capacity(body.len());
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut buf = chunk.to_vec();
        let plain = aead
            .open_in_place(
                nonce(salt, i as u64),
                Aad::from(aad(header, i == last)),
                &mut buf,
            )
            .map_err(|_| CryptError::Open)?;
        out.extend_from_slice(plain);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Key {
        Key::from_hex(&format!("{b:02x}").repeat(32)).unwrap()
    }

    #[test]
    fn sealed_bytes_open_with_their_key_only_and_whole_only() {
        for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] {
            let plain: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let sealed = seal(&key(1), &plain).unwrap();
            assert!(
                !sealed.windows(16).any(|w| len >= 16 && w == &plain[..16]),
                "plaintext shows"
            );
            assert_eq!(open(&key(1), &sealed).unwrap(), plain);
            assert_eq!(open(&key(2), &sealed), Err(CryptError::Open), "another key");
            // Cut anywhere, including at a chunk's end: refused.
            for cut in [sealed.len() - 1, HEADER + CHUNK + TAG, HEADER + 1] {
                if cut < sealed.len() {
                    assert!(
                        open(&key(1), &sealed[..cut]).is_err(),
                        "cut at {cut} of {len}"
                    );
                }
            }
            let mut flipped = sealed.clone();
            let last = flipped.len() - 1;
            flipped[last] ^= 1;
            assert_eq!(open(&key(1), &flipped), Err(CryptError::Open));
        }
        assert_eq!(
            open(&key(1), b"not sealed at all"),
            Err(CryptError::NotSealed)
        );
        assert_eq!(open(&key(1), b""), Err(CryptError::NotSealed));
    }

    #[test]
    fn keys_are_64_hex_digits() {
        assert!(Key::from_hex(&"ab".repeat(32)).is_ok());
        assert!(Key::from_hex(&format!(" {} \n", "00".repeat(32))).is_ok());
        for bad in [
            "",
            "ab",
            &"zz".repeat(32),
            &"ab".repeat(33),
            &"é".repeat(32),
        ] {
            assert_eq!(Key::from_hex(bad).unwrap_err(), CryptError::BadKey, "{bad}");
        }
    }
}
