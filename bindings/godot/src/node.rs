//! `GsRelayRoom`: the node a Godot scene holds. It owns one [`Session`] of the C ABI,
//! polls it in `_process` (or when the script calls `poll()`), and emits a signal per
//! [`Signal`] the mapper makes. Every method a script calls checks its arguments and
//! answers a Godot `Error` (`OK`, `ERR_INVALID_PARAMETER`, `ERR_UNCONFIGURED` when not
//! joined, `ERR_BUSY`, `FAILED`), with the message in `get_last_error()` and Godot's
//! error log; nothing a script passes can panic.
//!
//! This is the only module that needs the engine at run time (GString, Dictionary,
//! signals); the tests cover everything under it.

use crate::convert::Axes;
use crate::error::BindingError;
use crate::publish::{self, Body, Pose};
use crate::session::{self, JoinSettings, Session, Transport, u32_arg};
use crate::signals::{Detail, EventMapper, ObjectUpdate, Signal, id_to_int, int_to_id};
use godot::classes::{INode, Node};
use godot::global::Error;
use godot::prelude::*;
use gsrelay_ffi::net::GSR_STATE_JOINED;
use gsrelay_ffi::{GSR_ERR_ARGUMENT, GSR_ERR_BUSY, GSR_ERR_STATE, GSR_ERR_UTF8, gsr_object};

/// A room of a gsrelay relay, joined from a scene: poll-first, signals on the main thread.
#[derive(GodotClass)]
#[class(base = Node)]
pub struct GsRelayRoom {
    /// `"udp"` (RTP/SRTP, the default) or `"quic"`; read at `join()`.
    #[export]
    transport: GString,
    /// Aggregated delivery: every sender in one stream from the relay (dense rooms).
    #[export]
    aggregated: bool,
    /// The interest as JSON (`docs/interest.md`), empty for the default; read at `join()`.
    /// Areas are in the wire's axes.
    #[export(multiline)]
    interest_json: GString,
    /// The SSRC wanted; 0 lets the relay pick.
    #[export]
    ssrc: i64,
    /// Silence from the relay (ms) after which the session comes back; 0: 15 s.
    #[export]
    silence_ms: i64,
    /// Ask for the whole room on joining.
    #[export]
    snapshot_on_join: bool,
    /// Plain RTP, no SRTP (only relays run with `--insecure-plain-rtp` accept).
    #[export]
    plain_rtp: bool,
    /// Mirror Z between Godot's right-handed axes and the draft's left-handed ones; read
    /// at `join()`.
    #[export]
    draft_axes: bool,
    /// Poll in `_process`; off, the script calls `poll()` itself.
    #[export]
    auto_poll: bool,
    /// The session; dropped with the node (freed, or its scene closed), which frees it in
    /// the library, which leaves the room in the background: a closed game does not hold
    /// its place until the relay times it out. (Not on leaving the tree: a node moved to
    /// another parent keeps its session.)
    session: Option<Session>,
    /// `draft_axes` as it was at `join()`, for both directions of the session.
    axes: Axes,
    mapper: EventMapper,
    pending: Vec<Signal>,
    last_error: String,
    base: Base<Node>,
}

#[godot_api]
impl INode for GsRelayRoom {
    fn init(base: Base<Node>) -> Self {
        Self {
            transport: GString::from("udp"),
            aggregated: false,
            interest_json: GString::new(),
            ssrc: 0,
            silence_ms: 0,
            snapshot_on_join: true,
            plain_rtp: false,
            draft_axes: true,
            auto_poll: true,
            session: None,
            axes: Axes::Draft,
            mapper: EventMapper::new(Axes::Draft),
            pending: Vec::new(),
            last_error: String::new(),
            base,
        }
    }

    fn process(&mut self, _delta: f64) {
        if self.auto_poll && self.session.is_some() {
            self.poll();
        }
    }
}

