//! Bounds-checked, zero-copy reads of the draft's primitives.
//!
//! A [`Reader`] never reads past the slice it was given; sub-readers created with
//! [`Reader::sub`] are how an object's Length bounds everything inside it.

use super::error::{DecodeError, ErrorKind};

/// A cursor over a byte slice that remembers its absolute offset in the payload.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader over a whole payload (offsets start at 0).
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            base: 0,
        }
    }

    /// Absolute offset of the next byte.
    #[inline]
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when nothing is left.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// The unread bytes, without consuming them.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// An error at the current offset.
    pub fn error(&self, kind: ErrorKind) -> DecodeError {
        DecodeError::new(self.offset(), kind)
    }

    /// Takes the next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error(ErrorKind::Truncated {
                needed: n,
                available: self.remaining(),
            }));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Takes the next `n` bytes as a bounded sub-reader (an object's or TLV's Length).
    #[inline]
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a>, DecodeError> {
        let base = self.offset();
        let buf = self.take(n)?;
        Ok(Reader { buf, pos: 0, base })
    }

    /// Takes everything that is left.
    pub fn take_rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// UInt8.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    /// UInt16, network byte order.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    /// UInt32, network byte order.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    /// UInt64, network byte order.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    /// Int8.
    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.u8()? as i8)
    }
    /// Int16.
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(self.u16()? as i16)
    }
    /// Int32.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.u32()? as i32)
    }
    /// Int64.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.u64()? as i64)
    }
    /// Float16 (IEEE binary16), widened exactly to f32.
    #[inline]
    pub fn f16(&mut self) -> Result<f32, DecodeError> {
        Ok(super::float16::to_f32(self.u16()?))
    }
    /// Float32.
    #[inline]
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        Ok(f32::from_bits(self.u32()?))
    }
    /// Float64.
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// Boolean. `strict` (draft01) accepts only `00`/`01`; otherwise (gse) any non-zero is true.
    #[inline]
    pub fn boolean(&mut self, strict: bool) -> Result<bool, DecodeError> {
        let at = self.offset();
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b if strict => Err(DecodeError::new(at, ErrorKind::InvalidBoolean(b))),
            _ => Ok(true),
        }
    }

    /// VarUInt in the draft's prose forms; non-minimal forms are accepted.
    #[inline]
    pub fn varuint(&mut self) -> Result<u64, DecodeError> {
        let at = self.offset();
        let b0 = self.u8()?;
        let v = match b0 {
            0x00..=0x7f => u64::from(b0),
            0x80..=0xbf => (u64::from(b0 & 0x3f) << 8) | u64::from(self.u8()?),
            0xc0..=0xdf => (u64::from(b0 & 0x1f) << 16) | u64::from(self.u16()?),
            0xe1 => u64::from(self.u32()?),
            0xe2 => self.u64()?,
            _ => return Err(DecodeError::new(at, ErrorKind::InvalidVarPrefix(b0))),
        };
        Ok(v)
    }

    /// Skips one VarUInt without computing its value (the form is in the first byte).
    #[inline]
    pub fn skip_varuint(&mut self) -> Result<(), DecodeError> {
        let at = self.offset();
        let b0 = self.u8()?;
        let rest = match b0 {
            0x00..=0x7f => 0,
            0x80..=0xbf => 1,
            0xc0..=0xdf => 2,
            0xe1 => 4,
            0xe2 => 8,
            _ => return Err(DecodeError::new(at, ErrorKind::InvalidVarPrefix(b0))),
        };
        self.take(rest).map(|_| ())
    }

    /// VarInt: the VarUInt forms holding two's complement truncated to 7/14/21/32/64 bits.
    pub fn varint(&mut self) -> Result<i64, DecodeError> {
        let at = self.offset();
        let b0 = self.u8()?;
        let v = match b0 {
            0x00..=0x7f => sign_extend(u64::from(b0), 7),
            0x80..=0xbf => sign_extend((u64::from(b0 & 0x3f) << 8) | u64::from(self.u8()?), 14),
            0xc0..=0xdf => sign_extend((u64::from(b0 & 0x1f) << 16) | u64::from(self.u16()?), 21),
            0xe1 => i64::from(self.i32()?),
            0xe2 => self.i64()?,
            _ => return Err(DecodeError::new(at, ErrorKind::InvalidVarPrefix(b0))),
        };
        Ok(v)
    }

    /// A VarUInt length or count, checked to fit in `usize`.
    #[inline]
    pub fn length(&mut self) -> Result<usize, DecodeError> {
        let at = self.offset();
        let n = self.varuint()?;
        usize::try_from(n).map_err(|_| DecodeError::new(at, ErrorKind::LengthOverflow(n)))
    }

    /// Blob: VarUInt byte count, then the bytes.
    pub fn blob(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.length()?;
        self.take(n)
    }

    /// String: VarUInt byte count, then UTF-8.
    pub fn string(&mut self) -> Result<&'a str, DecodeError> {
        let at = self.offset();
        let bytes = self.blob()?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError::new(at, ErrorKind::InvalidUtf8))
    }
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}
