//! Access tokens: JWTs signed with HS256, scoped to one room and a set of rights.
//!
//! [`Tokens`] holds the shared secret and both issues and verifies tokens. Time is always
//! an input (`now`, unix seconds), so expiry is checked against the caller's clock and
//! tests are deterministic; jsonwebtoken's own clock-based checks are switched off.
//!
//! Failures map onto the HTTP API's error contract: every [`TokenError`] is a 401 (the
//! caller is not authenticated), every [`AuthzError`] a 403 (authenticated, not allowed),
//! and every [`NameError`] a 400. Each error has a stable [`code`](TokenError::code) for
//! the `{"error":{"code","message"}}` body.
//!
//! The secret is the raw bytes of whatever string the operator configures
//! (`--token-secret`); [`dev_secret`] makes a random one for embedded defaults.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Clock skew tolerated between the issuer and the relay, in seconds, applied to `exp`,
/// `nbf` and `iat`. Small, because tokens are short-lived and usually minted next door.
pub const LEEWAY_SECS: u64 = 30;

/// Longest token lifetime (`exp - iat`) accepted unless configured otherwise: one day. A
/// leaked token is then useful for a day at most, whatever its issuer wrote in `exp`.
pub const DEFAULT_MAX_TTL_SECS: u64 = 24 * 3600;

/// Shortest accepted signing secret, in bytes (128 bits).
pub const MIN_SECRET_LEN: usize = 16;

/// Longest token [`Tokens::verify`] will look at; real tokens are a few hundred bytes, so
/// anything larger is rejected before any decoding work.
pub const MAX_TOKEN_LEN: usize = 4096;

/// Longest room name, in characters.
pub const MAX_ROOM_LEN: usize = 64;

/// Longest identity, in characters.
pub const MAX_IDENTITY_LEN: usize = 128;

/// The `room` claim of a relay-wide admin token: with the admin right it administers
/// every room and may call the relay-wide routes (`GET /v1/rooms`); it grants nothing
/// else, and no room can be joined with it (no room has this name).
pub const ANY_ROOM: &str = "*";

/// One right a token can grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Right {
    /// Send game state into the room.
    Publish,
    /// Receive game state from the room.
    Subscribe,
    /// Inspect the room (`GET /v1/rooms/{room}`). Does not imply the other rights.
    Admin,
}

impl Right {
    /// The right's name as it appears in claims and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Publish => "publish",
            Right::Subscribe => "subscribe",
            Right::Admin => "admin",
        }
    }
}

impl fmt::Display for Right {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The set of rights a token grants; none by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rights {
    /// See [`Right::Publish`].
    pub publish: bool,
    /// See [`Right::Subscribe`].
    pub subscribe: bool,
    /// See [`Right::Admin`].
    pub admin: bool,
}

impl Rights {
    /// Whether `right` is granted.
    pub fn has(self, right: Right) -> bool {
        match right {
            Right::Publish => self.publish,
            Right::Subscribe => self.subscribe,
            Right::Admin => self.admin,
        }
    }
}

/// The payload of an access token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The one room this token is valid for.
    pub room: String,
    /// The holder's identity.
    pub sub: String,
    /// Whether the holder may publish.
    #[serde(default)]
    pub publish: bool,
    /// Whether the holder may subscribe.
    #[serde(default)]
    pub subscribe: bool,
    /// Whether the holder may administer the room.
    #[serde(default)]
    pub admin: bool,
    /// Expiry, unix seconds: the token is refused from this instant on (plus leeway).
    pub exp: u64,
    /// Issue time, unix seconds. Required: [`Tokens::verify`] refuses a token without it,
    /// since its lifetime could not be bounded; `None` only while a token is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Optional start of validity, unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
}

impl Claims {
    /// The rights this token grants.
    pub fn rights(&self) -> Rights {
        Rights {
            publish: self.publish,
            subscribe: self.subscribe,
            admin: self.admin,
        }
    }

    /// Whether this token grants `right`.
    pub fn has(&self, right: Right) -> bool {
        self.rights().has(right)
    }
}

