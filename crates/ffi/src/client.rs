//! A client session behind an integer handle: join, poll, publish, ask for the room,
//! change interest, request and release objects, leave. No call waits on the network:
//! a join returns at once and its outcome arrives as an event; the other calls queue a
//! command for the library's network thread and return, `GSR_ERR_BUSY` when its queue is
//! full. The longest any call holds its caller is a lock taken for a poll's copy.

#![allow(non_camel_case_types)]

use crate::codec::{dialect, gsr_dialect, put};
use crate::events::{PollSide, gsr_event};
use crate::handle::{Kind, Registry};
use crate::net::{self, Command, GSR_STATE_JOINED, JoinSpec, Shared};
use crate::object::{flag, from_c, gsr_object, items_at, str_at};
use crate::status::{Error, GSR_OK, code, gsr_status, guard};
use gsrelay_client::JoinOptions;
use gsrelay_core::wire::{Dialect, encode};
use gsrelay_core::{Delivery, Interest};
use std::ffi::c_char;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;

/// A client's handle.
pub type gsr_client = u64;

/// How a session reaches the relay.
pub type gsr_transport = u32;
/// RTP over UDP with SRTP (the default).
pub const GSR_TRANSPORT_UDP: gsr_transport = 0;
/// RTP over QUIC.
pub const GSR_TRANSPORT_QUIC: gsr_transport = 1;

/// How the relay delivers others' objects.
pub type gsr_delivery = u32;
/// Each sender's stream on its own (the default).
pub const GSR_DELIVERY_PER_STREAM: gsr_delivery = 0;
/// One stream from the relay carrying every sender's objects, for dense rooms.
pub const GSR_DELIVERY_AGGREGATED: gsr_delivery = 1;

/// Commands a client's queue holds before calls answer `GSR_ERR_BUSY`.
const COMMAND_QUEUE: usize = 1024;

/// What a join asks for. Fill it with [`gsr_join_options_init`], which sets `struct_size`,
/// then set the fields.
#[repr(C)]
pub struct gsr_join_options {
    /// `sizeof(gsr_join_options)`: a library of another version refuses it.
    pub struct_size: u32,
    /// `GSR_TRANSPORT_*`.
    pub transport: gsr_transport,
    /// `GSR_DIALECT_*`.
    pub dialect: gsr_dialect,
    /// `GSR_DELIVERY_*`.
    pub delivery: gsr_delivery,
    /// Aggregated delivery: the longest an update waits for a packet to fill, in ms; 0
    /// for the relay's default.
    pub aggregate_max_delay_ms: u32,
    /// The SSRC wanted; 0 lets the relay pick.
    pub ssrc: u32,
    /// Silence from the relay after which it is taken for gone and the session comes back
    /// (resume, else rejoin), in ms; 0 for the default (15 s).
    pub silence_ms: u32,
    /// 1: ask for a room stream (objects published on it outlive the session).
    pub room_stream: u8,
    /// 1: plain RTP, no SRTP (only relays run with `--insecure-plain-rtp` accept).
    pub plain_rtp: u8,
    /// 1: do not ask for the whole room on joining (no snapshot event follows the join).
    pub no_snapshot: u8,
    /// The relay's HTTP API, e.g. `"http://127.0.0.1:8080"`.
    pub http_base: *const c_char,
    /// The access token.
    pub token: *const c_char,
    /// The room.
    pub room: *const c_char,
    /// The interest as JSON (`docs/interest.md`), or null for the default.
    pub interest_json: *const c_char,
}

/// An object of a stream: what ownership requests and releases name.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gsr_object_ref {
    /// The stream.
    pub ssrc: u32,
    /// The objectID.
    pub object_id: u64,
}

