//! The game-state codec on its own: payloads to and from the JSON form of
//! `gsrelay_core::wire::Object` (what `gsrelay decode` prints). The Python package turns
//! that form into its dataclasses (`gsrelay/objects.py`), so the one codec of the
//! workspace does every byte.

use crate::errors::{Class, error};
use gsrelay_core::wire::{self, Dialect, Object};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Most bytes of one payload the module encodes, decodes or publishes: the relay's
/// `max_packet_bytes` (1500) less the RTP header and the SRTP tag, rounded down.
pub const MAX_PAYLOAD: usize = 1400;

/// A dialect by name: `draft01` (the default) or `gse`.
pub fn dialect(name: &str) -> PyResult<Dialect> {
    match name {
        "draft01" => Ok(Dialect::Draft01),
        "gse" => Ok(Dialect::Gse),
        other => Err(error(
            Class::Argument,
            "dialect",
            format!("unknown dialect {other:?}: expected \"draft01\" or \"gse\""),
            None,
        )),
    }
}

/// Refuses a payload longer than [`MAX_PAYLOAD`].
pub fn check_size(len: usize) -> PyResult<()> {
    if len > MAX_PAYLOAD {
        return Err(error(
            Class::Codec,
            "too_large",
            format!("a payload of {len} bytes is over the {MAX_PAYLOAD}-byte limit"),
            None,
        ));
    }
    Ok(())
}

/// The objects of a JSON array, as the codec reads them.
pub fn objects_from_json(json: &str) -> PyResult<Vec<Object>> {
    serde_json::from_str(json).map_err(|e| {
        error(
            Class::Codec,
            "bad_object",
            format!("not a list of objects: {e}"),
            None,
        )
    })
}

/// Encodes objects into one payload (of any length: [`check_size`] is the publish's).
pub fn encode_objects(objects: &[Object], dialect: Dialect) -> PyResult<Vec<u8>> {
    wire::encode(objects, dialect)
        .map_err(|e| error(Class::Codec, "encode", format!("cannot encode: {e}"), None))
}

/// `encode(objects_json, dialect)`: the payload of the objects given as a JSON array.
#[pyfunction]
pub fn encode<'py>(
    py: Python<'py>,
    objects_json: &str,
    dialect: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let d = self::dialect(dialect)?;
    let objects = objects_from_json(objects_json)?;
    let payload = encode_objects(&objects, d)?;
    Ok(PyBytes::new(py, &payload))
}

/// `decode(payload, dialect)`: the payload's objects as a JSON array.
#[pyfunction]
pub fn decode(payload: &[u8], dialect: &str) -> PyResult<String> {
    let d = self::dialect(dialect)?;
    let objects = wire::decode(payload, d)
        .map_err(|e| error(Class::Codec, "decode", format!("cannot decode: {e}"), None))?;
    serde_json::to_string(&objects)
        .map_err(|e| error(Class::Codec, "decode", format!("cannot show: {e}"), None))
}

/// `validate(payload, dialect)`: how many objects a payload holds, or the reason the
/// relay would drop it.
#[pyfunction]
pub fn validate(payload: &[u8], dialect: &str) -> PyResult<usize> {
    let d = self::dialect(dialect)?;
    wire::validate(payload, d).map_err(|e| {
        error(
            Class::Codec,
            "decode",
            format!("not a game-state payload: {e}"),
            None,
        )
    })
}
