//! A session as Python holds it: `join` starts the network task and waits for its join
//! (the GIL released, Ctrl-C honoured); commands go to the task through a channel; events
//! come back in batches.

use crate::codec::{check_size, dialect};
use crate::errors::{Class, error, join_error};
use crate::net::{self, Command, Info, JoinSpec, Shared};
use crate::queue::{Data, Queue, Record, Waker};
use gsrelay_client::JoinOptions;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::oneshot;

/// Most commands waiting for the network task; past it a publish is refused (`BusyError`)
/// rather than queued without bound behind a stalled network.
const COMMAND_QUEUE: usize = 4096;

/// How long a wait holds the GIL released before it looks for a signal (Ctrl-C).
const SLICE: Duration = Duration::from_millis(100);

/// Most events one `recv_batch` returns.
const MAX_BATCH: usize = 1 << 20;

/// A duration in seconds from Python: finite and not negative.
pub fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        error(
            Class::Argument,
            name,
            format!("{name} must be a finite number of seconds >= 0, not {value}"),
            None,
        )
    })
}

/// The instant `timeout` from now; a timeout past what the clock can hold (a Python
/// caller's `1e15`) is a year, which no wait here outlives.
fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// One joined session.
#[pyclass(frozen, module = "gsrelay._native")]
pub struct Session {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    waker: Option<Waker>,
    dialect: gsrelay_core::wire::Dialect,
}

/// The join options that need checking: `transport`, `dialect`, `interest` (its JSON
/// form, docs/interest.md) and `silence` (seconds).
fn options(
    transport: &str,
    dialect_name: &str,
    interest_json: Option<&str>,
    silence: Option<f64>,
) -> PyResult<JoinOptions> {
    let mut join = JoinOptions {
        dialect: dialect(dialect_name)?,
        ..JoinOptions::default()
    };
    match transport {
        // "rtp" as the HTTP API names it: RTP over UDP, SRTP unless `plain_rtp`.
        "rtp" | "srtp" => {}
        "quic" => join.quic = true,
        "webtransport" => join.webtransport = true,
        "webrtc" => join.webrtc = true,
        other => {
            return Err(error(
                Class::Argument,
                "transport",
                format!(
                    "unknown transport {other:?}: expected \"srtp\" (or \"rtp\"), \"quic\", \"webtransport\" or \"webrtc\""
                ),
                None,
            ));
        }
    }
    if let Some(json) = interest_json {
        join.interest = Some(interest(json)?);
    }
    if let Some(s) = silence {
        let d = seconds("silence", s)?;
        if d.is_zero() {
            return Err(error(
                Class::Argument,
                "silence",
                "silence must be > 0",
                None,
            ));
        }
        join.silence = Some(d);
    }
    Ok(join)
}

/// An interest from its JSON form (docs/interest.md).
fn interest(json: &str) -> PyResult<gsrelay_core::Interest> {
    serde_json::from_str(json).map_err(|e| {
        error(
            Class::Argument,
            "interest",
            format!("not an interest: {e}"),
            None,
        )
    })
}

/// `join(http_base, token, room, options..., snapshot, timeout)`: joins and returns the
/// session, or raises `JoinError` (the relay's refusal with its status and code, a
/// network failure, or `timeout` seconds passed).
#[pyfunction]
#[pyo3(signature = (http_base, token, room, *, transport="srtp", dialect="draft01", interest=None, ssrc=None, require_ssrc=false, room_stream=false, plain_rtp=false, silence=None, snapshot=true, timeout=15.0))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each
pub fn join(
    py: Python<'_>,
    http_base: &str,
    token: &str,
    room: &str,
    transport: &str,
    dialect: &str,
    interest: Option<&str>,
    ssrc: Option<u32>,
    require_ssrc: bool,
    room_stream: bool,
    plain_rtp: bool,
    silence: Option<f64>,
    snapshot: bool,
    timeout: f64,
) -> PyResult<Session> {
    let mut options = options(transport, dialect, interest, silence)?;
    options.ssrc = ssrc;
    options.require_ssrc = require_ssrc;
    options.room_stream = room_stream;
    options.plain_rtp = plain_rtp;
    let timeout = seconds("timeout", timeout)?;
    if !(http_base.starts_with("http://") || http_base.starts_with("https://")) {
        return Err(error(
            Class::Argument,
            "http_base",
            format!("the relay's address is an http:// or https:// URL, not {http_base:?}"),
            None,
        ));
    }
    let runtime = net::runtime().map_err(|e| error(Class::Join, "runtime", e, None))?;
    let dialect = options.dialect;
    let (queue, waker) = Queue::new();
    let shared = Arc::new(Shared {
        queue,
        info: Mutex::new(Info::default()),
    });
    let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
    let (joined_tx, mut joined) = sync_channel(1);
    let spec = JoinSpec {
        http_base: http_base.trim_end_matches('/').to_owned(),
        token: token.to_owned(),
        room: room.to_owned(),
        options,
        snapshot,
    };
    runtime.spawn(net::run(spec, Arc::clone(&shared), rx, joined_tx));
    let deadline = deadline(timeout);
    loop {
        let slice = deadline
            .saturating_duration_since(Instant::now())
            .min(SLICE);
        // The receiver goes into the wait and back (it is Send, not Sync).
        let (got, back) = py.detach(move || (joined.recv_timeout(slice), joined));
        joined = back;
        match got {
            Ok(Ok(())) => break,
            Ok(Err(e)) => return Err(join_error(&e)),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(error(Class::Join, "failed", "the join task stopped", None));
            }
            Err(RecvTimeoutError::Timeout) => {
                // Dropping `joined` on return makes a join that succeeds later leave.
                py.check_signals()?;
                if Instant::now() >= deadline {
                    return Err(error(
                        Class::Join,
                        "timeout",
                        format!("no answer to the join within {timeout:?}"),
                        None,
                    ));
                }
            }
        }
    }
    Ok(Session {
        shared,
        commands,
        waker,
        dialect,
    })
}

