//! The cluster's control plane as a state machine, like the relay's core: this node's
//! view of the directory, the state of every other node (alive, suspect, dead), the set
//! of links, and placement. It reads no clock and owns no socket: time, directory
//! answers, link events and forward outcomes come in as calls; directory reads and
//! writes, link opens and closes come out of [`Plane::poll_output`], and the next
//! moment it must be woken at out of [`Plane::poll_timeout`]. The Redis and QUIC code
//! around it ([`super::Cluster`]) carries them out. Its tests (`tests.rs`) run in
//! simulated time, one per rule of `docs/relay.md`, "Nodes: alive, suspect, dead".
//!
//! **Health.** Another node is
//! - *alive* while its link is up and nothing failed;
//! - *suspect* for [`SUSPECT_FOR`] after a request forwarded to it failed (refused,
//!   reset, timed out, or answered 503): placement skips it and a resumed session is
//!   taken here, while its link, if up, still carries its rooms;
//! - *dead* from whichever comes first: its link lost (silent past the link's idle
//!   timeout, or closed), or its record missing from a directory that answers for
//!   [`EXPIRE_AFTER`]. A dead node is taken out of the directory, never chosen, never
//!   waited for, and alive again only when a new link to it comes up.
//!
//! **Eligibility.** Another node is a candidate for placement once its link is up and
//! its record has been read; a link that comes up before its record is known asks for a
//! directory read at once, so a new node is eligible one Redis round trip after its
//! link.

mod placement;

pub use placement::{Candidate, Placement, choose};

use super::redis_directory::{NodeRecord, Replica};
use crate::transport::link::Peer;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the directory is read, to dial new nodes and find vanished ones.
pub const READ_EVERY: Duration = Duration::from_millis(500);

/// How long a linked node may be missing from a directory that answers before it is
/// dead: past a node key's lifetime, so that a Redis restarted empty, which every node
/// fills again within a refresh, kills no one.
pub const EXPIRE_AFTER: Duration = Duration::from_secs(7);

/// How long a node whose forwarded request failed is left out of placement.
pub const SUSPECT_FOR: Duration = Duration::from_secs(3);

/// How long a node that refused a link (another cluster's, say) is left alone.
pub const REFUSED_BACKOFF: Duration = Duration::from_secs(5);

/// How long a node that could not be reached is left alone.
pub const UNREACHABLE_BACKOFF: Duration = Duration::from_millis(500);

/// How many directory reads apart the rooms this node holds are linked again to the
/// replicas the directory shows (every 2 s).
pub const RELINK_EVERY: u32 = 4;

/// For how long after a link loss every directory read also looks for sessions resumed
/// elsewhere ([`Output::Fence`]); otherwise every [`RELINK_EVERY`] reads. A node that
/// thaws, or whose network comes back, loses its links as it does.
pub const FENCE_AFTER_LOSS: Duration = Duration::from_secs(10);

/// How long a node must stay cut off from at least half of the nodes it sees before it
/// sheds its sessions ([`Output::Isolated`]): past a directory read (0.5 s), so that a
/// dead node this one has just taken out of the directory never counts.
pub const ISOLATED_AFTER: Duration = Duration::from_secs(1);

/// The longest a starting node waits to be linked to the nodes it found before it calls
/// itself linked (one that cannot be reached must not keep it out of service).
pub const SETTLE_LIMIT: Duration = Duration::from_secs(3);

/// What the plane asks of its shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Read the directory's nodes and answer with [`Plane::directory_read`].
    ReadDirectory,
    /// Dial `node`'s link at `addr`; answer with [`Plane::link_up`] or
    /// [`Plane::dial_failed`].
    Dial {
        /// The node.
        node: Arc<str>,
        /// Its link address.
        addr: SocketAddr,
    },
    /// Close link `id` to `node`, whose record expired; its end is reported as usual.
    Close {
        /// The node.
        node: Arc<str>,
        /// The link.
        id: u16,
    },
    /// Take `node`, found dead, out of the directory.
    Forget {
        /// The node.
        node: Arc<str>,
    },
    /// Link each room this node holds to the replicas the directory shows.
    Relink,
    /// Write this node's record, rooms and sessions again now: the directory answered
    /// without them (Redis restarted empty).
    Register,
    /// This node is cut off from the cluster's majority (`true`: not ready, its sessions
    /// to be shed so that their clients resume on a node of the majority), or linked to
    /// it again (`false`).
    Isolated(bool),
    /// End this node's sessions that another node has resumed since (this node was
    /// frozen or cut off, and their clients went elsewhere).
    Fence,
}