/// A session's identifiers, once joined.
#[repr(C)]
pub struct gsr_client_info {
    /// `sizeof(gsr_client_info)`.
    pub struct_size: u32,
    /// 1 once joined (and until it ends), else 0 and the rest is zero.
    pub joined: u8,
    /// The session's SSRC.
    pub ssrc: u32,
    /// The relay's SSRC.
    pub relay_ssrc: u32,
    /// The room stream's SSRC, 0 without one.
    pub room_ssrc: u32,
    /// The session id, NUL-terminated.
    pub session_id: [c_char; 64],
}

struct ClientHandle {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    dialect: Dialect,
    poll: Mutex<PollSide>,
}

static CLIENTS: Registry<ClientHandle> = Registry::new(Kind::Client);

impl ClientHandle {
    /// Queues `command` for the network thread, if the session is joined.
    fn send(&self, command: Command) -> Result<i32, Error> {
        if self.shared.state.load(Ordering::Acquire) != GSR_STATE_JOINED {
            return Err(Error::new(
                code::STATE,
                "the client is not joined (still joining, or ended)",
            ));
        }
        self.commands.try_send(command).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => Error::new(
                code::BUSY,
                "the client's command queue is full; the network thread is behind",
            ),
            mpsc::error::TrySendError::Closed(_) => Error::new(code::STATE, "the client has ended"),
        })?;
        Ok(GSR_OK)
    }
}

fn check_size(got: u32, want: usize, what: &str) -> Result<(), Error> {
    if got as usize != want {
        return Err(Error::new(
            code::SIZE,
            format!(
                "{what}.struct_size is {got}, this library's is {want}: header and library differ"
            ),
        ));
    }
    Ok(())
}

/// Reads an interest from JSON, validated as the relay would.
///
/// # Safety
/// `json` must be null or a NUL-terminated string.
unsafe fn interest_at(json: *const c_char) -> Result<Option<Interest>, Error> {
    if json.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's promise.
    let text = unsafe { str_at(json, "interest_json") }?;
    let interest: Interest =
        serde_json::from_str(text).map_err(|e| Error::argument(format!("interest_json: {e}")))?;
    Ok(Some(interest))
}

/// Fills `*options` with the defaults (UDP/SRTP, draft-01, per-stream delivery, snapshot on
/// join, no strings) and its `struct_size`.
///
/// # Safety
/// `options` must be null or point at a writable `gsr_join_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_join_options_init(options: *mut gsr_join_options) -> gsr_status {
    guard(|| {
        let defaults = gsr_join_options {
            struct_size: size_of::<gsr_join_options>() as u32,
            transport: GSR_TRANSPORT_UDP,
            dialect: crate::codec::GSR_DIALECT_DRAFT01,
            delivery: GSR_DELIVERY_PER_STREAM,
            aggregate_max_delay_ms: 0,
            ssrc: 0,
            silence_ms: 0,
            room_stream: 0,
            plain_rtp: 0,
            no_snapshot: 0,
            http_base: std::ptr::null(),
            token: std::ptr::null(),
            room: std::ptr::null(),
            interest_json: std::ptr::null(),
        };
        // SAFETY: the caller promises null or writable.
        unsafe { put(options, defaults, "options") }?;
        Ok(GSR_OK)
    })
}

