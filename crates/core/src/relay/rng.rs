//! The core's pseudo-random numbers (SSRCs, session ids, report jitter, view phases):
//! xorshift64, seeded by whoever builds the core, so tests replay exactly. Nothing here
//! is secret: keys come from the shells' CSPRNG, never from this.

/// A xorshift64 generator.
#[derive(Debug, Clone)]
pub(super) struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value: zero would stick, so the low bit is set).
    pub(super) fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next 64 bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// A uniform number in [0, 1).
    pub(super) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
