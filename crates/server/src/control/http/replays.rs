//! Replay routes of the server API (`docs/api.md`, "Replays"; `docs/recording.md`,
//! "Replay"): playing a recording of this node into a room of its own, then seeking,
//! changing speed, pausing and stopping it. Starting one needs an admin token of the
//! room it plays into and of the recorded room (a relay-wide admin token is both);
//! the other routes, an admin token of the room it plays into.

use super::{ApiError, ApiState, TimedBody, parse_object};
use crate::control::token::{self, Right};
use crate::transport::replay::{ReplayOp, ReplaySpec, ReplayStatus};
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use gsrelay_record::PlayError;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Every replay; starting one.
pub(super) const REPLAYS_ROUTE: &str = "/v1/replays";
/// The replay of a room.
pub(super) const REPLAY_ROUTE: &str = "/v1/replays/{room}";

/// `POST /v1/replays`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    /// The recording's id.
    recording: String,
    /// The room to play it into: one no session is in.
    room: String,
    /// Where to start, milliseconds from the recording's start.
    #[serde(default)]
    from_ms: u64,
    /// The speed, 0.25 to 8.
    #[serde(default = "one")]
    speed: f64,
    /// Whether to start paused.
    #[serde(default)]
    paused: bool,
}

fn one() -> f64 {
    1.0
}

/// `PATCH /v1/replays/{room}`'s body: what changes (a seek first, then the speed, then
/// pause or resume).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlBody {
    #[serde(default)]
    seek_ms: Option<u64>,
    #[serde(default)]
    speed: Option<f64>,
    #[serde(default)]
    paused: Option<bool>,
}

/// `GET /v1/replays`'s answer.
#[derive(Debug, Serialize)]
struct ReplayList {
    replays: Vec<ReplayStatus>,
}

fn no_replay(room: &str) -> ApiError {
    ApiError::not_found(
        "replay_not_found",
        format!("no replay plays into {room:?} here"),
    )
}

fn refused(e: PlayError) -> ApiError {
    let code = match e {
        PlayError::Speed(_) => "invalid_speed",
        PlayError::PastEnd { .. } => "seek_past_end",
    };
    ApiError::unprocessable(code, e.to_string())
}

/// `POST /v1/replays`: plays a recording into a room of its own.
pub(super) async fn start(
    State(state): State<ApiState>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let claims = state.authenticate(&headers)?;
    let body: StartBody = parse_object(&body, None)?;
    token::validate_room(&body.room)?;
    token::require(&claims, &body.room, Right::Admin)?;
    let recordings = state
        .recordings()
        .ok_or_else(|| ApiError::not_found("recording_disabled", "this relay records no room"))?;
    let recorded = recordings.info(&body.recording)?;
    token::require(&claims, &recorded.room, Right::Admin)?;
    if !(gsrelay_record::player::MIN_SPEED..=gsrelay_record::player::MAX_SPEED)
        .contains(&body.speed)
    {
        return Err(refused(PlayError::Speed(body.speed)));
    }
    let (recordings, id) = (recordings.clone(), body.recording.clone());
    let recording = tokio::task::spawn_blocking(move || recordings.open(&id))
        .await
        .map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })??;
    let spec = ReplaySpec {
        recording: Arc::new(recording),
        from_ns: body.from_ms.saturating_mul(1_000_000),
        speed: body.speed,
        paused: body.paused,
    };
    let status = state.0.relay.replay(&body.room, spec).await?;
    tracing::info!(room = %body.room, recording = %body.recording, "replay started");
    Ok((StatusCode::CREATED, Json(status)).into_response())
}

/// `GET /v1/replays`: every replay of this node (relay-wide admin).
pub(super) async fn list(
    State(state): State<ApiState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let claims = state.authenticate(&headers)?;
    token::require_relay_admin(&claims)?;
    let replays = state.0.relay.replays().await?;
    Ok(Json(ReplayList { replays }).into_response())
}

/// `GET /v1/replays/{room}`.
pub(super) async fn status(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let status = state
        .0
        .relay
        .replays()
        .await?
        .into_iter()
        .find(|r| r.room == room)
        .ok_or_else(|| no_replay(&room))?;
    Ok(Json(status).into_response())
}

/// `PATCH /v1/replays/{room}`: seek, speed, pause or resume.
pub(super) async fn control(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let body: ControlBody = parse_object(&body, None)?;
    let ops = body
        .seek_ms
        .map(|ms| ReplayOp::Seek(ms.saturating_mul(1_000_000)))
        .into_iter()
        .chain(body.speed.map(ReplayOp::Speed))
        .chain(
            body.paused
                .map(|p| if p { ReplayOp::Pause } else { ReplayOp::Resume }),
        );
    let mut last = None;
    for op in ops {
        let done = state.0.relay.replay_control(&room, op).await?;
        last = Some(done.ok_or_else(|| no_replay(&room))?.map_err(refused)?);
    }
    let status = match last {
        Some(s) => s,
        None => {
            return Err(ApiError::unprocessable(
                "invalid_request",
                "the body: name seek_ms, speed or paused",
            ));
        }
    };
    Ok(Json(status).into_response())
}

/// `DELETE /v1/replays/{room}`: stops the replay; its room ends with it unless others
/// joined it, who then see its streams end.
pub(super) async fn stop(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    if !state.0.relay.stop_replay(&room).await? {
        return Err(no_replay(&room));
    }
    tracing::info!(%room, "replay stopped");
    Ok(StatusCode::NO_CONTENT.into_response())
}
