//! `gsrelay bench coordinator`: holds the scenario, lets the agents in (one per index),
//! starts them together once all have joined their clients, and merges their parts into
//! one report. The protocol is [`protocol`](super::protocol)'s.

use super::merge::{DistReport, merge};
use super::protocol::{ClockReading, Failed, Plan, Ready, ResultMsg, Start, Waiting};
use super::{PART_FORMAT, Part, Share};
use crate::scenario::Scenario;
use anyhow::{Context, bail};
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// How long after the last agent is ready publishing starts: time for the answer to
/// reach every agent, wherever it is.
pub const START_LEAD: Duration = Duration::from_secs(1);

/// How long a `POST /v1/ready` is held before the agent is told to ask again (under the
/// idle timeouts of proxies in between).
const LONG_POLL: Duration = Duration::from_secs(20);

/// How long after the run's end (warm-up, window, drain) the agents' parts may take.
const RESULT_GRACE: Duration = Duration::from_secs(60);

/// Largest request body: a part carries a histogram and a snapshot time per late
/// joiner, far below this.
const BODY_LIMIT: usize = 16 << 20;

/// How a coordinator runs.
#[derive(Debug, Clone)]
pub struct Coordinator {
    /// The scenario the agents share.
    pub scenario: Scenario,
    /// Agents in the run.
    pub agents: usize,
    /// Where it listens for them.
    pub listen: SocketAddr,
    /// How long it waits for every agent to be ready.
    pub wait: Duration,
}

/// The run as the coordinator knows it.
struct Run {
    plan: Plan,
    /// Each index's agent, by its nonce.
    nonces: Vec<Option<u64>>,
    /// Each ready agent's publishers' SSRCs by room.
    ready: Vec<Option<Vec<Vec<u32>>>>,
    start: Option<Start>,
    parts: Vec<Option<Part>>,
    /// Why the run was abandoned.
    failed: Option<String>,
}

/// The run and a signal of its every change.
struct Shared {
    run: Mutex<Run>,
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Run> {
        self.run.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }
}

/// A refusal: its status and plain-text reason.
type Refusal = (StatusCode, String);

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Run {
    fn ready_count(&self) -> usize {
        self.ready.iter().flatten().count()
    }

    /// Checks an agent's claim to `index` under `nonce` in run `run`, and takes it.
    fn claim(&mut self, run: &str, index: usize, nonce: u64) -> Result<(), Refusal> {
        if run != self.plan.run {
            return Err((
                StatusCode::CONFLICT,
                format!("run {run} is not this one ({})", self.plan.run),
            ));
        }
        let agents = self.plan.agents;
        let Some(slot) = self.nonces.get_mut(index) else {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("index {index} is not below the {agents} agents"),
            ));
        };
        match slot {
            Some(n) if *n != nonce => Err((
                StatusCode::CONFLICT,
                format!("index {index} is another agent's: give each agent its own index"),
            )),
            _ => {
                *slot = Some(nonce);
                Ok(())
            }
        }
    }

    /// Takes a ready agent; sets the start once every agent is.
    fn take_ready(&mut self, r: Ready) -> Result<(), Refusal> {
        self.claim(&r.run, r.index, r.nonce)?;
        let s = &self.plan.scenario;
        if r.pub_ssrcs.len() != s.rooms || r.pub_ssrcs.iter().any(|v| v.len() > s.publishers) {
            return Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "publishers' SSRCs for {} rooms, not {} rooms of at most {}",
                    r.pub_ssrcs.len(),
                    s.rooms,
                    s.publishers
                ),
            ));
        }
        if let Some(slot) = self.ready.get_mut(r.index) {
            *slot = Some(r.pub_ssrcs);
        }
        if self.start.is_none() && self.ready_count() == self.plan.agents {
            let mut pub_ssrcs = vec![Vec::new(); s.rooms];
            for agent in self.ready.iter().flatten() {
                for (all, mine) in pub_ssrcs.iter_mut().zip(agent) {
                    all.extend_from_slice(mine);
                }
            }
            self.start = Some(Start {
                unix_ns: unix_ns() + START_LEAD.as_nanos() as u64,
                pub_ssrcs,
            });
        }
        Ok(())
    }

    /// Takes an agent's part, checked against the plan and the agent's claim.
    fn take_part(&mut self, m: ResultMsg) -> Result<(), Refusal> {
        let p = m.part;
        let bad = |why: String| Err((StatusCode::BAD_REQUEST, why));
        if self.nonces.get(p.share.index).copied().flatten() != Some(m.nonce) {
            return Err((
                StatusCode::CONFLICT,
                format!("a part for index {} from another agent", p.share.index),
            ));
        }
        if p.run != self.plan.run {
            return Err((StatusCode::CONFLICT, format!("a part of run {}", p.run)));
        }
        if p.format != PART_FORMAT {
            return bad(format!("part format {}, not {PART_FORMAT}", p.format));
        }
        if Share::new(p.share.index, self.plan.agents).ok() != Some(p.share) {
            return bad(format!("share {:?} of another split", p.share));
        }
        if p.scenario != self.plan.scenario {
            return bad("a part of another scenario".into());
        }
        if p.tally.rooms.len() != p.scenario.rooms {
            return bad(format!(
                "counts of {} rooms, not {}",
                p.tally.rooms.len(),
                p.scenario.rooms
            ));
        }
        if let Some(slot) = self.parts.get_mut(p.share.index) {
            *slot = Some(p);
        }
        Ok(())
    }
}