/// Starts joining a room and puts the client's handle in `*out` at once. The outcome is
/// an event: `GSR_EVENT_JOINED` (then, unless `no_snapshot`, the room's objects and
/// `GSR_EVENT_SNAPSHOT_COMPLETE`), or `GSR_EVENT_ENDED` with `GSR_ENDED_FAILED` and why.
/// The options' strings are copied; the caller keeps them.
///
/// # Safety
/// `options` must be null or point at a `gsr_join_options` whose strings are null or
/// NUL-terminated; `out` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_join(
    options: *const gsr_join_options,
    out: *mut gsr_client,
) -> gsr_status {
    guard(|| {
        // SAFETY: the caller promises null or a valid struct. Its size is read first, so
        // a smaller struct of another version is refused before its other fields are.
        let size =
            unsafe { options.cast::<u32>().as_ref() }.ok_or_else(|| Error::null("options"))?;
        check_size(*size, size_of::<gsr_join_options>(), "options")?;
        // SAFETY: as above; the size matches this library's.
        let o = unsafe { &*options };
        if out.is_null() {
            return Err(Error::null("out"));
        }
        // SAFETY: the caller's promise on the strings.
        let (http_base, token, room, interest) = unsafe {
            (
                str_at(o.http_base, "http_base")?.to_owned(),
                str_at(o.token, "token")?.to_owned(),
                str_at(o.room, "room")?.to_owned(),
                interest_at(o.interest_json)?,
            )
        };
        let quic = match o.transport {
            GSR_TRANSPORT_UDP => false,
            GSR_TRANSPORT_QUIC => true,
            t => return Err(Error::argument(format!("transport {t} is not a transport"))),
        };
        let mut interest = interest.unwrap_or_default();
        interest.delivery = match o.delivery {
            GSR_DELIVERY_PER_STREAM => Delivery::default(),
            GSR_DELIVERY_AGGREGATED => Delivery::aggregated(
                (o.aggregate_max_delay_ms > 0).then_some(o.aggregate_max_delay_ms),
            ),
            d => {
                return Err(Error::argument(format!(
                    "delivery {d} is not a delivery mode"
                )));
            }
        };
        let dialect = dialect(o.dialect)?;
        let options = JoinOptions {
            ssrc: (o.ssrc != 0).then_some(o.ssrc),
            dialect,
            interest: Some(interest),
            plain_rtp: flag(o.plain_rtp, "plain_rtp")?,
            quic,
            room_stream: flag(o.room_stream, "room_stream")?,
            silence: (o.silence_ms > 0).then(|| Duration::from_millis(u64::from(o.silence_ms))),
            ..JoinOptions::default()
        };
        let snapshot = !flag(o.no_snapshot, "no_snapshot")?;
        let runtime = net::runtime().map_err(|e| Error::new(code::STATE, e))?;
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
        let spec = JoinSpec {
            http_base,
            token,
            room,
            options,
            snapshot,
        };
        runtime.spawn(net::run(spec, Arc::clone(&shared), rx));
        let handle = CLIENTS.insert(ClientHandle {
            shared,
            commands: tx,
            dialect,
            poll: Mutex::default(),
        });
        // SAFETY: checked non-null above; the caller promises it is writable.
        unsafe { put(out, handle, "out") }?;
        Ok(GSR_OK)
    })
}

/// Hands over up to `capacity` events, oldest first, into `events`; `*count` says how
/// many. Never waits. What the events point at (bytes, decoded arrays) stays valid until
/// the next poll of this client or its free. `event_size` must be `sizeof(gsr_event)`.
///
/// # Safety
/// `events` must point at `capacity` writable `gsr_event`s (or `capacity` be 0); `count`
/// null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_poll(
    client: gsr_client,
    events: *mut gsr_event,
    capacity: usize,
    event_size: usize,
    count: *mut usize,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        if event_size != size_of::<gsr_event>() {
            return Err(Error::new(
                code::SIZE,
                format!(
                    "event_size is {event_size}, this library's gsr_event is {}: header and library differ",
                    size_of::<gsr_event>()
                ),
            ));
        }
        if count.is_null() || (capacity > 0 && events.is_null()) {
            return Err(Error::null("events or count"));
        }
        if capacity > isize::MAX as usize / size_of::<gsr_event>() {
            return Err(Error::new(
                code::SIZE,
                format!("capacity {capacity} is too large"),
            ));
        }
        let out: &mut [gsr_event] = if capacity == 0 {
            &mut []
        } else {
            // SAFETY: non-null, `capacity` writable events as the caller promises, within
            // the address space (checked above). The library writes every slot it counts
            // before the caller reads it; a `gsr_event` is plain data, so a slot's old
            // bytes are never read as a Rust value.
            unsafe { std::slice::from_raw_parts_mut(events, capacity) }
        };
        let mut side = c.poll.lock().unwrap_or_else(PoisonError::into_inner);
        let n = side.poll(&c.shared.queue, c.dialect, out);
        // SAFETY: checked non-null above; the caller promises it is writable.
        unsafe { put(count, n, "count") }?;
        Ok(GSR_OK)
    })
}

