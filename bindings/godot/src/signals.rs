//! The C ABI's events turned into the node's signals, with their arguments in plain Rust
//! and Godot builtin types (`Vector3`, `Quaternion`, which need no engine), so that the
//! whole mapping runs in tests without Godot. The node only converts each [`Signal`] to
//! the typed emit of the signal of the same name (`node.rs`).
//!
//! Beyond a one-to-one mapping, the mapper remembers which objects each stream has shown,
//! so that a stream's end, and the session's end, first say `object_removed` for each of
//! them: a scene removes a remote player's nodes on that signal alone.

use crate::convert::Axes;
use godot::builtin::{Quaternion, Vector2, Vector3};
use gsrelay_ffi::events::{GSR_NOTICE_GRANTED, GSR_NOTICE_LOST, GSR_NOTICE_REFUSED};
use gsrelay_ffi::{
    GSR_ENDED_BY_RELAY, GSR_ENDED_FAILED, GSR_ENDED_LEFT, GSR_EVENT_DROPPED, GSR_EVENT_ENDED,
    GSR_EVENT_ERROR, GSR_EVENT_JOINED, GSR_EVENT_OBJECT, GSR_EVENT_OWNERSHIP, GSR_EVENT_REJOINED,
    GSR_EVENT_RESUMED, GSR_EVENT_SNAPSHOT_COMPLETE, GSR_EVENT_STREAM_ENDED,
    GSR_EVENT_STREAM_STARTED, GSR_FLAG_PARTIAL, GSR_OBJECT_GAME_CONTROL1, GSR_OBJECT_HAND1,
    GSR_OBJECT_HAND2, GSR_OBJECT_HEAD_IPD1, GSR_OBJECT_HEAD1, GSR_OBJECT_MESH1, GSR_OBJECT_MESH2,
    GSR_OBJECT_OBJECT1, GSR_OBJECT_OBJECT2, GSR_OBJECT_SIX_DOF1, GSR_OBJECT_THREE_DOF1,
    GSR_OBJECT_UNKNOWN, GSR_TEXTURE_RTP_PT, GSR_TEXTURE_URL, gsr_event, gsr_loc2, gsr_transform1,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, c_char};

/// One signal of `GsRelayRoom`, with its arguments. The variants are the node's signals,
/// named alike in snake case.
#[derive(Debug, Clone, PartialEq)]
pub enum Signal {
    /// `joined(ssrc: int, session_id: String)`.
    Joined {
        /// The session's SSRC.
        ssrc: u32,
        /// The session id.
        session_id: String,
    },
    /// `snapshot_complete(partial: bool)`: the room asked for has all arrived (or the
    /// wait timed out: `partial`).
    SnapshotComplete {
        /// The wait timed out with streams still missing.
        partial: bool,
    },
    /// `stream_started(ssrc: int)`.
    StreamStarted {
        /// The stream.
        ssrc: u32,
    },
    /// `object_updated(ssrc: int, object_id: int, kind: String, position: Vector3,
    /// rotation: Quaternion, details: Dictionary)`.
    ObjectUpdated(ObjectUpdate),
    /// `object_removed(ssrc: int, object_id: int)`: its stream or the session ended.
    ObjectRemoved {
        /// The stream.
        ssrc: u32,
        /// The objectID.
        object_id: u64,
    },
    /// `stream_ended(ssrc: int)`: its sender left.
    StreamEnded {
        /// The stream.
        ssrc: u32,
    },
    /// `ownership(ssrc: int, object_id: int, notice: String, reason: int)`.
    Ownership {
        /// The object's stream.
        ssrc: u32,
        /// The objectID.
        object_id: u64,
        /// `"granted"`, `"lost"`, `"refused"` (or `"unknown"`).
        notice: &'static str,
        /// The reason number (`docs/relay.md`, "Ownership handover").
        reason: i32,
    },
    /// `rejoined(ssrc: int, same_ssrc: bool)`: the session came back after the relay
    /// was silent or gone, with its SSRC (a resume) or a new one.
    Rejoined {
        /// The session's SSRC now.
        ssrc: u32,
        /// The SSRC is the one it had.
        same_ssrc: bool,
    },
    /// `session_error(status: int, message: String)`: something failed, the session goes
    /// on.
    SessionError {
        /// The C ABI's status (`GSR_ERR_*`).
        status: i32,
        /// Why.
        message: String,
    },
    /// `events_dropped(count: int)`: nobody polled for long and the queue overflowed.
    EventsDropped {
        /// How many events were lost.
        count: u32,
    },
    /// `ended(reason: String, message: String)`: the session is over; nothing follows.
    Ended {
        /// `"left"`, `"by_relay"`, `"failed"` (or `"unknown"`).
        reason: &'static str,
        /// Why, if the library said.
        message: String,
    },
}

