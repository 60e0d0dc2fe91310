//! AES-128 in SRTP's counter mode on VAES with AVX-512: four blocks per instruction, sixteen
//! in flight, where the portable path (RustCrypto's `aes` 0.8 on AES-NI) encrypts one block
//! per instruction, eight in flight.
//!
//! Why our own kernel rather than a crate's: of the well-kept crates that have AES-CTR,
//! RustCrypto's `aes` 0.9 has a VAES backend but hands it 64 blocks (1 024 bytes) at a time
//! and encrypts anything shorter one block after another, so on SRTP's packet sizes it
//! measured slower than `aes` 0.8 (100 bytes: 240 against 90 ns; 1 200: 600 against 350, in
//! one run on this machine); AWS-LC (`aws-lc-rs`) has no VAES CTR, only AES-NI's, and ring
//! exposes no CTR at all. `docs/benchmarks.md`, "SRTP at the hardware's speed", has the
//! figures. The kernel is small: the AES-128 key expansion (AES-NI's key-generation assist)
//! and a counter-mode loop; it is checked against the portable path byte for byte (the unit
//! tests here and in `cipher`) and against libsrtp (`tests/srtp_interop.rs`,
//! `tests/relay_libsrtp.rs`).
//!
//! The counter blocks are RFC 3711 §4.1.1's: the 14-byte IV prefix, then the block number as
//! a 16-bit big-endian integer. A packet's keystream never reaches 2^16 blocks (1 MiB); the
//! caller keeps longer inputs on the portable path, which carries into the prefix as a
//! 128-bit counter does.

use zeroize::Zeroizing;

/// The most bytes [`VaesCtr::apply`] takes: 2^16 blocks, the 16-bit block counter's range.
pub(super) const MAX_LEN: usize = 16 << 16;

/// An AES-128 key expanded for the VAES kernel. Only made when the CPU has AES-NI, VAES,
/// AVX-512F and AVX-512BW (checked at run time), which is what makes calling the kernel
/// sound.
pub(super) struct VaesCtr {
    /// The 11 AES-128 round keys, zeroed on drop.
    round_keys: Zeroizing<[[u8; 16]; 11]>,
}

