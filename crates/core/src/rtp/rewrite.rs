//! Per-subscriber sequence number and timestamp rewriting (RFC 7667 §3.7).
//!
//! Each subscriber sees each forwarded stream under its original SSRC but with its own
//! sequence numbers, so that what the relay filters out or injects never looks like loss or
//! reordering. A [`SeqRewriter`] holds that mapping for one (subscriber, SSRC) pair.
//!
//! # Rules
//!
//! Sequence numbers (all arithmetic modulo 2^16):
//! - The first packet sent gets the initial number given to [`SeqRewriter::new`]; every later
//!   packet sent "in line" gets the number after the last one issued.
//! - [`forward`](SeqRewriter::forward): a source packet newer than any seen before keeps its
//!   distance to the previous one, so a gap the *source* left (upstream loss, not yet arrived)
//!   stays a gap the subscriber can report. A late packet (up to [`MAX_MISORDER`] behind) gets
//!   the number its position implies, provided nothing was filtered or injected since it was
//!   due; otherwise, and for a duplicate of the newest, it is refused (`None`): numbers it
//!   could take are already taken, and for game state a late update is stale anyway. A late
//!   packet seen twice gets the same number twice, a duplicate receivers discard.
//! - [`filter`](SeqRewriter::filter): a newer source packet the relay does not send consumes
//!   no number; only the source gap before it is kept.
//! - [`inject`](SeqRewriter::inject): a relay-made packet (snapshot) takes the next number.
//! - A forward jump of [`MAX_DROPOUT`] or more, or a backward one beyond [`MAX_MISORDER`], is
//!   a source restart (RFC 3550 A.1): it continues the output without a gap.
//!
//! Timestamps (modulo 2^32):
//! - A forwarded packet's timestamp is the source's plus the fixed offset given to
//!   [`SeqRewriter::new`]. With offset 0 the source's SR timestamps stay valid as they are.
//! - An injected packet's timestamp is the caller's source timestamp plus the offset, raised
//!   to the latest timestamp sent so far if it is older: injected packets never go backwards.

/// Largest forward jump taken as loss rather than a source restart (RFC 3550 A.1).
pub const MAX_DROPOUT: u16 = 3000;
/// Largest backward step taken as reordering rather than a source restart (RFC 3550 A.1).
pub const MAX_MISORDER: u16 = 100;

/// The output sequence number and timestamp for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewritten {
    /// Sequence number to send.
    pub sequence_number: u16,
    /// RTP timestamp to send.
    pub timestamp: u32,
}

/// Where the source is: its newest sequence number, and the newest one a late packet can no
/// longer be mapped past (set whenever numbering stops following the source's distances).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Source {
    highest: u16,
    floor: u16,
}

/// How a source sequence number relates to the newest one seen.
enum Order {
    Duplicate,
    /// Newer by this many (1..MAX_DROPOUT).
    Newer(u16),
    /// Older by this many (1..=MAX_MISORDER).
    Late(u16),
    Restart,
}

impl Source {
    fn order(&self, seq: u16) -> Order {
        match seq.wrapping_sub(self.highest) {
            0 => Order::Duplicate,
            d if d < MAX_DROPOUT => Order::Newer(d),
            d if d.wrapping_neg() <= MAX_MISORDER => Order::Late(d.wrapping_neg()),
            _ => Order::Restart,
        }
    }
}

/// Rewriting state for one forwarded stream towards one subscriber. Pure, fixed-size state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRewriter {
    /// The number the next in-line packet gets.
    next_seq: u16,
    ts_offset: u32,
    /// Latest output timestamp, in RTP (wrapping) order; `None` before the first packet.
    last_ts: Option<u32>,
    /// `None` until the first source packet is forwarded.
    source: Option<Source>,
}

impl SeqRewriter {
    /// A rewriter whose first packet is numbered `first_seq` (RFC 3550 suggests a random one)
    /// and whose output timestamps are the source's plus `ts_offset`.
    pub fn new(first_seq: u16, ts_offset: u32) -> Self {
        SeqRewriter {
            next_seq: first_seq,
            ts_offset,
            last_ts: None,
            source: None,
        }
    }

