//! SRTP and SRTCP protection for one relay session ([RFC 3711], [RFC 7714]).
//!
//! The join answer (`docs/api.md`) hands each client two keys: `client_key` protects what the
//! client sends, `relay_key` what the relay sends back to it. Each is the base64 of master
//! key ‖ master salt, the key part of the RFC 4568 `inline:` parameter.
//!
//! # Keyed once, in place
//!
//! A session derives its session keys once (`kdf`, RFC 3711 §4.3), expands the AES key
//! schedules and the HMAC pads once (`cipher`), and then protects and unprotects in the
//! caller's buffer: [`SrtpSession::protect_rtp`] appends the tag to a `Vec` (or writes it
//! into room the caller left, [`SrtpSession::protect_rtp_slice`]), and
//! [`SrtpSession::unprotect_rtp`] decrypts where the packet lies and returns the plaintext
//! length. Neither allocates per packet; the only allocation is a map entry the first time
//! an SSRC is seen. The primitives are RustCrypto's `aes` (AES-NI when the CPU has it) +
//! `ctr` and `hmac` + `sha1` (SHA-NI when present) for AES-CM, and ring's AES-GCM.
//!
//! # At the hardware's speed, with the portable path beside it
//!
//! Where the CPU has VAES and AVX-512 (checked at run time), AES-CM's keystream comes from
//! a VAES kernel that encrypts sixteen blocks at once (`accel`): the accelerated backend,
//! [`SrtpBackend::Accelerated`]. The portable backend, [`SrtpBackend::Portable`], is the
//! code above, and what runs on any other CPU. Both give the same bytes. The rest already
//! runs on the CPU's best instructions on both backends, each crate choosing at run time:
//! HMAC-SHA1 on SHA-NI (`sha1`), AES-GCM on VAES + VPCLMULQDQ (ring's AVX2 code).
//! `GSRELAY_SRTP_PORTABLE=1` in the environment, read once per process, keeps every session
//! on the portable backend (the tests run the libsrtp interop both ways with it);
//! [`SrtpBackend::current`] says which one sessions get. `docs/benchmarks.md`, "SRTP at
//! the hardware's speed", has the figures.
//!
//! # Indexes, replay and forgeries
//!
//! Each direction keeps, per SSRC, the highest SRTP index and SRTCP index it accepted and
//! a [`REPLAY_WINDOW`]-packet bitmap below them (`replay`); the rollover counter is
//! estimated from it as in RFC 3711 Appendix A. That state changes **only after a packet
//! authenticates**, so a forged packet, whatever its sequence number or SSRC, can neither
//! start nor move nor fill a window: a forgery sent ahead of a client's first packet costs
//! the client nothing, and forged SSRCs create no state.
//!
//! The sending side keeps the same windows over what it sealed and refuses to seal an
//! index twice ([`SrtpError::IndexReuse`]), as libsrtp does: the same (SSRC, index) under
//! one key would reuse the keystream, revealing the XOR of the two plaintexts, and under
//! GCM would also reveal the authentication key.
//!
//! [RFC 3711]: https://www.rfc-editor.org/rfc/rfc3711
//! [RFC 7714]: https://www.rfc-editor.org/rfc/rfc7714

mod accel;
mod cipher;
mod kdf;
mod replay;

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use cipher::{Cipher, SRTCP_CLEAR, SRTCP_E_FLAG};
use kdf::Kdf;
use replay::{MAX_SRTCP_INDEX, Windows};

/// Width, in packets, of the SRTP and SRTCP replay windows: on inbound traffic, how far
/// a packet may arrive out of order; on outbound, how far behind the newest a packet may
/// still be sealed.
///
/// libsrtp's default; wide enough that ordinary UDP reordering is not taken for replay.
pub const REPLAY_WINDOW: usize = 128;

/// The fixed RTP header, without CSRCs or extension.
const RTP_FIXED_HEADER: usize = 12;
/// The SRTCP trailer word holding the E flag and the 31-bit SRTCP index.
const SRTCP_INDEX_LEN: usize = 4;
/// RTP and RTCP version 2, in the top two bits of the first byte.
const VERSION_2: u8 = 0x80;

