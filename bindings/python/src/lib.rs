//! `gsrelay._native`, the extension module under the `gsrelay` Python package
//! (`docs/python-client.md`). It wraps the one Rust client (`gsrelay-client`: SRTP, RTCP,
//! the codec, joins, resume and rejoin) as the C ABI does, for Python:
//!
//! - **Poll first** (`net`, `session`): each session is a task on the extension's own
//!   tokio thread; Python pushes commands and drains events in batches, the GIL released
//!   while it waits. An asyncio loop watches a socket that turns readable when events
//!   arrive (`queue`), so asyncio needs no thread and no other dependency.
//! - **The codec** (`codec`): payloads to and from the JSON form of the draft-01 objects,
//!   which the package turns into dataclasses.
//! - **Tokens** (`token`): HS256 JWTs with the relay's claims.
//! - **Errors** (`errors`): the package's exception classes, each with a stable code.

mod codec;
mod errors;
mod net;
mod queue;
mod session;
mod token;

use pyo3::prelude::*;

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(codec::encode, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decode, m)?)?;
    m.add_function(wrap_pyfunction!(codec::validate, m)?)?;
    m.add_function(wrap_pyfunction!(token::mint_token, m)?)?;
    m.add_function(wrap_pyfunction!(session::join, m)?)?;
    m.add_class::<session::Session>()?;
    m.add("MAX_PAYLOAD", codec::MAX_PAYLOAD)?;
    m.add("MAX_QUEUED", queue::MAX_QUEUED)?;
    m.add("SNAPSHOT_WAIT", net::SNAPSHOT_WAIT.as_secs_f64())?;
    Ok(())
}
