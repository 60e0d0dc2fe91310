//! What a transport port is to the shard that hosts it ([`super::shard`]): a [`Port`]
//! reads its inputs into the core, sends the core's packets for its sessions and forgets
//! the sessions that went; the core reaches it only through [`Core`], which the shard
//! implements over its [`gsrelay_core::relay::Relay`]. The UDP, QUIC and WebRTC ports implement
//! [`Port`]; a port carrying a peer relay's streams would too.
//!
//! This module imports no port and no shard, so every port and the shard can import it.

use crate::metrics::export::StatsExporter;
use gsrelay_core::relay::{SessionId, Transmit};
use gsrelay_core::rtp::PacketClass;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// A replica's place: a shard of this relay, or of another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Peer {
    /// The node: [`Peer::THIS_NODE`], or the number this node gave its link to another.
    pub node: u16,
    /// The shard on that node.
    pub shard: u16,
}

impl Peer {
    /// The node number of this relay's own shards.
    pub const THIS_NODE: u16 = 0;

    /// Shard `shard` of this relay.
    pub fn local(shard: usize) -> Self {
        Self {
            node: Self::THIS_NODE,
            shard: u16::try_from(shard).unwrap_or(u16::MAX),
        }
    }

    /// Whether it is a shard of this relay.
    pub fn is_local(self) -> bool {
        self.node == Self::THIS_NODE
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.is_local() {
            true => write!(f, "shard-{}", self.shard),
            false => write!(f, "node-{}/shard-{}", self.node, self.shard),
        }
    }
}

/// Inputs (datagrams, events) a port handles per wake-up before the shard looks at its
/// other inputs again.
pub(super) const RECV_BATCH: usize = 64;

/// What a port may ask of the core it feeds, on the shard's thread.
pub(super) trait Core {
    /// Hands one plaintext RTP or RTCP packet from session `id` to the core.
    fn packet(&mut self, now: Instant, id: SessionId, class: PacketClass, plain: &[u8]);

    /// Tells the core the session's path changed: the largest packet it takes now and
    /// the send rate it allows (`None`: no limit of its own).
    fn set_path(&mut self, now: Instant, id: SessionId, max_packet: usize, send_bps: Option<u64>);

    /// The session's connection is gone: it leaves its room, and the shard forgets it
    /// (the port has forgotten its own state for it already).
    fn leave(&mut self, now: Instant, id: SessionId);

    /// The session that sends with `ssrc`, if any.
    fn session_by_ssrc(&self, ssrc: u32) -> Option<SessionId>;

    /// Largest RTP or RTCP packet the core accepts.
    fn max_packet(&self) -> usize;

    /// Counts a packet the port dropped, by reason.
    fn drop_packet(&mut self, reason: &'static str) {
        self.drop_packets(reason, 1);
    }

    /// Counts `n` packets dropped for one reason (the kernel's drops, learnt at once).
    fn drop_packets(&mut self, reason: &'static str, n: u64);

    /// Joins a link session of `room` for replica `peer`, which sends from `peer_ssrc`
    /// (the link port, `super::link`); `None` when the core refuses it.
    fn join_link(
        &mut self,
        now: Instant,
        room: &Arc<str>,
        peer: Peer,
        peer_ssrc: u32,
    ) -> Option<SessionId>;

    /// Whether the shard holds a session of `room` other than its links.
    fn hosts(&self, room: &str) -> bool;

    /// Sends recorder `id` its room's whole state now (the recorder port, `super::recorder`).
    fn checkpoint(&mut self, now: Instant, id: SessionId);
}

/// A transport's side of a shard: one socket or inbox, and its sessions' transport state.
pub(super) trait Port {
    /// What the port's reader hands the shard to start a batch.
    type Input;

    /// Waits for the next input.
    async fn next(&mut self) -> Self::Input;

    /// Handles `first` and whatever more is ready at once, up to [`RECV_BATCH`] inputs,
    /// handing their packets to `core`. The packets the core took wait for
    /// [`Port::observe_latency`].
    fn receive(&mut self, now: Instant, first: Self::Input, core: &mut impl Core);

    /// Records `seconds`, from a batch's arrival to the end of its sends, as the latency
    /// of each packet the last [`Port::receive`] handed the core.
    fn observe_latency(&mut self, seconds: f64);

    /// Queues one of the core's packets for the port's session `t.session`; a packet
    /// the port drops is counted in `stats`.
    fn queue(&mut self, now: Instant, t: &Transmit<'_>, stats: &mut StatsExporter);

    /// Sends everything queued. `transmitted` is the core's output buffer, which the
    /// queued packets are in ([`Transmit::at`], with the core's trailer room after each):
    /// a port that protects packets does it there, in place. A packet the port drops then
    /// is counted in `stats`.
    async fn send_queued(&mut self, transmitted: &mut [u8], stats: &mut StatsExporter);

    /// Forgets a session that went (closing its connection, if any).
    fn forget(&mut self, id: SessionId);

    /// When [`Port::handle_timeout`] wants to run next, if ever.
    fn next_timeout(&self) -> Option<Instant> {
        None
    }

    /// Runs the port's own timers that are due.
    fn handle_timeout(&mut self, _now: Instant, _core: &mut impl Core) {}

    /// Gives back the capacity its buffers and tables grew to under load, once the
    /// shard holds no session.
    fn release_idle(&mut self) {}
}

/// A port's inbox, fed by its reader tasks; silent forever once they are all gone.
pub(super) struct Inbox<T>(Option<mpsc::Receiver<T>>);

impl<T> Inbox<T> {
    pub(super) fn new(rx: mpsc::Receiver<T>) -> Self {
        Self(Some(rx))
    }

    /// The next input; never, once every sender is gone.
    pub(super) async fn recv(&mut self) -> T {
        if let Some(rx) = &mut self.0 {
            match rx.recv().await {
                Some(input) => return input,
                None => self.0 = None,
            }
        }
        std::future::pending().await
    }

    /// An input that is ready now, if any.
    pub(super) fn try_recv(&mut self) -> Option<T> {
        self.0.as_mut()?.try_recv().ok()
    }
}