/// An object's update, in Godot's types and axes.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectUpdate {
    /// Its stream.
    pub ssrc: u32,
    /// Its objectID.
    pub object_id: u64,
    /// Its type: `"head1"`, `"hand1"`, `"hand2"`, `"object1"`, `"object2"`, `"mesh1"`,
    /// `"mesh2"`, `"game_control1"`, `"three_dof1"`, `"six_dof1"`, `"head_ipd1"`,
    /// `"unknown"`, or `"undecoded"` (bytes that did not decode).
    pub kind: &'static str,
    /// Where it is (zero for types without a position).
    pub position: Vector3,
    /// How it is turned (identity for types without a rotation).
    pub rotation: Quaternion,
    /// The rest of the object, by name (the node passes a `Dictionary`).
    pub details: Vec<(&'static str, Detail)>,
}

impl ObjectUpdate {
    /// The detail called `name`, if the object has it.
    pub fn detail(&self, name: &str) -> Option<&Detail> {
        self.details
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d)
    }
}

/// A value of an object's details.
#[derive(Debug, Clone, PartialEq)]
pub enum Detail {
    /// A flag (`left`, `active`).
    Bool(bool),
    /// A whole number (`time`, `buttons`, `parent`, ...).
    Int(i64),
    /// A number (`ipd`).
    Float(f32),
    /// Text (`mesh_url`, `texture_url`).
    Text(String),
    /// A stick.
    Vector2(Vector2),
    /// A velocity, a scale, a pointer.
    Vector3(Vector3),
    /// The rotation one second on (`rotation_in_1s`).
    Quaternion(Quaternion),
    /// Bytes (an unknown object's body, undecoded TLV).
    Bytes(Vec<u8>),
    /// Points (a mesh's vertices and normals, a hand's joints).
    Vector3s(Vec<Vector3>),
    /// Whole numbers (a mesh's triangle indexes).
    Ints(Vec<i64>),
}

/// An objectID or other 64-bit unsigned number as GDScript's signed `int`: the same 64
/// bits, so ids from 2^63 up arrive negative and go back unchanged.
pub fn id_to_int(id: u64) -> i64 {
    i64::from_ne_bytes(id.to_ne_bytes())
}

/// The inverse of [`id_to_int`].
pub fn int_to_id(value: i64) -> u64 {
    u64::from_ne_bytes(value.to_ne_bytes())
}

/// Turns events into signals, remembering each stream's objects.
#[derive(Debug)]
pub struct EventMapper {
    axes: Axes,
    known: BTreeMap<u32, BTreeSet<u64>>,
}

impl EventMapper {
    /// A mapper that reads positions and rotations with `axes`.
    pub fn new(axes: Axes) -> Self {
        Self {
            axes,
            known: BTreeMap::new(),
        }
    }

    /// Appends the signals event `e` makes to `out`.
    pub fn map(&mut self, e: &gsr_event, out: &mut Vec<Signal>) {
        match e.kind {
            GSR_EVENT_JOINED => out.push(Signal::Joined {
                ssrc: e.ssrc,
                session_id: text(e),
            }),
            GSR_EVENT_SNAPSHOT_COMPLETE => out.push(Signal::SnapshotComplete {
                partial: e.flags & GSR_FLAG_PARTIAL != 0,
            }),
            GSR_EVENT_STREAM_STARTED => out.push(Signal::StreamStarted { ssrc: e.ssrc }),
            GSR_EVENT_OBJECT => {
                self.known.entry(e.ssrc).or_default().insert(e.object_id);
                out.push(Signal::ObjectUpdated(object_update(e, self.axes)));
            }
            GSR_EVENT_STREAM_ENDED => {
                self.forget_stream(e.ssrc, out);
                out.push(Signal::StreamEnded { ssrc: e.ssrc });
            }
            GSR_EVENT_OWNERSHIP => out.push(Signal::Ownership {
                ssrc: e.ssrc,
                object_id: e.object_id,
                notice: match e.flags {
                    GSR_NOTICE_GRANTED => "granted",
                    GSR_NOTICE_LOST => "lost",
                    GSR_NOTICE_REFUSED => "refused",
                    _ => "unknown",
                },
                reason: e.code,
            }),
            GSR_EVENT_RESUMED | GSR_EVENT_REJOINED => out.push(Signal::Rejoined {
                ssrc: e.ssrc,
                same_ssrc: e.kind == GSR_EVENT_RESUMED,
            }),
            GSR_EVENT_ERROR => out.push(Signal::SessionError {
                status: e.code,
                message: text(e),
            }),
            GSR_EVENT_DROPPED => out.push(Signal::EventsDropped { count: e.flags }),
            GSR_EVENT_ENDED => {
                let streams: Vec<u32> = self.known.keys().copied().collect();
                for ssrc in streams {
                    self.forget_stream(ssrc, out);
                }
                out.push(Signal::Ended {
                    reason: match e.code {
                        GSR_ENDED_LEFT => "left",
                        GSR_ENDED_BY_RELAY => "by_relay",
                        GSR_ENDED_FAILED => "failed",
                        _ => "unknown",
                    },
                    message: text(e),
                });
            }
            // A kind of a newer library: nothing this binding can say about it.
            _ => {}
        }
    }

