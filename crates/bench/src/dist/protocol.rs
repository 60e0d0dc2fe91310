//! The messages agents and the coordinator exchange, as JSON over HTTP:
//!
//! - `GET /v1/plan` → [`Plan`]: the run's identifier, its agents and its scenario.
//! - `GET /v1/clock` → [`ClockReading`]: the coordinator's clock, from which an agent
//!   measures its offset.
//! - `POST /v1/ready` [`Ready`] → `200` [`Start`] once every agent is ready, `202`
//!   [`Waiting`] after a while without (ask again), `409` when the index is another
//!   agent's or the run is another, `410` when the run was abandoned.
//! - `POST /v1/result` [`Result`](ResultMsg) → `200`.
//! - `POST /v1/failed` [`Failed`] → `200`: the run is abandoned, the coordinator exits
//!   with the agent's error.
//!
//! Refusals carry a plain-text reason.

use super::Part;
use crate::scenario::Scenario;
use serde::{Deserialize, Serialize};

/// The run an agent takes part in.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The run's identifier.
    pub run: String,
    /// Agents in the run.
    pub agents: usize,
    /// The scenario every agent runs its share of.
    pub scenario: Scenario,
}

/// The coordinator's clock.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockReading {
    /// Nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// An agent whose clients have joined.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// The run's identifier, from the plan.
    pub run: String,
    /// The agent's index.
    pub index: usize,
    /// A number the agent drew at its start: two agents given one index differ in it.
    pub nonce: u64,
    /// Its publishers' SSRCs, by room.
    pub pub_ssrcs: Vec<Vec<u32>>,
}

/// When to start, once every agent is ready.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// Publishing starts at this time of the coordinator's clock, ns since the Unix epoch.
    pub unix_ns: u64,
    /// Every agent's publishers' SSRCs, by room.
    pub pub_ssrcs: Vec<Vec<u32>>,
}

/// Not every agent is ready yet.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waiting {
    /// Agents ready so far.
    pub ready: usize,
    /// Agents in the run.
    pub agents: usize,
}

/// An agent's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultMsg {
    /// The agent's nonce, as in [`Ready`].
    pub nonce: u64,
    /// Its part.
    pub part: Part,
}

/// An agent that could not do its share.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failed {
    /// The run's identifier.
    pub run: String,
    /// The agent's index.
    pub index: usize,
    /// Why.
    pub error: String,
}
