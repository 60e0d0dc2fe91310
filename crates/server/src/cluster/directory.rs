//! The room directory: which shards each room is on, with how many sessions on each, which
//! shard each session is on, and the relay-wide caps on rooms and sessions, which no one
//! shard can see.
//!
//! The control plane ([`super::shards::Shards`]) owns it and is its only caller, through
//! the [`Directory`] trait, whose look-ups are asynchronous and may fail (a directory in a
//! shared store is one network round trip away). Shards never call it: they report what
//! changes on them as [`ShardEvent`]s into an [`EventSink`], and the control plane applies
//! those to the directory in the order each shard sent them.
//!
//! A room may be on several shards (a [`RoomPlacement`] per shard, each a replica of the
//! room joined to the others by links). [`MemoryDirectory`], the in-process directory,
//! places a room's first session on the least-loaded running shard, and later ones on
//! the least-loaded of the room's shards whose load (sessions joined or joining, all
//! rooms together) is under the spill threshold; when none is, on the least-loaded other
//! shard under it, which becomes a replica; when no shard is under it, on the room's
//! least-loaded shard. A room whose sessions fit one shard stays on one.

use gsrelay_core::relay::{ControlError, SessionId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

pub use crate::transport::events::{EventSink, ShardEvent, ShardEvents, event_channel};

/// A directory's answer, to be awaited.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, DirectoryError>> + Send + 'a>>;

/// Why the directory did not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// A relay-wide cap refuses the session ([`ControlError::RelayFull`],
    /// [`ControlError::TooManyRooms`]).
    #[error(transparent)]
    Refused(#[from] ControlError),
    /// The directory cannot be reached or failed.
    #[error("the room directory is unavailable: {0}")]
    Unavailable(String),
}

/// One shard a room is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomPlacement {
    /// The shard.
    pub shard: usize,
    /// The room's sessions on it, joined or joining.
    pub sessions: usize,
}

/// Where rooms and sessions are. Every method answers asynchronously and may fail.
pub trait Directory: Debug + Send + Sync {
    /// Counts one more session of `room` against the relay-wide caps and answers the
    /// shard it is to join: one the room is on, else one of those `usable` marks (by
    /// shard index) as able to take a new room. A join that then fails gives the place
    /// back with [`Directory::unplace`].
    fn place<'a>(&'a self, room: &'a str, usable: &'a [bool]) -> Pending<'a, usize>;

    /// Gives back a place whose join failed.
    fn unplace<'a>(&'a self, room: &'a str, shard: usize) -> Pending<'a, ()>;

    /// Applies what a shard reported: a session joined (it is now routed to its shard) or
    /// is gone (its place is given back; a room with no sessions left is forgotten, so
    /// its next join is placed anew).
    fn apply(&self, event: ShardEvent) -> Pending<'_, ()>;

    /// The shard a session is on; `None` for a session the directory does not know.
    fn session_shard(&self, session: SessionId) -> Pending<'_, Option<usize>>;

    /// The shards `room` is on; empty when it has no sessions.
    fn room<'a>(&'a self, room: &'a str) -> Pending<'a, Vec<RoomPlacement>>;

    /// Sessions on each shard, joined or joining.
    fn load(&self) -> Pending<'_, Vec<usize>>;

    /// Whether the directory answered its last request: a relay whose directory does not
    /// cannot place joins, and says so on its readiness probe.
    fn available(&self) -> bool {
        true
    }
}

/// The in-process directory: one map behind a lock, held only for a look-up.
#[derive(Debug)]
pub struct MemoryDirectory {
    state: Mutex<State>,
    max_rooms: usize,
    max_sessions: usize,
    /// A shard's load (sessions) from which a room's new sessions go to another shard.
    spill: usize,
    /// Sessions a room may hold, over all its shards.
    room_cap: usize,
}

#[derive(Debug)]
struct State {
    rooms: HashMap<Arc<str>, Vec<RoomPlacement>>,
    sessions: HashMap<SessionId, usize>,
    /// Sessions on each shard.
    load: Vec<usize>,
    /// Sessions on all shards.
    total: usize,
}