/// Why a presented token was not accepted; all are HTTP 401.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a well-formed JWT, or its claims are missing or invalid.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The signature does not match the secret.
    #[error("token signature is invalid")]
    BadSignature,
    /// The header names an algorithm other than HS256 (including `none`).
    #[error("token algorithm is not HS256")]
    WrongAlgorithm,
    /// `exp` has passed.
    #[error("token has expired")]
    Expired,
    /// `nbf` is still in the future.
    #[error("token is not yet valid")]
    NotYetValid,
    /// No `iat` claim, so the token's lifetime cannot be bounded.
    #[error("token has no iat (issued-at) claim; the relay needs it to bound the lifetime")]
    MissingIssuedAt,
    /// `iat` is later than the relay's clock plus the leeway.
    #[error(
        "token is issued in the future (iat is more than {LEEWAY_SECS} s ahead of the relay's clock)"
    )]
    IssuedInFuture,
    /// `exp - iat` exceeds the relay's maximum lifetime.
    #[error("token lifetime (exp - iat) of {ttl} s exceeds the relay's maximum of {max} s")]
    LifetimeTooLong {
        /// The token's lifetime, seconds.
        ttl: u64,
        /// The relay's maximum, seconds.
        max: u64,
    },
}

impl TokenError {
    /// Stable machine-readable code for the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            TokenError::Malformed(_) => "token_malformed",
            TokenError::BadSignature => "token_bad_signature",
            TokenError::WrongAlgorithm => "token_wrong_algorithm",
            TokenError::Expired => "token_expired",
            TokenError::NotYetValid => "token_not_yet_valid",
            TokenError::MissingIssuedAt => "token_iat_missing",
            TokenError::IssuedInFuture => "token_iat_in_future",
            TokenError::LifetimeTooLong { .. } => "token_ttl_too_long",
        }
    }

    /// HTTP status for this error: always 401 Unauthorized.
    pub fn status(&self) -> u16 {
        401
    }
}

/// Why a valid token does not allow a request; all are HTTP 403.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthzError {
    /// The token is for a different room.
    #[error("token is not valid for this room")]
    WrongRoom,
    /// The token lacks the right the request needs.
    #[error("token lacks the {0} right")]
    MissingRight(Right),
}

impl AuthzError {
    /// Stable machine-readable code for the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            AuthzError::WrongRoom => "forbidden_room",
            AuthzError::MissingRight(_) => "forbidden_right",
        }
    }

    /// HTTP status for this error: always 403 Forbidden.
    pub fn status(&self) -> u16 {
        403
    }
}

/// Checks that `claims` allow `right` in `room`: a token for that room with the right,
/// or, for [`Right::Admin`], a relay-wide admin token.
pub fn require(claims: &Claims, room: &str, right: Right) -> Result<(), AuthzError> {
    if right == Right::Admin && is_relay_admin(claims) {
        return Ok(());
    }
    if claims.room != room {
        return Err(AuthzError::WrongRoom);
    }
    if !claims.has(right) {
        return Err(AuthzError::MissingRight(right));
    }
    Ok(())
}

/// Whether `claims` are a relay-wide admin token's ([`ANY_ROOM`] with the admin right).
pub fn is_relay_admin(claims: &Claims) -> bool {
    claims.room == ANY_ROOM && claims.admin
}

/// Checks that `claims` are a relay-wide admin token's.
pub fn require_relay_admin(claims: &Claims) -> Result<(), AuthzError> {
    if claims.room != ANY_ROOM {
        return Err(AuthzError::WrongRoom);
    }
    if !claims.admin {
        return Err(AuthzError::MissingRight(Right::Admin));
    }
    Ok(())
}

/// A token's `room` claim: a room name, or [`ANY_ROOM`].
fn validate_room_claim(room: &str) -> Result<(), NameError> {
    if room == ANY_ROOM {
        return Ok(());
    }
    validate_room(room)
}

/// An invalid room name or identity; HTTP 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Room name is empty or longer than [`MAX_ROOM_LEN`].
    #[error("room name must be 1 to 64 characters long (got {0})")]
    RoomLength(usize),
    /// Room name contains a character outside `[A-Za-z0-9_.-]`.
    #[error("room name may contain only A-Z, a-z, 0-9, '_', '.' and '-' (found {0:?})")]
    RoomChar(char),
    /// Identity is empty or longer than [`MAX_IDENTITY_LEN`].
    #[error("identity must be 1 to 128 characters long (got {0})")]
    IdentityLength(usize),
    /// Identity contains a control character.
    #[error("identity must not contain control characters")]
    IdentityControl,
}

