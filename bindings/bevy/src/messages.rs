//! The messages the plugin writes in `PreUpdate` (read them with a `MessageReader` in
//! `Update`), one type per thing that happened, as bevy_renet and lightyear do.

use crate::net::{EndReason, Reconnect};
use bevy::prelude::{Entity, Message};
use gsrelay_core::relay::handover::{Kind, Reason};

/// The session joined the room.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The session's SSRC: the stream its published objects are known by.
    pub ssrc: u32,
    /// The session's id.
    pub session: String,
}

/// A remote object was updated; `spawned` when its entity was made for this update.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectUpdated {
    /// The object's entity.
    pub entity: Entity,
    /// Its stream.
    pub ssrc: u32,
    /// Its objectID within the stream.
    pub object_id: u64,
    /// The entity was spawned for it.
    pub spawned: bool,
}

/// Why a remote object's entity was despawned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Its stream ended (the sender left, timed out or sent a BYE).
    StreamEnded,
    /// It was not updated for the object timeout (the relay drops such objects).
    TimedOut,
    /// The session ended: nothing will update it any more.
    SessionEnded,
}

/// A remote object's entity was despawned.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRemoved {
    /// The entity it had (despawned now).
    pub entity: Entity,
    /// Its stream.
    pub ssrc: u32,
    /// Its objectID within the stream.
    pub object_id: u64,
    /// Why.
    pub why: Removal,
}

/// A stream of the room ended; its objects' [`ObjectRemoved`] come before this.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamEnded {
    /// The stream.
    pub ssrc: u32,
}

/// The relay's answer about an object's ownership (`docs/relay.md`, "Ownership handover").
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// The object's stream.
    pub ssrc: u32,
    /// Its objectID.
    pub object_id: u64,
    /// Granted, lost or refused.
    pub kind: Kind,
    /// Why (a loss or a refusal).
    pub reason: Reason,
}

/// The relay went silent or away and the session came back (the room is asked for
/// again, so every object is refreshed).
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnected {
    /// The session's SSRC now.
    pub ssrc: u32,
    /// Resumed with its SSRC, or rejoined under a new one.
    pub how: Reconnect,
}

/// The session ended; nothing follows.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct SessionEnded {
    /// Why.
    pub reason: EndReason,
    /// What the client or the relay said.
    pub message: String,
}

/// Something failed without ending the session (a publish, a rejoin attempt, a packet
/// that did not decode).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct RelayError {
    /// What failed.
    pub message: String,
}
