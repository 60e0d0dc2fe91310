//! The codec on its own, no network: an encoder that appends objects to a payload and a
//! decoder that reads them back one at a time, as the reference implementation's
//! `GSEncoderInit`/`GSEncodeObject` and `GSDecoderInit`/`GSDecodeObject` do (the mapping is
//! in `docs/c-client.md`, "Moving over from gse").
//!
//! The one difference a gse user meets: the contexts own their buffers. The encoder keeps
//! the payload it builds ([`gsr_encoder_data`]); the decoder copies what it is given, so
//! the caller's buffer may be reused at once.

#![allow(non_camel_case_types)]

use crate::handle::{Kind, Registry};
use crate::object::{Storage, from_c, gsr_object, to_c};
use crate::status::{Error, GSR_END, GSR_OK, code, gsr_status, guard};
use gsrelay_core::wire::layout::read_tlv;
use gsrelay_core::wire::reader::Reader;
use gsrelay_core::wire::{Dialect, decode_tlv, encode_object};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A wire dialect: [`GSR_DIALECT_DRAFT01`] or [`GSR_DIALECT_GSE`].
pub type gsr_dialect = u32;
/// draft-01 as written (the default).
pub const GSR_DIALECT_DRAFT01: gsr_dialect = 0;
/// Byte-compatible with the reference implementation (cisco/gse).
pub const GSR_DIALECT_GSE: gsr_dialect = 1;

/// The dialect a C value names.
pub fn dialect(d: gsr_dialect) -> Result<Dialect, Error> {
    match d {
        GSR_DIALECT_DRAFT01 => Ok(Dialect::Draft01),
        GSR_DIALECT_GSE => Ok(Dialect::Gse),
        d => Err(Error::argument(format!("dialect {d} is not a dialect"))),
    }
}

/// An encoder's handle.
pub type gsr_encoder = u64;
/// A decoder's handle.
pub type gsr_decoder = u64;

struct Encoder {
    dialect: Dialect,
    state: Mutex<EncoderState>,
}

#[derive(Default)]
struct EncoderState {
    out: Vec<u8>,
    scratch: Vec<u8>,
}

struct Decoder {
    dialect: Dialect,
    state: Mutex<DecoderState>,
}

#[derive(Default)]
struct DecoderState {
    data: Vec<u8>,
    at: usize,
    storage: Storage,
}

static ENCODERS: Registry<Encoder> = Registry::new(Kind::Encoder);
static DECODERS: Registry<Decoder> = Registry::new(Kind::Decoder);

/// A context's state; a panic that poisoned it left it whole (each call writes it in one
/// step at its end), so it is taken as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `value` through `out`, refusing a null `out`.
///
/// # Safety
/// `out` must be null or valid for a write of `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-null, and the caller promises it is valid for a write.
    unsafe { out.write(value) };
    Ok(())
}

/// Makes a context for `dialect` with `make`, keeps it in `registry` and writes its handle.
///
/// # Safety
/// `out` must be null or writable.
unsafe fn new_context<T>(
    registry: &Registry<T>,
    d: gsr_dialect,
    out: *mut u64,
    make: fn(Dialect) -> T,
) -> gsr_status {
    guard(|| {
        let d = dialect(d)?;
        if out.is_null() {
            return Err(Error::null("out"));
        }
        let handle = registry.insert(make(d));
        // SAFETY: checked non-null above; the caller promises it is writable.
        unsafe { put(out, handle, "out") }?;
        Ok(GSR_OK)
    })
}

/// A new encoder for `dialect`, empty, in `*out`.
///
/// # Safety
/// `out` must be null or point at a writable `gsr_encoder`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_encoder_new(
    dialect: gsr_dialect,
    out: *mut gsr_encoder,
) -> gsr_status {
    let make = |dialect| Encoder {
        dialect,
        state: Mutex::default(),
    };
    // SAFETY: the caller's promise, passed on.
    unsafe { new_context(&ENCODERS, dialect, out, make) }
}

/// Appends `object`, encoded in the encoder's dialect, to its payload. On an error the
/// payload is unchanged.
///
/// # Safety
/// `object` must be null or point at a `gsr_object` whose pointers are valid for the
/// counts beside them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_encode_object(
    encoder: gsr_encoder,
    object: *const gsr_object,
) -> gsr_status {
    guard(|| {
        let enc = ENCODERS.get(encoder)?;
        // SAFETY: the caller promises null or a valid object.
        let object = unsafe { object.as_ref() }.ok_or_else(|| Error::null("object"))?;
        // SAFETY: the caller's promise on the object's pointers.
        let object = unsafe { from_c(object, enc.dialect == Dialect::Gse) }?;
        let mut st = lock(&enc.state);
        let EncoderState { out, scratch } = &mut *st;
        let before = out.len();
        if let Err(e) = encode_object(&object, enc.dialect, scratch, out) {
            out.truncate(before);
            return Err(Error::new(code::ENCODE, e.to_string()));
        }
        Ok(GSR_OK)
    })
}

