//! Control plane: the HTTP API and the access tokens it checks.
//!
//! - [`token`] issues and verifies the room-scoped access tokens (JWT, HS256) that every
//!   `/v1` request carries as a bearer token, and checks their rights.
//! - [`http`] serves the API of `docs/api.md` (sessions, rooms, metrics, health, readiness)
//!   and drives the relay task through its command channel.
//! - [`error`] is the API's error answer, and what each refusal below maps to.
//! - [`forward`] hands a request to the node of the cluster that serves its room or
//!   session.
//! - [`cors`] decides which other origins' pages may call the API and import the client.
//! - [`conn`] accepts the TCP connections and closes those that stall (slowloris, idle).
//! - [`limits`] holds the HTTP limits' configuration and the per-identity rate limit.
//! - [`resume`] issues and verifies the resume credentials of join answers.
//! - [`rooms`] is the room service: participants, metadata, mutes, closed rooms and
//!   removed identities, told to players as presence and to the backend as webhooks.
//! - [`webhooks`] delivers the room service's webhooks to the backend, signed, retried
//!   and never in the data path's way.
//! - [`web`] serves the embedded JavaScript client and the live room viewer.

pub mod conn;
pub mod cors;
pub mod error;
pub mod forward;
pub mod http;
pub mod limits;
pub mod openapi;
pub mod recordings;
pub mod resume;
pub mod rooms;
pub mod token;
pub mod web;
pub mod webhooks;
