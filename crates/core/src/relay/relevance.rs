//! Whether an object is inside a subscriber's area of interest.
//!
//! An object with a parent is located by its parent (children follow their parent's
//! relevance); others by their own position; an object with neither by its stream's
//! avatar (a 3DOF controller follows its player). Membership is kept per subscriber so
//! the exit size applies to objects already inside (hysteresis). An object that cannot be
//! located at all is always relevant: the relay cannot judge its distance.

use super::area::Area;
use super::grid;
use super::room::{Room, Stream};
use super::session::Session;
use std::collections::HashSet;

/// Where a subscriber's area is centred: its fixed centre, or its own avatar's position.
/// `None` while the avatar has not been seen.
pub fn center(room: &Room, sub: &Session) -> Option<[f32; 3]> {
    let area = sub.interest.area.as_ref()?;
    area.center.or_else(|| {
        room.streams
            .get(&sub.ssrc)?
            .store
            .avatar(area.avatar)
            .map(|a| a.1)
    })
}

/// The objectID whose membership decides an object's relevance, and its position.
///
/// A child is located by its parent even when it has a position of its own: children's
/// positions are often relative to the parent, and a child is relevant when its parent is.
pub fn locate(
    stream: &Stream,
    id: Option<u64>,
    pos: Option<[f32; 3]>,
    parent: Option<u64>,
) -> Option<(Option<u64>, [f32; 3])> {
    let parent = parent.filter(|p| Some(*p) != id);
    if let Some((pid, Some(p))) =
        parent.and_then(|p| stream.store.get(p).map(|e| (p, e.position())))
    {
        return Some((Some(pid), p));
    }
    if let Some(p) = pos {
        return Some((id, p));
    }
    stream
        .store
        .avatar(None)
        .filter(|(aid, _)| Some(*aid) != id)
        .map(|(aid, p)| (Some(aid), p))
}

/// Evaluates (and records) whether the object keyed `(ssrc, key)` at `p` is inside.
/// Returns (inside now, entered just now).
pub fn evaluate(
    inside: &mut HashSet<(u32, u64)>,
    area: &Area,
    center: Option<[f32; 3]>,
    ssrc: u32,
    key: Option<u64>,
    p: [f32; 3],
) -> (bool, bool) {
    let Some(c) = center else {
        return (false, false);
    };
    let Some(k) = key else {
        return (area.contains(c, p, false), false);
    };
    let was = inside.contains(&(ssrc, k));
    let now = area.contains(c, p, was);
    match (was, now) {
        (false, true) => {
            inside.insert((ssrc, k));
            (true, true)
        }
        (true, false) => {
            inside.remove(&(ssrc, k));
            (false, false)
        }
        _ => (now, false),
    }
}

/// (Re)registers a subscriber in its room's grid for its area centred at `center`.
pub fn place(room: &mut Room, sub: &mut Session, center: Option<[f32; 3]>) {
    unplace(room, sub);
    // A shared aggregated view gets each packet once for all its members, not per member.
    if !sub.subscribe || sub.shares_view() {
        return;
    }
    let cells = sub
        .interest
        .area
        .as_ref()
        .zip(center)
        .and_then(|(area, c)| grid::cells_covering(c, area.reach()));
    match cells {
        Some(cells) => {
            for cell in &cells {
                room.subscribers.insert(*cell, sub.id);
            }
            sub.cells = Some(cells);
        }
        None => room.everywhere.push(sub.id),
    }
}

/// Removes a subscriber from its room's grid.
pub fn unplace(room: &mut Room, sub: &mut Session) {
    match sub.cells.take() {
        Some(cells) => {
            for cell in cells {
                room.subscribers.remove(cell, sub.id);
            }
        }
        None => room.everywhere.retain(|s| *s != sub.id),
    }
}