impl MemoryDirectory {
    /// A directory for `shards` shards, with no rooms, admitting at most `max_rooms`
    /// rooms and `max_sessions` sessions over all shards.
    pub fn new(shards: usize, max_rooms: usize, max_sessions: usize) -> Self {
        Self {
            state: Mutex::new(State {
                rooms: HashMap::new(),
                sessions: HashMap::new(),
                load: vec![0; shards.max(1)],
                total: 0,
            }),
            max_rooms,
            max_sessions,
            spill: usize::MAX,
            room_cap: usize::MAX,
        }
    }

    /// The same directory, refusing a room's session past `sessions` over all the shards
    /// the room is on (each core counts only its own).
    pub fn with_room_cap(self, sessions: usize) -> Self {
        Self {
            room_cap: sessions,
            ..self
        }
    }

    /// The same directory, spilling a room to another shard once its shards each hold
    /// `sessions` sessions (all rooms together).
    pub fn with_spill(self, sessions: usize) -> Self {
        Self {
            spill: sessions.max(1),
            ..self
        }
    }

    /// The shards it places sessions on.
    pub fn shards(&self) -> usize {
        self.with(|s| s.load.len())
    }

    /// Sessions on each shard, joined or joining.
    pub fn load_now(&self) -> Vec<usize> {
        self.with(|s| s.load.clone())
    }

    /// The sessions `room` holds over this directory's shards.
    pub fn sessions_of(&self, room: &str) -> usize {
        self.with(|s| {
            s.rooms
                .get(room)
                .map_or(0, |p| p.iter().map(|p| p.sessions).sum())
        })
    }

    /// Every room with its sessions on each of this directory's shards.
    pub fn rooms(&self) -> Vec<(Arc<str>, Vec<RoomPlacement>)> {
        self.with(|s| {
            s.rooms
                .iter()
                .map(|(r, p)| (r.clone(), p.clone()))
                .collect()
        })
    }

    /// The shards `room` is on, with its sessions on each.
    pub fn placements_of(&self, room: &str) -> Vec<RoomPlacement> {
        self.with(|s| s.rooms.get(room).cloned().unwrap_or_default())
    }

    /// The shard serving `session`, as the shards reported it.
    pub fn session_shard_now(&self, session: SessionId) -> Option<usize> {
        self.with(|s| s.sessions.get(&session).copied())
    }