/// Reads `count` C objects.
///
/// # Safety
/// `objects` must point at `count` valid objects (or `count` be 0).
unsafe fn objects_at(
    objects: *const gsr_object,
    count: usize,
    gse: bool,
) -> Result<Vec<gsrelay_core::wire::Object>, Error> {
    // SAFETY: the caller's promise on the array and on each object's pointers.
    let slice = unsafe { items_at(objects, count, "objects") }?;
    slice.iter().map(|o| unsafe { from_c(o, gse) }).collect()
}

/// Publishes `count` objects in one packet on the session's stream.
///
/// # Safety
/// `objects` must point at `count` valid `gsr_object`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_publish(
    client: gsr_client,
    objects: *const gsr_object,
    count: usize,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        // SAFETY: the caller's promise.
        let objects = unsafe { objects_at(objects, count, c.dialect == Dialect::Gse) }?;
        let payload =
            encode(&objects, c.dialect).map_err(|e| Error::new(code::ENCODE, e.to_string()))?;
        c.send(Command::Publish(payload))
    })
}

/// Publishes `length` bytes as one packet's payload on the session's stream, as they are
/// (they must be a game-state payload of the session's dialect; the relay drops others).
///
/// # Safety
/// `payload` must point at `length` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_publish_raw(
    client: gsr_client,
    payload: *const u8,
    length: usize,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        if payload.is_null() {
            return Err(Error::null("payload"));
        }
        // SAFETY: non-null with `length` readable bytes, as the caller promises.
        let bytes = unsafe { std::slice::from_raw_parts(payload, length) };
        c.send(Command::Publish(bytes.to_vec()))
    })
}

/// Publishes `count` objects on the session's room stream (it joined with `room_stream`):
/// they belong to the room and outlive the session.
///
/// # Safety
/// `objects` must point at `count` valid `gsr_object`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_publish_room(
    client: gsr_client,
    objects: *const gsr_object,
    count: usize,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        // SAFETY: the caller's promise.
        let objects = unsafe { objects_at(objects, count, c.dialect == Dialect::Gse) }?;
        c.send(Command::PublishRoom(objects))
    })
}

/// Asks for the whole room again (a FIR naming the relay); `GSR_EVENT_SNAPSHOT_COMPLETE`
/// follows.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_client_request_snapshot(client: gsr_client) -> gsr_status {
    guard(|| CLIENTS.get(client)?.send(Command::Snapshot))
}

/// Changes what the session receives: `interest_json` as in `docs/interest.md`, or null
/// for the default. Checked here; the relay's refusal comes as a `GSR_EVENT_ERROR`.
///
/// # Safety
/// `interest_json` must be null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_set_interest(
    client: gsr_client,
    interest_json: *const c_char,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        // SAFETY: the caller's promise.
        let interest = unsafe { interest_at(interest_json) }?.unwrap_or_default();
        c.send(Command::Interest(Box::new(interest)))
    })
}

/// Reads `count` object references.
///
/// # Safety
/// `refs` must point at `count` readable references (or `count` be 0).
unsafe fn refs_at(refs: *const gsr_object_ref, count: usize) -> Result<Vec<(u32, u64)>, Error> {
    // SAFETY: the caller's promise on the array.
    let refs = unsafe { items_at(refs, count, "refs") }?;
    Ok(refs.iter().map(|r| (r.ssrc, r.object_id)).collect())
}

