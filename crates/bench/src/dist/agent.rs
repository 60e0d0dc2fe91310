//! `gsrelay bench agent`: asks the coordinator for the run, joins its share of the
//! clients against the relay (or the cluster's Service) it was pointed at, starts with
//! the others, and sends its part back.

use super::protocol::{ClockReading, Failed, Plan, Ready, ResultMsg, Start, Waiting};
use super::{AgentFigures, Barrier, Go, PART_FORMAT, Part, Share};
use anyhow::{Context, bail};
use futures_util::FutureExt as _;
use reqwest::StatusCode;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Clock readings an agent takes; the one with the shortest round trip gives the offset.
const CLOCK_READINGS: usize = 8;

/// How often an agent asks again for a coordinator that does not answer yet (its pod may
/// start after the agents').
const RETRY: Duration = Duration::from_millis(250);

/// How late, past the start it was given, an agent may hear of it and still run: later
/// and its clients would not start with the others'.
const LATE_START: Duration = Duration::from_millis(200);

/// Timeout of one request (the barrier's long poll aside).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How an agent runs.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The coordinator's base URL.
    pub coordinator: String,
    /// Its index.
    pub index: usize,
    /// The relay or the cluster's Service to join through.
    pub relay: String,
    /// The relay's token secret (the agent issues its clients' tokens).
    pub token_secret: String,
    /// How long it waits for the coordinator to answer at all.
    pub wait: Duration,
    /// Also write the part here.
    pub out: Option<PathBuf>,
}

fn unix_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The coordinator's `path`.
fn url(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// Runs an agent: its share of the coordinator's run; returns its part.
pub fn run(a: &Agent) -> anyhow::Result<Part> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the agent's runtime")?;
    let plan = rt.block_on(fetch_plan(a))?;
    let share = Share::new(a.index, plan.agents)?;
    let nonce = (unix_ns() as u64) ^ u64::from(std::process::id()).rotate_left(32);
    let (offset_ns, rtt_ns) = rt.block_on(clock_offset(&a.coordinator))?;
    eprintln!(
        "agent {} of {}: run {}, {} sessions, clock {:+.3} ms from the coordinator's (± {:.3})",
        a.index,
        plan.agents,
        plan.run,
        share.sessions(&plan.scenario),
        offset_ns as f64 / 1e6,
        rtt_ns as f64 / 2e6
    );
    let barrier = barrier(
        a.coordinator.clone(),
        plan.run.clone(),
        share,
        nonce,
        offset_ns,
    );
    let out = match crate::run::run_share(&plan.scenario, &a.relay, &a.token_secret, share, barrier)
    {
        Ok(out) => out,
        Err(e) => {
            // Tells the coordinator (and through it the other agents) not to wait.
            let failed = Failed {
                run: plan.run.clone(),
                index: a.index,
                error: format!("{e:#}"),
            };
            let _ = rt.block_on(
                client()?
                    .post(url(&a.coordinator, "/v1/failed"))
                    .json(&failed)
                    .send(),
            );
            return Err(e);
        }
    };
    let part = Part {
        format: PART_FORMAT,
        run: plan.run,
        share,
        scenario: plan.scenario,
        agent: AgentFigures {
            host: host(),
            publishers: out.publishers,
            subscribers: out.subscribers,
            peak_rss_bytes: out.peak_rss_bytes,
            clock_offset_ns: offset_ns as i64,
            clock_rtt_ns: rtt_ns,
        },
        tally: out.tally,
    };
    if let Some(path) = &a.out {
        let text = serde_json::to_string(&part)? + "\n";
        if path.as_os_str() == "-" {
            // One line, the log's last: `kubectl logs` keeps it for `bench merge`.
            std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())?;
        } else {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }

    rt.block_on(send_part(&a.coordinator, nonce, &part))?;
    Ok(part)
}

fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().build()?)
}

