//! Minting access tokens: HS256 JWTs with the claims the relay checks
//! (`crates/server/src/control/token.rs`), so that a bot or a tool needs no server crate
//! and no other JWT library to make its own.

use crate::errors::{Class, error};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pyo3::prelude::*;
use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// Shortest secret the relay accepts, in bytes.
const MIN_SECRET_LEN: usize = 16;
/// Longest room name the relay accepts, in characters.
const MAX_ROOM_LEN: usize = 64;
/// Longest identity the relay accepts, in characters.
const MAX_IDENTITY_LEN: usize = 128;

/// The relay's claims, as it reads them.
#[derive(Serialize)]
struct Claims<'a> {
    room: &'a str,
    sub: &'a str,
    publish: bool,
    subscribe: bool,
    admin: bool,
    exp: u64,
    iat: u64,
}

fn refuse(code: &str, message: String) -> PyErr {
    error(Class::Token, code, message, None)
}

/// `mint_token(secret, room, identity, publish, subscribe, admin, ttl, now)`: a token
/// valid for `ttl` seconds from `now` (unix seconds; the clock's when `None`).
#[pyfunction]
#[pyo3(signature = (secret, room, identity, publish, subscribe, admin, ttl, now=None))]
#[allow(clippy::too_many_arguments)] // the claims, one argument each, as Python passes them
pub fn mint_token(
    secret: &str,
    room: &str,
    identity: &str,
    publish: bool,
    subscribe: bool,
    admin: bool,
    ttl: u64,
    now: Option<u64>,
) -> PyResult<String> {
    if secret.len() < MIN_SECRET_LEN {
        return Err(refuse(
            "weak_secret",
            format!(
                "the secret has {} bytes; the relay wants {MIN_SECRET_LEN} or more",
                secret.len()
            ),
        ));
    }
    let room_chars = room.chars().count();
    if room_chars == 0 || room_chars > MAX_ROOM_LEN {
        return Err(refuse(
            "bad_room",
            format!("a room name has 1 to {MAX_ROOM_LEN} characters, not {room_chars}"),
        ));
    }
    let identity_chars = identity.chars().count();
    if identity_chars == 0 || identity_chars > MAX_IDENTITY_LEN {
        return Err(refuse(
            "bad_identity",
            format!("an identity has 1 to {MAX_IDENTITY_LEN} characters, not {identity_chars}"),
        ));
    }
    if ttl == 0 {
        return Err(refuse(
            "bad_ttl",
            "a token's ttl is at least 1 second".to_owned(),
        ));
    }
    let now = match now {
        Some(n) => n,
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| refuse("clock", format!("the clock is before 1970: {e}")))?
            .as_secs(),
    };
    let exp = now
        .checked_add(ttl)
        .ok_or_else(|| refuse("bad_ttl", format!("now + ttl overflows: {now} + {ttl}")))?;
    let claims = Claims {
        room,
        sub: identity,
        publish,
        subscribe,
        admin,
        exp,
        iat: now,
    };
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .map_err(|e| refuse("sign", format!("cannot sign the token: {e}")))
}