/// The SRTP protection profiles a session can use (`docs/api.md`, the join's `srtp_profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum SrtpProfile {
    /// AES-128 counter mode with an 80-bit HMAC-SHA1 tag (RFC 3711); the default.
    #[default]
    #[serde(rename = "AES_CM_128_HMAC_SHA1_80")]
    AesCm128HmacSha1_80,
    /// AES-128 in Galois/Counter Mode with a 16-byte tag (RFC 7714).
    #[serde(rename = "AEAD_AES_128_GCM")]
    AeadAes128Gcm,
}

impl SrtpProfile {
    /// Every supported profile.
    pub const ALL: [Self; 2] = [Self::AesCm128HmacSha1_80, Self::AeadAes128Gcm];

    /// The profile's name in the join answer, e.g. `"AES_CM_128_HMAC_SHA1_80"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AesCm128HmacSha1_80 => "AES_CM_128_HMAC_SHA1_80",
            Self::AeadAes128Gcm => "AEAD_AES_128_GCM",
        }
    }

    /// Master key length in bytes.
    pub const fn master_key_len(self) -> usize {
        16
    }

    /// Master salt length in bytes.
    pub const fn master_salt_len(self) -> usize {
        match self {
            Self::AesCm128HmacSha1_80 => 14,
            Self::AeadAes128Gcm => 12,
        }
    }

    /// Length of master key ‖ master salt, the bytes a [`KeyMaterial`] holds.
    pub const fn key_material_len(self) -> usize {
        self.master_key_len() + self.master_salt_len()
    }

    /// Bytes that protecting adds to an RTP packet (the authentication tag).
    pub const fn rtp_overhead(self) -> usize {
        match self {
            Self::AesCm128HmacSha1_80 => 10,
            Self::AeadAes128Gcm => 16,
        }
    }

    /// Bytes that protecting adds to an RTCP packet (E flag and index word, and the tag).
    pub const fn rtcp_overhead(self) -> usize {
        SRTCP_INDEX_LEN + self.rtp_overhead()
    }
}

impl fmt::Display for SrtpProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SrtpProfile {
    type Err = SrtpError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|profile| profile.name() == s)
            .ok_or_else(|| SrtpError::UnknownProfile(s.to_owned()))
    }
}

/// The environment variable that, set to `1`, keeps every session of the process on
/// [`SrtpBackend::Portable`]. Read once, when the first session is made.
pub const PORTABLE_ENV: &str = "GSRELAY_SRTP_PORTABLE";

/// Which implementation of the SRTP primitives a session runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SrtpBackend {
    /// AES-CM's keystream on VAES with AVX-512 (sixteen AES blocks at once); only where
    /// the CPU has VAES, AVX-512F and AVX-512BW.
    Accelerated,
    /// RustCrypto's `aes` on AES-NI (or in software on a CPU without it) for AES-CM's
    /// keystream: runs on any CPU.
    Portable,
}

impl SrtpBackend {
    /// Both backends.
    pub const ALL: [Self; 2] = [Self::Accelerated, Self::Portable];

    /// The backend this process's sessions use: [`Accelerated`](Self::Accelerated) when
    /// the CPU can run it and [`PORTABLE_ENV`] is not `1`, else
    /// [`Portable`](Self::Portable). Decided (and logged) once.
    pub fn current() -> Self {
        static CURRENT: OnceLock<SrtpBackend> = OnceLock::new();
        *CURRENT.get_or_init(|| {
            let forced = std::env::var_os(PORTABLE_ENV).is_some_and(|v| v == "1");
            let backend = if !forced && Self::Accelerated.supported() {
                Self::Accelerated
            } else {
                Self::Portable
            };
            tracing::info!(
                backend = backend.name(),
                forced_portable = forced,
                "SRTP primitives chosen"
            );
            backend
        })
    }

    /// Whether this CPU can run the backend.
    pub fn supported(self) -> bool {
        match self {
            Self::Accelerated => accel::VaesCtr::supported(),
            Self::Portable => true,
        }
    }

    /// The backend's name, `"accelerated"` or `"portable"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Accelerated => "accelerated",
            Self::Portable => "portable",
        }
    }
}

impl fmt::Display for SrtpBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SRTP master key ‖ master salt for one profile and one direction.
///
/// The bytes are zeroed on drop and never printed: `Debug` shows only the profile.
#[derive(Clone)]
pub struct KeyMaterial {
    profile: SrtpProfile,
    bytes: Zeroizing<Vec<u8>>,
}

