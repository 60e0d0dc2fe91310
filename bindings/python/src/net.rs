//! The network side of a session: one task on the extension's runtime that joins, reads
//! the relay's packets into the session's queue, carries out Python's commands, keeps the
//! session alive and brings it back when the relay goes silent, as the C ABI's does
//! (`crates/ffi/src/net.rs`). Python's threads never run any of it: they push commands
//! and drain events.

use crate::errors::code_of;
use crate::queue::*;
use gsrelay_client::{Client, ClientError, JoinOptions};
use gsrelay_core::relay::handover::Kind;
use gsrelay_core::rtp::RtcpItem;
use gsrelay_core::wire::layout::read_tlv;
use gsrelay_core::wire::reader::Reader as WireReader;
use gsrelay_core::wire::{Dialect, ObjectKind, container};
use gsrelay_net::udp::recv::RecvBatch;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, oneshot};

/// How long, once the room was asked for, the session waits for every stream of the room
/// at the join before it says the snapshot is complete anyway (partial).
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);

/// How often a session that publishes nothing sends a receiver report, so that the relay
/// keeps it.
const REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// The longest a leave waits for the relay.
pub const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// What Python asks of the network side.
pub enum Command {
    /// A payload on the session's stream.
    Publish(Vec<u8>),
    /// A request for the whole room (FIR naming the relay).
    Snapshot,
    /// A new interest.
    Interest(Box<gsrelay_core::Interest>),
    /// Leave the room; the answer says how it went.
    Leave(oneshot::Sender<String>),
}

/// The session's identifiers, as the last join or rejoin left them.
#[derive(Debug, Clone, Default)]
pub struct Info {
    /// Its SSRC.
    pub ssrc: u32,
    /// The relay's SSRC.
    pub relay_ssrc: u32,
    /// Its room stream's SSRC, 0 without one.
    pub room_ssrc: u32,
    /// Its session id (`s` and 16 hex digits).
    pub session: String,
}

impl Info {
    fn of(c: &Client) -> Self {
        Self {
            ssrc: c.ssrc(),
            relay_ssrc: c.relay_ssrc(),
            room_ssrc: c.room_ssrc().unwrap_or(0),
            session: gsrelay_core::format_session_id(c.session()),
        }
    }
}

/// What the session and its task share.
pub struct Shared {
    /// Events for Python.
    pub queue: Queue,
    /// The identifiers.
    pub info: Mutex<Info>,
}

impl Shared {
    fn set_info(&self, c: &Client) {
        *self.info.lock().unwrap_or_else(PoisonError::into_inner) = Info::of(c);
    }
}

/// What a join is asked with.
pub struct JoinSpec {
    /// The relay's HTTP API.
    pub http_base: String,
    /// The access token.
    pub token: String,
    /// The room.
    pub room: String,
    /// The client's options.
    pub options: JoinOptions,
    /// Ask for the whole room on joining.
    pub snapshot: bool,
}

/// The extension's runtime: one thread of its own, made on first use. One is enough for
/// a hundred sessions (docs/benchmarks.md, "Python client"), and a second only adds the
/// cost of tasks moving between the two.
pub fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("gsrelay-python")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the network thread: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Reads packets into events: which streams it has seen, and the snapshot it waits for.
struct Reader {
    local: Vec<Record>,
    dialect: Dialect,
    seen: HashSet<u32>,
    /// Streams the snapshot still waits for, and until when; `None` when not waiting.
    waiting: Option<(HashSet<u32>, Instant)>,
}

impl Reader {
    fn expect_snapshot(&mut self, streams: &[u32], own: &[u32], now: Instant) {
        let missing = streams
            .iter()
            .copied()
            .filter(|s| !own.contains(s))
            .collect();
        self.waiting = Some((missing, now + SNAPSHOT_WAIT));
        self.check_snapshot(now);
    }

    fn check_snapshot(&mut self, now: Instant) {
        let Some((missing, until)) = &self.waiting else {
            return;
        };
        if missing.is_empty() || now >= *until {
            let partial = i64::from(!missing.is_empty());
            self.local
                .push(Record::plain(SNAPSHOT_COMPLETE, 0, 0, partial));
            self.waiting = None;
        }
    }

