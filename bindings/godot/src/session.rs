//! A client session of the C ABI (`gsr_client_*`) behind a safe Rust type: the node's
//! only way to the network. Nothing here needs the engine, so the tests drive it against
//! a real relay as the node does.
//!
//! The C ABI is poll-first: its network runs on the library's own thread, a join returns
//! at once and its outcome is an event, and the other calls queue a command and return.
//! So nothing here blocks Godot's main thread, and no callback ever runs on another
//! thread (Godot's scene tree may only be touched from the main thread).

use crate::error::{BindingError, check};
use gsrelay_ffi::{
    GSR_DELIVERY_AGGREGATED, GSR_DELIVERY_PER_STREAM, GSR_TRANSPORT_QUIC, GSR_TRANSPORT_UDP,
    gsr_client, gsr_client_free, gsr_client_get_info, gsr_client_info, gsr_client_join,
    gsr_client_leave, gsr_client_poll, gsr_client_publish, gsr_client_release_objects,
    gsr_client_request_objects, gsr_client_request_snapshot, gsr_client_set_interest,
    gsr_client_state, gsr_event, gsr_join_options, gsr_join_options_init, gsr_object,
    gsr_object_ref,
};
use std::ffi::{CStr, CString};

/// Events taken from the library per `gsr_client_poll` call; a poll repeats until the
/// queue is empty.
const POLL_BATCH: usize = 256;

/// How a session reaches the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// RTP over UDP with SRTP.
    Udp,
    /// RTP over QUIC.
    Quic,
}

impl Transport {
    /// `"udp"` or `"quic"` (any case), or why not.
    pub fn parse(name: &str) -> Result<Self, BindingError> {
        match name.to_ascii_lowercase().as_str() {
            "udp" => Ok(Transport::Udp),
            "quic" => Ok(Transport::Quic),
            _ => Err(BindingError::argument(format!(
                "transport must be \"udp\" or \"quic\", got {name:?}"
            ))),
        }
    }
}

/// What a join asks for, checked.
#[derive(Debug, Clone)]
pub struct JoinSettings {
    /// The relay's HTTP API, `http://` or `https://`.
    pub http_base: CString,
    /// The access token.
    pub token: CString,
    /// The room.
    pub room: CString,
    /// UDP/SRTP or QUIC.
    pub transport: Transport,
    /// Aggregated delivery (every sender in one stream from the relay).
    pub aggregated: bool,
    /// The interest as JSON (`docs/interest.md`); `None` for the default.
    pub interest_json: Option<CString>,
    /// The SSRC wanted; 0 lets the relay pick.
    pub ssrc: u32,
    /// Silence from the relay, in ms, after which the session comes back; 0: 15 s.
    pub silence_ms: u32,
    /// Ask for the whole room on joining.
    pub snapshot: bool,
    /// Plain RTP (only relays run with `--insecure-plain-rtp` accept).
    pub plain_rtp: bool,
}

/// `text` as a C string for the library, or why not.
fn c_string(what: &str, text: &str) -> Result<CString, BindingError> {
    CString::new(text)
        .map_err(|_| BindingError::argument(format!("{what} must not contain a NUL character")))
}

/// `value` as an unsigned 32-bit number, or why not.
pub fn u32_arg(what: &str, value: i64) -> Result<u32, BindingError> {
    u32::try_from(value).map_err(|_| {
        BindingError::argument(format!(
            "{what} must be between 0 and {}, got {value}",
            u32::MAX
        ))
    })
}

impl JoinSettings {
    /// Checks what a script gave: the address must be an `http(s)://` URL, the token and
    /// room non-empty, numbers within their range. The interest is checked by the
    /// library at the join (as the relay would).
    pub fn new(http_base: &str, token: &str, room: &str) -> Result<Self, BindingError> {
        if !(http_base.starts_with("http://") || http_base.starts_with("https://")) {
            return Err(BindingError::argument(format!(
                "http_base must start with http:// or https://, got {http_base:?}"
            )));
        }
        if token.is_empty() {
            return Err(BindingError::argument("token must not be empty"));
        }
        if room.is_empty() {
            return Err(BindingError::argument("room must not be empty"));
        }
        Ok(Self {
            http_base: c_string("http_base", http_base)?,
            token: c_string("token", token)?,
            room: c_string("room", room)?,
            transport: Transport::Udp,
            aggregated: false,
            interest_json: None,
            ssrc: 0,
            silence_ms: 0,
            snapshot: true,
            plain_rtp: false,
        })
    }

    /// Sets the interest JSON; empty for the default.
    pub fn interest(mut self, json: &str) -> Result<Self, BindingError> {
        self.interest_json = interest_arg(json)?;
        Ok(self)
    }
}

/// An interest JSON for the library; empty text is the default interest (`None`).
pub fn interest_arg(json: &str) -> Result<Option<CString>, BindingError> {
    if json.trim().is_empty() {
        Ok(None)
    } else {
        c_string("interest_json", json).map(Some)
    }
}

/// A session's identifiers, once joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// The session's SSRC.
    pub ssrc: u32,
    /// The session id.
    pub session_id: String,
}

/// One client of the C ABI: freed (and so left, in the background) when dropped.
pub struct Session {
    handle: gsr_client,
    events: Vec<gsr_event>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("handle", &self.handle)
            .finish()
    }
}

