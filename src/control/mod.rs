//! Control plane: the HTTP API and the access tokens it checks.
//!
//! - [`token`] issues and verifies the room-scoped access tokens (JWT, HS256) that every
//!   `/v1` request carries as a bearer token, and checks their rights.
//! - [`http`] serves the API of DESIGN §2 (sessions, rooms, metrics, health, readiness)
//!   and drives the relay task through its command channel.

pub mod http;
pub mod token;
