//! Who may update an object (`docs/relay.md`, "Room objects and ownership"): by default
//! its stream's publisher; a session may ask for one ([`message::Kind::Request`]) and the
//! relay grants it to one session at a time. A grant is atomic because the core handles
//! one input at a time: from the input that grants it, the new holder's updates of the
//! object are forwarded as its stream's and the previous holder's are dropped
//! (`not_owner`). Both learn of it by an APP notice from the relay's SSRC. An object that
//! changed hands less than the handover guard ago is refused to a further request
//! (`contended`): of requests racing for one object, exactly one wins.
//!
//! The table lives in the room ([`Hold`] per handed object); the session keeps the keys
//! it holds, to route its packets' objects without a lookup per object when it holds
//! none.

pub mod message;

use super::api::{Event, SessionId};
use super::room::{Hold, ROOM, Room};
use super::session::Session;
use super::state::State;
use message::{Entry, Kind, Reason};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ownership messages a session may send per second; a flood beyond is dropped unread
/// and counted (`ownership_flood`), never answered.
pub const REQUESTS_PER_SEC: u32 = 20;

/// How long a session's updates of an object it just lost or gave back are dropped
/// (`not_owner`): what it had in flight then, about a round trip, must not become an
/// object of its own with that objectID.
pub const IN_FLIGHT: Duration = Duration::from_secs(1);

/// Notices to send once a message is handled: per session, the entries of one kind.
#[derive(Debug, Default)]
struct Notices(Vec<(SessionId, Kind, Entry)>);

impl Notices {
    fn push(&mut self, to: SessionId, kind: Kind, entry: Entry) {
        if to != ROOM {
            self.0.push((to, kind, entry));
        }
    }

    /// Sends them, grouped per (session, kind) in messages of at most
    /// [`message::MAX_ENTRIES`].
    fn send(mut self, st: &mut State) {
        self.0.sort_by_key(|(to, kind, _)| (*to, kind.subtype()));
        let mut data = Vec::new();
        for group in self.0.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let Some(&(to, kind, _)) = group.first() else {
                continue;
            };
            for chunk in group.chunks(message::MAX_ENTRIES) {
                data.clear();
                for (_, _, e) in chunk {
                    e.encode(&mut data);
                }
                let from = (st.relay_ssrc, kind.subtype(), message::NAME);
                st.out.app(to, from, &data);
            }
        }
    }
}

/// An ownership message from session `from`, whose own SSRC is `own`.
pub(super) fn on_app(
    st: &mut State,
    now: Instant,
    from: SessionId,
    own: u32,
    (subtype, ssrc, data): (u8, u32, &[u8]),
) -> Result<(), &'static str> {
    let s = st.sessions.get_mut(&from).ok_or("unknown_session")?;
    if ssrc != own {
        return Err("ssrc_mismatch");
    }
    if s.is_link() {
        return Err("ownership_from_link");
    }
    if !s.claims.take(now) {
        return Err("ownership_flood");
    }
    let entries: Vec<Entry> = message::decode(data)?.collect();
    let mut notices = Notices::default();
    match Kind::from_subtype(subtype) {
        Some(Kind::Request) => {
            for e in entries {
                match request(st, now, from, e, &mut notices) {
                    Ok(true) => st.stats.ownership.add("granted", 1),
                    Ok(false) => {}
                    Err(reason) => {
                        st.stats.ownership.add(reason.name(), 1);
                        notices.push(from, Kind::Refused, Entry { reason, ..e });
                    }
                }
            }
        }
        Some(Kind::Release) => {
            for e in entries {
                if release(st, now, from, (e.ssrc, e.object), &mut notices) {
                    st.stats.ownership.add("released", 1);
                }
            }
        }
        _ => return Err("ownership_malformed"),
    }
    notices.send(st);
    Ok(())
}