#[godot_api]
impl GsRelayRoom {
    /// The join succeeded.
    #[signal]
    fn joined(ssrc: i64, session_id: GString);
    /// The room asked for has arrived (`partial`: the wait timed out).
    #[signal]
    fn snapshot_complete(partial: bool);
    /// A stream's first packet arrived.
    #[signal]
    fn stream_started(ssrc: i64);
    /// An object's state: where it is and how it is turned, in Godot's axes; the rest by
    /// type in `details`.
    #[signal]
    fn object_updated(
        ssrc: i64,
        object_id: i64,
        kind: GString,
        position: Vector3,
        rotation: Quaternion,
        details: VarDictionary,
    );
    /// An object is gone: its stream ended, or this session did.
    #[signal]
    fn object_removed(ssrc: i64, object_id: i64);
    /// A stream ended (its sender left).
    #[signal]
    fn stream_ended(ssrc: i64);
    /// An ownership notice: `"granted"`, `"lost"` or `"refused"`, with the reason number.
    #[signal]
    fn ownership(ssrc: i64, object_id: i64, notice: GString, reason: i64);
    /// The session came back after the relay was silent or gone.
    #[signal]
    fn rejoined(ssrc: i64, same_ssrc: bool);
    /// Something failed without ending the session.
    #[signal]
    fn session_error(status: i64, message: GString);
    /// Events were lost because nobody polled.
    #[signal]
    fn events_dropped(count: i64);
    /// The session is over: `"left"`, `"by_relay"` or `"failed"`.
    #[signal]
    fn ended(reason: GString, message: GString);

    /// Starts joining `room` at the relay's HTTP API `http_base` with `token`, with the
    /// node's properties as options. `joined` or `ended` tells the outcome.
    #[func]
    fn join(&mut self, http_base: GString, token: GString, room: GString) -> Error {
        let settings = self.settings(
            &http_base.to_string(),
            &token.to_string(),
            &room.to_string(),
        );
        let result = settings.and_then(|s| {
            if self.session.is_some() {
                return Err(BindingError::state(
                    "already joined or joining: call leave() and wait for ended first",
                ));
            }
            Session::join(&s)
        });
        match result {
            Ok(session) => {
                self.axes = if self.draft_axes {
                    Axes::Draft
                } else {
                    Axes::AsIs
                };
                self.mapper = EventMapper::new(self.axes);
                self.session = Some(session);
                Error::OK
            }
            Err(e) => self.fail(e),
        }
    }

    /// Emits the signals of every event that arrived since the last poll. `_process`
    /// calls it when `auto_poll` is on.
    #[func]
    fn poll(&mut self) -> Error {
        let mut pending = std::mem::take(&mut self.pending);
        let result = match self.session.as_mut() {
            None => Err(not_joined()),
            Some(session) => {
                let mapper = &mut self.mapper;
                session.poll(|e| mapper.map(e, &mut pending))
            }
        };
        let ended = pending.iter().any(|s| matches!(s, Signal::Ended { .. }));
        if ended {
            // Nothing follows an end: a later join() starts afresh.
            self.session = None;
        }
        // Emitting runs the scripts' handlers, which may call back into this node (the
        // typed emit re-borrows through base_mut, which allows it); `pending` is out of
        // `self` meanwhile.
        for signal in pending.drain(..) {
            self.emit(signal);
        }
        self.pending = pending;
        match result {
            Ok(()) => Error::OK,
            Err(e) => self.fail(e),
        }
    }

    /// Publishes a head (Head1). `velocity` in m/s, `angular_velocity` in rad/s (at most
    /// PI), both in Godot's axes; receivers extrapolate with them.
    #[func]
    fn publish_head(
        &mut self,
        id: i64,
        position: Vector3,
        rotation: Quaternion,
        #[opt(default = Vector3::ZERO)] velocity: Vector3,
        #[opt(default = Vector3::ZERO)] angular_velocity: Vector3,
    ) -> Error {
        let pose = Pose {
            position,
            rotation,
            velocity,
            angular_velocity,
        };
        let object = publish::head(self.axes, id, &pose);
        self.publish(object)
    }

    /// Publishes a hand (Hand1).
    #[func]
    fn publish_hand(
        &mut self,
        id: i64,
        left: bool,
        position: Vector3,
        rotation: Quaternion,
        #[opt(default = Vector3::ZERO)] velocity: Vector3,
        #[opt(default = Vector3::ZERO)] angular_velocity: Vector3,
    ) -> Error {
        let pose = Pose {
            position,
            rotation,
            velocity,
            angular_velocity,
        };
        let object = publish::hand(self.axes, id, left, &pose);
        self.publish(object)
    }