/// The payload so far: `*data` and `*length`, valid until the next call on this encoder.
///
/// # Safety
/// `data` and `length` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_encoder_data(
    encoder: gsr_encoder,
    data: *mut *const u8,
    length: *mut usize,
) -> gsr_status {
    guard(|| {
        let enc = ENCODERS.get(encoder)?;
        if data.is_null() || length.is_null() {
            return Err(Error::null("data or length"));
        }
        let st = lock(&enc.state);
        // SAFETY: both checked non-null; the caller promises they are writable. The bytes
        // stay where they are until the next call on this encoder changes `out`.
        unsafe {
            put(data, st.out.as_ptr(), "data")?;
            put(length, st.out.len(), "length")?;
        }
        Ok(GSR_OK)
    })
}

/// Empties the encoder's payload.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_encoder_reset(encoder: gsr_encoder) -> gsr_status {
    guard(|| {
        lock(&ENCODERS.get(encoder)?.state).out.clear();
        Ok(GSR_OK)
    })
}

/// Frees the encoder; its handle is dead from then on (a second free is `GSR_ERR_HANDLE`).
#[unsafe(no_mangle)]
pub extern "C" fn gsr_encoder_free(encoder: gsr_encoder) -> gsr_status {
    guard(|| ENCODERS.remove(encoder).map(|_| GSR_OK))
}

/// A new decoder for `dialect`, with nothing to decode, in `*out`.
///
/// # Safety
/// `out` must be null or point at a writable `gsr_decoder`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_decoder_new(
    dialect: gsr_dialect,
    out: *mut gsr_decoder,
) -> gsr_status {
    let make = |dialect| Decoder {
        dialect,
        state: Mutex::default(),
    };
    // SAFETY: the caller's promise, passed on.
    unsafe { new_context(&DECODERS, dialect, out, make) }
}

/// Gives the decoder a payload to read from its start: `length` bytes at `data`, copied.
///
/// # Safety
/// `data` must point at `length` readable bytes (or `length` be 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_decoder_set_buffer(
    decoder: gsr_decoder,
    data: *const u8,
    length: usize,
) -> gsr_status {
    guard(|| {
        let dec = DECODERS.get(decoder)?;
        if length > 0 && data.is_null() {
            return Err(Error::null("data"));
        }
        let mut st = lock(&dec.state);
        st.data.clear();
        if length > 0 {
            // SAFETY: non-null with `length` readable bytes, as the caller promises.
            st.data
                .extend_from_slice(unsafe { std::slice::from_raw_parts(data, length) });
        }
        st.at = 0;
        Ok(GSR_OK)
    })
}

/// Decodes the next object into `*object`: `GSR_OK`, or `GSR_END` when the payload has no
/// more. Its arrays and bytes stay valid until the next call on this decoder. On
/// `GSR_ERR_DECODE` the decoder stays at the bad object (the rest cannot be framed).
///
/// # Safety
/// `object` must be null or point at a writable `gsr_object`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_decode_object(
    decoder: gsr_decoder,
    object: *mut gsr_object,
) -> gsr_status {
    guard(|| {
        let dec = DECODERS.get(decoder)?;
        if object.is_null() {
            return Err(Error::null("object"));
        }
        let mut st = lock(&dec.state);
        let DecoderState { data, at, storage } = &mut *st;
        let rest = data.get(*at..).unwrap_or_default();
        if rest.is_empty() {
            return Ok(GSR_END);
        }
        let mut r = Reader::new(rest);
        let decoded = read_tlv(&mut r).and_then(|tlv| decode_tlv(tlv, dec.dialect));
        let decoded = decoded
            .map_err(|e| Error::new(code::DECODE, format!("the object at byte {}: {e}", *at)))?;
        *at += r.offset();
        storage.clear();
        storage.reserve_for(std::iter::once(&decoded));
        let c = to_c(&decoded, storage);
        // SAFETY: checked non-null above; the caller promises it is writable.
        unsafe { put(object, c, "object") }?;
        Ok(GSR_OK)
    })
}

/// Frees the decoder; its handle is dead from then on.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_decoder_free(decoder: gsr_decoder) -> gsr_status {
    guard(|| DECODERS.remove(decoder).map(|_| GSR_OK))
}
