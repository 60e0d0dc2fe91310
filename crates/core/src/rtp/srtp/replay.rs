//! Per-SSRC packet indexes: the rollover counter estimate (RFC 3711 §3.3.1, Appendix A)
//! and the replay window (§3.3.2).
//!
//! A [`Window`] holds the highest index accepted on one SSRC and a bitmap of the
//! [`REPLAY_WINDOW`] indexes below it. The RFC's `s_l` and ROC are the low 16 and the next
//! 32 bits of that highest index. Checking and accepting are separate steps so that the
//! state changes only for packets that authenticated (inbound) or were sealed (outbound).

use std::collections::HashMap;

use super::REPLAY_WINDOW;

/// Largest SRTP packet index: the 32-bit ROC and the 16-bit sequence number.
const MAX_SRTP_INDEX: u64 = (1 << 48) - 1;
/// Largest SRTCP index (31 bits).
pub(super) const MAX_SRTCP_INDEX: u64 = (1 << 31) - 1;
/// Half the sequence number space: how far the estimate looks ahead and behind.
const HALF_SEQ: u16 = 0x8000;

/// The highest accepted index on one SSRC and which of the indexes below it were seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    highest: u64,
    /// Bit `k` is set when index `highest - k` was accepted.
    seen: u128,
}

// The bitmap is a u128: one bit per packet of the window.
const _: () = assert!(REPLAY_WINDOW == u128::BITS as usize);

impl Window {
    fn new(index: u64) -> Self {
        Self {
            highest: index,
            seen: 1,
        }
    }

    /// The SRTP index of sequence number `seq` (RFC 3711 Appendix A): the ROC guess that
    /// puts `seq` closest to the highest index. `None` before index 0 or past 2^48 - 1.
    fn estimate(&self, seq: u16) -> Option<u64> {
        let roc = self.highest >> 16;
        let s_l = self.highest as u16; // low 16 bits, by design
        let v = if s_l < HALF_SEQ {
            if seq > s_l && seq - s_l > HALF_SEQ {
                roc.checked_sub(1)?
            } else {
                roc
            }
        } else if seq < s_l - HALF_SEQ {
            roc + 1
        } else {
            roc
        };
        Some((v << 16) | u64::from(seq)).filter(|&index| index <= MAX_SRTP_INDEX)
    }

    /// Whether `index` is new: ahead of the highest, or inside the window and unseen.
    fn is_fresh(&self, index: u64) -> bool {
        match self.highest.checked_sub(index) {
            None => true,
            Some(behind) => behind < u64::from(u128::BITS) && self.seen & (1u128 << behind) == 0,
        }
    }

    /// Records `index` as seen, sliding the window when it is the new highest.
    fn accept(&mut self, index: u64) {
        let width = u64::from(u128::BITS);
        match self.highest.checked_sub(index) {
            None => {
                let ahead = index - self.highest;
                self.seen = if ahead < width {
                    (self.seen << ahead) | 1
                } else {
                    1
                };
                self.highest = index;
            }
            Some(behind) if behind < width => self.seen |= 1 << behind,
            Some(_) => {}
        }
    }
}

/// The windows of every SSRC one key protects or unprotects, in one direction, for SRTP
/// or for SRTCP.
///
/// An SSRC gets a window only when [`accept`](Self::accept) is called for it, so callers
/// must call it only for authenticated (or freshly sealed) packets: then no forged packet
/// can create, move or fill a window.
#[derive(Debug, Default)]
pub(super) struct Windows(HashMap<u32, Window>);

impl Windows {
    /// Room for `n` SSRCs before the first one is seen: a session's usual SSRCs then get
    /// their windows without allocating in the middle of forwarding.
    pub(super) fn with_capacity(n: usize) -> Self {
        Self(HashMap::with_capacity(n))
    }

    /// The SRTP index of sequence number `seq` on `ssrc`, if it is not one already
    /// accepted or older than the window. An SSRC not seen yet starts at ROC 0.
    pub(super) fn srtp_index(&self, ssrc: u32, seq: u16) -> Option<u64> {
        match self.0.get(&ssrc) {
            None => Some(u64::from(seq)),
            Some(w) => w.estimate(seq).filter(|&index| w.is_fresh(index)),
        }
    }

