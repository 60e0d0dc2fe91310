//! The codec: the hot-path scanner (`wire::objects`) and the typed decoder (`wire::decode`)
//! on arbitrary bytes, in the dialect the first byte selects.
//!
//! Checks what docs/wire-format.md promises: no panic; both parsers accept exactly the
//! same payloads; on an accepted payload they agree object by object (byte range, kind,
//! objectID, position, parent); it re-encodes, and the re-encoding is canonical (decodes
//! to the same objects and re-encodes to itself).
#![no_main]

use gsrelay_core::wire::{self, ObjectRef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    let d = gsrelay_fuzz::dialect(selector);
    let scanned: Result<Vec<ObjectRef>, _> = wire::objects(payload, d).collect();
    let typed = wire::decode(payload, d);
    let (refs, objects) = match (scanned, typed) {
        (Ok(r), Ok(o)) => (r, o),
        (Err(_), Err(_)) => return,
        (s, t) => panic!("scanner and decoder disagree: {s:?} vs {t:?}"),
    };
    assert_eq!(refs.len(), objects.len());
    let mut next = 0;
    for (r, o) in refs.iter().zip(&objects) {
        assert_eq!(r.start, next, "objects are contiguous");
        next = r.end;
        assert_eq!(r.kind, wire::kind_of(o));
        assert_eq!(r.id, o.id());
        assert_eq!(r.parent, o.parent());
        let bits = |p: Option<[f32; 3]>| p.map(|p| p.map(f32::to_bits));
        assert_eq!(bits(r.position), bits(o.position()));
    }
    assert_eq!(next, payload.len(), "objects cover the payload");
    let again = wire::encode(&objects, d).expect("a decoded payload re-encodes");
    let reread = wire::decode(&again, d).expect("a re-encoded payload decodes");
    assert_eq!(json(&reread), json(&objects));
    assert_eq!(
        wire::encode(&reread, d).expect("re-encodes"),
        again,
        "canonical"
    );
});

/// Objects as JSON: NaN-safe equality (NaN != NaN for the structs' PartialEq).
fn json(objects: &[wire::Object]) -> String {
    serde_json::to_string(objects).expect("objects serialize")
}
