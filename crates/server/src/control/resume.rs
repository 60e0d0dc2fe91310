//! Resume credentials (`docs/api.md`, "Resume"): what a join answers so that its client
//! can take the same session back after losing its path, or the same SSRC back after
//! the relay restarted.
//!
//! A credential is a JWT (HS256) under a key derived from the token secret for this use
//! alone, so an access token is never a credential nor the reverse (`typ` says which it
//! is, too). It names the session, its room, identity, SSRCs and a generation; each
//! resume answers a credential of the next generation, and the relay takes only the
//! current one for a live session, so a credential used once is spent. After a restart
//! the relay knows no generation: the first resume takes the SSRC back, and a replay of
//! the same credential then finds the SSRC taken. Nothing else is kept on the relay:
//! any node of a cluster, or a restarted relay, verifies a credential by the secret
//! alone.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::hmac;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The `typ` claim of a resume credential.
const TYP: &str = "gsrelay-resume";

/// Longest credential looked at; real ones are a few hundred bytes.
pub const MAX_CREDENTIAL_LEN: usize = 2048;

/// What a resume credential says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeClaims {
    /// Always [`TYP`].
    pub typ: String,
    /// The session's room.
    pub room: String,
    /// Its identity.
    pub sub: String,
    /// Its id, as the API spells it.
    pub sid: String,
    /// Its SSRC.
    pub ssrc: u32,
    /// The further SSRCs it declared.
    #[serde(default)]
    pub ssrcs: Vec<u32>,
    /// Its room stream's SSRC, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_ssrc: Option<u32>,
    /// Its generation: the number of resumes before this credential's.
    pub generation: u32,
    /// Expiry, Unix seconds: the access token's that joined.
    pub exp: u64,
}

/// Why a credential was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// Not a credential of this relay (malformed, forged, another secret, an access
    /// token).
    #[error("not a resume credential of this relay")]
    Invalid,
    /// Past its expiry.
    #[error("the resume credential has expired")]
    Expired,
}

/// Issues and verifies resume credentials.
#[derive(Clone)]
pub struct ResumeKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl fmt::Debug for ResumeKeys {
    // Never print the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResumeKeys").finish_non_exhaustive()
    }
}

impl ResumeKeys {
    /// The keys derived from the token secret `secret`.
    pub fn new(secret: &[u8]) -> Self {
        let derive = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let key = hmac::sign(&derive, b"gsrelay resume credential v1");
        let mut validation = Validation::new(Algorithm::HS256);
        // Expiry is checked against the caller's clock in `verify`.
        validation.validate_exp = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        Self {
            encoding: EncodingKey::from_secret(key.as_ref()),
            decoding: DecodingKey::from_secret(key.as_ref()),
            validation,
        }
    }

    /// A credential for `claims` (its `typ` is set here).
    pub fn issue(&self, mut claims: ResumeClaims) -> String {
        claims.typ = TYP.to_owned();
        // HS256 over a struct of plain fields cannot fail.
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .unwrap_or_default()
    }

    /// The claims of `credential` at `now` (Unix seconds).
    pub fn verify(&self, credential: &str, now: u64) -> Result<ResumeClaims, ResumeError> {
        if credential.len() > MAX_CREDENTIAL_LEN {
            return Err(ResumeError::Invalid);
        }
        let claims =
            jsonwebtoken::decode::<ResumeClaims>(credential, &self.decoding, &self.validation)
                .map_err(|_| ResumeError::Invalid)?
                .claims;
        if claims.typ != TYP {
            return Err(ResumeError::Invalid);
        }
        if now >= claims.exp {
            return Err(ResumeError::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> ResumeClaims {
        ResumeClaims {
            typ: String::new(),
            room: "r".into(),
            sub: "alice".into(),
            sid: "s0000000000000001".into(),
            ssrc: 7,
            ssrcs: vec![8],
            room_ssrc: Some(9),
            generation: 0,
            exp: 1000,
        }
    }

    #[test]
    fn a_credential_verifies_under_its_secret_only_and_until_it_expires() {
        let keys = ResumeKeys::new(b"a secret of sixteen bytes at least");
        let c = keys.issue(claims());
        let got = keys.verify(&c, 999).unwrap();
        assert_eq!(
            (got.sid.as_str(), got.ssrc, got.ssrcs),
            ("s0000000000000001", 7, vec![8])
        );
        assert_eq!(keys.verify(&c, 1000), Err(ResumeError::Expired));
        let other = ResumeKeys::new(b"another secret of sixteen bytes");
        assert_eq!(other.verify(&c, 1), Err(ResumeError::Invalid));
        // A flipped character, garbage, an oversized string: invalid, never a panic.
        let mut forged = c.clone().into_bytes();
        let i = forged.len() / 2;
        forged[i] = if forged[i] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(forged).unwrap();
        assert_eq!(keys.verify(&forged, 1), Err(ResumeError::Invalid));
        for junk in ["", ".", "a.b.c", "\u{0}", &"x".repeat(5000)] {
            assert_eq!(keys.verify(junk, 1), Err(ResumeError::Invalid), "{junk:?}");
        }
    }

    #[test]
    fn an_access_token_is_no_credential() {
        let secret = b"a secret of sixteen bytes at least";
        let tokens = super::super::token::Tokens::new(secret).unwrap();
        let rights = super::super::token::Rights {
            publish: true,
            ..Default::default()
        };
        let token = tokens.issue("r", "alice", rights, 60, 1).unwrap();
        assert_eq!(
            ResumeKeys::new(secret).verify(&token, 2),
            Err(ResumeError::Invalid)
        );
    }
}
