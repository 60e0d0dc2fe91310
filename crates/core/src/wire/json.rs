//! JSON helpers for the typed objects: floats that survive NaN/Infinity, bytes as hex.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// `#[serde(with = "json::float")]` for `f32` fields.
///
/// Finite values are JSON numbers (shortest form that round-trips the f32). Non-finite ones,
/// which JSON cannot hold, are strings: `"Infinity"`, `"-Infinity"`, `"NaN"`/`"-NaN"` for
/// the default quiet NaN, and `"NaN:0x7fc02000"` (the f32 bits) for any other NaN so that
/// `encode(decode(x)) == x` holds for payloads carrying NaN payload bits too.
pub mod float {
    use super::*;

    /// Serializes one f32.
    pub fn serialize<S: Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            return s.serialize_f32(*v);
        }
        if v.is_infinite() {
            return s.serialize_str(if *v > 0.0 { "Infinity" } else { "-Infinity" });
        }
        match v.to_bits() {
            0x7fc0_0000 => s.serialize_str("NaN"),
            0xffc0_0000 => s.serialize_str("-NaN"),
            bits => s.serialize_str(&format!("NaN:0x{bits:08x}")),
        }
    }

    /// Deserializes one f32 from a number or one of the strings above.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        d.deserialize_any(F32Visitor)
    }

    struct F32Visitor;

    impl Visitor<'_> for F32Visitor {
        type Value = f32;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(
                "a number, \"NaN\", \"-NaN\", \"NaN:0x<bits>\", \"Infinity\" or \"-Infinity\"",
            )
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f32, E> {
            Ok(v as f32)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f32, E> {
            match v {
                "Infinity" => Ok(f32::INFINITY),
                "-Infinity" => Ok(f32::NEG_INFINITY),
                "NaN" => Ok(f32::from_bits(0x7fc0_0000)),
                "-NaN" => Ok(f32::from_bits(0xffc0_0000)),
                _ => {
                    let bits = v
                        .strip_prefix("NaN:0x")
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .filter(|b| f32::from_bits(*b).is_nan())
                        .ok_or_else(|| E::custom(format!("not a float: {v:?}")))?;
                    Ok(f32::from_bits(bits))
                }
            }
        }
    }
}

/// Bytes shown as a lowercase hex string in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Hex(pub Vec<u8>);

impl Hex {
    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        hex::decode(&s).map(Hex).map_err(de::Error::custom)
    }
}