/// Queues an ownership request or release of `count` objects.
///
/// # Safety
/// `refs` must point at `count` readable `gsr_object_ref`s.
unsafe fn ownership(
    client: gsr_client,
    refs: *const gsr_object_ref,
    count: usize,
    command: fn(Vec<(u32, u64)>) -> Command,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        // SAFETY: the caller's promise.
        let refs = unsafe { refs_at(refs, count) }?;
        c.send(command(refs))
    })
}

/// Asks the relay for `count` objects of other streams; each answer is a
/// `GSR_EVENT_OWNERSHIP` (granted or refused).
///
/// # Safety
/// `refs` must point at `count` readable `gsr_object_ref`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_request_objects(
    client: gsr_client,
    refs: *const gsr_object_ref,
    count: usize,
) -> gsr_status {
    // SAFETY: the caller's promise, passed on.
    unsafe { ownership(client, refs, count, Command::Request) }
}

/// Gives `count` held objects back.
///
/// # Safety
/// `refs` must point at `count` readable `gsr_object_ref`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_release_objects(
    client: gsr_client,
    refs: *const gsr_object_ref,
    count: usize,
) -> gsr_status {
    // SAFETY: the caller's promise, passed on.
    unsafe { ownership(client, refs, count, Command::Release) }
}

/// The session's identifiers in `*info` (`info->struct_size` set by the caller).
///
/// # Safety
/// `info` must be null or point at a writable `gsr_client_info` whose `struct_size` is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_get_info(
    client: gsr_client,
    info: *mut gsr_client_info,
) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        // SAFETY: the caller promises null or a valid struct; its size is read first.
        let size = unsafe { info.cast::<u32>().as_ref() }.ok_or_else(|| Error::null("info"))?;
        check_size(*size, size_of::<gsr_client_info>(), "info")?;
        let joined = c.shared.state.load(Ordering::Acquire) == GSR_STATE_JOINED;
        let i = c
            .shared
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut session_id = [0 as c_char; 64];
        if joined {
            for (d, s) in session_id.iter_mut().zip(i.session.bytes().take(63)) {
                *d = s as c_char;
            }
        }
        let value = gsr_client_info {
            struct_size: size_of::<gsr_client_info>() as u32,
            joined: u8::from(joined),
            ssrc: if joined { i.ssrc } else { 0 },
            relay_ssrc: if joined { i.relay_ssrc } else { 0 },
            room_ssrc: if joined { i.room_ssrc } else { 0 },
            session_id,
        };
        // SAFETY: non-null and writable as the caller promises.
        unsafe { put(info, value, "info") }?;
        Ok(GSR_OK)
    })
}

/// The client's state in `*state`: `GSR_STATE_JOINING`, `GSR_STATE_JOINED` or
/// `GSR_STATE_ENDED` (as of now; the events tell when it changed).
///
/// # Safety
/// `state` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gsr_client_state(client: gsr_client, state: *mut u8) -> gsr_status {
    guard(|| {
        let c = CLIENTS.get(client)?;
        let now = c.shared.state.load(Ordering::Acquire);
        // SAFETY: the caller promises null or writable.
        unsafe { put(state, now, "state") }?;
        Ok(GSR_OK)
    })
}

/// Leaves the room; `GSR_EVENT_ENDED` (`GSR_ENDED_LEFT`) follows. The handle stays valid
/// until freed.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_client_leave(client: gsr_client) -> gsr_status {
    guard(|| CLIENTS.get(client)?.send(Command::Leave))
}

/// Frees the client: its handle is dead at once (a second free is `GSR_ERR_HANDLE`), and
/// the library leaves the room in the background (at most 2 s), if still joined. What
/// its last poll handed out is freed.
#[unsafe(no_mangle)]
pub extern "C" fn gsr_client_free(client: gsr_client) -> gsr_status {
    guard(|| CLIENTS.remove(client).map(|_| GSR_OK))
}