    fn forget_stream(&mut self, ssrc: u32, out: &mut Vec<Signal>) {
        for object_id in self.known.remove(&ssrc).unwrap_or_default() {
            out.push(Signal::ObjectRemoved { ssrc, object_id });
        }
    }
}

/// The bytes an event points at (valid during the poll that handed it out).
fn bytes(e: &gsr_event) -> &[u8] {
    if e.data.is_null() || e.data_length == 0 {
        return &[];
    }
    // SAFETY: the library hands out `data_length` readable bytes at `data`, valid until
    // the next poll of the client; the mapper runs within the poll's callback.
    unsafe { std::slice::from_raw_parts(e.data, e.data_length) }
}

/// A message event's text.
fn text(e: &gsr_event) -> String {
    String::from_utf8_lossy(bytes(e)).into_owned()
}

/// A decoded object's string field.
///
/// # Safety
/// `s` must be null or NUL-terminated and valid for the poll.
unsafe fn c_text(s: *const c_char) -> Option<String> {
    // SAFETY: the caller's promise.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// A decoded object's array.
///
/// # Safety
/// `p` must be null (with `n` 0) or point at `n` items valid for the poll.
unsafe fn items<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

fn int(v: impl Into<i64>) -> Detail {
    Detail::Int(v.into())
}

fn object_update(e: &gsr_event, axes: Axes) -> ObjectUpdate {
    let mut u = ObjectUpdate {
        ssrc: e.ssrc,
        object_id: e.object_id,
        kind: "undecoded",
        position: Vector3::ZERO,
        rotation: Quaternion::IDENTITY,
        details: Vec::new(),
    };
    let o = &e.object;
    let moving = |u: &mut ObjectUpdate, loc: &gsr_loc2, rot: &gsrelay_ffi::gsr_rot2| {
        let (position, velocity) = axes.loc2_in(loc);
        let (now, later) = axes.rot2_in(rot);
        u.position = position;
        u.rotation = now;
        u.details.push(("velocity", Detail::Vector3(velocity)));
        u.details
            .push(("rotation_in_1s", Detail::Quaternion(later)));
    };
    // SAFETY (every union read below): the library writes the member `type` names, and
    // its arrays and strings stay valid for the poll this runs in.
    unsafe {
        match o.r#type {
            GSR_OBJECT_HEAD1 => {
                let h = &o.u.head1;
                u.kind = "head1";
                u.details.push(("time", int(h.time)));
                moving(&mut u, &h.location, &h.rotation);
                if h.ipd_present != 0 {
                    u.details.push(("ipd", Detail::Float(h.ipd)));
                }
            }
            GSR_OBJECT_HAND1 => {
                let h = &o.u.hand1;
                u.kind = "hand1";
                u.details.push(("time", int(h.time)));
                u.details.push(("left", Detail::Bool(h.left != 0)));
                moving(&mut u, &h.location, &h.rotation);
            }
            GSR_OBJECT_HAND2 => {
                let h = &o.u.hand2;
                u.kind = "hand2";
                u.details.push(("time", int(h.time)));
                u.details.push(("left", Detail::Bool(h.left != 0)));
                moving(&mut u, &h.location, &h.rotation);
                let joint = |t: &gsr_transform1| axes.vec_in(t.tx, t.ty, t.tz);
                let mut joints = vec![joint(&h.wrist)];
                let t = &h.thumb;
                joints.extend([&t.tip, &t.ip, &t.mcp, &t.cmc].map(joint));
                for f in [&h.index, &h.middle, &h.ring, &h.pinky] {
                    joints.extend([&f.tip, &f.dip, &f.pip, &f.mcp, &f.cmc].map(joint));
                }
                u.details.push(("joints", Detail::Vector3s(joints)));
            }
            GSR_OBJECT_OBJECT1 => {
                let b = &o.u.object1;
                u.kind = "object1";
                u.position = axes.vec_in(b.position.x, b.position.y, b.position.z);
                u.rotation = axes.rot1_in(&b.rotation);
                u.details.push(("time", int(b.time)));
                let s = if b.scale_uniform != 0 {
                    Vector3::splat(b.scale.x)
                } else {
                    Vector3::new(b.scale.x, b.scale.y, b.scale.z)
                };
                u.details.push(("scale", Detail::Vector3(s)));
                u.details.push(("active", Detail::Bool(b.active != 0)));
                if b.parent_present != 0 {
                    u.details.push(("parent", int(id_to_int(b.parent))));
                }
            }
            GSR_OBJECT_OBJECT2 => {
                let b = &o.u.object2;
                u.kind = "object2";
                u.details.push(("time", int(b.time)));
                moving(&mut u, &b.location, &b.rotation);
                // A scale is a size per axis, not a direction: never mirrored.
                let s = &b.scale;
                u.details
                    .push(("scale", Detail::Vector3(Vector3::new(s.x, s.y, s.z))));
                let rate = Vector3::new(s.vx, s.vy, s.vz);
                u.details.push(("scale_velocity", Detail::Vector3(rate)));
                u.details.push(("active", Detail::Bool(b.active != 0)));
                if b.parent_present != 0 {
                    u.details.push(("parent", int(id_to_int(b.parent))));
                }
            }
            GSR_OBJECT_MESH1 => {
                let m = &o.u.mesh1;
                u.kind = "mesh1";
                let point = |v: &gsrelay_ffi::gsr_vec3| axes.vec_in(v.x, v.y, v.z);
                let vertices = items(m.vertices, m.num_vertices).iter().map(point);
                u.details
                    .push(("vertices", Detail::Vector3s(vertices.collect())));
                let normals = items(m.normals, m.num_normals).iter().map(point);
                u.details
                    .push(("normals", Detail::Vector3s(normals.collect())));
                let mut triangles: Vec<i64> = items(m.triangles, m.num_triangles)
                    .iter()
                    .map(|&i| id_to_int(i))
                    .collect();
                if axes == Axes::Draft {
                    // A mirror turns clockwise into counter-clockwise: keep faces facing
                    // out by swapping each triangle's last two corners.
                    for t in triangles.chunks_exact_mut(3) {
                        t.swap(1, 2);
                    }
                }
                u.details.push(("triangles", Detail::Ints(triangles)));
                texture(&mut u, m.texture_kind, m.texture_url, m.texture_rtp_pt);
            }
            GSR_OBJECT_MESH2 => {
                let m = &o.u.mesh2;
                u.kind = "mesh2";
                u.position = axes.loc2_in(&m.location).0;
                u.rotation = axes.rot2_in(&m.rotation).0;
                let s = &m.scale;
                u.details
                    .push(("scale", Detail::Vector3(Vector3::new(s.x, s.y, s.z))));
                if let Some(url) = c_text(m.mesh_url) {
                    u.details.push(("mesh_url", Detail::Text(url)));
                }
                texture(&mut u, m.texture_kind, m.texture_url, m.texture_rtp_pt);
                if m.parent_present != 0 {
                    u.details.push(("parent", int(id_to_int(m.parent))));
                }
            }
            GSR_OBJECT_GAME_CONTROL1 => {
                let g = &o.u.game_control1;
                u.kind = "game_control1";
                u.details.push(("time", int(g.time)));
                u.details.push(("buttons", int(g.buttons)));
                u.details.push(("buttons_time", int(g.buttons_time)));
                let stick = |s: &gsrelay_ffi::gsr_stick| Detail::Vector2(Vector2::new(s.x, s.y));
                u.details.push(("left_stick", stick(&g.left)));
                u.details.push(("right_stick", stick(&g.right)));
            }
            GSR_OBJECT_THREE_DOF1 => {
                let t = &o.u.three_dof1;
                u.kind = "three_dof1";
                u.details.push(("time", int(t.time)));
                u.details.push(("left", Detail::Bool(t.left != 0)));
                let (now, later) = axes.rot2_in(&t.rotation);
                u.rotation = now;
                u.details
                    .push(("rotation_in_1s", Detail::Quaternion(later)));
            }
            GSR_OBJECT_SIX_DOF1 => {
                let s = &o.u.six_dof1;
                u.kind = "six_dof1";
                u.details.push(("time", int(s.time)));
                u.details.push(("left", Detail::Bool(s.left != 0)));
                moving(&mut u, &s.location, &s.rotation);
                if s.pointer_present != 0 {
                    let p = &s.pointer;
                    u.details
                        .push(("pointer", Detail::Vector3(axes.vec_in(p.x, p.y, p.z))));
                }
            }
            GSR_OBJECT_HEAD_IPD1 => {
                u.kind = "head_ipd1";
                u.details.push(("ipd", Detail::Float(o.u.head_ipd1.ipd)));
            }
            GSR_OBJECT_UNKNOWN => {
                let x = &o.u.unknown_object;
                u.kind = "unknown";
                u.details.push(("tag", int(id_to_int(x.tag))));
                let body = items(x.data, x.data_length).to_vec();
                u.details.push(("body", Detail::Bytes(body)));
            }
            // Undecoded (or a type of a newer library): the bytes as they came.
            _ => u.details.push(("bytes", Detail::Bytes(bytes(e).to_vec()))),
        }
    }
    u
}