/// The host's name, which is the pod's in Kubernetes.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// Asks for the plan until the coordinator answers or `a.wait` is over.
async fn fetch_plan(a: &Agent) -> anyhow::Result<Plan> {
    let http = client()?;
    let deadline = Instant::now() + a.wait;
    let plan_url = url(&a.coordinator, "/v1/plan");
    loop {
        let got = http
            .get(&plan_url)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        match got {
            Ok(resp) => {
                let plan: Plan = resp
                    .json()
                    .await
                    .with_context(|| format!("{plan_url} answered no plan"))?;
                plan.scenario
                    .validate()
                    .context("the coordinator's scenario")?;
                return Ok(plan);
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(e).with_context(|| format!("no plan from {plan_url} in {:?}", a.wait));
            }
            Err(_) => tokio::time::sleep(RETRY).await,
        }
    }
}

/// This host's clock minus the coordinator's, ns, and the round trip of the reading it
/// comes from: of [`CLOCK_READINGS`] readings, the one with the shortest round trip,
/// taking the coordinator's time as that of the round trip's middle (as NTP does).
async fn clock_offset(coordinator: &str) -> anyhow::Result<(i128, u64)> {
    let http = client()?;
    let clock_url = url(coordinator, "/v1/clock");
    let mut best: Option<(i128, u64)> = None;
    for _ in 0..CLOCK_READINGS {
        let t0 = unix_ns();
        let reading: ClockReading = http
            .get(&clock_url)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let t1 = unix_ns();
        let rtt = (t1 - t0).max(0) as u64;
        let offset = (t0 + t1) / 2 - i128::from(reading.unix_ns);
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((offset, rtt));
        }
    }
    best.context("no clock reading")
}

/// The barrier: says this agent is ready until the coordinator answers with the start,
/// and turns the start into an instant of this host's clock.
fn barrier(coordinator: String, run: String, share: Share, nonce: u64, offset_ns: i128) -> Barrier {
    Box::new(move |pub_ssrcs| {
        async move {
            let http = client()?;
            let ready = Ready {
                run,
                index: share.index,
                nonce,
                pub_ssrcs,
            };
            let ready_url = url(&coordinator, "/v1/ready");
            let start: Start = loop {
                let resp = http.post(&ready_url).json(&ready).send().await?;
                match resp.status() {
                    StatusCode::OK => break resp.json().await?,
                    StatusCode::ACCEPTED => {
                        let w: Waiting = resp.json().await?;
                        eprintln!(
                            "agent {}: {} of {} agents ready",
                            share.index, w.ready, w.agents
                        );
                    }
                    status => bail!("the coordinator refused: {status} {}", resp.text().await?),
                }
            };
            let start_here = i128::from(start.unix_ns) + offset_ns;
            let ahead = start_here - unix_ns();
            let now = Instant::now();
            let at = if ahead >= 0 {
                now + Duration::from_nanos(ahead as u64)
            } else {
                let late = Duration::from_nanos(ahead.unsigned_abs() as u64);
                if late > LATE_START {
                    bail!(
                        "heard of the start {late:?} after it: the run went on without this agent"
                    );
                }
                now
            };
            Ok(Go {
                start: at,
                pub_ssrcs: start.pub_ssrcs,
            })
        }
        .boxed()
    })
}

/// Sends the part, a few times if the coordinator does not take it at once.
async fn send_part(coordinator: &str, nonce: u64, part: &Part) -> anyhow::Result<()> {
    let http = client()?;
    let msg = ResultMsg {
        nonce,
        part: part.clone(),
    };
    let result_url = url(coordinator, "/v1/result");
    let mut last = None;
    for _ in 0..5 {
        match http
            .post(&result_url)
            .json(&msg)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
        {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(resp) if resp.status().is_client_error() => {
                bail!(
                    "the coordinator refused the part: {} {}",
                    resp.status(),
                    resp.text().await?
                )
            }
            Ok(resp) => last = Some(anyhow::anyhow!("{}", resp.status())),
            Err(e) => last = Some(e.into()),
        }
        tokio::time::sleep(RETRY * 4).await;
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no answer")))
        .with_context(|| format!("sending the part to {result_url}"))
}
