//! The node's Rust side against a real relay on loopback, without Godot: sessions of the
//! C ABI joined as `GsRelayRoom.join()` joins, their events mapped to the node's signals
//! as `_process` maps them, objects built as the `publish_*()` methods build them. One
//! test binary (each links a whole relay).

mod common;
mod session;
mod signals;
