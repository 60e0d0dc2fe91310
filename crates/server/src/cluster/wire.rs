//! The wire format of a link between two nodes (`docs/relay.md`, "Links between nodes"):
//! control frames on one bidirectional QUIC stream, each a 16-bit length then a body
//! that starts with its tag; packets as QUIC datagrams, each a fixed header then the
//! packet. Pure: no I/O, so the fuzz target drives it directly.
//!
//! | frame | tag | body after the tag |
//! |---|---|---|
//! | Hello | 1 | version u8, node name (u8 length, bytes), shards u8, SSRC u32 per shard, proof (32 bytes) |
//! | Open | 2 | from shard u16, to shard u16, session u64, room (u8 length, bytes) |
//! | Close | 3 | from shard u16, to shard u16, session u64 |
//! | Refuse | 4 | to shard u16, the receiver's session u64 |
//!
//! A datagram: from shard u16, to shard u16, session u64 (the sender's link session),
//! class u8 (0 RTP, 1 RTCP), then the packet. All integers are big-endian.

use gsrelay_core::rtp::PacketClass;

/// The ALPN of a link between nodes.
pub const ALPN: &[u8] = b"gsrelay-link/1";

/// The version a [`Hello`] carries.
pub const VERSION: u8 = 1;

/// Bytes before a datagram's packet.
pub const DATAGRAM_HEADER: usize = 13;

/// Largest control frame body: a Hello of a long name and many shards, an Open of the
/// longest room.
pub const MAX_CONTROL: usize = 1024;

/// Longest node name.
pub const MAX_NODE_NAME: usize = 63;

/// Most shards a node announces.
pub const MAX_SHARDS: usize = 64;

/// Length of a [`Hello`]'s proof (HMAC-SHA-256).
pub const PROOF_LEN: usize = 32;

/// What a node says of itself when a link opens, and its proof of the cluster's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Its name in the directory.
    pub node: String,
    /// The SSRC each of its shards' cores sends from.
    pub ssrcs: Vec<u32>,
    /// HMAC of the connection's keying material under the cluster's link key.
    pub proof: [u8; PROOF_LEN],
}

/// A control frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The first frame each side sends.
    Hello(Hello),
    /// A shard opened a link session for a room towards a shard of the receiver.
    Open {
        /// The sending shard.
        from_shard: u16,
        /// The receiving shard.
        to_shard: u16,
        /// The sender's link session.
        session: u64,
        /// The room.
        room: String,
    },
    /// A shard closed its link session.
    Close {
        /// The sending shard.
        from_shard: u16,
        /// The receiving shard.
        to_shard: u16,
        /// The sender's link session.
        session: u64,
    },
    /// The receiver's link session is refused.
    Refuse {
        /// The receiving shard.
        to_shard: u16,
        /// The receiver's link session.
        session: u64,
    },
}

/// A datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram {
    /// The sending shard.
    pub from_shard: u16,
    /// The receiving shard.
    pub to_shard: u16,
    /// The sender's link session.
    pub session: u64,
    /// RTP or RTCP.
    pub class: PacketClass,
}

/// Why a frame or datagram was refused; [`WireError::reason`] names it for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// It ended before its fields did.
    #[error("truncated")]
    Truncated,
    /// Bytes were left after its last field.
    #[error("trailing bytes")]
    Trailing,
    /// Its tag is not one of the table's.
    #[error("unknown frame tag {0}")]
    UnknownTag(u8),
    /// A Hello of another version.
    #[error("link version {0} is not {VERSION}")]
    Version(u8),
    /// A name or room out of bounds, or not UTF-8.
    #[error("bad name")]
    BadName,
    /// More shards than [`MAX_SHARDS`], or none.
    #[error("bad shard count")]
    BadShards,
    /// A class byte other than 0 or 1.
    #[error("unknown packet class {0}")]
    BadClass(u8),
    /// A control frame longer than [`MAX_CONTROL`].
    #[error("frame too long")]
    TooLong,
}

impl WireError {
    /// The metrics' reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Truncated => "link_truncated",
            Self::Trailing => "link_trailing",
            Self::UnknownTag(_) => "link_unknown_tag",
            Self::Version(_) => "link_version",
            Self::BadName => "link_bad_name",
            Self::BadShards => "link_bad_shards",
            Self::BadClass(_) => "link_bad_class",
            Self::TooLong => "link_too_long",
        }
    }
}

const HELLO: u8 = 1;
const OPEN: u8 = 2;
const CLOSE: u8 = 3;
const REFUSE: u8 = 4;