/// A mesh's texture, as `texture_url` or `texture_rtp_pt`.
///
/// # Safety
/// `url` must be null or NUL-terminated and valid for the poll.
unsafe fn texture(u: &mut ObjectUpdate, kind: u32, url: *const c_char, pt: u8) {
    match kind {
        // SAFETY: the caller's promise.
        GSR_TEXTURE_URL => {
            if let Some(url) = unsafe { c_text(url) } {
                u.details.push(("texture_url", Detail::Text(url)));
            }
        }
        GSR_TEXTURE_RTP_PT => u.details.push(("texture_rtp_pt", int(pt))),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    //! Events no loopback test makes happen on demand (a full queue, an error mid-session,
    //! bytes that do not decode), built by hand as the library writes them. The rest is
    //! tested against a relay (`tests/`).
    use super::*;

    fn event(kind: u32, data: &[u8]) -> gsr_event {
        // SAFETY: gsr_event is plain data; all zeroes is a valid value of it.
        let mut e: gsr_event = unsafe { std::mem::zeroed() };
        e.kind = kind;
        e.data = data.as_ptr();
        e.data_length = data.len();
        e
    }

    fn mapped(e: &gsr_event) -> Vec<Signal> {
        let mut out = Vec::new();
        EventMapper::new(Axes::Draft).map(e, &mut out);
        out
    }

    #[test]
    fn drops_errors_and_undecoded_bytes_have_their_signals() {
        let mut dropped = event(GSR_EVENT_DROPPED, &[]);
        dropped.flags = 12;
        assert_eq!(mapped(&dropped), [Signal::EventsDropped { count: 12 }]);
        let mut error = event(GSR_EVENT_ERROR, b"interest refused");
        error.code = -12;
        assert_eq!(
            mapped(&error),
            [Signal::SessionError {
                status: -12,
                message: "interest refused".into()
            }]
        );
        let mut object = event(GSR_EVENT_OBJECT, &[0xff, 0x01]);
        object.ssrc = 3;
        object.object_id = u64::MAX;
        let signals = mapped(&object);
        let [Signal::ObjectUpdated(u)] = signals.as_slice() else {
            panic!("one update: {signals:?}")
        };
        assert_eq!((u.kind, u.position), ("undecoded", Vector3::ZERO));
        assert_eq!(u.detail("bytes"), Some(&Detail::Bytes(vec![0xff, 0x01])));
        assert_eq!(id_to_int(u.object_id), -1);
        assert!(
            mapped(&event(999, &[])).is_empty(),
            "a kind of a newer library"
        );
    }

    #[test]
    fn ids_round_trip_through_gdscript_ints() {
        for id in [0, 1, i64::MAX as u64, 1 << 63, u64::MAX] {
            assert_eq!(int_to_id(id_to_int(id)), id);
        }
    }
}
