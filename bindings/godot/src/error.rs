//! What went wrong, as the C ABI says it: a status code (`GSR_ERR_*`) and a message.

use gsrelay_ffi::{GSR_ERR_ARGUMENT, GSR_ERR_STATE, gsr_last_error, gsr_status, gsr_status_name};
use std::ffi::CStr;
use std::fmt;

/// A refused call: the C ABI's status and the message a user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingError {
    /// The status (`GSR_ERR_*`).
    pub status: gsr_status,
    /// Why.
    pub message: String,
}

impl BindingError {
    /// An argument the binding refuses before it reaches the library.
    pub fn argument(message: impl Into<String>) -> Self {
        Self {
            status: GSR_ERR_ARGUMENT,
            message: message.into(),
        }
    }

    /// A call made in the wrong state (not joined, already joined).
    pub fn state(message: impl Into<String>) -> Self {
        Self {
            status: GSR_ERR_STATE,
            message: message.into(),
        }
    }

    /// The library's last error on this thread, for a call that returned `status`.
    pub fn last(status: gsr_status) -> Self {
        // SAFETY: gsr_last_error returns a NUL-terminated string owned by the library,
        // valid until this thread's next call into it; it is copied before that.
        let message = unsafe { CStr::from_ptr(gsr_last_error()) }
            .to_string_lossy()
            .into_owned();
        Self { status, message }
    }

    /// The status's name (`GSR_ERR_BUSY`, ...).
    pub fn status_name(&self) -> String {
        // SAFETY: gsr_status_name returns a static NUL-terminated string for any value.
        unsafe { CStr::from_ptr(gsr_status_name(self.status)) }
            .to_string_lossy()
            .into_owned()
    }
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message)
    }
}

impl std::error::Error for BindingError {}

/// `Ok(())` for `GSR_OK`, else the library's error.
pub fn check(status: gsr_status) -> Result<(), BindingError> {
    if status == gsrelay_ffi::GSR_OK {
        Ok(())
    } else {
        Err(BindingError::last(status))
    }
}
