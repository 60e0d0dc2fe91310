//! Decode errors: what went wrong and at which byte offset of the payload.

use std::fmt;

/// Why a payload (or one primitive inside it) could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input ended (or the enclosing Length ended) before a field was complete.
    Truncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A VarUInt/VarInt whose first byte is `E0` or `E3`..`FF`.
    InvalidVarPrefix(u8),
    /// Tag 0 (`tagInvalid`).
    TagZero,
    /// A Length that does not fit in memory on this platform.
    LengthOverflow(u64),
    /// A Boolean byte other than `00`/`01` (draft01 dialect).
    InvalidBoolean(u8),
    /// A String whose bytes are not UTF-8.
    InvalidUtf8,
    /// Bytes left inside an object's Length where none may be.
    TrailingBytes(usize),
    /// An optional TLV inside an object that this object does not allow here.
    UnexpectedOptional(u64),
    /// A nested optional TLV whose Length is too short for its value.
    OptionalTooShort {
        /// The optional part's tag.
        tag: u64,
        /// Its declared Length.
        length: u64,
    },
    /// An array count that cannot fit in the object's remaining bytes.
    CountTooLarge(u64),
    /// A container whose ObjectID is not an SSRC (more than 32 bits).
    ContainerId(u64),
    /// A container inside a container.
    NestedContainer,
}

/// A decode failure at an absolute byte offset of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset in the payload where the failing field starts.
    pub offset: usize,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl DecodeError {
    pub(crate) fn new(offset: usize, kind: ErrorKind) -> Self {
        Self { offset, kind }
    }

    /// A short stable label for metrics (`reason` label values).
    pub fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Truncated { .. } => "truncated",
            ErrorKind::InvalidVarPrefix(_) => "bad_varint",
            ErrorKind::TagZero => "tag_zero",
            ErrorKind::LengthOverflow(_) => "bad_length",
            ErrorKind::InvalidBoolean(_) => "bad_boolean",
            ErrorKind::InvalidUtf8 => "bad_utf8",
            ErrorKind::TrailingBytes(_) => "trailing_bytes",
            ErrorKind::UnexpectedOptional(_) => "bad_optional",
            ErrorKind::OptionalTooShort { .. } => "bad_optional",
            ErrorKind::CountTooLarge(_) => "bad_count",
            ErrorKind::ContainerId(_) | ErrorKind::NestedContainer => "bad_container",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { needed, available } => {
                write!(f, "truncated: field needs {needed} bytes, {available} left")
            }
            Self::InvalidVarPrefix(b) => write!(f, "invalid VarUInt/VarInt first byte 0x{b:02x}"),
            Self::TagZero => write!(f, "tag 0 (tagInvalid)"),
            Self::LengthOverflow(n) => write!(f, "length {n} is too large"),
            Self::InvalidBoolean(b) => write!(f, "Boolean byte 0x{b:02x} is neither 00 nor 01"),
            Self::InvalidUtf8 => write!(f, "String is not valid UTF-8"),
            Self::TrailingBytes(n) => {
                write!(f, "{n} unexpected bytes before the end of the object")
            }
            Self::UnexpectedOptional(t) => write!(f, "unexpected optional part with tag {t}"),
            Self::OptionalTooShort { tag, length } => {
                write!(
                    f,
                    "optional part with tag {tag} has Length {length}, too short"
                )
            }
            Self::CountTooLarge(n) => write!(f, "array count {n} exceeds the object's Length"),
            Self::ContainerId(id) => write!(f, "container objectID {id} is not an SSRC"),
            Self::NestedContainer => write!(f, "a container inside a container"),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for DecodeError {}
