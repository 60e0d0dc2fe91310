//! The C ABI of the gsrelay client, for game engines: C and C++ through
//! `include/gsrelay.h`, C# and Unity through `bindings/csharp` (`docs/c-client.md`,
//! `docs/csharp-client.md`).
//!
//! It wraps the one Rust client (`gsrelay-client`: SRTP, RTCP, the codec, joins, resume
//! and rejoin) as LiveKit's FFI core and moq's `libmoq` do:
//!
//! - **Poll first.** No callback ever runs on a caller's thread or any other: the network
//!   runs on the library's own thread ([`net`]), and the engine's loop calls
//!   [`gsr_client_poll`] for [`gsr_event`]s. No call waits on the network.
//! - **Handles** ([`handle`]): opaque integers, checked at every call; a freed, foreign or
//!   made-up handle is refused with `GSR_ERR_HANDLE`, never dereferenced.
//! - **Errors** ([`status`]): a status code from every function, the message in
//!   [`gsr_last_error`] for the calling thread; every entry behind `catch_unwind`.
//! - **Objects** ([`object`]): the draft-01 objects as C structs shaped after the
//!   reference implementation's `GS_Object`, and the codec on its own ([`codec`]).
//! - **Memory**: the caller owns what it passes (the library copies what it keeps); what
//!   the library hands out stays valid until the next poll (or decode) on the same handle,
//!   or its free. Polling allocates nothing per update in steady state ([`events`]).
//!
//! Every exported symbol starts with `gsr_`; `tests/ffi_symbols.rs` checks it with `nm`.
#![warn(missing_docs)]

pub mod client;
pub mod codec;
pub mod events;
pub mod handle;
pub mod net;
pub mod object;
pub mod status;

pub use client::*;
pub use codec::*;
pub use events::{
    GSR_ENDED_BY_RELAY, GSR_ENDED_FAILED, GSR_ENDED_LEFT, GSR_EVENT_DROPPED, GSR_EVENT_ENDED,
    GSR_EVENT_ERROR, GSR_EVENT_JOINED, GSR_EVENT_OBJECT, GSR_EVENT_OWNERSHIP, GSR_EVENT_REJOINED,
    GSR_EVENT_RESUMED, GSR_EVENT_SNAPSHOT_COMPLETE, GSR_EVENT_STREAM_ENDED,
    GSR_EVENT_STREAM_STARTED, GSR_FLAG_PARTIAL, GSR_FLAG_UNDECODED, gsr_event, gsr_event_kind,
};
pub use object::*;
pub use status::*;