/// Why a link ended, as the plane weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEnd {
    /// The peer went silent past the idle timeout.
    Silent,
    /// The peer closed it, or the connection failed.
    Closed,
    /// The peer broke the link protocol.
    Protocol,
    /// This node closed it (expired, replaced, stopping).
    Local,
}

/// What became of a link that came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Taken into service as link `id`; `replaced` is the link it replaces, to close.
    Keep {
        /// Its number.
        id: u16,
        /// The node's previous link.
        replaced: Option<u16>,
    },
    /// A link to that node is up already (the peer dialled first): close this one.
    Duplicate,
}

/// Whether a join may wait for a link to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkWait {
    /// Linked: link `id`.
    Up(u16),
    /// Listed alive and not linked yet: worth waiting for.
    Pending,
    /// Dead or unknown: not worth waiting for.
    Never,
}

/// A node's health, as this node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Linked and nothing failed (or not linked yet).
    Alive,
    /// A forwarded request failed; until then.
    Suspect(Instant),
    /// Its link was lost or its record expired; until a new link comes up.
    Dead,
}

/// Counts of other nodes by health, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthCounts {
    /// Alive and linked.
    pub alive: usize,
    /// Suspect.
    pub suspect: usize,
    /// Dead.
    pub dead: usize,
}

/// Another node, as this one knows it.
#[derive(Debug, Clone)]
struct Member {
    /// Its record at the last directory read that showed it.
    record: Option<NodeRecord>,
    link: Link,
    health: Health,
    /// Since when a directory that answers has not shown it.
    absent_since: Option<Instant>,
    /// Not dialled before then.
    backoff_until: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Down,
    Dialing,
    Up(u16),
}

impl Member {
    fn new() -> Self {
        Self {
            record: None,
            link: Link::Down,
            health: Health::Alive,
            absent_since: None,
            backoff_until: None,
        }
    }

    fn link_id(&self) -> Option<u16> {
        match self.link {
            Link::Up(id) => Some(id),
            _ => None,
        }
    }

    /// Its health at `now`: a suspicion that has run out is alive again.
    fn health_at(&self, now: Instant) -> Health {
        match self.health {
            Health::Suspect(until) if now >= until => Health::Alive,
            h => h,
        }
    }

    fn healthy(&self, now: Instant) -> bool {
        self.health_at(now) == Health::Alive
    }
}

/// This node's side of the cluster's control plane.
#[derive(Debug)]
pub struct Plane {
    me: Arc<str>,
    spill: usize,
    members: BTreeMap<Arc<str>, Member>,
    /// The last link number given.
    last_id: u16,
    /// When the directory is read next; `None` while a read is under way.
    next_read: Option<Instant>,
    reads: u32,
    out: VecDeque<Output>,
    /// When this node started.
    started: Instant,
    /// Whether it has been linked to every node it found, once: from then on it is.
    settled: bool,
    /// When a link was last lost.
    last_loss: Option<Instant>,
    /// Since when this node has been cut off, and whether it counts as isolated.
    cut_off_since: Option<Instant>,
    isolated: bool,
}

impl Plane {
    /// The plane of node `me`, spilling a room past `spill` sessions a node, at `now`:
    /// its first output reads the directory.
    pub fn new(me: &str, spill: usize, now: Instant) -> Self {
        Self {
            me: Arc::from(me),
            spill: spill.max(1),
            members: BTreeMap::new(),
            last_id: 0,
            next_read: Some(now),
            reads: 0,
            out: VecDeque::new(),
            started: now,
            settled: false,
            last_loss: None,
            cut_off_since: None,
            isolated: false,
        }
    }

    /// Whether this node is isolated: linked to fewer than half of the other nodes the
    /// directory lists (at exactly half, the side without the name that sorts first)
    /// for [`ISOLATED_AFTER`]. Its links are partitioned from the others while its
    /// clients still reach it: it takes no joins (they are placed on the majority) and
    /// sheds its sessions, whose clients resume on the majority.
    pub fn isolated(&self) -> bool {
        self.isolated
    }

    /// Whether this node, with the links it has now, is on the minority side.
    fn cut_off(&self) -> bool {
        let listed: Vec<(&Arc<str>, bool)> = self
            .members
            .iter()
            .filter(|(_, m)| m.record.is_some() && m.absent_since.is_none())
            .map(|(n, m)| (n, m.link_id().is_some()))
            .collect();
        let Some(first_away) = listed.iter().filter(|l| !l.1).map(|l| l.0).min() else {
            return false;
        };
        let first_here = listed
            .iter()
            .filter(|l| l.1)
            .map(|l| l.0)
            .chain(std::iter::once(&self.me))
            .min()
            .unwrap_or(&self.me);
        let here = listed.iter().filter(|l| l.1).count() + 1;
        let all = listed.len() + 1;
        // At a tie, the side with the name that sorts first keeps serving.
        2 * here < all || (2 * here == all && first_away < first_here)
    }