/// Appends `frame` to `out`, length first; a frame out of the format's bounds is
/// refused and leaves `out` as it was.
pub fn write_control(frame: &Control, out: &mut Vec<u8>) -> Result<(), WireError> {
    let start = out.len();
    out.extend_from_slice(&[0, 0]);
    let written = write_body(frame, out).and_then(|()| {
        let len = out.len() - start - 2;
        match u16::try_from(len) {
            Ok(n) if len <= MAX_CONTROL => Ok(n),
            _ => Err(WireError::TooLong),
        }
    });
    match written {
        Ok(len) => {
            out[start..start + 2].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

fn write_body(frame: &Control, out: &mut Vec<u8>) -> Result<(), WireError> {
    match frame {
        Control::Hello(h) => {
            out.push(HELLO);
            out.push(VERSION);
            put_name(out, &h.node, MAX_NODE_NAME)?;
            let n = u8::try_from(h.ssrcs.len())
                .ok()
                .filter(|n| (1..=MAX_SHARDS).contains(&usize::from(*n)))
                .ok_or(WireError::BadShards)?;
            out.push(n);
            for s in &h.ssrcs {
                out.extend_from_slice(&s.to_be_bytes());
            }
            out.extend_from_slice(&h.proof);
        }
        Control::Open {
            from_shard,
            to_shard,
            session,
            room,
        } => {
            out.push(OPEN);
            put_route(out, *from_shard, *to_shard, *session);
            put_name(out, room, usize::from(u8::MAX))?;
        }
        Control::Close {
            from_shard,
            to_shard,
            session,
        } => {
            out.push(CLOSE);
            put_route(out, *from_shard, *to_shard, *session);
        }
        Control::Refuse { to_shard, session } => {
            out.push(REFUSE);
            out.extend_from_slice(&to_shard.to_be_bytes());
            out.extend_from_slice(&session.to_be_bytes());
        }
    }
    Ok(())
}

fn put_route(out: &mut Vec<u8>, from_shard: u16, to_shard: u16, session: u64) {
    out.extend_from_slice(&from_shard.to_be_bytes());
    out.extend_from_slice(&to_shard.to_be_bytes());
    out.extend_from_slice(&session.to_be_bytes());
}

fn put_name(out: &mut Vec<u8>, name: &str, max: usize) -> Result<(), WireError> {
    let len = u8::try_from(name.len())
        .ok()
        .filter(|n| (1..=max).contains(&usize::from(*n)))
        .ok_or(WireError::BadName)?;
    out.push(len);
    out.extend_from_slice(name.as_bytes());
    Ok(())
}

/// The length of a control frame from its two-byte prefix; refused past [`MAX_CONTROL`]
/// or at zero.
pub fn control_len(prefix: [u8; 2]) -> Result<usize, WireError> {
    let len = usize::from(u16::from_be_bytes(prefix));
    match len {
        0 => Err(WireError::Truncated),
        n if n > MAX_CONTROL => Err(WireError::TooLong),
        n => Ok(n),
    }
}

/// A reader over a frame's body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(b))
    }

    fn name(&mut self, max: usize) -> Result<String, WireError> {
        let len = usize::from(self.u8()?);
        if !(1..=max).contains(&len) {
            return Err(WireError::BadName);
        }
        let bytes = self.take(len)?;
        let s = std::str::from_utf8(bytes).map_err(|_| WireError::BadName)?;
        if s.chars().any(char::is_control) {
            return Err(WireError::BadName);
        }
        Ok(s.to_owned())
    }

    fn end(&self) -> Result<(), WireError> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err(WireError::Trailing),
        }
    }
}

/// Parses a control frame's body (after its length).
pub fn read_control(body: &[u8]) -> Result<Control, WireError> {
    if body.len() > MAX_CONTROL {
        return Err(WireError::TooLong);
    }
    let mut r = Reader(body);
    let frame = match r.u8()? {
        HELLO => {
            let version = r.u8()?;
            if version != VERSION {
                return Err(WireError::Version(version));
            }
            let node = r.name(MAX_NODE_NAME)?;
            let n = usize::from(r.u8()?);
            if !(1..=MAX_SHARDS).contains(&n) {
                return Err(WireError::BadShards);
            }
            let ssrcs = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
            let mut proof = [0; PROOF_LEN];
            proof.copy_from_slice(r.take(PROOF_LEN)?);
            Control::Hello(Hello { node, ssrcs, proof })
        }
        OPEN => Control::Open {
            from_shard: r.u16()?,
            to_shard: r.u16()?,
            session: r.u64()?,
            room: r.name(usize::from(u8::MAX))?,
        },
        CLOSE => Control::Close {
            from_shard: r.u16()?,
            to_shard: r.u16()?,
            session: r.u64()?,
        },
        REFUSE => Control::Refuse {
            to_shard: r.u16()?,
            session: r.u64()?,
        },
        tag => return Err(WireError::UnknownTag(tag)),
    };
    r.end()?;
    Ok(frame)
}