/// The body of a JSON request, or a 400 that says what is wrong with it.
fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, Refusal> {
    b.map(|Json(v)| v)
        .map_err(|e| (StatusCode::BAD_REQUEST, e.body_text()))
}

async fn get_plan(State(sh): State<Arc<Shared>>) -> Json<Plan> {
    Json(sh.lock().plan.clone())
}

async fn get_clock() -> Json<ClockReading> {
    Json(ClockReading { unix_ns: unix_ns() })
}

/// Takes a ready agent, then holds the request until every agent is ready (the start),
/// the run is abandoned, or [`LONG_POLL`] is over.
async fn post_ready(
    State(sh): State<Arc<Shared>>,
    b: Result<Json<Ready>, JsonRejection>,
) -> Result<Response, Refusal> {
    let r = body(b)?;
    let mut changes = sh.changed.subscribe();
    let index = r.index;
    {
        let mut run = sh.lock();
        let was = run.ready_count();
        run.take_ready(r)?;
        let now = run.ready_count();
        if now > was {
            eprintln!("agent {index} ready ({now} of {})", run.plan.agents);
        }
    }
    sh.bump();
    let deadline = tokio::time::Instant::now() + LONG_POLL;
    loop {
        {
            let run = sh.lock();
            if let Some(why) = &run.failed {
                return Err((StatusCode::GONE, why.clone()));
            }
            if let Some(start) = &run.start {
                return Ok(Json(start.clone()).into_response());
            }
            if tokio::time::Instant::now() >= deadline {
                let waiting = Waiting {
                    ready: run.ready_count(),
                    agents: run.plan.agents,
                };
                return Ok((StatusCode::ACCEPTED, Json(waiting)).into_response());
            }
        }
        let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
    }
}

async fn post_result(
    State(sh): State<Arc<Shared>>,
    b: Result<Json<ResultMsg>, JsonRejection>,
) -> Result<StatusCode, Refusal> {
    let m = body(b)?;
    let index = m.part.share.index;
    sh.lock().take_part(m)?;
    eprintln!("agent {index} sent its part");
    sh.bump();
    Ok(StatusCode::OK)
}

async fn post_failed(
    State(sh): State<Arc<Shared>>,
    b: Result<Json<Failed>, JsonRejection>,
) -> Result<StatusCode, Refusal> {
    let f = body(b)?;
    {
        let mut run = sh.lock();
        if f.run != run.plan.run {
            return Err((
                StatusCode::CONFLICT,
                format!("run {} is not this one", f.run),
            ));
        }
        run.failed
            .get_or_insert_with(|| format!("agent {} failed: {}", f.index, f.error));
    }
    sh.bump();
    Ok(StatusCode::OK)
}

/// Runs a coordinator until every agent has sent its part; returns the merged report.
pub fn run(c: &Coordinator) -> anyhow::Result<DistReport> {
    c.scenario.validate()?;
    // Refuses an agent count no split takes.
    Share::new(0, c.agents)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("gsr-coordinator")
        .enable_all()
        .build()
        .context("starting the coordinator's runtime")?;
    rt.block_on(serve(c))
}

