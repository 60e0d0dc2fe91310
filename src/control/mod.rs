//! Control plane: what the HTTP API needs before a session exists.
//!
//! `token` issues and verifies the room-scoped access tokens (JWT, HS256) that every
//! `/v1` request carries as a bearer token, and checks their rights.

pub mod token;