impl KeyMaterial {
    /// Fresh random key material from the operating system's CSPRNG.
    pub fn generate(profile: SrtpProfile) -> Result<Self, SrtpError> {
        let mut bytes = Zeroizing::new(vec![0; profile.key_material_len()]);
        getrandom::fill(&mut bytes).map_err(|e| SrtpError::RandomSource(e.to_string()))?;
        Ok(Self { profile, bytes })
    }

    /// Key material from raw master key ‖ master salt bytes.
    pub fn from_bytes(profile: SrtpProfile, bytes: &[u8]) -> Result<Self, SrtpError> {
        let expected = profile.key_material_len();
        if bytes.len() != expected {
            return Err(SrtpError::BadKey(format!(
                "{profile} needs {expected} bytes of master key and salt, got {}",
                bytes.len()
            )));
        }
        Ok(Self {
            profile,
            bytes: Zeroizing::new(bytes.to_vec()),
        })
    }

    /// Key material from its base64 form (standard alphabet, padded), as in the join answer.
    pub fn from_base64(profile: SrtpProfile, encoded: &str) -> Result<Self, SrtpError> {
        // Checked before decoding so an oversized string costs no allocation.
        let expected = base64::encoded_len(profile.key_material_len(), true);
        if expected != Some(encoded.len()) {
            return Err(SrtpError::BadKey(format!(
                "{profile} key must be {} base64 characters, got {}",
                expected.unwrap_or_default(),
                encoded.len()
            )));
        }
        let bytes = Zeroizing::new(
            BASE64
                .decode(encoded)
                .map_err(|e| SrtpError::BadKey(format!("invalid base64: {e}")))?,
        );
        Self::from_bytes(profile, &bytes)
    }

    /// The base64 form, as sent in the join answer.
    pub fn to_base64(&self) -> String {
        BASE64.encode(&*self.bytes)
    }

    /// The profile this key material is sized for.
    pub fn profile(&self) -> SrtpProfile {
        self.profile
    }

    /// The key derivation function keyed with this master key and salt.
    fn kdf(&self) -> Result<Kdf, SrtpError> {
        let (key, salt) = self.bytes.split_at(self.profile.master_key_len());
        let key: &[u8; 16] = key
            .try_into()
            .map_err(|_| SrtpError::BadKey("master key is not 16 bytes".into()))?;
        Ok(Kdf::new(key, salt))
    }
}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyMaterial")
            .field("profile", &self.profile)
            .field("bytes", &"<redacted>")
            .finish()
    }
}

/// Why SRTP protection or unprotection failed.
#[derive(Debug, thiserror::Error)]
pub enum SrtpError {
    /// The authentication tag did not verify (wrong key, tampering, or an SRTCP packet
    /// that claims to be unencrypted).
    #[error("SRTP authentication failed")]
    AuthFailed,
    /// The packet's index was already seen or is older than the replay window.
    #[error("replayed SRTP/SRTCP packet")]
    Replay,
    /// Protecting would use an (SSRC, index) this key already sealed: a repeated or too old
    /// sequence number, or an exhausted index space. Refused, because reusing a keystream
    /// reveals plaintext (and, under GCM, the authentication key).
    #[error("SRTP/SRTCP index already used under this key")]
    IndexReuse,
    /// Too short to hold its header and the profile's trailer (or, when protecting, no
    /// room left in the buffer for the trailer).
    #[error("packet too short")]
    TooShort,
    /// The RTP or RTCP header does not parse.
    #[error("malformed header: {0}")]
    Malformed(&'static str),
    /// Key material of the wrong length, encoding or profile.
    #[error("bad SRTP key: {0}")]
    BadKey(String),
    /// A profile name that is not one of [`SrtpProfile::ALL`].
    #[error("unknown SRTP profile {0:?}")]
    UnknownProfile(String),
    /// The operating system's random source failed while making keys.
    #[error("random source failed: {0}")]
    RandomSource(String),
}

impl SrtpError {
    /// A short stable label for metrics, e.g. `"auth_failed"`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::AuthFailed => "auth_failed",
            Self::Replay => "replay",
            Self::IndexReuse => "index_reuse",
            Self::TooShort => "too_short",
            Self::Malformed(_) => "malformed",
            Self::BadKey(_) => "bad_key",
            Self::UnknownProfile(_) => "unknown_profile",
            Self::RandomSource(_) => "random_source",
        }
    }
}

/// SSRCs a direction has replay windows ready for (a session sends and receives few
/// SSRCs' RTCP, and its RTP SSRCs beyond these allocate once each).
const SSRCS_AHEAD: usize = 4;

