//! Writes the draft's primitives into a byte vector, always in the minimal form.

/// Appends primitives to a `Vec<u8>` in network byte order.
pub trait WriteExt {
    /// UInt16.
    fn put_u16(&mut self, v: u16);
    /// UInt32.
    fn put_u32(&mut self, v: u32);
    /// Float16, rounded to nearest, ties to even (IEEE 754).
    fn put_f16(&mut self, v: f32);
    /// Float32.
    fn put_f32(&mut self, v: f32);
    /// Boolean as `00`/`01`.
    fn put_bool(&mut self, v: bool);
    /// VarUInt, minimal form.
    fn put_varuint(&mut self, v: u64);
    /// VarInt, minimal form.
    fn put_varint(&mut self, v: i64);
    /// String or Blob: VarUInt byte count, then the bytes.
    fn put_blob(&mut self, v: &[u8]);
}

impl WriteExt for Vec<u8> {
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_f16(&mut self, v: f32) {
        self.put_u16(super::float16::from_f32(v));
    }
    fn put_f32(&mut self, v: f32) {
        self.put_u32(v.to_bits());
    }
    fn put_bool(&mut self, v: bool) {
        self.push(u8::from(v));
    }
    fn put_varuint(&mut self, v: u64) {
        match v {
            0..=0x7f => self.push(v as u8),
            0x80..=0x3fff => self.extend_from_slice(&[0x80 | (v >> 8) as u8, v as u8]),
            0x4000..=0x1f_ffff => {
                self.extend_from_slice(&[0xc0 | (v >> 16) as u8, (v >> 8) as u8, v as u8])
            }
            0x20_0000..=0xffff_ffff => {
                self.push(0xe1);
                self.put_u32(v as u32);
            }
            _ => {
                self.push(0xe2);
                self.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
    fn put_varint(&mut self, v: i64) {
        let u = v as u64;
        match v {
            -64..=63 => self.push((u & 0x7f) as u8),
            -8192..=8191 => self.extend_from_slice(&[0x80 | ((u >> 8) & 0x3f) as u8, u as u8]),
            -1_048_576..=1_048_575 => {
                self.extend_from_slice(&[0xc0 | ((u >> 16) & 0x1f) as u8, (u >> 8) as u8, u as u8])
            }
            _ if i32::try_from(v).is_ok() => {
                self.push(0xe1);
                self.put_u32(v as i32 as u32);
            }
            _ => {
                self.push(0xe2);
                self.extend_from_slice(&u.to_be_bytes());
            }
        }
    }
    fn put_blob(&mut self, v: &[u8]) {
        self.put_varuint(v.len() as u64);
        self.extend_from_slice(v);
    }
}

/// Bytes a VarUInt takes in its minimal form.
pub fn varuint_len(v: u64) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}
