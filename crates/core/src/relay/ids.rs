//! Maps keyed by session id, with a cheap hash. The relay numbers sessions itself (from a
//! random start, one after another), so no client chooses these keys and SipHash's
//! protection against chosen collisions buys nothing; on the per-packet path (one lookup
//! per subscriber per packet) a multiply is what the hash should cost.

use super::api::SessionId;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by session id.
pub type IdMap<V> = HashMap<SessionId, V, BuildHasherDefault<IdHasher>>;

/// A set of session ids.
pub type IdSet = HashSet<SessionId, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing: consecutive ids land in distinct buckets and spread over the high
/// bits the table also uses.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let h = (self.0 ^ n).wrapping_mul(GOLDEN);
        self.0 = h ^ (h >> 29);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_are_found_and_distinct() {
        let start = 0xdead_beef_0000_0000u64;
        let map: IdMap<u64> = (start..start + 10_000).map(|k| (k, k ^ 1)).collect();
        assert_eq!(map.len(), 10_000);
        assert!((start..start + 10_000).all(|k| map.get(&k) == Some(&(k ^ 1))));
        assert_eq!(map.get(&(start + 10_000)), None);
    }
}