/// Who may update object `key` of a room now: its holder, else its stream's publisher
/// ([`ROOM`] for a room stream that outlived it).
fn holder(room: &Room, key: (u32, u64)) -> Option<SessionId> {
    let stream = room.streams.get(&key.0)?;
    Some(
        room.holds
            .get(&key)
            .and_then(|h| h.by)
            .unwrap_or(stream.owner),
    )
}

/// Grants `e` to `from` if the rules allow (see the module's documentation).
fn request(
    st: &mut State,
    now: Instant,
    from: SessionId,
    e: Entry,
    notices: &mut Notices,
) -> Result<bool, Reason> {
    let key = (e.ssrc, e.object);
    let (guard, max_held) = (st.cfg.handover_guard, st.cfg.max_held_objects);
    let s = st.sessions.get(&from).ok_or(Reason::NoObject)?;
    if !s.publish || s.muted {
        return Err(Reason::NotPublisher);
    }
    let room = st.rooms.get(&s.room).ok_or(Reason::NoObject)?;
    let stream = room.streams.get(&e.ssrc).ok_or(Reason::NoObject)?;
    stream.store.get(e.object).ok_or(Reason::NoObject)?;
    if stream.carried {
        return Err(Reason::NotHome);
    }
    if stream.dialect != s.dialect {
        return Err(Reason::DialectMismatch);
    }
    let previous = holder(room, key).ok_or(Reason::NoObject)?;
    if previous == from {
        notices.push(from, Kind::Granted, Entry::new(e.ssrc, e.object));
        return Ok(false);
    }
    if room.holds.get(&key).is_some_and(|h| now < h.at + guard) {
        return Err(Reason::Contended);
    }
    if id_in_use(room, s, key) {
        return Err(Reason::IdInUse);
    }
    let publisher = stream.owner;
    if publisher != from && s.holds.len() >= max_held {
        return Err(Reason::TooManyHeld);
    }
    let by = (publisher != from).then_some(from);
    let (name, holder) = (s.room.clone(), by.map(|_| s.ssrc));
    if let Some(room) = st.rooms.get_mut(&name) {
        room.holds.insert(key, Hold { by, at: now });
        recorded(&mut st.stream_events, (&name, room), key, holder);
    }
    if let Some(prev) = st.sessions.get_mut(&previous) {
        lose(prev, key, now);
    }
    if let (Some(_), Some(s)) = (by, st.sessions.get_mut(&from)) {
        s.holds.push(key);
    }
    notices.push(from, Kind::Granted, Entry::new(e.ssrc, e.object));
    notices.push(
        previous,
        Kind::Lost,
        Entry {
            reason: Reason::Contended,
            ..Entry::new(e.ssrc, e.object)
        },
    );
    if previous != ROOM {
        st.stats.ownership.add("lost", 1);
    }
    Ok(true)
}

/// Reports that object `key` of `room` changed hands (to `holder`'s SSRC, or back),
/// for its recorders, when it has any.
fn recorded(
    events: &mut VecDeque<Event>,
    (name, room): (&Arc<str>, &Room),
    key: (u32, u64),
    holder: Option<u32>,
) {
    if !room.recorders.is_empty() {
        events.push_back(Event::Ownership {
            room: name.clone(),
            ssrc: key.0,
            object: key.1,
            holder,
        });
    }
}

/// `s` no longer holds `key`: its updates of that objectID in flight are dropped for
/// [`IN_FLIGHT`] (a publisher's of its own stream are dropped while another holds it).
fn lose(s: &mut Session, key: (u32, u64), now: Instant) {
    let before = s.holds.len();
    s.holds.retain(|k| *k != key);
    if s.holds.len() < before {
        s.lost.retain(|(id, until)| *id != key.1 && *until > now);
        s.lost.push((key.1, now + IN_FLIGHT));
    }
}

/// Whether `s` sent objectID `id` too soon after it lost it.
pub fn lost_just_now(s: &Session, id: u64, now: Instant) -> bool {
    !s.lost.is_empty()
        && s.lost
            .iter()
            .any(|(lost, until)| *lost == id && now < *until)
}