impl NameError {
    /// Stable machine-readable code for the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            NameError::RoomLength(_) | NameError::RoomChar(_) => "invalid_room",
            NameError::IdentityLength(_) | NameError::IdentityControl => "invalid_identity",
        }
    }

    /// HTTP status for this error: always 400 Bad Request.
    pub fn status(&self) -> u16 {
        400
    }
}

/// Checks a room name: 1..=64 characters of `[A-Za-z0-9_.-]`.
pub fn validate_room(room: &str) -> Result<(), NameError> {
    let len = room.chars().count();
    if !(1..=MAX_ROOM_LEN).contains(&len) {
        return Err(NameError::RoomLength(len));
    }
    match room
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        Some(c) => Err(NameError::RoomChar(c)),
        None => Ok(()),
    }
}

/// Checks an identity: 1..=128 characters, none of them control characters.
pub fn validate_identity(identity: &str) -> Result<(), NameError> {
    let len = identity.chars().count();
    if !(1..=MAX_IDENTITY_LEN).contains(&len) {
        return Err(NameError::IdentityLength(len));
    }
    if identity.chars().any(char::is_control) {
        return Err(NameError::IdentityControl);
    }
    Ok(())
}

/// A signing secret that cannot be used, or could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The secret is shorter than [`MIN_SECRET_LEN`] bytes.
    #[error("token secret must be at least {MIN_SECRET_LEN} bytes (got {0})")]
    TooShort(usize),
    /// The operating system's random source failed.
    #[error("cannot generate a token secret: {0}")]
    Rng(getrandom::Error),
}

/// Generates a random dev secret: 32 bytes from the OS, hex-encoded (64 characters).
///
/// Meant for the embedded defaults of `gsrelay serve`; the string's bytes are the secret.
pub fn dev_secret() -> Result<String, SecretError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(SecretError::Rng)?;
    Ok(hex::encode(bytes))
}

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The room name or identity is invalid.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A zero TTL would make a token that is already expired.
    #[error("token TTL must be at least one second")]
    ZeroTtl,
    /// `now + ttl` does not fit in a u64.
    #[error("token expiry overflows")]
    ExpiryOverflow,
    /// jsonwebtoken failed to sign; not expected with an HMAC key.
    #[error("cannot sign token: {0}")]
    Signing(jsonwebtoken::errors::Error),
}

/// Issues and verifies HS256 access tokens with one shared secret.
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    max_ttl_secs: u64,
    /// Resume credentials, under a key derived from the same secret.
    resume: super::resume::ResumeKeys,
}

impl fmt::Debug for Tokens {
    // Never print the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens").finish_non_exhaustive()
    }
}

/// The only part of the JOSE header we inspect ourselves.
#[derive(Deserialize)]
struct RawHeader {
    alg: String,
}