    /// Every session joined, as the shards reported them.
    pub fn sessions(&self) -> Vec<SessionId> {
        self.with(|s| s.sessions.keys().copied().collect())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // The state stays consistent at every step a panic could interrupt.
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn place_now(&self, room: &str, usable: &[bool]) -> Result<usize, ControlError> {
        self.with(|s| {
            if s.total >= self.max_sessions {
                return Err(ControlError::RelayFull(self.max_sessions));
            }
            let open = s.rooms.len();
            let shard = match s.rooms.get(room) {
                Some(placed)
                    if placed.iter().map(|p| p.sessions).sum::<usize>() >= self.room_cap =>
                {
                    return Err(ControlError::RoomFull(room.to_owned()));
                }
                Some(placed) => self.shard_for(&s.load, placed, usable),
                None if open >= self.max_rooms => {
                    return Err(ControlError::TooManyRooms(self.max_rooms));
                }
                None => {
                    least_loaded(&s.load, |k| usable.get(k).copied().unwrap_or(false)).unwrap_or(0)
                }
            };
            let placed = s.rooms.entry(Arc::from(room)).or_default();
            match placed.iter_mut().find(|p| p.shard == shard) {
                Some(p) => p.sessions += 1,
                None => placed.push(RoomPlacement { shard, sessions: 1 }),
            }
            s.load[shard] += 1;
            s.total += 1;
            Ok(shard)
        })
    }

    /// The shard for one more session of a room already on the shards `placed`.
    fn shard_for(&self, load: &[usize], placed: &[RoomPlacement], usable: &[bool]) -> usize {
        let usable = |k: usize| usable.get(k).copied().unwrap_or(false);
        let on_room = |k: usize| placed.iter().any(|p| p.shard == k);
        let under = |k: usize| load.get(k).is_some_and(|l| *l < self.spill);
        least_loaded(load, |k| usable(k) && on_room(k) && under(k))
            .or_else(|| least_loaded(load, |k| usable(k) && !on_room(k) && under(k)))
            .or_else(|| least_loaded(load, |k| usable(k) && on_room(k)))
            .or_else(|| least_loaded(load, usable))
            .unwrap_or(0)
    }

    fn apply_now(&self, event: ShardEvent) {
        self.with(|s| match event {
            ShardEvent::SessionJoined { session, shard, .. } => {
                s.sessions.insert(session, shard);
            }
            ShardEvent::SessionGone {
                room,
                session,
                shard,
            } => {
                s.sessions.remove(&session);
                s.release(&room, shard);
            }
        });
    }
}

impl State {
    /// Counts one session of `room` on `shard` gone.
    fn release(&mut self, room: &str, shard: usize) {
        let Some(placed) = self.rooms.get_mut(room) else {
            return;
        };
        let Some(i) = placed.iter().position(|p| p.shard == shard) else {
            return;
        };
        placed[i].sessions = placed[i].sessions.saturating_sub(1);
        if placed[i].sessions == 0 {
            placed.remove(i);
        }
        if placed.is_empty() {
            self.rooms.remove(room);
        }
        if let Some(load) = self.load.get_mut(shard) {
            *load = load.saturating_sub(1);
        }
        self.total = self.total.saturating_sub(1);
    }
}

/// The least-loaded shard of those `pick` takes (the lowest index among equals).
fn least_loaded(load: &[usize], pick: impl Fn(usize) -> bool) -> Option<usize> {
    (0..load.len())
        .filter(|&k| pick(k))
        .min_by_key(|&k| load[k])
}

/// An answer that is ready now.
fn ready<'a, T: Send + 'a>(answer: Result<T, DirectoryError>) -> Pending<'a, T> {
    Box::pin(std::future::ready(answer))
}