/// Whether objectID `key.1` already means another object in `s`'s packets: one of its
/// own streams has it, or it holds it from another stream. Its packets name objects by
/// objectID alone, so two would be ambiguous.
fn id_in_use(room: &Room, s: &Session, key: (u32, u64)) -> bool {
    s.holds.iter().any(|k| k.1 == key.1 && *k != key)
        || s.streams.iter().any(|ssrc| {
            *ssrc != key.0
                && room
                    .streams
                    .get(ssrc)
                    .is_some_and(|st| st.store.get(key.1).is_some())
        })
}

/// Gives object `key` back from `from` to its stream's publisher, who is told; returns
/// whether `from` held it.
fn release(
    st: &mut State,
    now: Instant,
    from: SessionId,
    key: (u32, u64),
    notices: &mut Notices,
) -> bool {
    let Some(s) = st.sessions.get_mut(&from) else {
        return false;
    };
    let before = s.holds.len();
    lose(s, key, now);
    if s.holds.len() == before {
        return false;
    }
    let Some(room) = st.rooms.get_mut(&s.room) else {
        return true;
    };
    room.holds.insert(key, Hold { by: None, at: now });
    recorded(&mut st.stream_events, (&s.room, room), key, None);
    if let Some(stream) = room.streams.get(&key.0) {
        notices.push(stream.owner, Kind::Granted, Entry::new(key.0, key.1));
    }
    true
}

/// Everything session `id` holds goes back to each stream's publisher, who is told: it
/// leaves, or (`tell`: it is told it lost them, `not_publisher`) it was muted.
pub(super) fn give_back(st: &mut State, now: Instant, id: SessionId, tell: bool) {
    let Some(s) = st.sessions.get_mut(&id) else {
        return;
    };
    let held = std::mem::take(&mut s.holds);
    if held.is_empty() {
        return;
    }
    for key in &held {
        s.lost.push((key.1, now + IN_FLIGHT));
    }
    let mut notices = Notices::default();
    if let Some(room) = st.rooms.get_mut(&s.room) {
        for key in held {
            room.holds.insert(key, Hold { by: None, at: now });
            recorded(&mut st.stream_events, (&s.room, room), key, None);
            if let Some(stream) = room.streams.get(&key.0) {
                notices.push(stream.owner, Kind::Granted, Entry::new(key.0, key.1));
            }
            if tell {
                let reason = Reason::NotPublisher;
                notices.push(
                    id,
                    Kind::Lost,
                    Entry {
                        reason,
                        ..Entry::new(key.0, key.1)
                    },
                );
            }
        }
    }
    notices.send(st);
}

/// Objects of `room` that went (their stream ended, or they expired): their holders lose
/// them (`gone`), so what they have in flight is dropped for [`IN_FLIGHT`] as after any
/// loss, and the table forgets them. `gone` selects the keys.
pub(super) fn objects_gone(
    st: &mut State,
    now: Instant,
    room: &str,
    gone: impl Fn((u32, u64)) -> bool,
) {
    let Some(r) = st.rooms.get_mut(room) else {
        return;
    };
    if r.holds.is_empty() {
        return;
    }
    let mut notices = Notices::default();
    r.holds.retain(|key, hold| {
        if !gone(*key) {
            return true;
        }
        if let Some(by) = hold.by {
            notices.push(
                by,
                Kind::Lost,
                Entry {
                    reason: Reason::Gone,
                    ..Entry::new(key.0, key.1)
                },
            );
        }
        false
    });
    for (to, _, e) in &notices.0 {
        if let Some(s) = st.sessions.get_mut(to) {
            lose(s, (e.ssrc, e.object), now);
        }
    }
    notices.send(st);
}

/// Forgets handovers back with their publisher whose guard has run out, so the table
/// holds only what is held or was handed just now.
pub(super) fn prune(room: &mut Room, now: Instant, guard: Duration) {
    room.holds
        .retain(|_, h| h.by.is_some() || now < h.at + guard);
}
