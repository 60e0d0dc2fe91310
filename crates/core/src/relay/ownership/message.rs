//! The ownership messages' codec (`docs/relay.md`, "Room objects and ownership"): what a
//! session asks of the relay about objects, and what the relay tells it back.
//!
//! Each message is an RTCP APP packet (RFC 3550 §6.7) named [`NAME`], whose subtype is
//! its [`Kind`]: a client sends it from its own SSRC, the relay from the relay's SSRC. Its
//! data is one or more entries of 16 octets, big-endian:
//!
//! | octets | field |
//! |---|---|
//! | 4 | the stream (SSRC) the object is in |
//! | 8 | the objectID |
//! | 1 | a [`Reason`] code: 0 in requests, releases and grants |
//! | 3 | zero |
//!
//! At most [`MAX_ENTRIES`] entries travel in one message. A message that does not decode
//! is dropped whole and counted (`ownership_malformed`).

/// The APP packet's name.
pub const NAME: [u8; 4] = *b"GSOW";

/// Entries one message may carry.
pub const MAX_ENTRIES: usize = 16;

/// One entry's size in octets.
const ENTRY: usize = 16;

/// What a message says; its APP subtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Client to relay: give me these objects.
    Request = 1,
    /// Client to relay: I give these objects back.
    Release = 2,
    /// Relay to client: these objects are yours from now on.
    Granted = 3,
    /// Relay to client: these objects are no longer yours (the entry's reason says why).
    Lost = 4,
    /// Relay to client: your request for these objects is refused (the reason says why).
    Refused = 5,
}

impl Kind {
    /// The kind an APP subtype names.
    pub fn from_subtype(subtype: u8) -> Option<Self> {
        Some(match subtype {
            1 => Self::Request,
            2 => Self::Release,
            3 => Self::Granted,
            4 => Self::Lost,
            5 => Self::Refused,
            _ => return None,
        })
    }

    /// Its APP subtype.
    pub fn subtype(self) -> u8 {
        self as u8
    }
}

/// Why an object was lost or a request refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// No reason (requests, releases, grants).
    None = 0,
    /// Another session was granted it (lost), or it changed hands within the handover
    /// guard (refused: a concurrent request won).
    Contended = 1,
    /// No such object in the room.
    NoObject = 2,
    /// The object's stream ended, or the object expired.
    Gone = 3,
    /// The object's stream is carried from another replica; only its home hands it over.
    NotHome = 4,
    /// The requester speaks another wire dialect than the object's stream.
    DialectMismatch = 5,
    /// The requester already has an object with that objectID (its own, or held).
    IdInUse = 6,
    /// The requester holds as many objects as a session may.
    TooManyHeld = 7,
    /// The requester may not publish (no right, or muted).
    NotPublisher = 8,
}

impl Reason {
    /// The reason a code names; unknown codes read as [`Reason::None`].
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Contended,
            2 => Self::NoObject,
            3 => Self::Gone,
            4 => Self::NotHome,
            5 => Self::DialectMismatch,
            6 => Self::IdInUse,
            7 => Self::TooManyHeld,
            8 => Self::NotPublisher,
            _ => Self::None,
        }
    }

    /// Its code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Its name, as the relay counts it and the documentation lists it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Contended => "contended",
            Self::NoObject => "no_object",
            Self::Gone => "gone",
            Self::NotHome => "not_home",
            Self::DialectMismatch => "dialect_mismatch",
            Self::IdInUse => "id_in_use",
            Self::TooManyHeld => "too_many_held",
            Self::NotPublisher => "not_publisher",
        }
    }
}

/// One object named in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The stream the object is in.
    pub ssrc: u32,
    /// Its objectID.
    pub object: u64,
    /// Why (notices of loss and refusal).
    pub reason: Reason,
}

impl Entry {
    /// An entry with no reason.
    pub fn new(ssrc: u32, object: u64) -> Self {
        Self {
            ssrc,
            object,
            reason: Reason::None,
        }
    }

    /// Appends the entry's 16 octets to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        out.extend_from_slice(&self.object.to_be_bytes());
        out.extend_from_slice(&[self.reason.code(), 0, 0, 0]);
    }
}

/// The entries of a message's data, or why it does not decode (no entries, more than
/// [`MAX_ENTRIES`], or a length not a multiple of 16).
pub fn decode(data: &[u8]) -> Result<impl Iterator<Item = Entry> + '_, &'static str> {
    const BAD: &str = "ownership_malformed";
    if data.is_empty() || !data.len().is_multiple_of(ENTRY) || data.len() / ENTRY > MAX_ENTRIES {
        return Err(BAD);
    }
    Ok(data.chunks_exact(ENTRY).map(|c| {
        let word = |r: std::ops::Range<usize>| c.get(r).unwrap_or_default();
        let ssrc = word(0..4).try_into().map_or(0, u32::from_be_bytes);
        let object = word(4..12).try_into().map_or(0, u64::from_be_bytes);
        Entry {
            ssrc,
            object,
            reason: Reason::from_code(c.get(12).copied().unwrap_or(0)),
        }
    }))
}

/// Encodes `entries` (at most [`MAX_ENTRIES`] are taken) as a message's data.
pub fn encode(entries: &[Entry], out: &mut Vec<u8>) {
    for e in entries.iter().take(MAX_ENTRIES) {
        e.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let entries = [
            Entry::new(7, u64::MAX),
            Entry {
                ssrc: 0xdead_beef,
                object: 42,
                reason: Reason::TooManyHeld,
            },
        ];
        let mut data = Vec::new();
        encode(&entries, &mut data);
        assert_eq!(data.len(), 32);
        let back: Vec<Entry> = decode(&data).unwrap().collect();
        assert_eq!(back, entries);
    }

    #[test]
    fn garbage_is_refused() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0; 15]).is_err());
        assert!(decode(&[0; 17]).is_err());
        assert!(decode(&[0; 16 * (MAX_ENTRIES + 1)]).is_err());
        assert_eq!(decode(&[0xff; 16]).unwrap().count(), 1);
        assert_eq!(Kind::from_subtype(0), None);
        assert_eq!(Kind::from_subtype(31), None);
        for k in [
            Kind::Request,
            Kind::Release,
            Kind::Granted,
            Kind::Lost,
            Kind::Refused,
        ] {
            assert_eq!(Kind::from_subtype(k.subtype()), Some(k));
        }
        assert_eq!(Reason::from_code(200), Reason::None);
    }
}
