//! Which of a scenario's clients one process runs ([`Share`]), how it starts them in step
//! with the others ([`Barrier`]) and what they count ([`tally`]): what a run of part of a
//! scenario (`gsrelay bench agent`, [`crate::dist`]) and a run of the whole ([`mod@crate::run`])
//! share, so that both report from the same mergeable counts.

pub mod tally;

use crate::scenario::Scenario;
use anyhow::bail;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::time::Instant;
use tally::Tally;

/// Most agents one run takes.
pub const MAX_AGENTS: usize = 1_000;

/// Which of a scenario's clients an agent runs: agent `index` of `agents` runs client `n`
/// of room `room` when `(room + n) % agents == index`. A player's publishing and
/// subscribing sessions share their `n` and so an agent; every room is spread over the
/// agents, and so are its observers. The split depends on nothing but the indices, so
/// each client sends and behaves as it does in a single-process run (its positions, its
/// send phase, its token's identity), whichever agent runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// This agent, from 0.
    pub index: usize,
    /// Agents in the run.
    pub agents: usize,
}

impl Share {
    /// The whole scenario: a single-process run.
    pub const WHOLE: Share = Share {
        index: 0,
        agents: 1,
    };

    /// Share `index` of `agents`, checked.
    pub fn new(index: usize, agents: usize) -> anyhow::Result<Self> {
        if !(1..=MAX_AGENTS).contains(&agents) {
            bail!("agents must be 1..={MAX_AGENTS}, not {agents}");
        }
        if index >= agents {
            bail!("agent index {index} is not below the {agents} agents");
        }
        Ok(Self { index, agents })
    }

    /// Whether this share runs client `n` (publisher, or subscriber counted as in
    /// [`Scenario`]: regular ones, then late joiners, then slow ones) of room `room`.
    pub fn holds(&self, room: usize, n: usize) -> bool {
        (room + n) % self.agents.max(1) == self.index
    }

    /// Sessions of `s` this share runs (publishers and subscribers of every kind).
    pub fn sessions(&self, s: &Scenario) -> usize {
        let per_room = s.subscribers + s.late_joiners + s.slow_subscribers;
        (0..s.rooms)
            .map(|room| {
                (0..s.publishers).filter(|n| self.holds(room, *n)).count()
                    + (0..per_room).filter(|n| self.holds(room, *n)).count()
            })
            .sum()
    }
}

/// What the barrier gives an agent: when to start, in its own clock, and every agent's
/// publishers' SSRCs by room (what its late joiners expect a snapshot of).
#[derive(Debug)]
pub struct Go {
    /// Publishing starts (the run's time zero).
    pub start: Instant,
    /// SSRCs of every publisher of the run, by room.
    pub pub_ssrcs: Vec<Vec<u32>>,
}

/// Called once an agent's clients have joined, with its publishers' SSRCs by room; done
/// when every agent has joined.
pub type Barrier = Box<dyn FnOnce(Vec<Vec<u32>>) -> BoxFuture<'static, anyhow::Result<Go>> + Send>;

/// What an agent's run of its share gathered.
#[derive(Debug)]
pub struct ShareOut {
    /// Publishers it ran.
    pub publishers: usize,
    /// Subscribers it ran (late and slow ones too).
    pub subscribers: usize,
    /// Its peak RSS.
    pub peak_rss_bytes: Option<u64>,
    /// What they counted.
    pub tally: Tally,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_is_in_exactly_one_share() {
        let s = Scenario {
            rooms: 3,
            publishers: 5,
            subscribers: 7,
            late_joiners: 2,
            slow_subscribers: 1,
            ..Scenario::default()
        };
        let total = s.rooms * (s.publishers + s.subscribers + s.late_joiners + 1);
        for agents in 1..=12 {
            let shares: Vec<Share> = (0..agents)
                .map(|k| Share::new(k, agents).unwrap())
                .collect();
            for room in 0..s.rooms {
                for n in 0..10 {
                    assert_eq!(shares.iter().filter(|sh| sh.holds(room, n)).count(), 1);
                }
            }
            let sessions: Vec<usize> = shares.iter().map(|sh| sh.sessions(&s)).collect();
            assert_eq!(sessions.iter().sum::<usize>(), total, "{agents} agents");
            // Even: in each room, publishers and subscribers each differ by one at most
            // from one agent to another.
            let (lo, hi) = (sessions.iter().min(), sessions.iter().max());
            assert!(
                hi.zip(lo).is_some_and(|(h, l)| h - l <= 2 * s.rooms),
                "{sessions:?}"
            );
        }
        assert_eq!(Share::WHOLE.sessions(&s), total);
    }

    #[test]
    fn a_share_out_of_range_is_refused() {
        assert!(Share::new(3, 3).is_err());
        assert!(Share::new(0, 0).is_err());
        assert!(Share::new(0, MAX_AGENTS + 1).is_err());
        assert_eq!(
            Share::new(2, 3).ok(),
            Some(Share {
                index: 2,
                agents: 3
            })
        );
    }
}
