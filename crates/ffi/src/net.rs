//! The network side of a client handle: one task on the library's runtime that joins,
//! reads the relay's packets into the handle's event queue, carries out the engine's
//! commands, keeps the session alive and brings it back when the relay goes silent. The
//! engine's threads never run any of it: they push commands and poll events.

use crate::events::*;
use gsrelay_client::{Client, ClientError, JoinOptions};
use gsrelay_core::relay::handover::Kind;
use gsrelay_core::rtp::RtcpItem;
use gsrelay_core::wire::layout::read_tlv;
use gsrelay_core::wire::reader::Reader as WireReader;
use gsrelay_core::wire::{Dialect, Object, ObjectKind, container};
use gsrelay_net::udp::recv::RecvBatch;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// How long the library waits, once the room was asked for, for every stream of the room
/// at the join to send its state before it says the snapshot is complete anyway (partial).
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);

/// How often a session that publishes nothing sends a receiver report, so that the relay
/// keeps it (the JavaScript client's interval).
const REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// The longest a leave waits for the relay when the handle is freed.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// A client's state (`gsr_client_state`): joining; commands are refused until joined.
pub const GSR_STATE_JOINING: u8 = 0;
/// Joined: commands are taken.
pub const GSR_STATE_JOINED: u8 = 1;
/// Ended: nothing more happens.
pub const GSR_STATE_ENDED: u8 = 2;

/// What the engine asks of the network side.
pub enum Command {
    /// A payload on the session's stream.
    Publish(Vec<u8>),
    /// Objects on the room stream.
    PublishRoom(Vec<Object>),
    /// A request for the whole room (FIR naming the relay).
    Snapshot,
    /// A new interest.
    Interest(Box<gsrelay_core::Interest>),
    /// Ownership requests.
    Request(Vec<(u32, u64)>),
    /// Ownership releases.
    Release(Vec<(u32, u64)>),
    /// Leave the room; the session ends.
    Leave,
}

/// What the handle and its task share.
#[derive(Default)]
pub struct Shared {
    /// Events for the poll.
    pub queue: Queue,
    /// `GSR_STATE_JOINING`, `GSR_STATE_JOINED` or `GSR_STATE_ENDED`.
    pub state: AtomicU8,
    /// The session's identifiers, once joined.
    pub info: Mutex<Info>,
}

/// The session's identifiers.
#[derive(Debug, Clone, Default)]
pub struct Info {
    /// Its SSRC.
    pub ssrc: u32,
    /// The relay's SSRC (what a FIR for the whole room names).
    pub relay_ssrc: u32,
    /// Its room stream's SSRC, 0 without one.
    pub room_ssrc: u32,
    /// Its session id.
    pub session: String,
}

impl Shared {
    fn set_info(&self, c: &Client) {
        let info = Info {
            ssrc: c.ssrc(),
            relay_ssrc: c.relay_ssrc(),
            room_ssrc: c.room_ssrc().unwrap_or(0),
            session: gsrelay_core::format_session_id(c.session()),
        };
        *self.info.lock().unwrap_or_else(PoisonError::into_inner) = info;
    }

    fn end(&self, code: i32, message: &str) {
        self.state.store(GSR_STATE_ENDED, Ordering::Release);
        self.queue.push_text(GSR_EVENT_ENDED, 0, code, message);
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

/// The library's runtime: one thread of its own, made on first use. One: a game holds one
/// or a few sessions, and a second worker only adds the cost of waking it and of tasks
/// moving between the two (measured: `gsrelay bench ffi`, docs/benchmarks.md).
pub fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("gsrelay-net")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the network threads: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The status code a client error maps to.
pub fn status_of(e: &ClientError) -> i32 {
    use crate::status::code;
    match e {
        ClientError::Status { .. } => code::REFUSED,
        ClientError::Encode(_) | ClientError::Rtp(_) | ClientError::Rtcp(_) => code::ENCODE,
        ClientError::Decode(_) => code::DECODE,
        ClientError::NoHttp => code::STATE,
        _ => code::NETWORK,
    }
}

/// Reads packets into events: which streams it has seen, and the snapshot it waits for.
/// Events gather in `local` and go to the queue once per read ([`Reader::flush`]).
struct Reader {
    shared: Arc<Shared>,
    local: Batch,
    dialect: Dialect,
    seen: HashSet<u32>,
    /// Streams the snapshot still waits for, and until when; `None` when not waiting.
    waiting: Option<(HashSet<u32>, Instant)>,
}

impl Reader {
    fn expect_snapshot(&mut self, streams: &[u32], own: &[u32], now: Instant) {
        let missing: HashSet<u32> = streams
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
            let flags = if missing.is_empty() {
                0
            } else {
                GSR_FLAG_PARTIAL
            };
            self.local
                .push(GSR_EVENT_SNAPSHOT_COMPLETE, 0, 0, 0, flags, &[]);
            self.waiting = None;
        }
    }

    fn stream(&mut self, ssrc: u32) {
        if self.seen.insert(ssrc) {
            self.local
                .push(GSR_EVENT_STREAM_STARTED, ssrc, 0, 0, 0, &[]);
        }
        if let Some((missing, _)) = &mut self.waiting {
            missing.remove(&ssrc);
        }
    }

    /// One RTP payload of stream `ssrc`: an event per object, containers unpacked to their
    /// senders' objects. Objects are only framed here (tag, Length, objectID), not
    /// validated: the poll decodes each, and one that does not decode arrives flagged
    /// `GSR_FLAG_UNDECODED`. A payload whose framing breaks keeps the objects before it.
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
        self.local.push(GSR_EVENT_OBJECT, ssrc, id, 0, 0, tlv);
    }

