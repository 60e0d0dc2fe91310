//! What the poll's test and benchmark share: a load of Head1 updates as the network
//! thread writes them.

use gsrelay_core::wire::{self, Dialect, Head1, Loc2, Object};
use gsrelay_ffi::GSR_EVENT_OBJECT;
use gsrelay_ffi::events::Batch;

/// `n` Head1 updates, objectIDs 0.., each its own TLV (draft-01).
pub fn heads(n: usize) -> Vec<Vec<u8>> {
    (0..n as u64)
        .map(|id| {
            let head = Object::Head1(Head1 {
                id,
                location: Loc2 {
                    x: id as f32,
                    ..Loc2::default()
                },
                ..Head1::default()
            });
            wire::encode(&[head], Dialect::Draft01).expect("encode")
        })
        .collect()
}

/// Writes one object event per TLV into `local`, as stream 7's.
pub fn push_all(local: &mut Batch, tlvs: &[Vec<u8>]) {
    for (i, tlv) in tlvs.iter().enumerate() {
        local.push(GSR_EVENT_OBJECT, 7, i as u64, 0, 0, tlv);
    }
}
