//! The plane's rules in simulated time: a clock that only these tests move, directory
//! answers and link events given by hand, outputs read back.

use super::*;

/// A plane under test and its clock.
struct Sim {
    plane: Plane,
    now: Instant,
}

fn record(port: u16, load: usize) -> NodeRecord {
    NodeRecord {
        http: SocketAddr::from(([127, 0, 0, 1], port)),
        rtp: Vec::new(),
        load: vec![load],
        link: Some(SocketAddr::from(([127, 0, 0, 1], port + 1))),
        draining: false,
    }
}

fn link_addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port + 1))
}

fn replica(node: &str, sessions: usize) -> Replica {
    Replica {
        node: node.into(),
        shard: 0,
        sessions,
    }
}

impl Sim {
    /// Node `b` of a cluster, spilling past `spill`.
    fn new(spill: usize) -> Self {
        let now = Instant::now();
        Self {
            plane: Plane::new("b", spill, now),
            now,
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.plane.handle_timeout(self.now);
    }

    fn outputs(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.plane.poll_output()).collect()
    }

    /// Answers the pending read with `nodes` (name, HTTP port, load), this node's own
    /// record among them.
    fn read(&mut self, nodes: &[(&str, u16, usize)]) -> Vec<Output> {
        let mut all = nodes.to_vec();
        if !all.iter().any(|(n, _, _)| *n == "b") {
            all.push(("b", 20, 0));
        }
        self.read_exactly(&all)
    }

    /// Answers the pending read with `nodes` alone.
    fn read_exactly(&mut self, nodes: &[(&str, u16, usize)]) -> Vec<Output> {
        let listed = nodes
            .iter()
            .map(|&(n, port, load)| (n.to_owned(), record(port, load)))
            .collect();
        self.plane.directory_read(self.now, Some(listed));
        self.outputs()
    }

    /// Links node `name` (accepted: it dialled).
    fn link(&mut self, name: &str) -> u16 {
        match self.plane.link_up(self.now, name, false) {
            Admit::Keep { id, .. } => id,
            Admit::Duplicate => panic!("{name} not admitted"),
        }
    }

    fn place(&self, replicas: &[Replica], loads: &[(&str, usize)], own: usize) -> String {
        let loads = loads.iter().map(|&(n, l)| (n.to_owned(), l)).collect();
        match self.plane.place(self.now, replicas, &loads, (own, false)) {
            Placement::Here => "here".into(),
            Placement::Node { name, .. } => name.to_string(),
        }
    }
}