impl Tokens {
    /// Builds a signer/verifier from `secret`, which must be at least
    /// [`MIN_SECRET_LEN`] bytes, accepting lifetimes up to [`DEFAULT_MAX_TTL_SECS`].
    pub fn new(secret: &[u8]) -> Result<Self, SecretError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(SecretError::TooShort(secret.len()));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        // exp/nbf are checked against the caller's `now` in `verify`; `exp` being present
        // is enforced by `Claims` itself. Audiences are not part of this scheme.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        Ok(Tokens {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            max_ttl_secs: DEFAULT_MAX_TTL_SECS,
            resume: super::resume::ResumeKeys::new(secret),
        })
    }

    /// The keys of resume credentials, derived from the same secret.
    pub fn resume(&self) -> &super::resume::ResumeKeys {
        &self.resume
    }

    /// The same verifier, refusing tokens whose lifetime (`exp - iat`) exceeds
    /// `max_ttl_secs`.
    pub fn with_max_ttl(self, max_ttl_secs: u64) -> Self {
        Self {
            max_ttl_secs,
            ..self
        }
    }

    /// Issues a token for `identity` in `room` with `rights`, valid from `now` for
    /// `ttl_secs` seconds.
    pub fn issue(
        &self,
        room: &str,
        identity: &str,
        rights: Rights,
        ttl_secs: u64,
        now: u64,
    ) -> Result<String, IssueError> {
        validate_room_claim(room)?;
        validate_identity(identity)?;
        if ttl_secs == 0 {
            return Err(IssueError::ZeroTtl);
        }
        let exp = now
            .checked_add(ttl_secs)
            .ok_or(IssueError::ExpiryOverflow)?;
        let claims = Claims {
            room: room.to_owned(),
            sub: identity.to_owned(),
            publish: rights.publish,
            subscribe: rights.subscribe,
            admin: rights.admin,
            exp,
            iat: Some(now),
            nbf: None,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(IssueError::Signing)
    }

    /// Verifies `token` at time `now` (unix seconds) and returns its claims.
    ///
    /// Checks, in order: size and shape, algorithm (HS256 only), signature, claims
    /// (including room name and identity syntax), then `exp`/`nbf`/`iat` with
    /// [`LEEWAY_SECS`] of tolerance, then the lifetime `exp - iat` against the maximum.
    pub fn verify(&self, token: &str, now: u64) -> Result<Claims, TokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed("token too long"));
        }
        // Inspect `alg` ourselves first: jsonwebtoken cannot even parse `"alg":"none"`,
        // and would report it as malformed rather than as a wrong algorithm.
        let header = token.split_once('.').map_or(token, |(header, _)| header);
        let header = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| TokenError::Malformed("header is not base64url"))?;
        let header: RawHeader = serde_json::from_slice(&header)
            .map_err(|_| TokenError::Malformed("header is not a JOSE header"))?;
        if header.alg != "HS256" {
            return Err(TokenError::WrongAlgorithm);
        }

        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidSignature => TokenError::BadSignature,
                ErrorKind::InvalidAlgorithm => TokenError::WrongAlgorithm,
                _ => TokenError::Malformed("invalid token or claims"),
            })?
            .claims;

        if validate_room_claim(&claims.room).is_err() {
            return Err(TokenError::Malformed("invalid room claim"));
        }
        if validate_identity(&claims.sub).is_err() {
            return Err(TokenError::Malformed("invalid sub claim"));
        }
        if now >= claims.exp.saturating_add(LEEWAY_SECS) {
            return Err(TokenError::Expired);
        }
        if claims
            .nbf
            .is_some_and(|nbf| now.saturating_add(LEEWAY_SECS) < nbf)
        {
            return Err(TokenError::NotYetValid);
        }
        let iat = claims.iat.ok_or(TokenError::MissingIssuedAt)?;
        if iat > now.saturating_add(LEEWAY_SECS) {
            return Err(TokenError::IssuedInFuture);
        }
        let ttl = claims.exp.saturating_sub(iat);
        if ttl > self.max_ttl_secs {
            return Err(TokenError::LifetimeTooLong {
                ttl,
                max: self.max_ttl_secs,
            });
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NOW: u64 = 1_700_000_000;

    fn tokens() -> Tokens {
        Tokens::new(SECRET).unwrap()
    }

    fn all_rights() -> Rights {
        Rights {
            publish: true,
            subscribe: true,
            admin: true,
        }
    }

    fn b64(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    fn claims_json() -> String {
        format!(
            r#"{{"room":"lobby","sub":"alice","publish":true,"exp":{},"iat":{NOW}}}"#,
            NOW + 60
        )
    }

    /// Signs `claims` with our secret but under a caller-chosen header.
    fn sign_with(alg: Algorithm, secret: &[u8], claims: &impl Serialize) -> String {
        jsonwebtoken::encode(&Header::new(alg), claims, &EncodingKey::from_secret(secret)).unwrap()
    }

    fn sample_claims() -> Claims {
        Claims {
            room: "lobby".into(),
            sub: "alice".into(),
            publish: true,
            subscribe: false,
            admin: false,
            exp: NOW + 60,
            iat: Some(NOW),
            nbf: None,
        }
    }

    #[test]
    fn round_trip() {
        let t = tokens();
        let rights = Rights {
            publish: true,
            subscribe: true,
            admin: false,
        };
        let token = t.issue("lobby", "alice", rights, 60, NOW).unwrap();
        let claims = t.verify(&token, NOW).unwrap();
        assert_eq!(claims.room, "lobby");
        assert_eq!(claims.sub, "alice");
        assert_eq!(claims.rights(), rights);
        assert_eq!(claims.exp, NOW + 60);
        assert_eq!(claims.iat, Some(NOW));
        assert_eq!(claims.nbf, None);
        assert!(claims.has(Right::Publish) && !claims.has(Right::Admin));
    }

    #[test]
    fn rights_default_to_false_when_absent() {
        let t = tokens();
        let claims: Claims = serde_json::from_str(&format!(
            r#"{{"room":"lobby","sub":"alice","exp":{},"iat":{NOW}}}"#,
            NOW + 60
        ))
        .unwrap();
        let token = sign_with(Algorithm::HS256, SECRET, &claims);
        assert_eq!(t.verify(&token, NOW).unwrap().rights(), Rights::default());
    }

    #[test]
    fn expiry_honours_leeway() {
        let t = tokens();
        let token = t.issue("lobby", "alice", all_rights(), 60, NOW).unwrap();
        let exp = NOW + 60;
        assert!(t.verify(&token, exp + LEEWAY_SECS - 1).is_ok());
        assert_eq!(
            t.verify(&token, exp + LEEWAY_SECS),
            Err(TokenError::Expired)
        );
        assert_eq!(t.verify(&token, u64::MAX), Err(TokenError::Expired));
    }

    #[test]
    fn nbf_in_future_is_not_yet_valid() {
        let t = tokens();
        let claims = Claims {
            nbf: Some(NOW + 600),
            exp: NOW + 1200,
            ..sample_claims()
        };
        let token = sign_with(Algorithm::HS256, SECRET, &claims);
        assert_eq!(t.verify(&token, NOW), Err(TokenError::NotYetValid));
        assert_eq!(
            t.verify(&token, NOW + 600 - LEEWAY_SECS - 1),
            Err(TokenError::NotYetValid)
        );
        assert!(t.verify(&token, NOW + 600 - LEEWAY_SECS).is_ok());
    }

    #[test]
    fn missing_iat_is_refused() {
        let claims = Claims {
            iat: None,
            ..sample_claims()
        };
        let token = sign_with(Algorithm::HS256, SECRET, &claims);
        let err = tokens().verify(&token, NOW).unwrap_err();
        assert_eq!(err, TokenError::MissingIssuedAt);
        assert_eq!(err.code(), "token_iat_missing");
        assert_eq!(err.status(), 401);
    }

    #[test]
    fn iat_in_future_honours_leeway() {
        let t = tokens();
        let at = |iat: u64| {
            let claims = Claims {
                iat: Some(iat),
                exp: iat + 60,
                ..sample_claims()
            };
            t.verify(&sign_with(Algorithm::HS256, SECRET, &claims), NOW)
        };
        assert!(at(NOW + LEEWAY_SECS).is_ok());
        let err = at(NOW + LEEWAY_SECS + 1).unwrap_err();
        assert_eq!(err, TokenError::IssuedInFuture);
        assert_eq!(err.code(), "token_iat_in_future");
    }

    #[test]
    fn lifetime_is_bounded() {
        let t = tokens();
        let max = DEFAULT_MAX_TTL_SECS;
        let ok = t.issue("lobby", "alice", all_rights(), max, NOW).unwrap();
        assert!(t.verify(&ok, NOW).is_ok());
        let long = t
            .issue("lobby", "alice", all_rights(), max + 1, NOW)
            .unwrap();
        let err = t.verify(&long, NOW).unwrap_err();
        assert_eq!(err, TokenError::LifetimeTooLong { ttl: max + 1, max });
        assert_eq!(err.code(), "token_ttl_too_long");
        // A configured maximum replaces the default.
        let strict = tokens().with_max_ttl(60);
        let hour = t.issue("lobby", "alice", all_rights(), 3600, NOW).unwrap();
        assert_eq!(
            strict.verify(&hour, NOW),
            Err(TokenError::LifetimeTooLong { ttl: 3600, max: 60 })
        );
    }

    #[test]
    fn tampered_payload_is_bad_signature() {
        let t = tokens();
        let token = t
            .issue("lobby", "alice", Rights::default(), 60, NOW)
            .unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let forged = b64(&format!(
            r#"{{"room":"lobby","sub":"alice","admin":true,"exp":{},"iat":{NOW}}}"#,
            NOW + 60
        ));
        let tampered = format!("{}.{forged}.{}", parts[0], parts[2]);
        let err = t.verify(&tampered, NOW).unwrap_err();
        assert_eq!(err, TokenError::BadSignature);
        assert_eq!(err.code(), "token_bad_signature");
        assert_eq!(err.status(), 401);
    }

    #[test]
    fn other_secret_is_bad_signature() {
        let other = Tokens::new(b"another-secret-of-enough-length").unwrap();
        let token = other
            .issue("lobby", "alice", all_rights(), 60, NOW)
            .unwrap();
        assert_eq!(tokens().verify(&token, NOW), Err(TokenError::BadSignature));
    }

    #[test]
    fn alg_none_is_rejected() {
        let header = b64(r#"{"alg":"none","typ":"JWT"}"#);
        let payload = b64(&claims_json());
        let t = tokens();
        for token in [
            format!("{header}.{payload}."),
            format!("{header}.{payload}"),
        ] {
            assert_eq!(t.verify(&token, NOW), Err(TokenError::WrongAlgorithm));
        }
        // Case variants must not slip through either.
        let header = b64(r#"{"alg":"None"}"#);
        assert_eq!(
            t.verify(&format!("{header}.{payload}."), NOW),
            Err(TokenError::WrongAlgorithm)
        );
    }

    #[test]
    fn other_algorithms_with_same_secret_are_rejected() {
        let t = tokens();
        for alg in [Algorithm::HS384, Algorithm::HS512] {
            let token = sign_with(alg, SECRET, &sample_claims());
            let err = t.verify(&token, NOW).unwrap_err();
            assert_eq!(err, TokenError::WrongAlgorithm);
            assert_eq!(err.code(), "token_wrong_algorithm");
        }
    }

    #[test]
    fn malformed_tokens() {
        let t = tokens();
        let good = t.issue("lobby", "alice", all_rights(), 60, NOW).unwrap();
        let header = good.split('.').next().unwrap();
        for bad in [
            String::new(),
            "not a token".into(),
            "a.b.c".into(),
            header.to_string(),
            format!("{header}.."),
            format!("{good}.extra"),
            "x".repeat(MAX_TOKEN_LEN + 1),
            // Valid signature, but required claims missing.
            sign_with(
                Algorithm::HS256,
                SECRET,
                &serde_json::json!({"room": "lobby"}),
            ),
            // Valid signature, but a room name we would never issue.
            sign_with(
                Algorithm::HS256,
                SECRET,
                &Claims {
                    room: "../etc".into(),
                    ..sample_claims()
                },
            ),
        ] {
            let err = t.verify(&bad, NOW).unwrap_err();
            assert!(
                matches!(err, TokenError::Malformed(_) | TokenError::BadSignature),
                "{bad:?} gave {err:?}"
            );
            assert_eq!(err.status(), 401);
        }
        assert_eq!(t.verify("", NOW).unwrap_err().code(), "token_malformed");
    }

    #[test]
    fn error_codes_are_stable() {
        assert_eq!(TokenError::Expired.code(), "token_expired");
        assert_eq!(TokenError::NotYetValid.code(), "token_not_yet_valid");
        assert_eq!(TokenError::Malformed("x").code(), "token_malformed");
    }

    #[test]
    fn wrong_room_is_forbidden() {
        let claims = sample_claims();
        let err = require(&claims, "other", Right::Publish).unwrap_err();
        assert_eq!(err, AuthzError::WrongRoom);
        assert_eq!(err.code(), "forbidden_room");
        assert_eq!(err.status(), 403);
    }

    #[test]
    fn missing_right_is_forbidden() {
        let claims = sample_claims();
        assert_eq!(require(&claims, "lobby", Right::Publish), Ok(()));
        for right in [Right::Subscribe, Right::Admin] {
            let err = require(&claims, "lobby", right).unwrap_err();
            assert_eq!(err, AuthzError::MissingRight(right));
            assert_eq!(err.code(), "forbidden_right");
            assert_eq!(err.status(), 403);
        }
    }

    #[test]
    fn room_names() {
        assert!(validate_room("a").is_ok());
        assert!(validate_room("Game-1_v2.eu").is_ok());
        assert!(validate_room(&"r".repeat(64)).is_ok());
        assert_eq!(validate_room(""), Err(NameError::RoomLength(0)));
        assert_eq!(
            validate_room(&"r".repeat(65)),
            Err(NameError::RoomLength(65))
        );
        assert_eq!(validate_room("a b"), Err(NameError::RoomChar(' ')));
        assert_eq!(validate_room("a/b"), Err(NameError::RoomChar('/')));
        assert_eq!(validate_room("café"), Err(NameError::RoomChar('é')));
        assert_eq!(validate_room("").unwrap_err().code(), "invalid_room");
        assert_eq!(validate_room("").unwrap_err().status(), 400);
    }

    #[test]
    fn identities() {
        assert!(validate_identity("a").is_ok());
        assert!(validate_identity("Zoë the 🦀 <zoe@example.org>").is_ok());
        // Length is counted in characters, not bytes.
        assert!(validate_identity(&"é".repeat(128)).is_ok());
        assert_eq!(
            validate_identity(&"é".repeat(129)),
            Err(NameError::IdentityLength(129))
        );
        assert_eq!(validate_identity(""), Err(NameError::IdentityLength(0)));
        for bad in ["a\nb", "a\0", "\u{7f}", "tab\t", "\u{85}"] {
            assert_eq!(validate_identity(bad), Err(NameError::IdentityControl));
        }
        assert_eq!(
            validate_identity("").unwrap_err().code(),
            "invalid_identity"
        );
    }

    #[test]
    fn issue_validates_inputs() {
        let t = tokens();
        assert!(matches!(
            t.issue("bad room", "alice", all_rights(), 60, NOW),
            Err(IssueError::Name(NameError::RoomChar(' ')))
        ));
        assert!(matches!(
            t.issue("lobby", "", all_rights(), 60, NOW),
            Err(IssueError::Name(NameError::IdentityLength(0)))
        ));
        assert!(matches!(
            t.issue("lobby", "alice", all_rights(), 0, NOW),
            Err(IssueError::ZeroTtl)
        ));
        assert!(matches!(
            t.issue("lobby", "alice", all_rights(), u64::MAX, NOW),
            Err(IssueError::ExpiryOverflow)
        ));
    }

    #[test]
    fn secrets() {
        assert!(matches!(
            Tokens::new(b"fifteen-bytes!!"),
            Err(SecretError::TooShort(15))
        ));
        assert!(Tokens::new(b"sixteen-bytes!!!").is_ok());
        let a = dev_secret().unwrap();
        let b = dev_secret().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(Tokens::new(a.as_bytes()).is_ok());
    }

    #[test]
    fn debug_hides_secret() {
        let shown = format!("{:?}", tokens());
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }

    proptest! {
        #[test]
        fn garbage_never_panics(s in any::<String>()) {
            let _ = tokens().verify(&s, NOW);
        }

        #[test]
        fn jwt_shaped_garbage_never_verifies(
            h in "[A-Za-z0-9_-]{0,64}",
            p in "[A-Za-z0-9_-]{0,256}",
            sig in "[A-Za-z0-9_-]{0,64}",
        ) {
            let token = format!("{h}.{p}.{sig}");
            prop_assert!(tokens().verify(&token, NOW).is_err());
        }

        #[test]
        fn forged_payloads_never_verify(json in "\\PC{0,200}", sig in "[A-Za-z0-9_-]{43}") {
            let token = format!("{}.{}.{sig}", b64(r#"{"alg":"HS256","typ":"JWT"}"#), b64(&json));
            prop_assert!(tokens().verify(&token, NOW).is_err());
        }
    }
}
