//! Merges the agents' parts into one report: the same [`Report`] a single process makes,
//! computed from the sum of the agents' tallies, and a row per agent.

use super::tally::TargetFigures;
use super::{PART_FORMAT, Part, Share};
use crate::report::{Report, TargetKind};
use anyhow::{Context, bail};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// A distributed run's report: the single-process report's keys, and the agents.
#[derive(Debug, Clone, Serialize)]
pub struct DistReport {
    /// The merged report.
    #[serde(flatten)]
    pub report: Report,
    /// Each agent, by index.
    pub agents: Vec<AgentRow>,
}

/// One agent of a distributed run.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRow {
    /// Its index.
    pub index: usize,
    /// Its host (pod) name.
    pub host: String,
    /// Publishers it ran.
    pub publishers: usize,
    /// Subscribers it ran.
    pub subscribers: usize,
    /// Its CPU seconds during the window.
    pub process_cpu_s: f64,
    /// Its CPU per session it ran, as a share of one core, in thousandths (millicores,
    /// Kubernetes' CPU unit).
    pub millicores_per_session: Option<f64>,
    /// Its peak RSS, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Its clock minus the coordinator's, ms.
    pub clock_offset_ms: f64,
    /// Half the round trip the offset was measured over, ms: its uncertainty.
    pub clock_uncertainty_ms: f64,
}

/// Merges the parts of one run, one per agent.
pub fn merge(parts: &[Part]) -> anyhow::Result<DistReport> {
    let Some(first) = parts.first() else {
        bail!("no parts to merge");
    };
    // Checked before anything is sized from them: a file may hold anything.
    let agents = Share::new(first.share.index, first.share.agents)?.agents;
    first.scenario.validate().context("the parts' scenario")?;
    let mut seen = vec![false; agents];
    for p in parts {
        if p.format != PART_FORMAT {
            bail!(
                "part {} is of format {}, not {PART_FORMAT}",
                p.share.index,
                p.format
            );
        }
        if p.run != first.run {
            bail!("parts of runs {} and {}", first.run, p.run);
        }
        if p.scenario != first.scenario {
            bail!("parts of two scenarios in run {}", p.run);
        }
        if p.share.agents != agents {
            bail!("parts split {} and {} ways", agents, p.share.agents);
        }
        match seen.get_mut(p.share.index) {
            Some(s) if !*s => *s = true,
            Some(_) => bail!("two parts of agent {}", p.share.index),
            None => bail!("agent {} of {agents}", p.share.index),
        }
    }
    let missing: Vec<usize> = (0..agents).filter(|i| !seen[*i]).collect();
    if !missing.is_empty() {
        bail!("no part of agents {missing:?} (of {agents})");
    }
    let s = &first.scenario;
    // In index order, whatever order the files came in: sums of floats depend on it.
    let mut parts: Vec<&Part> = parts.iter().collect();
    parts.sort_by_key(|p| p.share.index);
    let mut tally = super::tally::Tally::new(s.rooms)?;
    for p in &parts {
        tally
            .merge(&p.tally)
            .with_context(|| format!("agent {}", p.share.index))?;
    }
    let report = tally.report(s, TargetKind::Remote, None, &TargetFigures::default());
    let rows: Vec<AgentRow> = parts
        .iter()
        .map(|p| {
            let sessions = p.agent.publishers + p.agent.subscribers;
            let cores = p.tally.process_cpu_s / s.duration_s;
            AgentRow {
                index: p.share.index,
                host: p.agent.host.clone(),
                publishers: p.agent.publishers,
                subscribers: p.agent.subscribers,
                process_cpu_s: p.tally.process_cpu_s,
                millicores_per_session: (sessions > 0).then(|| cores * 1e3 / sessions as f64),
                peak_rss_bytes: p.agent.peak_rss_bytes,
                clock_offset_ms: p.agent.clock_offset_ns as f64 / 1e6,
                clock_uncertainty_ms: p.agent.clock_rtt_ns as f64 / 2e6,
            }
        })
        .collect();
    Ok(DistReport {
        report,
        agents: rows,
    })
}