impl Session {
    /// Starts joining; the outcome comes as an event (`joined`, or `ended` with why).
    pub fn join(s: &JoinSettings) -> Result<Self, BindingError> {
        // SAFETY: gsr_join_options is plain data (integers and pointers), for which all
        // zeroes is a valid value; gsr_join_options_init overwrites every field.
        let mut options: gsr_join_options = unsafe { std::mem::zeroed() };
        // SAFETY: a valid, writable struct.
        check(unsafe { gsr_join_options_init(&mut options) })?;
        options.transport = match s.transport {
            Transport::Udp => GSR_TRANSPORT_UDP,
            Transport::Quic => GSR_TRANSPORT_QUIC,
        };
        options.delivery = if s.aggregated {
            GSR_DELIVERY_AGGREGATED
        } else {
            GSR_DELIVERY_PER_STREAM
        };
        options.ssrc = s.ssrc;
        options.silence_ms = s.silence_ms;
        options.no_snapshot = u8::from(!s.snapshot);
        options.plain_rtp = u8::from(s.plain_rtp);
        options.http_base = s.http_base.as_ptr();
        options.token = s.token.as_ptr();
        options.room = s.room.as_ptr();
        options.interest_json = s
            .interest_json
            .as_ref()
            .map_or(std::ptr::null(), |j| j.as_ptr());
        let mut handle: gsr_client = 0;
        // SAFETY: `options` is initialised and its strings are NUL-terminated C strings
        // borrowed from `s`, alive for the call (the library copies them); `handle` is
        // writable.
        check(unsafe { gsr_client_join(&options, &mut handle) })?;
        // SAFETY (of the zeroed events): gsr_event is plain data, all zeroes valid; the
        // library writes every slot it counts before one is read.
        let events = vec![unsafe { std::mem::zeroed() }; POLL_BATCH];
        Ok(Self { handle, events })
    }

    /// Hands every event that arrived since the last poll to `each`, oldest first. What
    /// an event points at (bytes, decoded arrays) is valid only during `each`.
    pub fn poll(&mut self, mut each: impl FnMut(&gsr_event)) -> Result<(), BindingError> {
        loop {
            let mut n = 0usize;
            // SAFETY: `events` holds POLL_BATCH writable events of this library's size,
            // `n` is writable.
            check(unsafe {
                gsr_client_poll(
                    self.handle,
                    self.events.as_mut_ptr(),
                    self.events.len(),
                    size_of::<gsr_event>(),
                    &mut n,
                )
            })?;
            for e in self.events.iter().take(n) {
                each(e);
            }
            if n < self.events.len() {
                return Ok(());
            }
        }
    }

    /// Publishes `objects` in one packet on the session's stream.
    pub fn publish(&self, objects: &[gsr_object]) -> Result<(), BindingError> {
        // SAFETY: `objects` is a live slice of initialised objects whose pointers (none
        // but null here: the binding publishes no arrays or strings) are valid.
        check(unsafe { gsr_client_publish(self.handle, objects.as_ptr(), objects.len()) })
    }

    /// Asks for the whole room again.
    pub fn request_snapshot(&self) -> Result<(), BindingError> {
        check(gsr_client_request_snapshot(self.handle))
    }

    /// Changes the interest; `None` for the default.
    pub fn set_interest(&self, json: Option<&CStr>) -> Result<(), BindingError> {
        let json = json.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: null or a NUL-terminated string alive for the call.
        check(unsafe { gsr_client_set_interest(self.handle, json) })
    }

    /// Asks for an object of another stream; the answer is an ownership event.
    pub fn request_object(&self, ssrc: u32, object_id: u64) -> Result<(), BindingError> {
        let r = gsr_object_ref { ssrc, object_id };
        // SAFETY: one readable reference.
        check(unsafe { gsr_client_request_objects(self.handle, &r, 1) })
    }

    /// Gives a held object back.
    pub fn release_object(&self, ssrc: u32, object_id: u64) -> Result<(), BindingError> {
        let r = gsr_object_ref { ssrc, object_id };
        // SAFETY: one readable reference.
        check(unsafe { gsr_client_release_objects(self.handle, &r, 1) })
    }

    /// Leaves the room; an `ended` event follows.
    pub fn leave(&self) -> Result<(), BindingError> {
        check(gsr_client_leave(self.handle))
    }

    /// `GSR_STATE_JOINING`, `GSR_STATE_JOINED` or `GSR_STATE_ENDED`.
    pub fn state(&self) -> Result<u8, BindingError> {
        let mut state = 0u8;
        // SAFETY: a writable byte.
        check(unsafe { gsr_client_state(self.handle, &mut state) })?;
        Ok(state)
    }

    /// The session's SSRC and id, once joined.
    pub fn info(&self) -> Result<Option<Info>, BindingError> {
        // SAFETY: gsr_client_info is plain data, all zeroes valid; the library writes it
        // whole.
        let mut info: gsr_client_info = unsafe { std::mem::zeroed() };
        info.struct_size = size_of::<gsr_client_info>() as u32;
        // SAFETY: a writable struct whose struct_size is set.
        check(unsafe { gsr_client_get_info(self.handle, &mut info) })?;
        if info.joined == 0 {
            return Ok(None);
        }
        // SAFETY: the library writes a NUL within the 64 bytes (at most 63 of the id).
        let id = unsafe { CStr::from_ptr(info.session_id.as_ptr()) };
        Ok(Some(Info {
            ssrc: info.ssrc,
            session_id: id.to_string_lossy().into_owned(),
        }))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The handle is live (only this type frees it); the library leaves in the
        // background if still joined. Nothing to do with a failure here.
        let _ = gsr_client_free(self.handle);
    }
}