    fn stream(&mut self, ssrc: u32) {
        if self.seen.insert(ssrc) {
            self.local.push(Record::plain(STREAM_STARTED, ssrc, 0, 0));
        }
        if let Some((missing, _)) = &mut self.waiting {
            missing.remove(&ssrc);
        }
    }

    /// One RTP payload of stream `ssrc`: an event per object, containers unpacked to their
    /// senders' objects. Objects are framed here (tag, Length, objectID) and decoded only
    /// when Python asks for one. A payload whose framing breaks keeps the objects before it.
    fn payload(&mut self, ssrc: u32, payload: &[u8]) {
        let mut r = WireReader::new(payload);
        let mut started = false;
        while !r.is_empty() {
            let at = r.offset();
            let Ok(tlv) = read_tlv(&mut r) else {
                return;
            };
            let bytes = &payload[at..r.offset()];
            match self.dialect.kind_of(tlv.tag) {
                ObjectKind::Container => {
                    if let Some((sender, inner)) = container::split(bytes) {
                        self.stream(sender);
                        self.objects(sender, inner);
                    }
                }
                kind => {
                    if !started {
                        self.stream(ssrc);
                        started = true;
                    }
                    self.object(ssrc, object_id(kind, tlv.body), bytes);
                }
            }
        }
    }

    /// The objects of one sender inside a container.
    fn objects(&mut self, ssrc: u32, inner: &[u8]) {
        let mut r = WireReader::new(inner);
        while !r.is_empty() {
            let at = r.offset();
            let Ok(tlv) = read_tlv(&mut r) else {
                return;
            };
            let id = object_id(self.dialect.kind_of(tlv.tag), tlv.body);
            self.object(ssrc, id, &inner[at..r.offset()]);
        }
    }

    fn object(&mut self, ssrc: u32, id: u64, tlv: &[u8]) {
        self.local.push(Record {
            kind: OBJECT,
            ssrc,
            id,
            code: 0,
            data: Data::Bytes(tlv.to_vec()),
        });
    }

    /// An RTCP compound other than a report: BYEs end streams, notices tell ownership.
    fn rtcp(&mut self, items: &[RtcpItem], relay_ssrc: u32) {
        for item in items {
            if let RtcpItem::Bye { ssrcs } = item {
                for &s in ssrcs.iter().filter(|&&s| s != relay_ssrc) {
                    self.seen.remove(&s);
                    if let Some((missing, _)) = &mut self.waiting {
                        missing.remove(&s);
                    }
                    self.local.push(Record::plain(STREAM_ENDED, s, 0, 0));
                }
            }
        }
        for n in gsrelay_client::notices(items) {
            if matches!(n.kind, Kind::Granted | Kind::Lost | Kind::Refused) {
                self.local.push(Record::plain(
                    OWNERSHIP,
                    n.entry.ssrc,
                    n.entry.object,
                    n.kind as i64,
                ));
            }
        }
    }
}

/// An object's objectID: the first VarUInt of its body; 0 for the types that have none (a
/// top-level HeadIPD1) or a body that does not start with one.
fn object_id(kind: ObjectKind, mut body: WireReader<'_>) -> u64 {
    if kind == ObjectKind::HeadIpd1 {
        return 0;
    }
    body.varuint().unwrap_or(0)
}

/// An error event: the message, and the code in `code` as Python's `ErrorEvent` reads it.
fn error_record(e: &ClientError, what: &str) -> Record {
    Record::text(ERROR, 0, format!("{}: {what}: {e}", code_of(e)))
}