/// One direction of a session: its SRTP and SRTCP keys and the per-SSRC indexes they
/// accepted (inbound) or sealed (outbound).
struct Direction {
    srtp: Cipher,
    srtcp: Cipher,
    srtp_seen: Windows,
    srtcp_seen: Windows,
}

impl Direction {
    fn new(
        profile: SrtpProfile,
        key: &KeyMaterial,
        backend: SrtpBackend,
    ) -> Result<Self, SrtpError> {
        if key.profile != profile {
            return Err(SrtpError::BadKey(format!(
                "key is for {}, session uses {profile}",
                key.profile
            )));
        }
        let kdf = key.kdf()?;
        Ok(Self {
            srtp: Cipher::derive(profile, &kdf, false, backend)?,
            srtcp: Cipher::derive(profile, &kdf, true, backend)?,
            srtp_seen: Windows::with_capacity(SSRCS_AHEAD),
            srtcp_seen: Windows::with_capacity(SSRCS_AHEAD),
        })
    }
}

/// The SRTP state of one session: inbound decryption and outbound encryption, each with
/// its own key.
///
/// Per-SSRC state (rollover counter, replay window) is created only for packets that
/// authenticated or that this side sealed, so made-up SSRCs cost nothing. The relay still
/// drops packets whose SSRC is not the session's before unprotecting them (`docs/security.md`).
pub struct SrtpSession {
    profile: SrtpProfile,
    backend: SrtpBackend,
    inbound: Direction,
    outbound: Direction,
}

impl SrtpSession {
    /// The relay's side: unprotects with `client_key`, protects with `relay_key`.
    pub fn for_relay(
        profile: SrtpProfile,
        client_key: &KeyMaterial,
        relay_key: &KeyMaterial,
    ) -> Result<Self, SrtpError> {
        Self::new(profile, client_key, relay_key)
    }

    /// The client's side (bench clients, tests): unprotects with `relay_key`, protects with
    /// `client_key`.
    pub fn for_client(
        profile: SrtpProfile,
        client_key: &KeyMaterial,
        relay_key: &KeyMaterial,
    ) -> Result<Self, SrtpError> {
        Self::new(profile, relay_key, client_key)
    }

    fn new(
        profile: SrtpProfile,
        inbound_key: &KeyMaterial,
        outbound_key: &KeyMaterial,
    ) -> Result<Self, SrtpError> {
        let backend = SrtpBackend::current();
        Ok(Self {
            profile,
            backend,
            inbound: Direction::new(profile, inbound_key, backend)?,
            outbound: Direction::new(profile, outbound_key, backend)?,
        })
    }

    /// The session's protection profile.
    pub fn profile(&self) -> SrtpProfile {
        self.profile
    }

    /// The backend the session's primitives run on ([`SrtpBackend::current`] when it was
    /// made). With AEAD_AES_128_GCM both backends run the same code, ring's, which picks
    /// its VAES + VPCLMULQDQ path at run time by itself.
    pub fn backend(&self) -> SrtpBackend {
        self.backend
    }

    /// Encrypts and authenticates the RTP packet in `packet`, appending the
    /// [`SrtpProfile::rtp_overhead`]-byte tag. Allocates only if `packet` lacks the
    /// capacity; on error `packet` is unchanged.
    pub fn protect_rtp(&mut self, packet: &mut Vec<u8>) -> Result<(), SrtpError> {
        let overhead = self.profile.rtp_overhead();
        grow_in_place(packet, overhead, |buf, len| {
            self.protect_rtp_slice(buf, len)
        })
    }