impl Directory for MemoryDirectory {
    fn place<'a>(&'a self, room: &'a str, usable: &'a [bool]) -> Pending<'a, usize> {
        ready(self.place_now(room, usable).map_err(DirectoryError::from))
    }

    fn unplace<'a>(&'a self, room: &'a str, shard: usize) -> Pending<'a, ()> {
        self.with(|s| s.release(room, shard));
        ready(Ok(()))
    }

    fn apply(&self, event: ShardEvent) -> Pending<'_, ()> {
        self.apply_now(event);
        ready(Ok(()))
    }

    fn session_shard(&self, session: SessionId) -> Pending<'_, Option<usize>> {
        ready(Ok(self.session_shard_now(session)))
    }

    fn room<'a>(&'a self, room: &'a str) -> Pending<'a, Vec<RoomPlacement>> {
        ready(Ok(
            self.with(|s| s.rooms.get(room).cloned().unwrap_or_default())
        ))
    }

    fn load(&self) -> Pending<'_, Vec<usize>> {
        ready(Ok(self.load_now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [bool; 3] = [true; 3];

    fn gone(room: &str, session: SessionId, shard: usize) -> ShardEvent {
        ShardEvent::SessionGone {
            room: Arc::from(room),
            session,
            shard,
        }
    }

    fn shards_of(d: &MemoryDirectory, room: &str) -> Vec<usize> {
        d.with(|s| {
            s.rooms
                .get(room)
                .map(|p| p.iter().map(|p| p.shard).collect())
        })
        .unwrap_or_default()
    }

    #[test]
    fn a_room_stays_on_its_shard_until_its_last_session_goes() {
        let d = MemoryDirectory::new(2, 10, 10);
        let a = d.place_now("a", &ALL).unwrap();
        let b = d.place_now("b", &ALL).unwrap();
        assert_ne!(a, b, "the second room goes to the idle shard");
        assert_eq!(d.place_now("a", &ALL).unwrap(), a);
        let load = d.with(|s| s.load.clone());
        assert_eq!(load, if a == 0 { vec![2, 1] } else { vec![1, 2] });
        d.apply_now(gone("a", 1, a));
        assert_eq!(shards_of(&d, "a"), vec![a]);
        d.apply_now(gone("a", 2, a));
        assert!(
            shards_of(&d, "a").is_empty(),
            "forgotten with its last session"
        );
        assert_eq!(d.with(|s| s.load.iter().sum::<usize>()), 1);
    }

    #[test]
    fn a_room_spills_to_another_shard_only_past_the_threshold() {
        let d = MemoryDirectory::new(3, 10, 100).with_spill(2);
        let home = d.place_now("a", &ALL).unwrap();
        assert_eq!(d.place_now("a", &ALL).unwrap(), home, "under the threshold");
        let replica = d.place_now("a", &ALL).unwrap();
        assert_ne!(replica, home, "the home shard holds 2: a replica starts");
        assert_eq!(
            d.place_now("a", &ALL).unwrap(),
            replica,
            "the replica has room"
        );
        let third = d.place_now("a", &ALL).unwrap();
        assert!(third != home && third != replica);
        assert_eq!(shards_of(&d, "a").len(), 3);
        // Every shard at the threshold: the room's least-loaded shard takes it.
        let more = d.place_now("a", &ALL).unwrap();
        assert_eq!(more, third);
        // A small room on a quiet shard is not spread.
        let small = d.place_now("b", &ALL).unwrap();
        assert_eq!(d.place_now("b", &ALL).unwrap(), small);
    }

    #[test]
    fn a_rooms_cap_counts_its_sessions_on_every_shard() {
        let d = MemoryDirectory::new(2, 10, 100)
            .with_spill(1)
            .with_room_cap(3);
        for _ in 0..3 {
            d.place_now("a", &ALL).unwrap();
        }
        assert_eq!(shards_of(&d, "a").len(), 2, "spread over both shards");
        assert_eq!(
            d.place_now("a", &ALL),
            Err(ControlError::RoomFull("a".into()))
        );
        d.place_now("b", &ALL)
            .expect("another room has its own cap");
    }

    #[test]
    fn a_replica_whose_sessions_all_left_is_no_longer_the_rooms() {
        let d = MemoryDirectory::new(2, 10, 100).with_spill(1);
        let home = d.place_now("a", &ALL).unwrap();
        let replica = d.place_now("a", &ALL).unwrap();
        assert_ne!(home, replica);
        d.apply_now(gone("a", 2, replica));
        assert_eq!(shards_of(&d, "a"), vec![home]);
    }

    #[test]
    fn new_rooms_avoid_stopped_shards() {
        let d = MemoryDirectory::new(3, 10, 10);
        for name in ["a", "b", "c", "d"] {
            assert_ne!(d.place_now(name, &[true, false, true]).unwrap(), 1);
        }
    }

    #[test]
    fn the_caps_hold_over_all_shards() {
        let d = MemoryDirectory::new(2, 1, 2);
        d.place_now("a", &ALL).unwrap();
        assert_eq!(d.place_now("b", &ALL), Err(ControlError::TooManyRooms(1)));
        let shard = d.place_now("a", &ALL).unwrap();
        assert_eq!(d.place_now("a", &ALL), Err(ControlError::RelayFull(2)));
        d.with(|s| s.release("a", shard));
        d.apply_now(gone("a", 7, shard));
        d.place_now("b", &ALL).expect("room and sessions freed");
    }

    #[test]
    fn releasing_an_unknown_room_changes_nothing() {
        let d = MemoryDirectory::new(2, 10, 10);
        d.apply_now(gone("nobody", 1, 0));
        assert_eq!(d.with(|s| s.load.clone()), vec![0, 0]);
    }

    #[test]
    fn sessions_are_routed_from_their_join_to_their_end() {
        let d = MemoryDirectory::new(2, 10, 10);
        let shard = d.place_now("a", &ALL).unwrap();
        let joined = ShardEvent::SessionJoined {
            room: Arc::from("a"),
            session: 5,
            shard,
        };
        d.apply_now(joined);
        assert_eq!(d.with(|s| s.sessions.get(&5).copied()), Some(shard));
        d.apply_now(gone("a", 5, shard));
        assert_eq!(d.with(|s| s.sessions.get(&5).copied()), None);
    }
}
