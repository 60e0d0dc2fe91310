//! What a shard reports to the control plane: its sessions joining and going, which the
//! control plane applies to the room directory (`crate::cluster::directory`). A shard
//! never calls the directory; it only sends these, and sending never blocks it.

use gsrelay_core::relay::SessionId;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What a shard reports to the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardEvent {
    /// A session joined `room` on `shard` (reported before its join is answered).
    SessionJoined {
        /// Its room.
        room: Arc<str>,
        /// The session.
        session: SessionId,
        /// The shard it is on.
        shard: usize,
    },
    /// A session is gone from `shard`: it left, timed out, lost its connection or went
    /// with a failed room.
    SessionGone {
        /// Its room.
        room: Arc<str>,
        /// The session.
        session: SessionId,
        /// The shard it was on.
        shard: usize,
    },
}

/// Where a shard reports its [`ShardEvent`]s; sending never blocks the shard.
#[derive(Debug, Clone)]
pub struct EventSink {
    shard: usize,
    tx: mpsc::UnboundedSender<ShardEvent>,
}

/// The control plane's end of the shards' [`EventSink`]s.
pub type ShardEvents = mpsc::UnboundedReceiver<ShardEvent>;

impl EventSink {
    /// The same channel, for shard `shard`.
    pub fn for_shard(&self, shard: usize) -> Self {
        Self {
            shard,
            tx: self.tx.clone(),
        }
    }

    /// Reports a session that joined `room`.
    pub fn joined(&self, room: Arc<str>, session: SessionId) {
        self.send(ShardEvent::SessionJoined {
            room,
            session,
            shard: self.shard,
        });
    }

    /// Reports a session gone from `room`.
    pub fn gone(&self, room: Arc<str>, session: SessionId) {
        self.send(ShardEvent::SessionGone {
            room,
            session,
            shard: self.shard,
        });
    }

    fn send(&self, event: ShardEvent) {
        // The control plane gone, the relay is stopping: nobody needs the event.
        let _ = self.tx.send(event);
    }
}

/// A channel for shard events: a sink for shard 0 ([`EventSink::for_shard`] for the
/// others) and the control plane's end.
pub fn event_channel() -> (EventSink, ShardEvents) {
    let (tx, rx) = mpsc::unbounded_channel();
    (EventSink { shard: 0, tx }, rx)
}
