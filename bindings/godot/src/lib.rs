//! The Godot 4 extension of gsrelay: a `GsRelayRoom` node that joins a room, publishes
//! heads, hands, objects and controllers from GDScript, and emits a signal per event,
//! with positions and rotations as `Vector3` and `Quaternion` (`docs/godot-client.md`).
//!
//! Built with godot-rust (the `godot` crate, API `4.3`: the library loads in Godot 4.3
//! and every later 4.x) over the C ABI crate `gsrelay-ffi`, whose poll-first client runs
//! the network on the library's own thread: this crate re-implements nothing of the
//! client (SRTP, RTCP, the codec, resume and rejoin are the C ABI's, so the Rust client's).
//!
//! Only `node` (the class itself) needs the engine at run time. Under it, everything is plain Rust that the
//! tests run against a real relay without Godot:
//!
//! - [`session`]: a client of the C ABI as a safe type (join, poll, publish, leave);
//! - [`signals`]: the C ABI's events to the node's signals and their arguments;
//! - [`publish`] and [`convert`]: what a script passes, checked, to the C ABI's objects,
//!   between Godot's right-handed axes and the draft's left-handed ones;
//! - [`error`]: the C ABI's status and message.
#![warn(missing_docs)]

pub mod convert;
pub mod error;
mod node;
pub mod publish;
pub mod session;
pub mod signals;

use godot::init::{ExtensionLibrary, gdextension};

/// The extension: Godot calls its entry symbol, `gsrelay_init` (named in
/// `gsrelay.gdextension`), which registers `GsRelayRoom`.
struct GsRelayExtension;

// SAFETY: godot-rust's safety model (the `unsafe` opt-in its macro requires): this crate
// touches engine objects only from the main thread, in the node's methods and signals;
// the C ABI's network thread never calls into the engine.
#[gdextension(entry_symbol = gsrelay_init)]
unsafe impl ExtensionLibrary for GsRelayExtension {}
