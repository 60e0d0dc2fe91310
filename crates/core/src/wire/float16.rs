//! Float16 conversions: IEEE 754 binary16, rounding to nearest with ties to even, and NaN
//! payloads (signalling bit included) carried through f32 unchanged so that a decoded
//! payload re-encodes to the same bytes.

use half::f16;

/// Widens a Float16 to f32 exactly.
pub fn to_f32(bits: u16) -> f32 {
    if bits & 0x7c00 == 0x7c00 && bits & 0x03ff != 0 {
        // `half` quiets signalling NaNs; shift the payload across unchanged instead.
        let sign = u32::from(bits & 0x8000) << 16;
        return f32::from_bits(sign | 0x7f80_0000 | (u32::from(bits & 0x03ff) << 13));
    }
    f16::from_bits(bits).to_f32()
}

/// Narrows an f32 to Float16 (round to nearest, ties to even; NaN payload kept).
pub fn from_f32(v: f32) -> u16 {
    if v.is_nan() {
        let b = v.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let payload = ((b >> 13) & 0x03ff) as u16;
        // A payload only in the low f32 bits would narrow to Infinity: keep it a NaN.
        return sign | 0x7c00 | if payload == 0 { 0x0200 } else { payload };
    }
    f16::from_f32(v).to_bits()
}
