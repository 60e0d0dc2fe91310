//! A replica's side of its links (`docs/relay.md`, "Links"): the interest union of its
//! own subscribers it sends each link, and the union each link's peer sends it.

use super::api::SessionId;
use super::relevance;
use super::room::Room;
use super::session::Session;
use super::state::State;
use super::union::{MAX_REGIONS, NAME, Region, SUBTYPE, Union, bounding_box};
use std::collections::HashMap;

/// Sends each link of every room the union of the room's own subscribers (at every
/// sweep: a union follows its subscribers' avatars).
pub(super) fn send_unions(st: &mut State) {
    let mut data = Vec::new();
    for room in st.rooms.values() {
        let mut links = room
            .members
            .iter()
            .filter(|id| st.sessions.get(id).is_some_and(Session::is_link))
            .peekable();
        if links.peek().is_none() {
            continue;
        }
        data.clear();
        union_of(room, &st.sessions).encode(&mut data);
        for &link in links {
            st.out.app(link, (st.relay_ssrc, SUBTYPE, NAME), &data);
        }
    }
}

/// An APP packet from session `from`, whose own SSRC is `own`: a union from a link is
/// kept as what its peer wants at full rate; anything else named [`NAME`] is dropped and
/// counted, and other APP packets are not this relay's.
pub(super) fn on_app(
    st: &mut State,
    from: SessionId,
    own: u32,
    (name, ssrc, data): ([u8; 4], u32, &[u8]),
) {
    if name != NAME {
        return;
    }
    let Some(s) = st.sessions.get_mut(&from) else {
        return;
    };
    let verdict = if !s.is_link() {
        Err("union_from_sender")
    } else if ssrc != own {
        Err("ssrc_mismatch")
    } else {
        Union::decode(data)
    };
    match verdict {
        Ok(u) => s.union = Some(u),
        Err(reason) => {
            // Not the old union either: what the peer wants now is unknown, so it gets
            // everything until its next union decodes.
            if reason == "union_malformed" {
                s.union = None;
            }
            st.stats.drop(reason);
        }
    }
}

/// The union of the areas of the room's subscribers other than links.
pub(super) fn union_of(room: &Room, sessions: &HashMap<SessionId, Session>) -> Union {
    let mut regions = Vec::new();
    for s in room.members.iter().filter_map(|id| sessions.get(id)) {
        if s.is_link() || !s.subscribe {
            continue;
        }
        let Some(area) = &s.interest.area else {
            return Union::Everything;
        };
        // An area whose avatar is not known yet, or is not a number, holds nothing.
        let Some(c) = relevance::center(room, s).filter(|c| c.iter().all(|v| v.is_finite())) else {
            continue;
        };
        let region = Region::of_area(area, c);
        if !region.encodable() {
            // Out of the bounds a union can say: the peer sends everything.
            return Union::Everything;
        }
        regions.push(region);
    }
    if regions.len() > MAX_REGIONS {
        match bounding_box(&regions) {
            Some(b) => regions = vec![b],
            None => return Union::Everything,
        }
    }
    Union::Regions(regions)
}
