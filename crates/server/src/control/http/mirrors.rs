//! Broadcast-delay routes of the server API (`docs/api.md`, "Mirrors";
//! `docs/recording.md`, "Broadcast delay"): a room's live, delayed mirror for
//! spectators. Each needs an admin token of the source room; starting one, of the mirror
//! room too (a relay-wide admin token is both). Spectators join the mirror room with
//! tokens of their own, which may only subscribe.

use super::{ApiError, ApiState, TimedBody, parse_object};
use crate::control::token::{self, Right};
use crate::transport::mirror::{DELAYS, MirrorView};
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::time::Duration;

/// A room's mirror.
pub(super) const MIRROR_ROUTE: &str = "/v1/rooms/{room}/mirror";

/// `PUT /v1/rooms/{room}/mirror`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MirrorBody {
    /// The mirror room: one no session is in.
    room: String,
    /// The delay, milliseconds.
    delay_ms: u64,
}

fn no_mirror(room: &str) -> ApiError {
    ApiError::not_found("no_mirror", format!("room {room:?} has no mirror here"))
}

/// `PUT /v1/rooms/{room}/mirror`: starts mirroring the room.
pub(super) async fn start(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let source = state.room_for(&headers, room, &[Right::Admin])?;
    let claims = state.authenticate(&headers)?;
    let body: MirrorBody = parse_object(&body, None)?;
    token::validate_room(&body.room)?;
    token::require(&claims, &body.room, Right::Admin)?;
    let delay = Duration::from_millis(body.delay_ms);
    if !DELAYS.contains(&delay) {
        return Err(ApiError::unprocessable(
            "invalid_delay",
            format!(
                "delay_ms: {} is outside {}..={}",
                body.delay_ms,
                DELAYS.start().as_millis(),
                DELAYS.end().as_millis()
            ),
        ));
    }
    if body.room == source {
        return Err(ApiError::unprocessable(
            "invalid_request",
            "room: a mirror plays into a room of its own",
        ));
    }
    let view = state.0.relay.mirror(&source, &body.room, delay).await?;
    tracing::info!(room = %source, mirror = %body.room, delay_ms = body.delay_ms, "mirror started");
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// The mirror of source room `room` on this node, if any.
pub(super) async fn of(state: &ApiState, room: &str) -> Result<Option<MirrorView>, ApiError> {
    let all = state.0.relay.mirrors().await?;
    Ok(all.into_iter().find(|m| m.room == room))
}

/// `GET /v1/rooms/{room}/mirror`.
pub(super) async fn show(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let view = of(&state, &room).await?.ok_or_else(|| no_mirror(&room))?;
    Ok(Json(view).into_response())
}

/// `DELETE /v1/rooms/{room}/mirror`: stops the mirror; its spectators see its streams
/// end.
pub(super) async fn stop(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    if !state.0.relay.stop_mirror(&room).await? {
        return Err(no_mirror(&room));
    }
    tracing::info!(%room, "mirror stopped");
    Ok(StatusCode::NO_CONTENT.into_response())
}
