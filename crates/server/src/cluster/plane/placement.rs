//! The placement rule: which node a join is served on, from what this node knows of
//! each candidate. Pure: [`choose`] sees only its arguments.

use std::net::SocketAddr;
use std::sync::Arc;

/// Where a join is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this node.
    Here,
    /// On another node, whose HTTP API is at `http`.
    Node {
        /// Its name.
        name: Arc<str>,
        /// Its HTTP API.
        http: SocketAddr,
    },
}

/// A node a join may be served on: this node, or another that is eligible
/// ([`super::Plane`]: linked, its record read, neither suspect nor dead).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its name.
    pub name: Arc<str>,
    /// Its HTTP API; `None` for this node.
    pub http: Option<SocketAddr>,
    /// Its sessions, all rooms together.
    pub load: usize,
    /// Whether it takes no new sessions.
    pub draining: bool,
    /// Whether it holds sessions of the room.
    pub in_room: bool,
}

impl Candidate {
    fn here(&self) -> bool {
        self.http.is_none()
    }
}

/// The rule `docs/relay.md` states ("Placement across nodes"), tier by tier, over the
/// nodes that are not draining, with `spill` the load from which a node takes no more
/// of a room that is elsewhere:
///
/// 1. this node, when it holds the room and is under `spill`;
/// 2. else the least loaded of the room's nodes under `spill`;
/// 3. else, when no candidate holds the room (a new room, or its nodes are gone), this
///    node if it is under `spill`: the Service that sent the join spreads rooms;
/// 4. else the least loaded other node under `spill`, which becomes a replica;
/// 5. else the room's least loaded node;
/// 6. else the least loaded node.
///
/// Among equals, this node, then the first name. With no candidate at all (this node
/// drains and no other is eligible) the answer is [`Placement::Here`], which the join
/// then refuses as draining.
pub fn choose(nodes: &[Candidate], spill: usize) -> Placement {
    let open: Vec<&Candidate> = nodes.iter().filter(|c| !c.draining).collect();
    let under = |c: &&&Candidate| c.load < spill;
    let least = |it: &mut dyn Iterator<Item = &&Candidate>| {
        it.min_by_key(|c| (c.load, !c.here(), c.name.clone()))
            .map(|c| (*c).clone())
    };
    let room_held = open.iter().any(|c| c.in_room);
    let pick = open
        .iter()
        .find(|c| c.here() && c.in_room && c.load < spill)
        .map(|c| (*c).clone())
        .or_else(|| least(&mut open.iter().filter(|c| c.in_room).filter(under)))
        .or_else(|| {
            open.iter()
                .find(|c| c.here() && !room_held && c.load < spill)
                .map(|c| (*c).clone())
        })
        .or_else(|| least(&mut open.iter().filter(|c| !c.in_room).filter(under)))
        .or_else(|| least(&mut open.iter().filter(|c| c.in_room)))
        .or_else(|| least(&mut open.iter()));
    match pick {
        Some(Candidate {
            name,
            http: Some(http),
            ..
        }) => Placement::Node { name, http },
        _ => Placement::Here,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, remote: bool, load: usize, in_room: bool) -> Candidate {
        Candidate {
            name: name.into(),
            http: remote.then(|| SocketAddr::from(([127, 0, 0, 1], 1))),
            load,
            draining: false,
            in_room,
        }
    }

    fn named(p: Placement) -> String {
        match p {
            Placement::Here => "here".into(),
            Placement::Node { name, .. } => name.to_string(),
        }
    }

    #[test]
    fn tier_1_this_node_when_it_holds_the_room_under_the_threshold() {
        let nodes = [node("me", false, 9, true), node("b", true, 1, true)];
        assert_eq!(named(choose(&nodes, 10)), "here");
    }

    #[test]
    fn tier_2_the_least_loaded_of_the_rooms_nodes_under_it() {
        let nodes = [
            node("me", false, 0, false),
            node("b", true, 5, true),
            node("c", true, 4, true),
        ];
        assert_eq!(named(choose(&nodes, 10)), "c");
        let nodes = [node("me", false, 10, true), node("b", true, 9, true)];
        assert_eq!(named(choose(&nodes, 10)), "b", "this node is past it");
    }

    #[test]
    fn tier_3_a_new_room_stays_here_under_the_threshold() {
        let nodes = [node("me", false, 3, false), node("b", true, 0, false)];
        assert_eq!(named(choose(&nodes, 10)), "here");
    }

    #[test]
    fn tier_4_the_least_loaded_other_node_when_the_rooms_are_past_it() {
        let nodes = [
            node("me", false, 10, true),
            node("b", true, 3, false),
            node("c", true, 1, false),
        ];
        assert_eq!(named(choose(&nodes, 10)), "c");
        let new_room = [node("me", false, 10, false), node("b", true, 3, false)];
        assert_eq!(named(choose(&new_room, 10)), "b", "this node is full");
    }

    #[test]
    fn tier_5_the_rooms_least_loaded_node_when_every_node_is_past_it() {
        // Through A, A's load went 4, 5, 6 while B stayed at 3: no more.
        let through_a = [node("me", false, 4, true), node("b", true, 3, true)];
        assert_eq!(named(choose(&through_a, 3)), "b");
        let through_b = [node("me", false, 3, true), node("a", true, 4, true)];
        assert_eq!(named(choose(&through_b, 3)), "here");
        let tie = [node("me", false, 4, true), node("b", true, 4, true)];
        assert_eq!(named(choose(&tie, 3)), "here", "this node among equals");
    }

    #[test]
    fn tier_6_the_least_loaded_node_for_a_new_room_when_all_are_past_it() {
        let nodes = [node("me", false, 7, false), node("b", true, 5, false)];
        assert_eq!(named(choose(&nodes, 3)), "b");
    }

    #[test]
    fn a_draining_node_is_never_chosen() {
        let mut nodes = [node("me", false, 3, true), node("b", true, 0, false)];
        nodes[0].draining = true;
        assert_eq!(named(choose(&nodes, 10)), "b");
        let mut alone = [node("me", false, 3, true)];
        alone[0].draining = true;
        assert_eq!(
            named(choose(&alone, 10)),
            "here",
            "no candidate: refused here"
        );
    }
}
