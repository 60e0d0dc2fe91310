//! Errors across the C boundary: every function returns a [`gsr_status`] (0 for success,
//! negative for an error), and the message of the last failure is kept per thread
//! ([`gsr_last_error`]). Every entry runs inside [`guard`], which turns a panic into
//! `GSR_ERR_PANIC` instead of unwinding into C (undefined behaviour).

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What a call did: [`GSR_OK`] (0), [`GSR_END`] (1, nothing more to decode), or a
/// negative error code whose message [`gsr_last_error`] gives.
pub type gsr_status = i32;

/// Success.
pub const GSR_OK: gsr_status = 0;
/// A decoder has no more objects.
pub const GSR_END: gsr_status = 1;
/// A required pointer was null.
pub const GSR_ERR_NULL: gsr_status = -1;
/// The handle is not a live handle of the kind the function takes: never issued, already
/// freed, or of another kind.
pub const GSR_ERR_HANDLE: gsr_status = -2;
/// A string was not valid UTF-8.
pub const GSR_ERR_UTF8: gsr_status = -3;
/// A struct's `struct_size` (or a size argument) is not the size this library knows.
pub const GSR_ERR_SIZE: gsr_status = -4;
/// An argument's value is out of its range (an unknown enum value, a flag not 0 or 1,
/// malformed interest JSON).
pub const GSR_ERR_ARGUMENT: gsr_status = -5;
/// The bytes are not a game-state payload of the dialect.
pub const GSR_ERR_DECODE: gsr_status = -6;
/// The object cannot be encoded in the dialect.
pub const GSR_ERR_ENCODE: gsr_status = -7;
/// The client is not joined yet, or has ended: the operation needs a live session.
pub const GSR_ERR_STATE: gsr_status = -8;
/// The client's command queue is full: the network thread is behind; try again later.
pub const GSR_ERR_BUSY: gsr_status = -9;
/// The library panicked inside the call (a defect); the message says where.
pub const GSR_ERR_PANIC: gsr_status = -10;
/// The network failed: the relay could not be reached, a connection broke.
pub const GSR_ERR_NETWORK: gsr_status = -11;
/// The relay refused: it answered an HTTP error (the message holds its status and body).
pub const GSR_ERR_REFUSED: gsr_status = -12;

/// The error codes under short names, for the library's own code (`code::SIZE`).
pub(crate) mod code {
    pub use super::{
        GSR_ERR_BUSY as BUSY, GSR_ERR_DECODE as DECODE, GSR_ERR_ENCODE as ENCODE,
        GSR_ERR_HANDLE as HANDLE, GSR_ERR_NETWORK as NETWORK, GSR_ERR_REFUSED as REFUSED,
        GSR_ERR_SIZE as SIZE, GSR_ERR_STATE as STATE, GSR_ERR_UTF8 as UTF8,
    };
}

/// A failure: its code and message.
#[derive(Debug, Clone)]
pub struct Error {
    /// Negative.
    pub status: i32,
    /// For `gsr_last_error`.
    pub message: String,
}

impl Error {
    /// An error of `status` saying `message`.
    pub fn new(status: i32, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// `what` was a null pointer.
    pub fn null(what: &str) -> Self {
        Self::new(GSR_ERR_NULL, format!("{what} is null"))
    }

    /// An argument out of range.
    pub fn argument(message: impl Into<String>) -> Self {
        Self::new(GSR_ERR_ARGUMENT, message)
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // A message holding a NUL (from a relay's answer, say) is cut there, not lost.
    let cut = message.split('\0').next().unwrap_or_default();
    let c = CString::new(cut).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs an entry's body: its error becomes the thread's last error and the returned code,
/// and a panic becomes `GSR_ERR_PANIC` (never unwinding into the caller).
pub fn guard(body: impl FnOnce() -> Result<i32, Error>) -> i32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            set_last_error(&e.message);
            e.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            set_last_error(&format!("internal error (please report): {what}"));
            GSR_ERR_PANIC
        }
    }
}

/// The message of the last call that failed on this thread (empty if none has). Valid
/// until the next failing call on this thread; never null.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The name of a status code (`"GSR_ERR_HANDLE"`, ...), or `"GSR_UNKNOWN"`. A static
/// string; never null.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_status_name(status: gsr_status) -> *const c_char {
    let name: &'static [u8] = match status {
        GSR_OK => b"GSR_OK\0",
        GSR_END => b"GSR_END\0",
        GSR_ERR_NULL => b"GSR_ERR_NULL\0",
        GSR_ERR_HANDLE => b"GSR_ERR_HANDLE\0",
        GSR_ERR_UTF8 => b"GSR_ERR_UTF8\0",
        GSR_ERR_SIZE => b"GSR_ERR_SIZE\0",
        GSR_ERR_ARGUMENT => b"GSR_ERR_ARGUMENT\0",
        GSR_ERR_DECODE => b"GSR_ERR_DECODE\0",
        GSR_ERR_ENCODE => b"GSR_ERR_ENCODE\0",
        GSR_ERR_STATE => b"GSR_ERR_STATE\0",
        GSR_ERR_BUSY => b"GSR_ERR_BUSY\0",
        GSR_ERR_PANIC => b"GSR_ERR_PANIC\0",
        GSR_ERR_NETWORK => b"GSR_ERR_NETWORK\0",
        GSR_ERR_REFUSED => b"GSR_ERR_REFUSED\0",
        _ => b"GSR_UNKNOWN\0",
    };
    name.as_ptr().cast()
}

/// The version of the C ABI this library implements: [`GSR_ABI_VERSION`] of the header it
/// was built with. A binding compares it with the header it was written against at load,
/// and refuses a library of another ABI with a clear message.
pub const GSR_ABI_VERSION: u32 = 1;

/// The library's [`GSR_ABI_VERSION`].
#[unsafe(no_mangle)]
pub extern "C" fn gsr_abi_version() -> u32 {
    GSR_ABI_VERSION
}

/// The library's version, `"major.minor.patch"`. A static string; never null.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
