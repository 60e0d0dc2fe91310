//! Recording routes of the server API (`docs/api.md`, "Recordings";
//! `docs/recording.md`): starting and stopping a room's recording with an admin token of
//! the room, and listing, downloading and deleting recordings. A recording's routes need
//! an admin token of its room (or a relay-wide one); listing every recording needs a
//! relay-wide admin token.
//!
//! Recordings are kept on the node that recorded them: in a cluster, each node answers
//! for its own.

use super::{ApiError, ApiState, path_param};
use crate::control::recordings::{RecordingView, Recordings};
use crate::control::token::{self, Right};
use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A room's recording.
pub(super) const ROOM_RECORDING_ROUTE: &str = "/v1/rooms/{room}/recording";
/// Every recording.
pub(super) const RECORDINGS_ROUTE: &str = "/v1/recordings";
/// One recording.
pub(super) const RECORDING_ROUTE: &str = "/v1/recordings/{id}";
/// One recording as one pcapng file.
pub(super) const RECORDING_PCAPNG_ROUTE: &str = "/v1/recordings/{id}/pcapng";

/// `GET /v1/recordings`'s answer.
#[derive(Debug, Serialize, Deserialize)]
struct RecordingList {
    recordings: Vec<RecordingView>,
}

/// How many chunks of an export wait for a slow download before the export waits.
const EXPORT_CHUNKS: usize = 8;

impl ApiState {
    fn recordings_or_404(&self) -> Result<&Arc<Recordings>, ApiError> {
        self.recordings()
            .ok_or_else(|| ApiError::not_found("recording_disabled", "this relay records no room"))
    }

    /// A recording's view, once the caller is shown to be an admin of its room.
    fn recording_for(
        &self,
        headers: &HeaderMap,
        id: Result<Path<String>, PathRejection>,
    ) -> Result<RecordingView, ApiError> {
        let claims = self.authenticate(headers)?;
        let id = path_param(id)?;
        let view = self.recordings_or_404()?.info(&id)?;
        token::require(&claims, &view.room, Right::Admin)?;
        Ok(view)
    }
}

/// `POST /v1/rooms/{room}/recording`: starts recording the room.
pub(super) async fn start(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let view = state.recordings_or_404()?.start(&room).await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// `GET /v1/rooms/{room}/recording`: the room's running recording.
pub(super) async fn running(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let recordings = state.recordings_or_404()?;
    let id = recordings.running(&room).ok_or_else(|| {
        ApiError::not_found(
            "not_recording",
            format!("room {room:?} is not being recorded"),
        )
    })?;
    Ok(Json(recordings.info(&id)?).into_response())
}

/// `DELETE /v1/rooms/{room}/recording`: stops recording the room; answers once its files
/// are closed.
pub(super) async fn stop(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let view = state.recordings_or_404()?.stop(&room).await?;
    Ok(Json(view).into_response())
}

/// `GET /v1/recordings`: every recording of this node, oldest first.
pub(super) async fn list(
    State(state): State<ApiState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let claims = state.authenticate(&headers)?;
    token::require_relay_admin(&claims)?;
    let recordings = state.recordings_or_404()?.clone();
    let list = tokio::task::spawn_blocking(move || recordings.list())
        .await
        .map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })??;
    Ok(Json(RecordingList { recordings: list }).into_response())
}

/// `GET /v1/recordings/{id}`.
pub(super) async fn info(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    Ok(Json(state.recording_for(&headers, id)?).into_response())
}

/// `DELETE /v1/recordings/{id}`: deletes a stopped recording.
pub(super) async fn delete(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let view = state.recording_for(&headers, id)?;
    state.recordings_or_404()?.delete(&view.id)?;
    tracing::info!(recording = %view.id, room = %view.room, "recording deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/recordings/{id}/pcapng`: the recording as one pcapng file (its segments'
/// sections one after another, torn tails left out), streamed as it is read.
pub(super) async fn pcapng(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let view = state.recording_for(&headers, id)?;
    let recordings = state.recordings_or_404()?.clone();
    let id = view.id.clone();
    let recording = tokio::task::spawn_blocking(move || recordings.open(&id))
        .await
        .map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })??;
    let (tx, rx) = mpsc::channel::<Bytes>(EXPORT_CHUNKS);
    tokio::task::spawn_blocking(move || {
        let mut out = Chunks {
            tx,
            buf: Vec::new(),
        };
        let written = recording.export_pcapng(&mut out);
        if let Err(e) = written
            .map_err(std::io::Error::other)
            .and_then(|_| out.flush())
        {
            // The download is cut short: a client sees a truncated file, never a bad one
            // announced as whole (no Content-Length is sent).
            tracing::warn!(error = %e, "recording export ended early");
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<Bytes, std::io::Error>(chunk), rx))
    });
    let mut response = Body::from_stream(stream).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-pcapng"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}.pcapng\"", view.id)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(response)
}

/// Writes into chunks of about 256 KiB sent down a channel (blocking: on a blocking
/// thread).
struct Chunks {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
}

const CHUNK: usize = 256 << 10;

impl Write for Chunks {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx
            .blocking_send(chunk)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "download gone"))
    }
}