    /// Encrypts and authenticates the RTP packet in `buf[..len]` in place, writing the tag
    /// after it; `buf` must have [`SrtpProfile::rtp_overhead`] bytes of room past `len`.
    /// Returns the SRTP packet's length. On error `buf` is unchanged.
    pub fn protect_rtp_slice(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError> {
        let plain = buf.get(..len).ok_or(SrtpError::TooShort)?;
        let header = rtp_header_len(plain)?;
        let (seq, ssrc) = rtp_seq_ssrc(plain)?;
        let out = &mut self.outbound;
        let index = out
            .srtp_seen
            .srtp_index(ssrc, seq)
            .ok_or(SrtpError::IndexReuse)?;
        let total = len + out.srtp.tag_len();
        let packet = buf.get_mut(..total).ok_or(SrtpError::TooShort)?;
        out.srtp.seal_rtp(packet, header, ssrc, index)?;
        out.srtp_seen.accept(ssrc, index);
        Ok(total)
    }

    /// Encrypts and authenticates the RTCP packet (compound or not) in `packet`, appending
    /// the [`SrtpProfile::rtcp_overhead`] bytes of trailer. Allocates only if `packet`
    /// lacks the capacity; on error `packet` is unchanged.
    pub fn protect_rtcp(&mut self, packet: &mut Vec<u8>) -> Result<(), SrtpError> {
        let overhead = self.profile.rtcp_overhead();
        grow_in_place(packet, overhead, |buf, len| {
            self.protect_rtcp_slice(buf, len)
        })
    }

    /// Encrypts and authenticates the RTCP packet in `buf[..len]` in place, writing the
    /// trailer after it; `buf` must have [`SrtpProfile::rtcp_overhead`] bytes of room past
    /// `len`. Returns the SRTCP packet's length. On error `buf` is unchanged.
    pub fn protect_rtcp_slice(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError> {
        let plain = buf.get(..len).ok_or(SrtpError::TooShort)?;
        let ssrc = rtcp_sender_ssrc(plain)?;
        let out = &mut self.outbound;
        let index = out
            .srtcp_seen
            .next_srtcp_index(ssrc)
            .ok_or(SrtpError::IndexReuse)?;
        let total = len + self.profile.rtcp_overhead();
        let packet = buf.get_mut(..total).ok_or(SrtpError::TooShort)?;
        out.srtcp
            .seal_rtcp(packet, len, ssrc, srtcp_index(index)?)?;
        out.srtcp_seen.accept(ssrc, index);
        Ok(total)
    }

    /// Authenticates, replay-checks and decrypts the SRTP packet in `packet` in place;
    /// returns the length of the RTP packet now at its start. On error no state moved;
    /// a packet that failed to authenticate under GCM has its payload zeroed.
    pub fn unprotect_rtp(&mut self, packet: &mut [u8]) -> Result<usize, SrtpError> {
        let header = rtp_header_len(packet)?;
        let input = &mut self.inbound;
        if packet.len() < header + input.srtp.tag_len() {
            return Err(SrtpError::TooShort);
        }
        let (seq, ssrc) = rtp_seq_ssrc(packet)?;
        let index = input
            .srtp_seen
            .srtp_index(ssrc, seq)
            .ok_or(SrtpError::Replay)?;
        let len = input.srtp.open_rtp(packet, header, ssrc, index)?;
        input.srtp_seen.accept(ssrc, index);
        Ok(len)
    }

    /// Authenticates, replay-checks and decrypts the SRTCP packet in `packet` in place;
    /// returns the length of the RTCP packet now at its start. On error no state moved;
    /// a packet that failed to authenticate under GCM has its payload zeroed.
    ///
    /// Packets whose E flag is clear are refused as [`SrtpError::AuthFailed`]: our peers
    /// always encrypt, and accepting unencrypted SRTCP would only widen what a forger can
    /// try.
    pub fn unprotect_rtcp(&mut self, packet: &mut [u8]) -> Result<usize, SrtpError> {
        if packet.len() < SRTCP_CLEAR + self.profile.rtcp_overhead() {
            return Err(SrtpError::TooShort);
        }
        let ssrc = rtcp_sender_ssrc(packet)?;
        let input = &mut self.inbound;
        let word = input.srtcp.srtcp_word(packet).ok_or(SrtpError::TooShort)?;
        if word & SRTCP_E_FLAG == 0 {
            return Err(SrtpError::AuthFailed);
        }
        let index = word & !SRTCP_E_FLAG;
        if !input.srtcp_seen.is_fresh(ssrc, u64::from(index)) {
            return Err(SrtpError::Replay);
        }
        let len = input.srtcp.open_rtcp(packet, ssrc, index)?;
        input.srtcp_seen.accept(ssrc, u64::from(index));
        Ok(len)
    }
}

impl fmt::Debug for SrtpSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SrtpSession")
            .field("profile", &self.profile)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Runs `seal` on `packet` grown by `overhead` bytes, keeping the length it returns; on
/// error `packet` goes back to its length before.
fn grow_in_place(
    packet: &mut Vec<u8>,
    overhead: usize,
    seal: impl FnOnce(&mut [u8], usize) -> Result<usize, SrtpError>,
) -> Result<(), SrtpError> {
    let len = packet.len();
    packet.resize(len + overhead, 0);
    let sealed = seal(packet, len);
    packet.truncate(*sealed.as_ref().unwrap_or(&len));
    sealed.map(drop)
}

/// Length of an RTP header with its CSRCs and extension: where SRTP encryption starts.
fn rtp_header_len(packet: &[u8]) -> Result<usize, SrtpError> {
    let first = *packet.first().ok_or(SrtpError::TooShort)?;
    if first & 0xc0 != VERSION_2 {
        return Err(SrtpError::Malformed("RTP version is not 2"));
    }
    let mut len = RTP_FIXED_HEADER + 4 * usize::from(first & 0x0f);
    if first & 0x10 != 0 {
        let Some(&[w0, w1]) = packet.get(len + 2..len + 4) else {
            return Err(SrtpError::TooShort);
        };
        len += 4 + 4 * usize::from(u16::from_be_bytes([w0, w1]));
    }
    if packet.len() < len {
        return Err(SrtpError::TooShort);
    }
    Ok(len)
}

/// The sequence number and SSRC of an RTP packet.
fn rtp_seq_ssrc(packet: &[u8]) -> Result<(u16, u32), SrtpError> {
    match packet.get(2..RTP_FIXED_HEADER) {
        Some(&[s0, s1, _, _, _, _, x0, x1, x2, x3]) => Ok((
            u16::from_be_bytes([s0, s1]),
            u32::from_be_bytes([x0, x1, x2, x3]),
        )),
        _ => Err(SrtpError::TooShort),
    }
}

/// The sender SSRC of an RTCP packet, after checking its version.
fn rtcp_sender_ssrc(packet: &[u8]) -> Result<u32, SrtpError> {
    match packet.get(..SRTCP_CLEAR) {
        Some(&[first, _, _, _, x0, x1, x2, x3]) if first & 0xc0 == VERSION_2 => {
            Ok(u32::from_be_bytes([x0, x1, x2, x3]))
        }
        Some(_) => Err(SrtpError::Malformed("RTCP version is not 2")),
        None => Err(SrtpError::TooShort),
    }
}

/// An SRTCP index as its 31-bit wire form.
fn srtcp_index(index: u64) -> Result<u32, SrtpError> {
    u32::try_from(index)
        .ok()
        .filter(|&i| u64::from(i) <= MAX_SRTCP_INDEX)
        .ok_or(SrtpError::IndexReuse)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libsrtp's `srtp_driver` known answer for AES_CM_128_HMAC_SHA1_80, from the master
    /// key of RFC 3711 Appendix B.3: covers the KDF, AES-CM and HMAC-SHA1 together.
    #[test]
    fn libsrtp_aes_cm_known_answer() {
        let profile = SrtpProfile::AesCm128HmacSha1_80;
        let master =
            hex::decode("e1f97a0d3e018be0d64fa32c06de41390ec675ad498afeebb6960b3aabe6").unwrap();
        let key = KeyMaterial::from_bytes(profile, &master).unwrap();
        let plain = hex::decode(format!("800f1234decafbadcafebabe{}", "ab".repeat(16))).unwrap();
        let mut packet = plain.clone();
        let mut sender = SrtpSession::for_client(profile, &key, &key).unwrap();
        sender.protect_rtp(&mut packet).unwrap();
        assert_eq!(
            hex::encode(&packet),
            "800f1234decafbadcafebabe4e55dc4ce79978d88ca4d215949d2402b78d6acc99ea179b8dbb"
        );
        let mut receiver = SrtpSession::for_relay(profile, &key, &key).unwrap();
        let len = receiver.unprotect_rtp(&mut packet).unwrap();
        assert_eq!(packet[..len], plain[..]);
    }

    #[test]
    fn rtp_header_length_counts_csrcs_and_extension() {
        let mut packet = vec![0x82, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        packet.extend_from_slice(&[0; 8]); // two CSRCs
        assert_eq!(rtp_header_len(&packet).unwrap(), 20);
        packet[0] |= 0x10;
        assert!(matches!(rtp_header_len(&packet), Err(SrtpError::TooShort)));
        packet.extend_from_slice(&[0xbe, 0xde, 0, 1, 0x10, 0xaa, 0, 0]);
        assert_eq!(rtp_header_len(&packet).unwrap(), 28);
        packet[0] = 0x40;
        assert!(matches!(
            rtp_header_len(&packet),
            Err(SrtpError::Malformed(_))
        ));
    }
}
