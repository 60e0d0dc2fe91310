//! Errors as Python exceptions. The classes live in `gsrelay/errors.py` (so that they can
//! derive from both `GsrelayError` and the built-in a Python caller expects, such as
//! `ValueError`); this module raises them by name with a stable code and a message.

use gsrelay_client::ClientError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// Which exception class of `gsrelay.errors` to raise.
#[derive(Debug, Clone, Copy)]
pub enum Class {
    /// An argument that is not what it must be (`ArgumentError`, a `ValueError`).
    Argument,
    /// A payload or object the codec refuses (`CodecError`, a `ValueError`).
    Codec,
    /// A token that cannot be minted (`TokenError`, a `ValueError`).
    Token,
    /// The relay refused the join, or it failed (`JoinError`).
    Join,
    /// The session is over (`ClosedError`).
    Closed,
    /// The session's command queue is full (`BusyError`).
    Busy,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Argument => "ArgumentError",
            Class::Codec => "CodecError",
            Class::Token => "TokenError",
            Class::Join => "JoinError",
            Class::Closed => "ClosedError",
            Class::Busy => "BusyError",
        }
    }
}

/// An exception of `class` with a stable `code`, a message and, for a relay's refusal,
/// its HTTP status.
pub fn error(class: Class, code: &str, message: impl Into<String>, status: Option<u16>) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        let made = py
            .import("gsrelay.errors")
            .and_then(|m| m.getattr(class.name()))
            .and_then(|c| c.call1((message.as_str(), code, status)));
        match made {
            Ok(instance) => PyErr::from_value(instance),
            // Only when the package around the module is broken: still say what failed.
            Err(e) => PyRuntimeError::new_err(format!("{message} (and gsrelay.errors: {e})")),
        }
    })
}

/// A client error of a join: the relay's refusal keeps its status and the code of its
/// error body (`{"error":{"code","message"}}`), e.g. 401 `bad_token`.
pub fn join_error(e: &ClientError) -> PyErr {
    match e {
        ClientError::Status { status, body } => {
            let code = serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "refused".to_owned());
            error(
                Class::Join,
                &code,
                format!("the relay refused the join ({status}): {body}"),
                Some(*status),
            )
        }
        other => error(
            Class::Join,
            code_of(other),
            format!("join failed: {other}"),
            None,
        ),
    }
}

/// The stable code of a client error, as events and exceptions carry it.
pub fn code_of(e: &ClientError) -> &'static str {
    match e {
        ClientError::Status { .. } => "refused",
        ClientError::Encode(_) | ClientError::Rtp(_) | ClientError::Rtcp(_) => "encode",
        ClientError::Decode(_) => "decode",
        ClientError::BadAnswer(_) => "bad_answer",
        ClientError::NoHttp => "state",
        ClientError::Http(_) => "http",
        ClientError::Io(_) => "io",
        ClientError::Srtp(_) => "srtp",
        ClientError::Quic(_) => "quic",
        ClientError::WebRtc(_) => "webrtc",
    }
}
