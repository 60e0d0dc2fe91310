//! The game-state payload codec (draft-jennings-dispatch-game-state-over-rtp-01).
//!
//! Two entry points:
//! - [`objects`]: the zero-copy scanner for the relay's hot path (tag, objectID, byte
//!   range, position, parent; no allocation);
//! - [`decode`] / [`encode`]: typed objects for tools, clients and tests.
//!
//! Both read the same [`layout`] and accept the same payloads. See `docs/wire-format.md`
//! for the dialects and every ambiguity of the draft.

pub mod container;
mod decode;
mod dialect;
mod encode;
mod error;
pub mod float16;
pub mod json;
pub mod layout;
pub mod motion;
mod object;
pub mod predict;
pub mod reader;
mod scan;
pub mod writer;

pub use container::{CONTAINER_TAG, Container};
pub use decode::{decode, decode_tlv};
pub use dialect::{Dialect, ObjectKind};
pub use encode::{EncodeError, encode, encode_object, kind_of};
pub use error::{DecodeError, ErrorKind};
pub use object::*;
pub use scan::{ObjectRef, Objects, objects, validate};