fn dials(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::Dial { node, .. } => Some(node.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_directory_is_read_at_start_and_every_half_second() {
    let mut s = Sim::new(10);
    s.plane.handle_timeout(s.now);
    assert_eq!(s.outputs(), [Output::ReadDirectory]);
    assert_eq!(
        s.plane.poll_timeout(),
        None,
        "no second read while one runs"
    );
    s.read(&[("b", 1, 0)]);
    assert_eq!(s.plane.poll_timeout(), Some(s.now + READ_EVERY));
    s.advance(READ_EVERY - Duration::from_millis(1));
    assert!(s.outputs().is_empty());
    s.advance(Duration::from_millis(1));
    assert_eq!(s.outputs(), [Output::ReadDirectory]);
}

#[test]
fn a_node_dials_the_nodes_whose_names_sort_after_its_own() {
    let mut s = Sim::new(10);
    let out = s.read(&[("a", 10, 0), ("b", 20, 0), ("c", 30, 0)]);
    assert_eq!(dials(&out), ["c"], "a dials b; b dials c");
    s.advance(READ_EVERY);
    assert!(dials(&s.read(&[("c", 30, 0)])).is_empty(), "being dialled");
    s.plane.dial_failed(s.now, ("c", link_addr(30)), false);
    s.advance(UNREACHABLE_BACKOFF - Duration::from_millis(1));
    assert!(dials(&s.read(&[("c", 30, 0)])).is_empty(), "left alone");
    s.advance(Duration::from_millis(1));
    assert_eq!(dials(&s.read(&[("c", 30, 0)])), ["c"]);
    s.plane.dial_failed(s.now, ("c", link_addr(30)), true);
    s.advance(REFUSED_BACKOFF - Duration::from_millis(1));
    assert!(dials(&s.read(&[("c", 30, 0)])).is_empty(), "refused: 5 s");
    s.advance(Duration::from_millis(1));
    assert_eq!(dials(&s.read(&[("c", 30, 0)])), ["c"]);
}

#[test]
fn a_node_is_eligible_once_linked_and_its_record_read() {
    let mut s = Sim::new(10);
    s.read(&[]);
    // A new node dials this one before this one has read its record.
    s.link("a");
    assert_eq!(
        s.place(&[replica("a", 3)], &[], 0),
        "here",
        "not yet eligible"
    );
    assert_eq!(
        s.outputs(),
        [Output::ReadDirectory],
        "its link asks for a read at once"
    );
    s.read(&[("a", 10, 3)]);
    assert_eq!(s.place(&[replica("a", 3)], &[], 0), "a");
    // Listed but not linked is not eligible either.
    s.advance(READ_EVERY);
    s.read(&[("a", 10, 3), ("c", 30, 0)]);
    assert_eq!(s.place(&[replica("c", 1)], &[], 0), "here");
}

/// `b` linked to `a` and `c`, both listed.
fn three_nodes(spill: usize) -> Sim {
    let mut s = Sim::new(spill);
    s.read(&[("a", 10, 0), ("b", 20, 0), ("c", 30, 0)]);
    s.link("a");
    assert!(matches!(
        s.plane.link_up(s.now, "c", true),
        Admit::Keep { replaced: None, .. }
    ));
    s.outputs();
    s
}

#[test]
fn placement_follows_each_tier_of_the_docs() {
    let s = three_nodes(5);
    // 1. This node holds the room and is under the threshold.
    assert_eq!(s.place(&[replica("b", 1), replica("a", 1)], &[], 4), "here");
    // 2. The room's least loaded node under it.
    let room = [replica("b", 5), replica("a", 1), replica("c", 1)];
    assert_eq!(s.place(&room, &[("a", 4), ("c", 3)], 5), "c");
    // 3. A new room stays here.
    assert_eq!(s.place(&[], &[("a", 0), ("c", 0)], 4), "here");
    // 4. Every node of the room past it: the least loaded other node under it.
    let room = [replica("b", 5), replica("a", 5)];
    assert_eq!(s.place(&room, &[("a", 5), ("c", 2)], 5), "c");
    // 5. Every node past it: the room's least loaded node, wherever the join came.
    assert_eq!(s.place(&room, &[("a", 5), ("c", 9)], 6), "a");
    // 6. A new room when every node is past it: the least loaded node.
    assert_eq!(s.place(&[], &[("a", 7), ("c", 6)], 8), "c");
}

#[test]
fn the_directorys_load_wins_over_the_records() {
    let mut s = three_nodes(5);
    s.advance(READ_EVERY);
    s.read(&[("a", 10, 4), ("c", 30, 1)]);
    let room = [replica("a", 1), replica("c", 1)];
    assert_eq!(s.place(&room, &[], 5), "c", "from the records");
    assert_eq!(s.place(&room, &[("a", 0)], 5), "a", "from the loads");
}

#[test]
fn a_failed_forward_makes_a_node_suspect_at_once_then_alive_again() {
    let mut s = three_nodes(5);
    let room = [replica("a", 1)];
    assert_eq!(s.place(&room, &[], 0), "a");
    s.plane.forward_failed(s.now, "a");
    assert!(matches!(
        s.plane.health(s.now, "a"),
        Some(Health::Suspect(_))
    ));
    assert_eq!(s.place(&room, &[], 0), "here", "the join is taken here");
    assert_eq!(s.plane.http_of(s.now, "a"), None, "nor resumed there");
    assert_eq!(
        s.plane.link_wait("a"),
        LinkWait::Up(1),
        "its link still carries rooms"
    );
    assert_eq!(s.plane.counts(s.now).suspect, 1);
    s.advance(SUSPECT_FOR);
    assert_eq!(s.plane.health(s.now, "a"), Some(Health::Alive));
    assert_eq!(s.place(&room, &[], 0), "a");
}

#[test]
fn a_suspect_node_is_skipped_for_the_next_candidate() {
    let mut s = three_nodes(5);
    let room = [replica("a", 1), replica("c", 2)];
    assert_eq!(s.place(&room, &[], 5), "a");
    s.plane.forward_failed(s.now, "a");
    assert_eq!(s.place(&room, &[], 5), "c");
    s.plane.forward_failed(s.now, "c");
    assert_eq!(s.place(&room, &[], 5), "here", "no node left but this one");
}

#[test]
fn a_lost_link_kills_its_node_until_it_links_again() {
    let mut s = three_nodes(5);
    let id = s.plane.link_of("a").unwrap();
    assert!(s.plane.link_lost(s.now, "a", id, LinkEnd::Silent));
    assert_eq!(
        s.outputs(),
        [
            Output::Fence,
            Output::Forget {
                node: Arc::from("a")
            }
        ]
    );
    assert_eq!(s.plane.health(s.now, "a"), Some(Health::Dead));
    assert_eq!(
        s.plane.link_wait("a"),
        LinkWait::Never,
        "no join waits for it"
    );
    assert_eq!(s.place(&[replica("a", 3)], &[], 0), "here");
    // Its key outlives it; it stays dead while listed.
    s.advance(READ_EVERY);
    s.read(&[("a", 10, 3), ("c", 30, 0)]);
    assert_eq!(s.plane.health(s.now, "a"), Some(Health::Dead));
    assert_eq!(s.plane.counts(s.now).dead, 1);
    // Restarted, it dials again: alive.
    let again = s.link("a");
    assert_ne!(again, id);
    assert_eq!(s.plane.health(s.now, "a"), Some(Health::Alive));
    assert_eq!(s.place(&[replica("a", 3)], &[], 0), "a");
}

#[test]
fn an_old_links_end_after_a_new_link_changes_nothing() {
    let mut s = three_nodes(5);
    let old = s.plane.link_of("a").unwrap();
    let Admit::Keep { id, replaced } = s.plane.link_up(s.now, "a", false) else {
        panic!("a peer dialling again is admitted");
    };
    assert_eq!(replaced, Some(old));
    assert!(!s.plane.link_lost(s.now, "a", old, LinkEnd::Local));
    assert_eq!(s.plane.link_of("a"), Some(id));
    assert_eq!(s.plane.health(s.now, "a"), Some(Health::Alive));
    assert_eq!(
        s.plane.link_up(s.now, "a", true),
        Admit::Duplicate,
        "this node's own dial duplicates it"
    );
}

#[test]
fn a_node_missing_from_the_directory_dies_after_expire_after() {
    let mut s = three_nodes(5);
    s.advance(READ_EVERY);
    s.read(&[("c", 30, 0)]);
    let mut waited = Duration::ZERO;
    while waited < EXPIRE_AFTER - READ_EVERY {
        s.advance(READ_EVERY);
        waited += READ_EVERY;
        assert!(
            s.read(&[("c", 30, 0)])
                .iter()
                .all(|o| !matches!(o, Output::Close { .. }))
        );
        assert_eq!(s.plane.health(s.now, "a"), Some(Health::Alive));
    }
    s.advance(READ_EVERY);
    let out = s.read(&[("c", 30, 0)]);
    assert!(out.contains(&Output::Close {
        node: Arc::from("a"),
        id: 1
    }));
    assert!(out.contains(&Output::Forget {
        node: Arc::from("a")
    }));
    assert_eq!(s.plane.health(s.now, "a"), Some(Health::Dead));
}

#[test]
fn redis_lost_and_back_kills_no_one() {
    let mut s = three_nodes(5);
    for _ in 0..30 {
        s.advance(READ_EVERY);
        s.plane.directory_read(s.now, None);
    }
    assert_eq!(s.plane.counts(s.now).alive, 2, "Redis away: links stand");
    assert_eq!(s.place(&[replica("a", 1)], &[], 0), "a", "and place");
    // Restarted empty: the nodes write their records again within a refresh (2 s).
    for _ in 0..4 {
        s.advance(READ_EVERY);
        s.read(&[]);
    }
    s.advance(READ_EVERY);
    s.read(&[("a", 10, 0), ("c", 30, 0)]);
    assert_eq!(s.plane.counts(s.now).alive, 2);
    assert_eq!(s.plane.counts(s.now).dead, 0);
}

#[test]
fn a_draining_node_is_not_placed_on_but_keeps_its_links() {
    let mut s = three_nodes(5);
    s.advance(READ_EVERY);
    let mut draining = record(10, 0);
    draining.draining = true;
    s.plane.directory_read(
        s.now,
        Some(vec![("a".into(), draining), ("c".into(), record(30, 0))]),
    );
    assert_eq!(s.place(&[replica("a", 2)], &[], 0), "here");
    assert_eq!(s.plane.link_wait("a"), LinkWait::Up(1));
    assert!(
        s.plane.http_of(s.now, "a").is_some(),
        "its sessions still answer"
    );
}

#[test]
fn a_node_neither_listed_nor_linked_is_forgotten() {
    let mut s = three_nodes(5);
    let id = s.plane.link_of("a").unwrap();
    s.plane.link_lost(s.now, "a", id, LinkEnd::Closed);
    s.advance(READ_EVERY);
    s.read(&[("c", 30, 0)]);
    assert_eq!(s.plane.health(s.now, "a"), None);
    assert_eq!(s.plane.link_wait("a"), LinkWait::Never);
}

#[test]
fn rooms_are_relinked_every_fourth_read() {
    let mut s = Sim::new(5);
    let mut relinks = 0;
    for _ in 0..(RELINK_EVERY * 3) {
        s.advance(READ_EVERY);
        relinks += s.read(&[]).iter().filter(|o| **o == Output::Relink).count();
    }
    assert_eq!(relinks, 3);
}

#[test]
fn a_link_to_itself_is_refused() {
    let mut s = Sim::new(5);
    assert_eq!(s.plane.link_up(s.now, "b", false), Admit::Duplicate);
}

#[test]
fn a_node_settles_once_linked_to_every_node_it_found_and_stays_settled() {
    let mut s = Sim::new(5);
    assert!(!s.plane.settled(), "nothing read yet");
    s.read(&[("a", 10, 0), ("b", 20, 0), ("c", 30, 0)]);
    assert!(!s.plane.settled(), "a and c not linked");
    s.link("a");
    assert!(!s.plane.settled());
    s.plane.dial_failed(s.now, ("c", link_addr(30)), false);
    assert!(s.plane.settled(), "c unreachable for now: not waited for");
    let id = s.plane.link_of("a").unwrap();
    s.plane.link_lost(s.now, "a", id, LinkEnd::Silent);
    s.advance(READ_EVERY);
    s.read(&[("a", 10, 0), ("c", 30, 0), ("d", 40, 0)]);
    assert!(s.plane.settled(), "settled once, settled for good");
}

#[test]
fn a_node_that_cannot_link_settles_after_the_limit() {
    let mut s = Sim::new(5);
    s.read(&[("a", 10, 0)]);
    s.advance(SETTLE_LIMIT - READ_EVERY);
    assert!(!s.plane.settled());
    s.advance(READ_EVERY);
    assert!(s.plane.settled());
}

#[test]
fn superseded_sessions_are_looked_for_before_each_relink_and_at_every_read_after_a_loss() {
    let mut s = three_nodes(5);
    let mut fences = 0;
    for _ in 0..RELINK_EVERY {
        s.advance(READ_EVERY);
        fences += s
            .read(&[("a", 10, 0), ("c", 30, 0)])
            .iter()
            .filter(|o| **o == Output::Fence)
            .count();
    }
    assert_eq!(fences, 1, "with the relink");
    // A thawed node loses its links as it thaws.
    let id = s.plane.link_of("a").unwrap();
    s.plane.link_lost(s.now, "a", id, LinkEnd::Silent);
    let lost_at = s.now;
    while s.now + READ_EVERY < lost_at + FENCE_AFTER_LOSS {
        s.advance(READ_EVERY);
        let out = s.read(&[("c", 30, 0)]);
        let fence = out.iter().position(|o| *o == Output::Fence);
        assert!(
            fence.is_some(),
            "every read {:?} after the loss",
            s.now - lost_at
        );
        let relink = out.iter().position(|o| *o == Output::Relink);
        assert!(
            relink.is_none_or(|r| fence < Some(r)),
            "fenced before relinked"
        );
    }
    let mut fences = 0;
    for _ in 0..RELINK_EVERY {
        s.advance(READ_EVERY);
        fences += s
            .read(&[("c", 30, 0)])
            .iter()
            .filter(|o| **o == Output::Fence)
            .count();
    }
    assert_eq!(fences, 1, "back to one in four reads");
}

#[test]
fn a_node_missing_from_an_answering_directory_registers_again_at_once() {
    let mut s = Sim::new(5);
    let first = s.read_exactly(&[]);
    assert!(
        !first.contains(&Output::Register),
        "the first read may precede it"
    );
    s.advance(READ_EVERY);
    assert!(!s.read(&[]).contains(&Output::Register));
    s.advance(READ_EVERY);
    let out = s.read_exactly(&[("a", 10, 0)]);
    let at = |o: Output| out.iter().position(|x| *x == o);
    assert!(at(Output::Register).is_some(), "Redis restarted empty");
    assert!(at(Output::Fence) < at(Output::Register), "fenced first");
    s.advance(READ_EVERY);
    s.plane.directory_read(s.now, None);
    assert!(
        !s.outputs().contains(&Output::Register),
        "Redis away: nothing to write to"
    );
}

#[test]
fn a_node_restarted_on_new_ports_is_dialled_at_once() {
    let mut s = Sim::new(5);
    assert_eq!(dials(&s.read(&[("c", 30, 0)])), ["c"]);
    // Killed: the dial of its old address is under way, or failed and left alone.
    s.plane.dial_failed(s.now, ("c", link_addr(30)), false);
    s.advance(READ_EVERY / 5);
    s.plane.read_soon();
    assert!(dials(&s.read(&[("c", 30, 0)])).is_empty(), "left alone");
    // Started again under its name, on other ports.
    s.plane.read_soon();
    assert_eq!(
        dials(&s.read(&[("c", 40, 0)])),
        ["c"],
        "no backoff for a new address"
    );
    s.plane.dial_failed(s.now, ("c", link_addr(30)), false);
    s.plane.read_soon();
    let out = s.read(&[("c", 40, 0)]);
    assert!(dials(&out).is_empty(), "the new dial is under way");
    assert!(s.plane.link_up(s.now, "c", true) != Admit::Duplicate);
}

/// Node `b` of five (`a`, `b`, `c`, `d`, `e`), settled and linked to all.
fn five_nodes() -> Sim {
    let mut s = Sim::new(10);
    let all = [("a", 10, 0), ("c", 30, 0), ("d", 40, 0), ("e", 50, 0)];
    s.read(&all);
    for n in ["a", "c", "d", "e"] {
        s.link(n);
    }
    s.outputs();
    s
}

const FIVE: [(&str, u16, usize); 4] = [("a", 10, 0), ("c", 30, 0), ("d", 40, 0), ("e", 50, 0)];

#[test]
fn a_node_cut_off_from_the_majority_for_a_second_is_isolated_and_places_away() {
    let mut s = five_nodes();
    for n in ["a", "c", "d", "e"] {
        let id = s.plane.link_of(n).unwrap();
        s.plane.link_lost(s.now, n, id, LinkEnd::Silent);
    }
    s.outputs();
    // They are alive and write their records again: listed, not linked.
    let mut waited = Duration::ZERO;
    while waited < ISOLATED_AFTER {
        assert!(!s.plane.isolated(), "{waited:?}");
        s.advance(READ_EVERY);
        waited += READ_EVERY;
        s.read(&FIVE);
    }
    assert!(s.plane.isolated());
    let room = [replica("b", 3)];
    assert_eq!(
        s.place(&room, &[("c", 1)], 3),
        "a",
        "the least loaded of the others"
    );
    // The partition heals: one link back is not yet the majority, two are.
    s.link("a");
    assert!(s.plane.isolated());
    s.link("c");
    assert!(!s.plane.isolated());
    assert!(s.outputs().contains(&Output::Isolated(false)));
    assert_eq!(s.place(&room, &[], 3), "here");
}

#[test]
fn a_dead_node_taken_out_of_the_directory_isolates_no_one() {
    let mut s = five_nodes();
    for n in ["a", "c", "d"] {
        let id = s.plane.link_of(n).unwrap();
        s.plane.link_lost(s.now, n, id, LinkEnd::Silent);
    }
    // Three of four dead, and taken out at the next read: b and e are what is left.
    s.advance(READ_EVERY);
    s.read(&[("e", 50, 0)]);
    for _ in 0..4 {
        s.advance(READ_EVERY);
        s.read(&[("e", 50, 0)]);
        assert!(!s.plane.isolated());
    }
}

#[test]
fn at_a_tie_the_side_with_the_first_name_keeps_serving() {
    // b and c, partitioned from each other: b keeps (it sorts first), c sheds.
    for (me, other, isolated) in [("b", "c", false), ("c", "b", true)] {
        let now = Instant::now();
        let mut plane = Plane::new(me, 10, now);
        let listed = || {
            Some(vec![
                (me.to_owned(), record(20, 0)),
                (other.to_owned(), record(30, 0)),
            ])
        };
        plane.directory_read(now, listed());
        plane.link_up(now, other, false);
        let id = plane.link_of(other).unwrap();
        plane.link_lost(now, other, id, LinkEnd::Silent);
        let mut t = now;
        for _ in 0..4 {
            t += READ_EVERY;
            plane.handle_timeout(t);
            plane.directory_read(t, listed());
        }
        assert_eq!(plane.isolated(), isolated, "{me}");
    }
}