/// Reads part files and merges them.
pub fn merge_files(paths: &[impl AsRef<Path>]) -> anyhow::Result<DistReport> {
    let mut parts = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let part: Part = serde_json::from_str(&text)
            .with_context(|| format!("{} is not an agent's part", path.display()))?;
        parts.push(part);
    }
    merge(&parts)
}

impl DistReport {
    /// The single-process table, then one line per agent.
    pub fn table(&self) -> String {
        let mut t = self.report.table();
        let _ = writeln!(
            t,
            "{} agents:\n{:>5} {:<24} {:>5} {:>5} {:>8} {:>13} {:>9} {:>12}",
            self.agents.len(),
            "agent",
            "host",
            "pub",
            "sub",
            "CPU s",
            "mcore/session",
            "RSS MiB",
            "clock ms"
        );
        for a in &self.agents {
            let _ = writeln!(
                t,
                "{:>5} {:<24} {:>5} {:>5} {:>8.2} {:>13} {:>9} {:>12}",
                a.index,
                a.host,
                a.publishers,
                a.subscribers,
                a.process_cpu_s,
                a.millicores_per_session
                    .map_or_else(|| "-".into(), |m| format!("{m:.2}")),
                a.peak_rss_bytes
                    .map_or_else(|| "-".into(), |b| format!("{:.1}", b as f64 / 1048576.0)),
                format!("{:+.3}±{:.3}", a.clock_offset_ms, a.clock_uncertainty_ms),
            );
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::{AgentFigures, Share};
    use crate::scenario::Scenario;
    use crate::share::tally::Tally;

    fn part(index: usize, agents: usize) -> Part {
        let mut tally = Tally::new(1).unwrap();
        tally.rooms[0].sent = 10;
        tally.rooms[0].subscribers = 1;
        // Its subscriber got what every agent's publishers sent.
        tally.rooms[0].received = 30;
        tally.received_packets = 30;
        tally.process_cpu_s = 0.5;
        Part {
            format: PART_FORMAT,
            run: "r1".into(),
            share: Share::new(index, agents).unwrap(),
            scenario: Scenario::default(),
            agent: AgentFigures {
                host: format!("agent-{index}"),
                publishers: 2,
                subscribers: 3,
                peak_rss_bytes: Some(1 << 20),
                clock_offset_ns: 1_000,
                clock_rtt_ns: 2_000,
            },
            tally,
        }
    }

    #[test]
    fn parts_add_up_and_are_checked() {
        let parts: Vec<Part> = (0..3).map(|k| part(k, 3)).collect();
        let r = merge(&parts).unwrap();
        let secs = Scenario::default().duration_s;
        assert_eq!(r.report.sent_pps, 30.0 / secs);
        assert_eq!(r.report.received_pps, 90.0 / secs);
        assert_eq!(r.report.loss_ratio, 0.0);
        assert_eq!(r.report.process_cpu_s, 1.5);
        assert_eq!(r.agents.len(), 3);
        assert_eq!(
            r.agents[1].millicores_per_session,
            Some(0.5 / secs * 1e3 / 5.0)
        );
        assert!(r.table().contains("3 agents"));

        let refused = |parts: Vec<Part>, why: &str| {
            let err = merge(&parts).unwrap_err().to_string();
            assert!(err.contains(why), "{err}, not {why}");
        };
        refused(Vec::new(), "no parts");
        refused(parts[..2].to_vec(), "no part of agents [2]");
        refused(
            vec![part(0, 3), part(0, 3), part(1, 3)],
            "two parts of agent 0",
        );
        let mut other = parts.clone();
        other[2].run = "r2".into();
        refused(other, "parts of runs");
        let mut other = parts.clone();
        other[1].scenario.rate_hz = 1.0;
        refused(other, "two scenarios");
        let mut other = parts.clone();
        other[0].format = 99;
        refused(other, "format 99");
        refused(vec![part(0, 3), part(1, 2)], "split 3 and 2 ways");
        let mut huge = part(0, 3);
        huge.share.agents = usize::MAX;
        refused(vec![huge], "agents must be");
        let mut bad = part(0, 1);
        bad.scenario.rooms = 0;
        refused(vec![bad], "the parts' scenario");
    }
}