    /// Hands what was read to the poll.
    fn flush(&mut self) {
        self.shared.queue.append(&mut self.local);
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
                    self.local.push(GSR_EVENT_STREAM_ENDED, s, 0, 0, 0, &[]);
                }
            }
        }
        for n in gsrelay_client::notices(items) {
            if matches!(n.kind, Kind::Granted | Kind::Lost | Kind::Refused) {
                self.local.push(
                    GSR_EVENT_OWNERSHIP,
                    n.entry.ssrc,
                    n.entry.object,
                    n.entry.reason as i32,
                    n.kind as u32,
                    &[],
                );
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

/// The task: join, then serve the session until it ends.
pub async fn run(spec: JoinSpec, shared: Arc<Shared>, mut commands: mpsc::Receiver<Command>) {
    let dialect = spec.options.dialect;
    let client = Client::join(&spec.http_base, &spec.token, &spec.room, spec.options).await;
    let mut client = match client {
        Ok(c) => c,
        Err(e) => {
            shared.end(GSR_ENDED_FAILED, &format!("join failed: {e}"));
            return;
        }
    };
    shared.set_info(&client);
    shared.state.store(GSR_STATE_JOINED, Ordering::Release);
    let session = gsrelay_core::format_session_id(client.session());
    shared
        .queue
        .push_text(GSR_EVENT_JOINED, client.ssrc(), 0, &session);
    let reader = Mutex::new(Reader {
        shared: Arc::clone(&shared),
        local: Batch::default(),
        dialect,
        seen: HashSet::new(),
        waiting: None,
    });
    if spec.snapshot {
        ask_for_room(&mut client, &reader).await;
    }
    let mut batch = RecvBatch::coalescing(8);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_report = Instant::now();
    loop {
        let relay_ssrc = client.relay_ssrc();
        tokio::select! {
            command = commands.recv() => {
                let Some(command) = command else {
                    // The handle was freed: leave, bounded, and stop.
                    let _ = tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await;
                    shared.state.store(GSR_STATE_ENDED, Ordering::Release);
                    return;
                };
                if matches!(command, Command::Leave) {
                    let left = tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await;
                    let note = match left {
                        Ok(Ok(())) => "left".to_owned(),
                        Ok(Err(e)) => format!("left; the relay answered: {e}"),
                        Err(_) => "left; the relay did not answer in time".to_owned(),
                    };
                    shared.end(GSR_ENDED_LEFT, &note);
                    return;
                }
                if let Err(e) = apply(&mut client, command, &reader).await {
                    shared.queue.push_text(GSR_EVENT_ERROR, 0, status_of(&e), &e.to_string());
                }
            }
            got = client.recv_batch_with(
                &mut batch,
                Duration::from_millis(250),
                |ssrc, _seq, payload| lock(&reader).payload(ssrc, payload),
                |items| lock(&reader).rtcp(items, relay_ssrc),
            ) => {
                // A failed read is the relay's silence, which the tick takes care of.
                drop(got);
                lock(&reader).flush();
            }
            _ = tick.tick() => {
                let now = Instant::now();
                {
                    let mut r = lock(&reader);
                    r.check_snapshot(now);
                    r.flush();
                }
                if client.ended_by_relay() {
                    shared.end(GSR_ENDED_BY_RELAY, "the relay ended the session");
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
async fn ask_for_room(client: &mut Client, reader: &Mutex<Reader>) {
    let own = [client.ssrc(), client.room_ssrc().unwrap_or(0)];
    {
        let mut r = lock(reader);
        r.expect_snapshot(client.streams(), &own, Instant::now());
        r.flush();
    }
    if let Err(e) = client.send_fir(client.relay_ssrc()).await {
        let r = lock(reader);
        r.shared
            .queue
            .push_text(GSR_EVENT_ERROR, 0, status_of(&e), &e.to_string());
    }
}

/// The reader's state. Only the network task takes it (its two callbacks of one read, and
/// the tick), never across an await, so it never waits.
fn lock(reader: &Mutex<Reader>) -> std::sync::MutexGuard<'_, Reader> {
    reader.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When the relay is silent, resumes or rejoins, and tells which.
async fn come_back_if_silent(client: &mut Client, shared: &Shared, reader: &Mutex<Reader>) {
    let before = client.ssrc();
    match client.rejoin_if_silent().await {
        Ok(false) => {}
        Ok(true) => {
            shared.set_info(client);
            let kind = if client.ssrc() == before {
                GSR_EVENT_RESUMED
            } else {
                GSR_EVENT_REJOINED
            };
            // `rejoin_if_silent` has asked for the room; wait for it afresh.
            let own = [client.ssrc(), client.room_ssrc().unwrap_or(0)];
            let mut r = lock(reader);
            r.local.push(kind, client.ssrc(), 0, 0, 0, &[]);
            r.seen.clear();
            r.expect_snapshot(client.streams(), &own, Instant::now());
            r.flush();
        }
        Err(e) => {
            let message = format!("the relay is silent and coming back failed (retrying): {e}");
            shared
                .queue
                .push_text(GSR_EVENT_ERROR, 0, status_of(&e), &message);
        }
    }
}

async fn apply(
    client: &mut Client,
    command: Command,
    reader: &Mutex<Reader>,
) -> Result<(), ClientError> {
    match command {
        Command::Publish(payload) => client.send_payload(&payload).await,
        Command::PublishRoom(objects) => client.send_room_objects(&objects).await,
        Command::Snapshot => {
            ask_for_room(client, reader).await;
            Ok(())
        }
        Command::Interest(interest) => client.set_interest(*interest).await,
        Command::Request(objects) => client.request_objects(&objects).await,
        Command::Release(objects) => client.release_objects(&objects).await,
        // Taken by the loop before it gets here.
        Command::Leave => Ok(()),
    }
}