impl VaesCtr {
    /// Whether this CPU can run the kernel.
    pub(super) fn supported() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("aes")
                && std::is_x86_feature_detected!("vaes")
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The kernel keyed with `key`, or `None` when the CPU cannot run it.
    pub(super) fn new(key: &[u8; 16]) -> Option<Self> {
        if !Self::supported() {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let mut round_keys = Zeroizing::new([[0u8; 16]; 11]);
            // SAFETY: `supported()` just found AES-NI, which is all `expand_key` needs.
            unsafe { x86::expand_key(key, &mut round_keys) };
            Some(Self { round_keys })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// XORs onto `data` the keystream of the counter blocks `prefix ‖ be16(j)`,
    /// `j = 0, 1, …`. `data` must be at most [`MAX_LEN`] bytes; returns false, touching
    /// nothing, when it is longer.
    pub(super) fn apply(&self, prefix: &[u8; 14], data: &mut [u8]) -> bool {
        if data.len() > MAX_LEN {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `self` exists only if `supported()` found AES-NI, VAES, AVX-512F and
            // AVX-512BW on this CPU (`new`), the features `xor_keystream` is compiled for;
            // `data` is at most 2^16 blocks, as it requires.
            unsafe { x86::xor_keystream(&self.round_keys, prefix, data) };
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = prefix;
            false
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m512i, _mm_aeskeygenassist_si128, _mm_loadu_si128, _mm_setr_epi8,
        _mm_shuffle_epi32, _mm_slli_si128, _mm_storeu_si128, _mm_xor_si128, _mm512_add_epi32,
        _mm512_aesenc_epi128, _mm512_aesenclast_epi128, _mm512_broadcast_i32x4, _mm512_loadu_si512,
        _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8, _mm512_set_epi32, _mm512_shuffle_epi8,
        _mm512_storeu_si512, _mm512_xor_si512,
    };

    /// One step of the AES-128 key schedule (FIPS 197 §5.2): `assist` is
    /// `AESKEYGENASSIST(prev, rcon)`, whose top word is `SubWord(RotWord(w3)) ^ rcon`.
    #[target_feature(enable = "aes")]
    fn next_round_key(prev: __m128i, assist: __m128i) -> __m128i {
        let t = _mm_shuffle_epi32::<0xff>(assist);
        let mut k = prev;
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        _mm_xor_si128(k, t)
    }

    /// Expands an AES-128 key into its 11 round keys.
    ///
    /// # Safety
    /// The CPU must have AES-NI.
    #[target_feature(enable = "aes")]
    pub(super) unsafe fn expand_key(key: &[u8; 16], out: &mut [[u8; 16]; 11]) {
        // SAFETY: `key` is 16 readable bytes; loadu has no alignment requirement.
        let mut k = unsafe { _mm_loadu_si128(key.as_ptr().cast()) };
        let mut round = |i: usize, k: __m128i| {
            // SAFETY: `out[i]` is 16 writable bytes; storeu has no alignment requirement.
            unsafe { _mm_storeu_si128(out[i].as_mut_ptr().cast(), k) };
        };
        round(0, k);
        // The round constants are immediates, so each step is spelled out.
        macro_rules! steps {
            ($($i:literal $rcon:literal),*) => {$(
                k = next_round_key(k, _mm_aeskeygenassist_si128::<$rcon>(k));
                round($i, k);
            )*};
        }
        steps!(1 0x01, 2 0x02, 3 0x04, 4 0x08, 5 0x10, 6 0x20, 7 0x40, 8 0x80, 9 0x1b, 10 0x36);
    }

    /// AES-128 on the four blocks of `b` with the broadcast round keys `k`.
    #[inline]
    #[target_feature(enable = "avx512f,vaes")]
    fn encrypt4(k: &[__m512i; 11], b: __m512i) -> __m512i {
        let mut b = _mm512_xor_si512(b, k[0]);
        for rk in &k[1..10] {
            b = _mm512_aesenc_epi128(b, *rk);
        }
        _mm512_aesenclast_epi128(b, k[10])
    }

    /// AES-128 on sixteen blocks, the four vectors interleaved round by round so that the
    /// AES unit is never waiting on one chain.
    #[inline]
    #[target_feature(enable = "avx512f,vaes")]
    fn encrypt16(k: &[__m512i; 11], b: [__m512i; 4]) -> [__m512i; 4] {
        let mut b = b.map(|v| _mm512_xor_si512(v, k[0]));
        for rk in &k[1..10] {
            b = b.map(|v| _mm512_aesenc_epi128(v, *rk));
        }
        b.map(|v| _mm512_aesenclast_epi128(v, k[10]))
    }

    /// XORs the AES-CM keystream onto `data` (see [`super::VaesCtr::apply`]).
    ///
    /// # Safety
    /// The CPU must have AES-NI, VAES, AVX-512F and AVX-512BW; `data` must be at most
    /// [`super::MAX_LEN`] bytes (else block numbers would wrap at 2^16 where a 128-bit
    /// counter carries).
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    pub(super) unsafe fn xor_keystream(
        round_keys: &[[u8; 16]; 11],
        prefix: &[u8; 14],
        data: &mut [u8],
    ) {
        debug_assert!(data.len() <= super::MAX_LEN);
        // SAFETY (every `_mm_loadu_si128` here): the source is a 16-byte array; loadu has no
        // alignment requirement.
        let k: [__m512i; 11] = std::array::from_fn(|i| {
            _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(round_keys[i].as_ptr().cast()) })
        });
        let mut iv = [0u8; 16];
        iv[..14].copy_from_slice(prefix);
        // The IV with block number 0 in each of the four 128-bit lanes.
        let base = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(iv.as_ptr().cast()) });
        // Block numbers as little-endian 32-bit words in each lane's last word (0, 1, 2, 3);
        // `swap` moves their low two bytes, big-endian, to the lane's bytes 14 and 15 and
        // zeroes the rest, so `base ^ shuffle(n, swap)` is the counter block.
        let mut n = _mm512_set_epi32(3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0);
        let four = _mm512_set_epi32(4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0);
        let none = -128i8; // a shuffle index with its top bit set writes zero
        let swap = _mm512_broadcast_i32x4(_mm_setr_epi8(
            none, none, none, none, none, none, none, none, none, none, none, none, none, none, 13,
            12,
        ));
        let mut next = || {
            let block = _mm512_xor_si512(base, _mm512_shuffle_epi8(n, swap));
            n = _mm512_add_epi32(n, four);
            block
        };

