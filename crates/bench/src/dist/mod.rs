//! The distributed bench: one scenario's clients split over agents on as many machines
//! (or Kubernetes pods) as the load takes, driven by one coordinator, their counts merged
//! into one [`Report`](crate::Report).
//!
//! - `gsrelay bench coordinator` holds the scenario and listens for agents on HTTP
//!   ([`coordinator`]).
//! - `gsrelay bench agent` (one per machine or pod, `--index K`, or the Indexed Job's
//!   `JOB_COMPLETION_INDEX`) asks it for the scenario, joins its [`Share`] of the clients
//!   against the relay or cluster it was pointed at, and waits at the coordinator's
//!   barrier; once every agent has joined its own, the coordinator hands out one start
//!   time, in its own clock, which each agent turns into its own from the offset it
//!   measured ([`agent`]). After the run each agent sends its [`Part`] (and may keep it in
//!   a file).
//! - The coordinator, or `gsrelay bench merge` over the agents' files, merges the parts
//!   ([`merge`]): counts add up, the latency histograms merge exactly ([`tally`]), and the
//!   report's figures are computed from the sums as a single process computes them from
//!   its own.

pub mod agent;
pub mod coordinator;
pub mod merge;
pub mod protocol;

use crate::scenario::Scenario;
pub use crate::share::tally::{self, Tally};
pub use crate::share::{Barrier, Go, MAX_AGENTS, Share, ShareOut};
use serde::{Deserialize, Serialize};

/// The version of [`Part`]'s format; `merge` refuses parts of another.
pub const PART_FORMAT: u32 = 1;

/// One agent's results, as it sends them to the coordinator and writes them with
/// `--out`; `gsrelay bench merge` reads them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// [`PART_FORMAT`].
    pub format: u32,
    /// The run's identifier, the coordinator's: parts of other runs do not merge.
    pub run: String,
    /// The share it ran.
    pub share: Share,
    /// The scenario, as the coordinator gave it.
    pub scenario: Scenario,
    /// The agent itself.
    pub agent: AgentFigures,
    /// What its clients counted.
    pub tally: Tally,
}

/// What an agent reports of itself, for sizing agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFigures {
    /// Its host name (the pod's name in Kubernetes).
    pub host: String,
    /// Publishers it ran.
    pub publishers: usize,
    /// Subscribers it ran.
    pub subscribers: usize,
    /// Its peak RSS, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Its clock minus the coordinator's, ns, as measured before the start.
    pub clock_offset_ns: i64,
    /// The round trip of the measurement the offset came from, ns: the offset is right
    /// to within half of it.
    pub clock_rtt_ns: u64,
}