/// Joins; on success answers `joined` and serves the session until it ends.
pub async fn run(
    spec: JoinSpec,
    shared: Arc<Shared>,
    mut commands: mpsc::Receiver<Command>,
    joined: std::sync::mpsc::SyncSender<Result<(), ClientError>>,
) {
    let dialect = spec.options.dialect;
    let mut client =
        match Client::join(&spec.http_base, &spec.token, &spec.room, spec.options).await {
            Ok(c) => c,
            Err(e) => {
                let _ = joined.send(Err(e));
                return;
            }
        };
    shared.set_info(&client);
    if joined.send(Ok(())).is_err() {
        // Python gave up waiting (a timeout): leave at once rather than hold a session.
        let _ = tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await;
        return;
    }
    let reader = Mutex::new(Reader {
        local: Vec::new(),
        dialect,
        seen: HashSet::new(),
        waiting: None,
    });
    if spec.snapshot {
        ask_for_room(&mut client, &reader, &shared).await;
    }
    let mut batch = RecvBatch::coalescing(8);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_report = Instant::now();
    loop {
        let relay_ssrc = client.relay_ssrc();
        tokio::select! {
            command = commands.recv() => {
                let Some(command) = command else {
                    // The session was dropped without a leave: leave, bounded, and stop.
                    let _ = tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await;
                    shared.queue.close(Record::text(ENDED, 0, "left (the session was dropped)"));
                    return;
                };
                if let Command::Leave(answer) = command {
                    let left = tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await;
                    let note = match left {
                        Ok(Ok(())) => "left".to_owned(),
                        Ok(Err(e)) => format!("left; the relay answered: {e}"),
                        Err(_) => "left; the relay did not answer in time".to_owned(),
                    };
                    shared.queue.close(Record::text(ENDED, 0, note.clone()));
                    let _ = answer.send(note);
                    return;
                }
                apply(&mut client, command, &reader, &shared).await;
            }
            got = client.recv_batch_with(
                &mut batch,
                Duration::from_millis(250),
                |ssrc, _seq, payload| lock(&reader).payload(ssrc, payload),
                |items| lock(&reader).rtcp(items, relay_ssrc),
            ) => {
                // A failed read is the relay's silence, which the tick takes care of.
                drop(got);
                shared.queue.append(&mut lock(&reader).local);
            }
            _ = tick.tick() => {
                let now = Instant::now();
                {
                    let mut r = lock(&reader);
                    r.check_snapshot(now);
                    shared.queue.append(&mut r.local);
                }
                if client.ended_by_relay() {
                    shared.queue.close(Record::text(ENDED, 1, "the relay ended the session"));
                    return;
                }
                if now.duration_since(last_report) >= REPORT_INTERVAL {
                    last_report = now;
                    let _ = client.send_rr().await;
                }
                come_back_if_silent(&mut client, &shared, &reader).await;
            }
        }
    }
}

/// Sends a FIR naming the relay and starts waiting for the snapshot.
async fn ask_for_room(client: &mut Client, reader: &Mutex<Reader>, shared: &Shared) {
    let own = [client.ssrc(), client.room_ssrc().unwrap_or(0)];
    {
        let mut r = lock(reader);
        r.expect_snapshot(client.streams(), &own, Instant::now());
        shared.queue.append(&mut r.local);
    }
    if let Err(e) = client.send_fir(client.relay_ssrc()).await {
        shared.queue.push(error_record(&e, "asking for the room"));
    }
}

/// The reader's state. Only the network task takes it (its two callbacks of one read, and
/// the tick), never across an await, so it never waits.
fn lock(reader: &Mutex<Reader>) -> std::sync::MutexGuard<'_, Reader> {
    reader.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When the relay is silent, resumes or rejoins (the client's own logic), and tells which.
async fn come_back_if_silent(client: &mut Client, shared: &Shared, reader: &Mutex<Reader>) {
    let before = client.ssrc();
    match client.rejoin_if_silent().await {
        Ok(false) => {}
        Ok(true) => {
            shared.set_info(client);
            let kind = if client.ssrc() == before {
                RESUMED
            } else {
                REJOINED
            };
            // `rejoin_if_silent` has asked for the room; wait for it afresh.
            let own = [client.ssrc(), client.room_ssrc().unwrap_or(0)];
            let mut r = lock(reader);
            r.local.push(Record::plain(kind, client.ssrc(), 0, 0));
            r.seen.clear();
            r.expect_snapshot(client.streams(), &own, Instant::now());
            shared.queue.append(&mut r.local);
        }
        Err(e) => shared.queue.push(error_record(
            &e,
            "the relay is silent and coming back failed (retrying)",
        )),
    }
}

async fn apply(client: &mut Client, command: Command, reader: &Mutex<Reader>, shared: &Shared) {
    let done = match command {
        Command::Publish(payload) => client.send_payload(&payload).await,
        Command::Snapshot => {
            ask_for_room(client, reader, shared).await;
            Ok(())
        }
        Command::Interest(interest) => client.set_interest(*interest).await,
        // Taken by the loop before it gets here.
        Command::Leave(_) => Ok(()),
    };
    if let Err(e) = done {
        shared.queue.push(error_record(&e, "a command failed"));
    }
}