async fn serve(c: &Coordinator) -> anyhow::Result<DistReport> {
    let plan = Plan {
        run: format!("{:x}-{:x}", unix_ns(), std::process::id()),
        agents: c.agents,
        scenario: c.scenario.clone(),
    };
    let sh = Arc::new(Shared {
        run: Mutex::new(Run {
            plan,
            nonces: vec![None; c.agents],
            ready: vec![None; c.agents],
            start: None,
            parts: vec![None; c.agents],
            failed: None,
        }),
        changed: watch::channel(0).0,
    });
    let app = axum::Router::new()
        .route("/v1/plan", get(get_plan))
        .route("/v1/clock", get(get_clock))
        .route("/v1/ready", post(post_ready))
        .route("/v1/result", post(post_result))
        .route("/v1/failed", post(post_failed))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(sh.clone());
    let listener = tokio::net::TcpListener::bind(c.listen)
        .await
        .with_context(|| format!("listening on {}", c.listen))?;
    eprintln!(
        "coordinator listening on {}: waiting for {} agents",
        listener.local_addr()?,
        c.agents
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let parts = collect(c, &sh).await;
    let _ = stop.send(());
    // Agents still held at the barrier get their answer first.
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    merge(&parts?)
}

/// Waits until every agent has sent its part, the run was abandoned, or its time is up:
/// `c.wait` for every agent to be ready, then the run's length and a grace for the parts.
async fn collect(c: &Coordinator, sh: &Shared) -> anyhow::Result<Vec<Part>> {
    let mut changes = sh.changed.subscribe();
    let s = &c.scenario;
    let run_length = START_LEAD + Duration::from_secs_f64(s.warmup_s + s.duration_s) + RESULT_GRACE;
    let mut deadline = Instant::now() + c.wait;
    let mut started = false;
    loop {
        {
            let run = sh.lock();
            if let Some(why) = &run.failed {
                bail!("{why}");
            }
            if run.parts.iter().all(Option::is_some) {
                return Ok(run.parts.iter().flatten().cloned().collect());
            }
            if !started && run.start.is_some() {
                started = true;
                deadline = Instant::now() + run_length;
            }
            if Instant::now() >= deadline {
                if started {
                    bail!("agents {:?} sent no part in time", missing(&run.parts));
                }
                bail!(
                    "agents {:?} were not ready after {:?}",
                    missing(&run.ready),
                    c.wait
                );
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = tokio::time::timeout(left, changes.changed()).await;
    }
}

/// The indices of the empty slots.
fn missing<T>(slots: &[Option<T>]) -> Vec<usize> {
    (0..slots.len())
        .filter(|i| slots.get(*i).is_some_and(Option::is_none))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(agents: usize) -> Run {
        let scenario = Scenario {
            rooms: 2,
            publishers: 2,
            ..Scenario::default()
        };
        Run {
            plan: Plan {
                run: "r1".into(),
                agents,
                scenario,
            },
            nonces: vec![None; agents],
            ready: vec![None; agents],
            start: None,
            parts: vec![None; agents],
            failed: None,
        }
    }

    fn ready(index: usize, nonce: u64, ssrcs: Vec<Vec<u32>>) -> Ready {
        Ready {
            run: "r1".into(),
            index,
            nonce,
            pub_ssrcs: ssrcs,
        }
    }

    #[test]
    fn the_start_waits_for_every_agent_and_gathers_their_publishers() {
        let mut r = run(2);
        r.take_ready(ready(1, 7, vec![vec![11], vec![12]])).unwrap();
        assert!(r.start.is_none());
        // The same agent asking again is no second agent.
        r.take_ready(ready(1, 7, vec![vec![11], vec![12]])).unwrap();
        assert!(r.start.is_none());
        r.take_ready(ready(0, 9, vec![vec![1], vec![]])).unwrap();
        let start = r.start.clone().unwrap();
        assert_eq!(start.pub_ssrcs, vec![vec![1, 11], vec![12]]);
        assert!(start.unix_ns > unix_ns());
    }

    #[test]
    fn wrong_agents_are_refused() {
        let mut r = run(2);
        let status = |r: &mut Run, m: Ready| r.take_ready(m).unwrap_err().0;
        r.take_ready(ready(0, 7, vec![vec![], vec![]])).unwrap();
        // Another agent given the same index.
        assert_eq!(
            status(&mut r, ready(0, 8, vec![vec![], vec![]])),
            StatusCode::CONFLICT
        );
        assert_eq!(
            status(&mut r, ready(2, 8, vec![vec![], vec![]])),
            StatusCode::BAD_REQUEST
        );
        // Rooms or publishers the scenario does not have.
        assert_eq!(
            status(&mut r, ready(1, 8, vec![vec![]])),
            StatusCode::BAD_REQUEST
        );
        let many = vec![vec![1, 2, 3], vec![]];
        assert_eq!(status(&mut r, ready(1, 8, many)), StatusCode::BAD_REQUEST);
        let mut other = ready(1, 8, vec![vec![], vec![]]);
        other.run = "r0".into();
        assert_eq!(status(&mut r, other), StatusCode::CONFLICT);
        assert!(r.start.is_none());
    }
}