    /// Publishes an object (Object2): its pose, scale, whether it is active, and its
    /// parent's objectID (negative: none).
    #[func]
    #[allow(clippy::too_many_arguments)] // GDScript has no structs: one argument per part
    fn publish_object(
        &mut self,
        id: i64,
        position: Vector3,
        rotation: Quaternion,
        #[opt(default = Vector3::ONE)] scale: Vector3,
        #[opt(default = true)] active: bool,
        #[opt(default = Vector3::ZERO)] velocity: Vector3,
        #[opt(default = Vector3::ZERO)] angular_velocity: Vector3,
        #[opt(default = -1)] parent: i64,
    ) -> Error {
        let pose = Pose {
            position,
            rotation,
            velocity,
            angular_velocity,
        };
        let body = Body {
            scale,
            active,
            parent,
        };
        let object = publish::object2(self.axes, id, &pose, &body);
        self.publish(object)
    }

    /// Publishes a game controller (GameControl1): `buttons` as a bit set, sticks in
    /// [-1, 1].
    #[func]
    fn publish_game_control(
        &mut self,
        id: i64,
        buttons: i64,
        left_stick: Vector2,
        right_stick: Vector2,
    ) -> Error {
        let object = publish::game_control(id, buttons, left_stick, right_stick);
        self.publish(object)
    }

    /// Changes what this session receives: JSON as in `docs/interest.md`, empty for the
    /// default.
    #[func]
    fn set_interest(&mut self, json: GString) -> Error {
        let result = session::interest_arg(&json.to_string())
            .and_then(|json| self.joined()?.set_interest(json.as_deref()));
        self.done(result)
    }

    /// Asks for the whole room again; `snapshot_complete` follows.
    #[func]
    fn request_snapshot(&mut self) -> Error {
        let result = self.joined().and_then(Session::request_snapshot);
        self.done(result)
    }

    /// Asks the relay for an object of another stream; `ownership` answers.
    #[func]
    fn request_object(&mut self, ssrc: i64, object_id: i64) -> Error {
        let result = u32_arg("ssrc", ssrc)
            .and_then(|ssrc| self.joined()?.request_object(ssrc, int_to_id(object_id)));
        self.done(result)
    }

    /// Gives a held object back.
    #[func]
    fn release_object(&mut self, ssrc: i64, object_id: i64) -> Error {
        let result = u32_arg("ssrc", ssrc)
            .and_then(|ssrc| self.joined()?.release_object(ssrc, int_to_id(object_id)));
        self.done(result)
    }

    /// Leaves the room; `ended` ("left") follows.
    #[func]
    fn leave(&mut self) -> Error {
        let result = self.joined().and_then(Session::leave);
        self.done(result)
    }

    /// Whether the session is joined now.
    #[func]
    fn is_joined(&self) -> bool {
        self.session
            .as_ref()
            .and_then(|s| s.state().ok())
            .is_some_and(|state| state == GSR_STATE_JOINED)
    }

    /// The session's SSRC once joined, else -1.
    #[func]
    fn get_session_ssrc(&self) -> i64 {
        self.info().map_or(-1, |i| i64::from(i.ssrc))
    }

    /// The session id once joined, else "".
    #[func]
    fn get_session_id(&self) -> GString {
        self.info()
            .map_or_else(GString::new, |i| GString::from(i.session_id.as_str()))
    }

    /// Why the last call that failed did.
    #[func]
    fn get_last_error(&self) -> GString {
        GString::from(self.last_error.as_str())
    }
}

fn not_joined() -> BindingError {
    BindingError::state("not joined: call join() first")
}

/// A Godot error for a binding error's status.
fn godot_error(e: &BindingError) -> Error {
    match e.status {
        GSR_ERR_ARGUMENT | GSR_ERR_UTF8 => Error::ERR_INVALID_PARAMETER,
        GSR_ERR_STATE => Error::ERR_UNCONFIGURED,
        GSR_ERR_BUSY => Error::ERR_BUSY,
        _ => Error::FAILED,
    }
}

