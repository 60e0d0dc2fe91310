//! The API's errors: a status, a stable code and a message, answered as
//! `{"error":{"code","message"}}` (`docs/api.md`, "Errors"), and how each refusal of the
//! layers below (tokens, names, the relay's commands) maps to one. The HTTP handlers and
//! the forwarding to another node both answer with it.

use super::token::{AuthzError, NameError, TokenError};
use crate::control::recordings::RecordingError;
use crate::transport::command::CommandError;
use crate::transport::webrtc::OfferError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gsrelay_core::api::{ErrorBody, ErrorDetail};
use gsrelay_core::relay::ControlError;
use std::time::Duration;

/// An API error: a status and the `{"error":{"code","message"}}` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// Seconds after which a retry may succeed, sent as `Retry-After`.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error, telling the client to retry after `wait` (whole seconds, at
    /// least one).
    pub fn retry_after(self, wait: Duration) -> Self {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Self {
            retry_after: Some(secs.max(1)),
            ..self
        }
    }

    pub(super) fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub(super) fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }
}

/// The code of an error response, kept in its extensions so the request metrics can
/// count refused joins by reason.
#[derive(Clone, Copy)]
pub(super) struct ErrorCode(pub(super) &'static str);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        let mut resp = (self.status, Json(body)).into_response();
        // For the request metrics, which see only the response.
        resp.extensions_mut().insert(ErrorCode(self.code));
        let headers = resp.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 6750 §3: tell the client which scheme is expected.
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::REQUEST_TIMEOUT {
            // RFC 9110 §15.5.9: the rest of the body may still come; do not read it as
            // the next request.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        Self::new(status(e.status()), e.code(), e.to_string())
    }
}

impl From<AuthzError> for ApiError {
    fn from(e: AuthzError) -> Self {
        Self::new(status(e.status()), e.code(), e.to_string())
    }
}

impl From<NameError> for ApiError {
    fn from(e: NameError) -> Self {
        Self::new(status(e.status()), e.code(), e.to_string())
    }
}

impl From<CommandError> for ApiError {
    fn from(e: CommandError) -> Self {
        let message = e.to_string();
        match e {
            CommandError::Control(ControlError::RoomFull(_)) => {
                // 429 rather than 503: the relay is healthy, this room is at its limit,
                // and a retry succeeds once someone leaves.
                Self::new(StatusCode::TOO_MANY_REQUESTS, "room_full", message)
            }
            CommandError::Control(ControlError::TooManyRooms(_)) => {
                // 503 rather than 429: this relay as a whole takes no more rooms, so a
                // load balancer or client should turn to another instance.
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "too_many_rooms", message)
            }
            CommandError::Control(ControlError::RelayFull(_)) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "relay_full", message)
            }
            CommandError::Control(ControlError::SsrcTaken(_)) => {
                Self::new(StatusCode::CONFLICT, "ssrc_taken", message)
            }
            CommandError::Control(ControlError::NoSuchSession(_)) => {
                Self::not_found("session_not_found", message)
            }
            CommandError::Control(ControlError::InvalidInterest(_)) => {
                Self::unprocessable("invalid_interest", message)
            }
            CommandError::Control(ControlError::TooManyStreams(_)) => {
                Self::unprocessable("too_many_streams", message)
            }
            CommandError::Control(ControlError::Draining) => draining(),
            CommandError::PlainRtpDisabled => {
                Self::new(StatusCode::FORBIDDEN, "plain_rtp_disabled", message)
            }
            CommandError::QuicDisabled | CommandError::WebRtcDisabled => {
                Self::unprocessable("unsupported_transport", message)
            }
            CommandError::WebRtcOffer(OfferError::NoAddress) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "webrtc_address_unknown",
                message,
            ),
            CommandError::WebRtcOffer(e) => Self::unprocessable(e.code(), message),
            CommandError::Stopped => relay_stopped(),
            CommandError::ResumeStale => Self::new(StatusCode::CONFLICT, "resume_stale", message),
            // 503 with a short Retry-After: the directory reconnects by itself, and the
            // rooms already open keep flowing meanwhile.
            CommandError::DirectoryUnavailable(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "directory_unavailable",
                message,
            )
            .retry_after(DIRECTORY_RETRY),
            CommandError::Internal => {
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
            }
            CommandError::NotHere(_) => Self::not_found("room_not_found", message),
            CommandError::RoomLive(_) => Self::new(StatusCode::CONFLICT, "room_live", message),
            CommandError::Mirrored(_) => {
                Self::new(StatusCode::CONFLICT, "already_mirrored", message)
            }
            CommandError::ReadOnly(_) => {
                Self::new(StatusCode::FORBIDDEN, "room_read_only", message)
            }
            CommandError::Replay(_) => Self::unprocessable("invalid_replay", message),
            CommandError::Recording(_) => {
                Self::new(StatusCode::CONFLICT, "already_recording", message)
            }
        }
    }
}

impl From<RecordingError> for ApiError {
    fn from(e: RecordingError) -> Self {
        let message = e.to_string();
        match e {
            RecordingError::NoRoom(_) => Self::not_found("room_not_found", message),
            RecordingError::AlreadyRecording(_) => {
                Self::new(StatusCode::CONFLICT, "already_recording", message)
            }
            RecordingError::NotRecording(_) => Self::not_found("not_recording", message),
            RecordingError::NoRecording(_) => Self::not_found("recording_not_found", message),
            RecordingError::Running(_) => {
                Self::new(StatusCode::CONFLICT, "recording_running", message)
            }
            RecordingError::Damaged(..) => Self::unprocessable("recording_damaged", message),
            RecordingError::Storage(_) => Self::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "recording_storage",
                message,
            ),
            RecordingError::Relay(e) => e.into(),
        }
    }
}

/// What a join refused for an unavailable directory is told to wait.
const DIRECTORY_RETRY: Duration = Duration::from_secs(1);

/// The relay has stopped (a shard or the whole relay): 503.
pub(super) fn relay_stopped() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "relay_stopped",
        CommandError::Stopped.to_string(),
    )
}

/// The relay is draining: 503, so a load balancer turns to another instance.
pub(super) fn draining() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "draining",
        "the relay is draining and takes no new sessions",
    )
}