        let mut chunks = data.chunks_exact_mut(256);
        for chunk in &mut chunks {
            let ks = encrypt16(&k, [next(), next(), next(), next()]);
            for (part, ks) in chunk.chunks_exact_mut(64).zip(ks) {
                let p = part.as_mut_ptr();
                // SAFETY: `part` is exactly 64 bytes, read then written through its own
                // pointer; loadu and storeu have no alignment requirement.
                unsafe {
                    _mm512_storeu_si512(
                        p.cast(),
                        _mm512_xor_si512(_mm512_loadu_si512(p.cast()), ks),
                    )
                };
            }
        }
        let rest = chunks.into_remainder();
        if rest.is_empty() {
            return;
        }
        // Under 256 bytes left: at most four vectors, the last perhaps partial.
        let parts = rest.chunks_mut(64);
        let ks: [__m512i; 4] = if parts.len() == 1 {
            [encrypt4(&k, next()), base, base, base] // only the first is used
        } else {
            encrypt16(&k, [next(), next(), next(), next()])
        };
        for (part, ks) in parts.zip(ks) {
            let len = part.len(); // 1 to 64
            let mask = u64::MAX >> (64 - len);
            let p = part.as_mut_ptr();
            // SAFETY: the mask selects the first `len` bytes, all inside `part`; masked-off
            // bytes are neither read nor written (AVX-512BW masked moves do not touch, nor
            // fault on, memory outside the mask) and need no alignment.
            unsafe {
                let x = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, p.cast()), ks);
                _mm512_mask_storeu_epi8(p.cast(), mask, x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::Aes128Enc;
    use aes::cipher::{InnerIvInit, KeyInit, StreamCipher};

    type Ctr = ctr::Ctr128BE<Aes128Enc>;
    type CtrCore = ctr::CtrCore<Aes128Enc, ctr::flavors::Ctr128BE>;

    /// The portable path's keystream, for comparison.
    fn portable(key: &[u8; 16], prefix: &[u8; 14], data: &mut [u8]) {
        let mut iv = [0u8; 16];
        iv[..14].copy_from_slice(prefix);
        let aes = Aes128Enc::new(key.into());
        Ctr::from_core(CtrCore::inner_iv_init(aes, &iv.into())).apply_keystream(data);
    }

    /// FIPS 197 Appendix A.1's key expansion: the last round key.
    #[test]
    fn key_expansion_matches_fips_197() {
        let Some(ctr) = VaesCtr::new(&hex_array("2b7e151628aed2a6abf7158809cf4f3c")) else {
            eprintln!("no VAES/AVX-512 here: the kernel is not tested");
            return;
        };
        assert_eq!(
            ctr.round_keys[10],
            hex_array::<16>("d014f9a8c9ee2589e13f0cc8b6630ca6")
        );
    }

    /// Every length from 0 to 600 bytes, and some up to the limit, under a few keys and
    /// prefixes: the same bytes as the portable path.
    #[test]
    fn same_keystream_as_the_portable_path() {
        if !VaesCtr::supported() {
            eprintln!("no VAES/AVX-512 here: the kernel is not tested");
            return;
        }
        let lengths = (0..=600).chain([1023, 1024, 1025, 1200, 1500, 9000, 65535, MAX_LEN]);
        for (round, len) in lengths.enumerate() {
            let key: [u8; 16] = std::array::from_fn(|i| (i * 7 + round) as u8);
            // 0xff bytes near the end of the prefix would show a carry gone wrong.
            let prefix: [u8; 14] =
                std::array::from_fn(|i| if i > 11 { 0xff } else { (i + round * 3) as u8 });
            let plain: Vec<u8> = (0..len).map(|i| (i * 31 + round) as u8).collect();
            let (mut fast, mut slow) = (plain.clone(), plain);
            let ctr = VaesCtr::new(&key).expect("supported");
            assert!(ctr.apply(&prefix, &mut fast));
            portable(&key, &prefix, &mut slow);
            assert!(fast == slow, "length {len} differs");
        }
    }

    #[test]
    fn longer_than_the_block_counter_is_refused() {
        let Some(ctr) = VaesCtr::new(&[1; 16]) else {
            return;
        };
        let mut data = vec![0u8; MAX_LEN + 1];
        assert!(!ctr.apply(&[2; 14], &mut data));
        assert!(data.iter().all(|&b| b == 0));
    }

    fn hex_array<const N: usize>(s: &str) -> [u8; N] {
        hex::decode(s).unwrap().try_into().unwrap()
    }
}
