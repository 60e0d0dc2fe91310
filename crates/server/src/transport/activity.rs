//! What happens in rooms as the shards see it: sessions joining and going, streams
//! beginning and ending. The control plane's room service ([`crate::control::rooms`])
//! observes it to keep the participants of each room, tell players (presence) and tell a
//! game's backend (webhooks).
//!
//! A shard calls its [`Observer`] in place, at control rate only (a join, a session gone,
//! a stream's first packet or its end, never once per packet), before it answers the
//! command that caused it: whoever asked sees the change in the room service as soon as
//! the answer arrives. An observer must not block: it takes a short lock at most and
//! hands anything slow (a webhook's delivery) to a task of its own.

use gsrelay_core::relay::SessionId;
use std::fmt::Debug;
use std::sync::Arc;

/// Why a session is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// It left: `DELETE /v1/sessions/{id}`.
    Left,
    /// Its connection (QUIC, WebTransport, WebRTC) closed.
    Disconnected,
    /// The relay ended it: nothing arrived from it for the session timeout, or its room
    /// failed.
    Timeout,
    /// The room's admin removed it, or closed its room.
    Removed,
}

impl Gone {
    /// The reason as the API and webhooks spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Left => "left",
            Self::Disconnected => "disconnected",
            Self::Timeout => "timeout",
            Self::Removed => "removed",
        }
    }
}

/// One change in a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// A session joined (links between replicas are not sessions of the room).
    Joined {
        /// Its room.
        room: Arc<str>,
        /// The session.
        session: SessionId,
        /// Its identity.
        identity: String,
        /// The SSRCs it owns: its own first, then those it declared.
        ssrcs: Vec<u32>,
        /// May publish.
        publish: bool,
        /// May subscribe.
        subscribe: bool,
        /// Joined muted.
        muted: bool,
    },
    /// A session is gone.
    Gone {
        /// Its room.
        room: Arc<str>,
        /// The session.
        session: SessionId,
        /// Why.
        why: Gone,
    },
    /// A publisher's stream began (its first packet arrived).
    StreamStarted {
        /// Its room.
        room: Arc<str>,
        /// The publishing session.
        session: SessionId,
        /// The stream.
        ssrc: u32,
    },
    /// A publisher's stream ended.
    StreamEnded {
        /// Its room.
        room: Arc<str>,
        /// The publishing session.
        session: SessionId,
        /// The stream.
        ssrc: u32,
    },
}

/// Whoever follows the rooms' activity; called by the shards in place (see the module).
pub trait Observer: Debug + Send + Sync {
    /// Takes one change.
    fn observe(&self, activity: Activity);
}