    fn weigh_isolation(&mut self, now: Instant) {
        if !self.settled || !self.cut_off() {
            self.cut_off_since = None;
            if self.isolated {
                self.isolated = false;
                self.out.push_back(Output::Isolated(false));
            }
            return;
        }
        let since = *self.cut_off_since.get_or_insert(now);
        if !self.isolated && now.duration_since(since) >= ISOLATED_AFTER {
            self.isolated = true;
            self.out.push_back(Output::Isolated(true));
        }
    }

    /// Whether this node has settled in the cluster: its first directory read answered
    /// and every node it listed linked (or dead, or unreachable for now), or
    /// [`SETTLE_LIMIT`] passed. Until then it is not ready for joins, which would wait
    /// for links or split their rooms; once settled it stays so.
    pub fn settled(&self) -> bool {
        self.settled
    }

    fn settle(&mut self, now: Instant) {
        if self.settled {
            return;
        }
        let linked = self.reads > 0
            && self.members.values().all(|m| {
                m.record.is_none()
                    || m.absent_since.is_some()
                    || m.link_id().is_some()
                    || m.health == Health::Dead
                    || m.backoff_until.is_some()
            });
        self.settled = linked || now.duration_since(self.started) >= SETTLE_LIMIT;
    }

    /// This node's name.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The next thing to do, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due; `None` while a directory
    /// read is under way.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_read
    }

    /// Time passed: a directory read falls due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_read.is_some_and(|at| now >= at) {
            self.read_now();
        }
        self.settle(now);
    }

    /// Asks for a directory read now, unless one is under way.
    pub fn read_soon(&mut self) {
        if self.next_read.is_some() {
            self.read_now();
        }
    }

    fn read_now(&mut self) {
        self.next_read = None;
        self.out.push_back(Output::ReadDirectory);
    }

    /// The directory's answer: every node registered, this one included; `None` when
    /// Redis did not answer, which leaves links and views as they are.
    pub fn directory_read(&mut self, now: Instant, nodes: Option<Vec<(String, NodeRecord)>>) {
        self.next_read = Some(now + READ_EVERY);
        let Some(nodes) = nodes else {
            return;
        };
        let listed: HashMap<&str, &NodeRecord> =
            nodes.iter().map(|(n, r)| (n.as_str(), r)).collect();
        if self.reads > 0 && !listed.contains_key(&*self.me) {
            // Lost with a Redis restarted empty, or taken out by a node that found this
            // one dead, whose clients may have gone elsewhere: their sessions here end
            // before the rooms are written again, and the other nodes do not wait for the
            // next refresh to see this one.
            self.out.push_back(Output::Fence);
            self.out.push_back(Output::Register);
        }
        for (name, record) in &nodes {
            if **name == *self.me {
                continue;
            }
            let m = self
                .members
                .entry(Arc::from(name.as_str()))
                .or_insert_with(Member::new);
            let moved = m.record.as_ref().is_some_and(|old| old.link != record.link);
            if moved {
                // Restarted under its name, on new ports: what was tried at its old
                // address says nothing of the new one.
                m.backoff_until = None;
                if m.link == Link::Dialing {
                    m.link = Link::Down;
                }
            }
            m.record = Some(record.clone());
            m.absent_since = None;
        }
        let mut gone = Vec::new();
        for (name, m) in &mut self.members {
            if listed.contains_key(&**name) {
                continue;
            }
            match m.link {
                Link::Up(id) => {
                    let since = *m.absent_since.get_or_insert(now);
                    if now.duration_since(since) >= EXPIRE_AFTER && m.health != Health::Dead {
                        m.health = Health::Dead;
                        self.out.push_back(Output::Close {
                            node: name.clone(),
                            id,
                        });
                        self.out.push_back(Output::Forget { node: name.clone() });
                    }
                }
                // A node neither listed nor linked is forgotten: the table holds no
                // more than the directory and the links.
                Link::Down => gone.push(name.clone()),
                Link::Dialing => {}
            }
        }
        for name in gone {
            self.members.remove(&name);
        }
        self.dial_due(now);
        self.reads += 1;
        self.weigh_isolation(now);
        let relink = self.reads.is_multiple_of(RELINK_EVERY);
        let lost_lately = self
            .last_loss
            .is_some_and(|at| now.duration_since(at) < FENCE_AFTER_LOSS);
        if relink || lost_lately {
            // Before relinking: a superseded session's state must not reach a peer.
            self.out.push_back(Output::Fence);
        }
        if relink {
            self.out.push_back(Output::Relink);
        }
        self.settle(now);
    }

    /// Dials the listed nodes whose names sort after this one's that have no link, are
    /// not being dialled and are not left alone: the others dial this one.
    fn dial_due(&mut self, now: Instant) {
        for (name, m) in &mut self.members {
            if **name <= *self.me || m.link != Link::Down || m.absent_since.is_some() {
                continue;
            }
            if m.backoff_until.is_some_and(|until| now < until) {
                continue;
            }
            let Some(addr) = m.record.as_ref().and_then(|r| r.link) else {
                continue;
            };
            m.link = Link::Dialing;
            self.out.push_back(Output::Dial {
                node: name.clone(),
                addr,
            });
        }
    }

    /// A dial of `node` at `addr` failed: `refused` by the node (another cluster's, say),
    /// or it could not be reached. A dial of an address the node no longer has (it
    /// restarted meanwhile) is ignored.
    pub fn dial_failed(&mut self, now: Instant, (node, addr): (&str, SocketAddr), refused: bool) {
        let Some(m) = self.members.get_mut(node) else {
            return;
        };
        if m.record.as_ref().is_some_and(|r| r.link != Some(addr)) {
            return;
        }
        if m.link == Link::Dialing {
            m.link = Link::Down;
        }
        let backoff = if refused {
            REFUSED_BACKOFF
        } else {
            UNREACHABLE_BACKOFF
        };
        m.backoff_until = Some(now + backoff);
        self.settle(now);
    }

    /// An authenticated link to `node` came up, `dialled` by this node or accepted.
    pub fn link_up(&mut self, now: Instant, node: &str, dialled: bool) -> Admit {
        if *node == *self.me {
            return Admit::Duplicate;
        }
        let key: Arc<str> = Arc::from(node);
        let m = self.members.entry(key).or_insert_with(Member::new);
        let replaced = match m.link {
            // The peer dialled first: keep its link.
            Link::Up(_) if dialled => return Admit::Duplicate,
            // A peer dialling again lost its old link, which is dead on its side.
            Link::Up(old) => Some(old),
            Link::Down | Link::Dialing => None,
        };
        let known = m.record.is_some();
        let id = self.next_id();
        if let Some(m) = self.members.get_mut(node) {
            m.link = Link::Up(id);
            m.health = Health::Alive;
            m.absent_since = None;
            m.backoff_until = None;
        }
        if !known {
            // Eligible as soon as its record is read.
            self.read_soon();
        }
        self.settle(now);
        self.weigh_isolation(now);
        Admit::Keep { id, replaced }
    }

    /// Link `id` to `node` ended; true if it was the node's current link (its replicas
    /// are then to be dropped).
    pub fn link_lost(&mut self, now: Instant, node: &str, id: u16, end: LinkEnd) -> bool {
        let Some(m) = self.members.get_mut(node) else {
            return false;
        };
        if m.link != Link::Up(id) {
            return false;
        }
        m.link = Link::Down;
        m.absent_since = None;
        if end != LinkEnd::Local {
            // This node may be the one that was cut off (frozen, partitioned): its
            // sessions whose clients went elsewhere end before it links again.
            self.last_loss = Some(now);
            self.out.push_back(Output::Fence);
            m.health = Health::Dead;
            if matches!(end, LinkEnd::Silent | LinkEnd::Closed) {
                self.out.push_back(Output::Forget {
                    node: Arc::from(node),
                });
            }
        }
        self.weigh_isolation(now);
        true
    }

    /// A request forwarded to `node` failed: it is suspect at once.
    pub fn forward_failed(&mut self, now: Instant, node: &str) {
        if let Some(m) = self.members.get_mut(node)
            && m.health != Health::Dead
        {
            m.health = Health::Suspect(now + SUSPECT_FOR);
        }
    }

    /// `node`'s health at `now`; `None` for a node this one does not know.
    pub fn health(&self, now: Instant, node: &str) -> Option<Health> {
        Some(self.members.get(node)?.health_at(now))
    }

    /// Other nodes by health, for the metrics: alive counts only linked ones.
    pub fn counts(&self, now: Instant) -> HealthCounts {
        let mut c = HealthCounts::default();
        for m in self.members.values() {
            match m.health_at(now) {
                Health::Dead => c.dead += 1,
                Health::Suspect(_) => c.suspect += 1,
                Health::Alive if m.link_id().is_some() => c.alive += 1,
                Health::Alive => {}
            }
        }
        c
    }

    /// Whether a join may wait for a link to `node`.
    pub fn link_wait(&self, node: &str) -> LinkWait {
        let Some(m) = self.members.get(node) else {
            return LinkWait::Never;
        };
        match (m.link, m.health) {
            (Link::Up(id), _) => LinkWait::Up(id),
            (_, Health::Dead) => LinkWait::Never,
            _ if m.record.is_some() && m.absent_since.is_none() => LinkWait::Pending,
            _ => LinkWait::Never,
        }
    }

    /// The link to `node`, if up.
    pub fn link_of(&self, node: &str) -> Option<u16> {
        self.members.get(node)?.link_id()
    }

    /// The HTTP API of `node` for a request only it can answer (a session it serves, its
    /// part of a room): linked and healthy at `now`; `None` for this node, or one that
    /// is not.
    pub fn http_of(&self, now: Instant, node: &str) -> Option<SocketAddr> {
        let m = self.members.get(node)?;
        m.link_id()?;
        m.healthy(now).then_some(())?;
        Some(m.record.as_ref()?.http)
    }

    /// The HTTP APIs of every other node linked and healthy at `now`.
    pub fn others(&self, now: Instant) -> Vec<SocketAddr> {
        self.members
            .keys()
            .filter_map(|n| self.http_of(now, n))
            .collect()
    }

    /// The other nodes eligible for placement at `now`: linked, record read, healthy.
    fn eligible(&self, now: Instant) -> impl Iterator<Item = (&Arc<str>, &NodeRecord)> {
        self.members.iter().filter_map(move |(n, m)| {
            m.link_id()?;
            m.healthy(now).then_some(())?;
            Some((n, m.record.as_ref()?))
        })
    }

    /// Where a join of a room is served at `now`, given the room's `replicas` and the
    /// nodes' `loads` (as the directory has them), and this node's own load and
    /// whether it drains.
    pub fn place(
        &self,
        now: Instant,
        replicas: &[Replica],
        loads: &HashMap<String, usize>,
        (own_load, own_draining): (usize, bool),
    ) -> Placement {
        if self.isolated {
            return self.place_away(loads);
        }
        let in_room = |n: &str| replicas.iter().any(|r| r.node == n && r.sessions > 0);
        let candidates: Vec<Candidate> = self
            .eligible(now)
            .map(|(n, r)| Candidate {
                name: n.clone(),
                http: Some(r.http),
                load: loads.get(&**n).copied().unwrap_or_else(|| r.sessions()),
                draining: r.draining,
                in_room: in_room(n),
            })
            .chain(std::iter::once(Candidate {
                name: self.me.clone(),
                http: None,
                load: own_load,
                draining: own_draining,
                in_room: in_room(&self.me),
            }))
            .collect();
        choose(&candidates, self.spill)
    }

    /// An isolated node's placement: the least loaded of the listed nodes it has no link
    /// to (the majority, whose HTTP API it may still reach), not draining.
    fn place_away(&self, loads: &HashMap<String, usize>) -> Placement {
        let away = self
            .members
            .iter()
            .filter(|(_, m)| m.absent_since.is_none() && m.link_id().is_none())
            .filter_map(|(n, m)| Some((n, m.record.as_ref()?)))
            .filter(|(_, r)| !r.draining)
            .min_by_key(|(n, r)| {
                (
                    loads.get(&***n).copied().unwrap_or_else(|| r.sessions()),
                    (*n).clone(),
                )
            });
        match away {
            Some((name, r)) => Placement::Node {
                name: name.clone(),
                http: r.http,
            },
            None => Placement::Here,
        }
    }

    /// The peers a room's replicas on other nodes are reached as, over links that are up.
    pub fn peers_of(&self, replicas: &[Replica]) -> Vec<Peer> {
        replicas
            .iter()
            .filter(|r| *r.node != *self.me)
            .filter_map(|r| {
                Some(Peer {
                    node: self.link_of(&r.node)?,
                    shard: r.shard,
                })
            })
            .collect()
    }

    /// The next free link number (never [`Peer::THIS_NODE`]).
    fn next_id(&mut self) -> u16 {
        loop {
            self.last_id = self.last_id.wrapping_add(1);
            let id = self.last_id;
            let used = self.members.values().any(|m| m.link == Link::Up(id));
            if id != Peer::THIS_NODE && !used {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests;