impl GsRelayRoom {
    fn settings(
        &self,
        http_base: &str,
        token: &str,
        room: &str,
    ) -> Result<JoinSettings, BindingError> {
        let mut s =
            JoinSettings::new(http_base, token, room)?.interest(&self.interest_json.to_string())?;
        s.transport = Transport::parse(&self.transport.to_string())?;
        s.aggregated = self.aggregated;
        s.ssrc = u32_arg("ssrc", self.ssrc)?;
        s.silence_ms = u32_arg("silence_ms", self.silence_ms)?;
        s.snapshot = self.snapshot_on_join;
        s.plain_rtp = self.plain_rtp;
        Ok(s)
    }

    fn joined(&self) -> Result<&Session, BindingError> {
        self.session.as_ref().ok_or_else(not_joined)
    }

    fn info(&self) -> Option<session::Info> {
        self.session.as_ref()?.info().ok().flatten()
    }

    fn publish(&mut self, object: Result<gsr_object, BindingError>) -> Error {
        let result = object.and_then(|o| self.joined()?.publish(&[o]));
        self.done(result)
    }

    fn done(&mut self, result: Result<(), BindingError>) -> Error {
        match result {
            Ok(()) => Error::OK,
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: BindingError) -> Error {
        godot_error!("GsRelayRoom: {e}");
        let code = godot_error(&e);
        self.last_error = e.to_string();
        code
    }

    fn emit(&mut self, signal: Signal) {
        match signal {
            Signal::Joined { ssrc, session_id } => self
                .signals()
                .joined()
                .emit(i64::from(ssrc), &GString::from(session_id.as_str())),
            Signal::SnapshotComplete { partial } => {
                self.signals().snapshot_complete().emit(partial)
            }
            Signal::StreamStarted { ssrc } => self.signals().stream_started().emit(i64::from(ssrc)),
            Signal::ObjectUpdated(u) => {
                let details = dictionary(&u);
                self.signals().object_updated().emit(
                    i64::from(u.ssrc),
                    id_to_int(u.object_id),
                    &GString::from(u.kind),
                    u.position,
                    u.rotation,
                    &details,
                )
            }
            Signal::ObjectRemoved { ssrc, object_id } => self
                .signals()
                .object_removed()
                .emit(i64::from(ssrc), id_to_int(object_id)),
            Signal::StreamEnded { ssrc } => self.signals().stream_ended().emit(i64::from(ssrc)),
            Signal::Ownership {
                ssrc,
                object_id,
                notice,
                reason,
            } => self.signals().ownership().emit(
                i64::from(ssrc),
                id_to_int(object_id),
                &GString::from(notice),
                i64::from(reason),
            ),
            Signal::Rejoined { ssrc, same_ssrc } => {
                self.signals().rejoined().emit(i64::from(ssrc), same_ssrc)
            }
            Signal::SessionError { status, message } => self
                .signals()
                .session_error()
                .emit(i64::from(status), &GString::from(message.as_str())),
            Signal::EventsDropped { count } => {
                self.signals().events_dropped().emit(i64::from(count))
            }
            Signal::Ended { reason, message } => self
                .signals()
                .ended()
                .emit(&GString::from(reason), &GString::from(message.as_str())),
        }
    }
}

/// An update's details as the Dictionary the signal carries.
fn dictionary(u: &ObjectUpdate) -> VarDictionary {
    let mut d = VarDictionary::new();
    for (name, value) in &u.details {
        let value = match value {
            Detail::Bool(b) => b.to_variant(),
            Detail::Int(i) => i.to_variant(),
            Detail::Float(f) => f.to_variant(),
            Detail::Text(t) => GString::from(t.as_str()).to_variant(),
            Detail::Vector2(v) => v.to_variant(),
            Detail::Vector3(v) => v.to_variant(),
            Detail::Quaternion(q) => q.to_variant(),
            Detail::Bytes(b) => PackedByteArray::from(b.as_slice()).to_variant(),
            Detail::Vector3s(v) => PackedVector3Array::from(v.as_slice()).to_variant(),
            Detail::Ints(v) => PackedInt64Array::from(v.as_slice()).to_variant(),
        };
        d.set(*name, &value);
    }
    d
}
