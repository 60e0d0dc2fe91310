//! Whether a subscriber may receive an object: its interest admits the type, and the
//! object's bytes mean the same in the subscriber's dialect. A leaf: forwarding,
//! snapshots and aggregated delivery all ask it.

use super::interest::Interest;
use crate::wire::{Dialect, ObjectKind, ObjectRef, writer::varuint_len};

/// Whether a subscriber gets an object: its interest admits the type, and the object
/// means the same in the subscriber's dialect (docs/relay.md, "Mixed dialects").
pub(super) fn admits(interest: &Interest, to: Dialect, from: Dialect, r: &ObjectRef) -> bool {
    interest.admits_object(r.tag, r.kind)
        && portable(r.tag, r.kind, r.id, r.end - r.start, from, to)
}

/// Objects whose bytes read the same in both dialects: Hand1, a Head1 without its IPD
/// part (the IPD tag differs), and tags neither dialect knows.
pub(super) fn portable(
    tag: u64,
    kind: ObjectKind,
    id: Option<u64>,
    len: usize,
    from: Dialect,
    to: Dialect,
) -> bool {
    if from == to {
        return true;
    }
    if to.kind_of(tag) != kind {
        return false;
    }
    match kind {
        ObjectKind::Hand1 | ObjectKind::Unknown => true,
        ObjectKind::Head1 => id.is_some_and(|id| len == 2 + varuint_len(id) + 32),
        _ => false,
    }
}