    /// Whether `index` (an SRTCP index) on `ssrc` is new.
    pub(super) fn is_fresh(&self, ssrc: u32, index: u64) -> bool {
        self.0.get(&ssrc).is_none_or(|w| w.is_fresh(index))
    }

    /// The next SRTCP index to send on `ssrc`: 0 first (RFC 3711 §3.4), then one more
    /// than the last; `None` once the 31-bit space is used up.
    pub(super) fn next_srtcp_index(&self, ssrc: u32) -> Option<u64> {
        match self.0.get(&ssrc) {
            None => Some(0),
            Some(w) => Some(w.highest + 1).filter(|&index| index <= MAX_SRTCP_INDEX),
        }
    }

    /// Records `index` as used on `ssrc`.
    pub(super) fn accept(&mut self, ssrc: u32, index: u64) {
        self.0
            .entry(ssrc)
            .and_modify(|w| w.accept(index))
            .or_insert_with(|| Window::new(index));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(highest: u64) -> Window {
        Window::new(highest)
    }

    #[test]
    fn estimate_follows_rfc_3711_appendix_a() {
        // s_l in the lower half: a sequence number far ahead belongs to the previous ROC.
        let w = window(3 << 16 | 100);
        assert_eq!(w.estimate(101), Some(3 << 16 | 101));
        assert_eq!(w.estimate(50), Some(3 << 16 | 50));
        assert_eq!(w.estimate(100 + 0x8000), Some(3 << 16 | (100 + 0x8000)));
        assert_eq!(w.estimate(101 + 0x8000), Some(2 << 16 | (101 + 0x8000)));
        assert_eq!(w.estimate(65535), Some(2 << 16 | 65535));
        // s_l in the upper half: a sequence number far behind belongs to the next ROC.
        let w = window(3 << 16 | 65000);
        assert_eq!(w.estimate(65535), Some(3 << 16 | 65535));
        assert_eq!(w.estimate(0), Some(4 << 16));
        assert_eq!(w.estimate(65000 - 0x8000), Some(3 << 16 | (65000 - 0x8000)));
        assert_eq!(
            w.estimate(65000 - 0x8000 - 1),
            Some(4 << 16 | (65000 - 0x8001))
        );
    }

    #[test]
    fn estimate_stays_inside_the_48_bit_index() {
        assert_eq!(window(100).estimate(60000), None, "before index 0");
        let last = window(MAX_SRTP_INDEX);
        assert_eq!(last.estimate(0), None, "past the last ROC");
        assert_eq!(last.estimate(65534), Some(MAX_SRTP_INDEX - 1));
    }

    #[test]
    fn window_accepts_each_index_once_and_forgets_the_too_old() {
        let mut w = window(1000);
        assert!(!w.is_fresh(1000));
        assert!(w.is_fresh(1001) && w.is_fresh(999));
        w.accept(999);
        assert!(!w.is_fresh(999));
        let oldest = 1000 - (REPLAY_WINDOW as u64 - 1);
        assert!(w.is_fresh(oldest) && !w.is_fresh(oldest - 1));
        w.accept(1005);
        assert_eq!(w.highest, 1005);
        assert!(!w.is_fresh(1000) && !w.is_fresh(999) && w.is_fresh(1001));
        w.accept(1005 + 500);
        assert_eq!(w.seen, 1);
        assert!(!w.is_fresh(1005), "now older than the window");
    }

    #[test]
    fn windows_change_only_on_accept() {
        let mut ws = Windows::default();
        assert_eq!(ws.srtp_index(7, 65535), Some(65535));
        assert_eq!(
            ws.srtp_index(7, 65535),
            Some(65535),
            "checking is not accepting"
        );
        ws.accept(7, 65535);
        assert_eq!(ws.srtp_index(7, 65535), None);
        assert_eq!(ws.srtp_index(7, 0), Some(1 << 16), "rolled over");
        assert_eq!(ws.srtp_index(8, 0), Some(0), "other SSRCs are apart");
        assert_eq!(ws.next_srtcp_index(7), Some(65536));
        assert_eq!(ws.next_srtcp_index(9), Some(0));
        ws.accept(9, MAX_SRTCP_INDEX);
        assert_eq!(ws.next_srtcp_index(9), None);
    }
}