/// Writes a datagram's header into `out[..DATAGRAM_HEADER]`.
pub fn write_datagram_header(d: &Datagram, out: &mut [u8; DATAGRAM_HEADER]) {
    out[0..2].copy_from_slice(&d.from_shard.to_be_bytes());
    out[2..4].copy_from_slice(&d.to_shard.to_be_bytes());
    out[4..12].copy_from_slice(&d.session.to_be_bytes());
    out[12] = match d.class {
        PacketClass::Rtp => 0,
        PacketClass::Rtcp | PacketClass::Other => 1,
    };
}

/// Parses a datagram: its header and its packet.
pub fn read_datagram(buf: &[u8]) -> Result<(Datagram, &[u8]), WireError> {
    let mut r = Reader(buf);
    let from_shard = r.u16()?;
    let to_shard = r.u16()?;
    let session = r.u64()?;
    let class = match r.u8()? {
        0 => PacketClass::Rtp,
        1 => PacketClass::Rtcp,
        c => return Err(WireError::BadClass(c)),
    };
    let d = Datagram {
        from_shard,
        to_shard,
        session,
        class,
    };
    Ok((d, r.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Control) {
        let mut out = Vec::new();
        write_control(&frame, &mut out).unwrap();
        let len = control_len([out[0], out[1]]).unwrap();
        assert_eq!(len, out.len() - 2);
        assert_eq!(read_control(&out[2..]), Ok(frame));
    }

    #[test]
    fn every_control_frame_round_trips() {
        round_trip(Control::Hello(Hello {
            node: "node-a".into(),
            ssrcs: vec![1, 0xdead_beef],
            proof: [7; PROOF_LEN],
        }));
        round_trip(Control::Open {
            from_shard: 1,
            to_shard: 2,
            session: u64::MAX,
            room: "arena".into(),
        });
        round_trip(Control::Close {
            from_shard: 3,
            to_shard: 0,
            session: 9,
        });
        round_trip(Control::Refuse {
            to_shard: 1,
            session: 5,
        });
    }

    #[test]
    fn a_datagram_round_trips() {
        let d = Datagram {
            from_shard: 1,
            to_shard: 65535,
            session: 42,
            class: PacketClass::Rtcp,
        };
        let mut buf = [0; DATAGRAM_HEADER];
        write_datagram_header(&d, &mut buf);
        let mut bytes = buf.to_vec();
        bytes.extend_from_slice(b"payload");
        assert_eq!(read_datagram(&bytes), Ok((d, &b"payload"[..])));
    }

    #[test]
    fn garbage_is_refused_by_reason() {
        assert_eq!(read_control(&[]), Err(WireError::Truncated));
        assert_eq!(read_control(&[9]), Err(WireError::UnknownTag(9)));
        assert_eq!(read_control(&[HELLO, 2]), Err(WireError::Version(2)));
        assert_eq!(read_control(&[HELLO, VERSION, 0]), Err(WireError::BadName));
        assert_eq!(
            read_control(&[HELLO, VERSION, 1, b'a', 0]),
            Err(WireError::BadShards)
        );
        assert_eq!(
            read_control(&[OPEN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]),
            Err(WireError::BadName)
        );
        assert_eq!(
            read_control(&[REFUSE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(WireError::Trailing)
        );
        assert_eq!(control_len([0, 0]), Err(WireError::Truncated));
        assert_eq!(control_len([0xff, 0xff]), Err(WireError::TooLong));
        assert_eq!(read_datagram(&[0; 12]), Err(WireError::Truncated));
        let mut bad = [0; DATAGRAM_HEADER];
        bad[12] = 7;
        assert_eq!(read_datagram(&bad), Err(WireError::BadClass(7)));
    }

    #[test]
    fn a_frame_past_its_bounds_is_not_written() {
        let mut out = Vec::new();
        let hello = Control::Hello(Hello {
            node: "n".repeat(MAX_NODE_NAME + 1),
            ssrcs: vec![1],
            proof: [0; PROOF_LEN],
        });
        assert_eq!(write_control(&hello, &mut out), Err(WireError::BadName));
        assert!(out.is_empty());
        let none = Control::Hello(Hello {
            node: "n".into(),
            ssrcs: vec![],
            proof: [0; PROOF_LEN],
        });
        assert_eq!(
            write_control(&none, &mut Vec::new()),
            Err(WireError::BadShards)
        );
    }
}