impl Session {
    fn send(&self, command: Command) -> PyResult<()> {
        self.commands.try_send(command).map_err(|e| match e {
            TrySendError::Full(_) => error(
                Class::Busy,
                "busy",
                format!("{COMMAND_QUEUE} commands are waiting for the network: slow down"),
                None,
            ),
            TrySendError::Closed(_) => closed(),
        })
    }
}

fn closed() -> PyErr {
    error(Class::Closed, "closed", "the session is over", None)
}

fn to_python<'py>(py: Python<'py>, r: Record) -> PyResult<Bound<'py, PyTuple>> {
    let data = match r.data {
        Data::None => py.None().into_bound(py),
        Data::Bytes(b) => PyBytes::new(py, &b).into_any(),
        Data::Text(t) => PyString::new(py, &t).into_any(),
    };
    (r.kind, r.ssrc, r.id, r.code, data).into_pyobject(py)
}

#[pymethods]
impl Session {
    /// Up to `max` events as `(kind, ssrc, object_id, code, data)` tuples, waiting at
    /// most `timeout` seconds for the first; `[]` when none came.
    #[pyo3(signature = (max=4096, timeout=0.0))]
    fn recv_batch<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyList>> {
        let deadline = deadline(seconds("timeout", timeout)?);
        let max = max.clamp(1, MAX_BATCH);
        let records = loop {
            let until = deadline.min(Instant::now() + SLICE);
            let (records, over) = py.detach(|| self.shared.queue.take(max, until));
            if !records.is_empty() || over || Instant::now() >= deadline {
                break records;
            }
            py.check_signals()?;
        };
        let items = records
            .into_iter()
            .map(|r| to_python(py, r))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Publishes one payload on the session's stream: a game-state payload of the
    /// session's dialect of at most 1400 bytes, checked before it goes.
    fn publish(&self, payload: &[u8]) -> PyResult<()> {
        check_size(payload.len())?;
        gsrelay_core::wire::validate(payload, self.dialect).map_err(|e| {
            error(
                Class::Codec,
                "decode",
                format!("not a game-state payload: {e}"),
                None,
            )
        })?;
        self.send(Command::Publish(payload.to_vec()))
    }

    /// Asks the relay for the whole room; a snapshot-complete event follows.
    fn snapshot(&self) -> PyResult<()> {
        self.send(Command::Snapshot)
    }

    /// Replaces the session's interest (its JSON form).
    fn set_interest(&self, interest_json: &str) -> PyResult<()> {
        let i = interest(interest_json)?;
        self.send(Command::Interest(Box::new(i)))
    }

    /// Leaves the room, waiting at most `timeout` seconds; how it went.
    #[pyo3(signature = (timeout=5.0))]
    fn leave(&self, py: Python<'_>, timeout: f64) -> PyResult<String> {
        let deadline = deadline(seconds("timeout", timeout)?);
        let (tx, mut rx) = oneshot::channel();
        if self.commands.try_send(Command::Leave(tx)).is_err() {
            return Ok("already over".to_owned());
        }
        loop {
            match rx.try_recv() {
                Ok(note) => return Ok(note),
                Err(oneshot::error::TryRecvError::Closed) => return Ok("already over".to_owned()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            if Instant::now() >= deadline {
                return Ok("leaving; the network task did not finish in time".to_owned());
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(5)));
            py.check_signals()?;
        }
    }

    /// `(ssrc, relay_ssrc, room_ssrc, session_id)` as the last join or rejoin left them.
    fn info(&self) -> (u32, u32, u32, String) {
        let i = self
            .shared
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        (i.ssrc, i.relay_ssrc, i.room_ssrc, i.session)
    }

    /// Whether the session ended and every event was taken.
    fn is_over(&self) -> bool {
        self.shared.queue.is_over()
    }

    /// A file descriptor that turns readable when events arrive (asyncio's `add_reader`);
    /// read and discard its bytes, then drain with `recv_batch` until it returns `[]`.
    /// `None` where there are no Unix sockets.
    fn wake_fd(&self) -> Option<i64> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            self.waker.as_ref().map(|w| i64::from(w.0.as_raw_fd()))
        }
        #[cfg(not(unix))]
        {
            let _ = &self.waker;
            None
        }
    }
}