    /// The number the next in-line packet gets.
    pub fn next_seq(&self) -> u16 {
        self.next_seq
    }

    /// What is added to source timestamps (the subscriber's timestamp space).
    pub fn ts_offset(&self) -> u32 {
        self.ts_offset
    }

    /// Numbers a source packet the relay sends; `None` if it must not be sent (see the rules).
    pub fn forward(&mut self, src_seq: u16, src_ts: u32) -> Option<Rewritten> {
        let sequence_number = match &mut self.source {
            None => {
                self.source = Some(Source {
                    highest: src_seq,
                    floor: src_seq,
                });
                self.issue(1)
            }
            Some(src) => match src.order(src_seq) {
                Order::Duplicate => return None,
                Order::Newer(d) => {
                    src.highest = src_seq;
                    // Late packets come at most MAX_MISORDER behind: pulling the floor up to
                    // there keeps its distance from wrapping on a long stream.
                    if src_seq.wrapping_sub(src.floor) > MAX_MISORDER {
                        src.floor = src_seq.wrapping_sub(MAX_MISORDER + 1);
                    }
                    self.issue(d)
                }
                Order::Late(back) => {
                    if back >= src.highest.wrapping_sub(src.floor) {
                        return None;
                    }
                    // The slot `back` before the newest issued number was left as a gap.
                    self.next_seq.wrapping_sub(1).wrapping_sub(back)
                }
                Order::Restart => {
                    *src = Source {
                        highest: src_seq,
                        floor: src_seq,
                    };
                    self.issue(1)
                }
            },
        };
        let timestamp = src_ts.wrapping_add(self.ts_offset);
        self.last_ts = Some(match self.last_ts {
            Some(last) if !is_newer_ts(timestamp, last) => last,
            _ => timestamp,
        });
        Some(Rewritten {
            sequence_number,
            timestamp,
        })
    }

    /// Records a source packet the relay does not send, so that it leaves no gap.
    pub fn filter(&mut self, src_seq: u16) {
        let Some(src) = &mut self.source else {
            // Nothing numbered yet: the first packet sent starts the sequence anyway.
            return;
        };
        match src.order(src_seq) {
            Order::Newer(d) => {
                // Keep the source's own gap before this packet, but give its number back.
                self.next_seq = self.next_seq.wrapping_add(d - 1);
                *src = Source {
                    highest: src_seq,
                    floor: src_seq,
                };
            }
            Order::Restart => {
                *src = Source {
                    highest: src_seq,
                    floor: src_seq,
                };
            }
            // A late or duplicate packet had no number to give back.
            Order::Duplicate | Order::Late(_) => {}
        }
    }

    /// Numbers a packet the relay makes itself, e.g. a snapshot packet.
    ///
    /// `src_ts` is the source timestamp the content corresponds to (e.g. the newest the relay
    /// holds for the stream); the result never precedes the latest timestamp sent.
    pub fn inject(&mut self, src_ts: u32) -> Rewritten {
        if let Some(src) = &mut self.source {
            // Late source packets can no longer be slotted in before this one.
            src.floor = src.highest;
        }
        let wanted = src_ts.wrapping_add(self.ts_offset);
        let timestamp = match self.last_ts {
            Some(last) if !is_newer_ts(wanted, last) => last,
            _ => wanted,
        };
        self.last_ts = Some(timestamp);
        Rewritten {
            sequence_number: self.issue(1),
            timestamp,
        }
    }

    /// Skips `step - 1` numbers (a gap), issues the next one and returns it.
    fn issue(&mut self, step: u16) -> u16 {
        let seq = self.next_seq.wrapping_add(step - 1);
        self.next_seq = seq.wrapping_add(1);
        seq
    }
}

/// Whether RTP timestamp `a` is after `b`, modulo 2^32.
fn is_newer_ts(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}
