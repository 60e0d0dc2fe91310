//! The connection as a Bevy resource: its state, and the commands a game sends through it.

use crate::net::{self, Command, EndReason, Link, NetEvent};
use crate::settings::{ConfigError, Connect};
use bevy::prelude::Resource;
use gsrelay_core::Interest;
use gsrelay_core::wire::Object;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

/// Why a connection could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConnectError {
    /// The settings were refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The network thread could not start.
    #[error("{0}")]
    Runtime(String),
}

/// Why a command was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The session has not joined yet.
    #[error("the session has not joined yet")]
    NotJoined,
    /// The session ended.
    #[error("the session ended")]
    Ended,
    /// The network thread has a full queue of commands it has not carried out.
    #[error("the network thread is behind; the command was dropped")]
    Busy,
}

/// Where the session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionState {
    /// Joining: commands are refused until joined.
    Joining,
    /// Joined (or back after the relay went away) as `ssrc`.
    Joined {
        /// The session's SSRC.
        ssrc: u32,
        /// The session's id.
        session: String,
    },
    /// Over: nothing more happens.
    Ended {
        /// Why.
        reason: EndReason,
        /// What the client or the relay said.
        message: String,
    },
}

/// One session with a relay, as a resource: insert the one
/// [`RelayClient::connect`] returns, and the plugin's systems drain it every frame.
/// Removing it (or dropping it) leaves the room, bounded by two seconds, on the network
/// thread.
#[derive(Resource, Debug)]
pub struct RelayClient {
    link: Link,
    state: ConnectionState,
    /// The session's end was seen and told.
    end_told: bool,
}

impl RelayClient {
    /// Checks `connect` and starts joining on the plugin's network thread; returns at once
    /// (the join's outcome arrives as a [`Joined`](crate::Joined) or
    /// [`SessionEnded`](crate::SessionEnded) message).
    pub fn connect(connect: Connect) -> Result<Self, ConnectError> {
        connect.validate()?;
        let link = net::start(connect).map_err(ConnectError::Runtime)?;
        Ok(Self {
            link,
            state: ConnectionState::Joining,
            end_told: false,
        })
    }

    /// Where the session is.
    pub fn state(&self) -> &ConnectionState {
        &self.state
    }

    /// The session's SSRC once joined.
    pub fn ssrc(&self) -> Option<u32> {
        match self.state {
            ConnectionState::Joined { ssrc, .. } => Some(ssrc),
            _ => None,
        }
    }

    /// Whether the session is joined.
    pub fn is_joined(&self) -> bool {
        matches!(self.state, ConnectionState::Joined { .. })
    }

    /// Events the network thread dropped because the game did not drain them in time.
    pub fn dropped(&self) -> u64 {
        self.link.shared.dropped.load(Ordering::Relaxed)
    }

    /// Publishes `objects` on the session's stream now (the plugin publishes the entities
    /// marked [`Publish`](crate::Publish) by itself; this is for anything else).
    pub fn publish_objects(&self, objects: Vec<Object>) -> Result<(), SendError> {
        self.command(Command::Publish(objects))
    }

    /// Asks the relay for the whole room again; it answers from its cache.
    pub fn request_snapshot(&self) -> Result<(), SendError> {
        self.command(Command::Snapshot)
    }

    /// Changes what the session receives (`docs/interest.md`).
    pub fn set_interest(&self, interest: Interest) -> Result<(), SendError> {
        self.command(Command::Interest(Box::new(interest)))
    }

    /// Asks for objects (stream SSRC, objectID) of other streams
    /// ([`Ownership`](crate::Ownership) messages answer).
    pub fn request_objects(&self, objects: &[(u32, u64)]) -> Result<(), SendError> {
        self.command(Command::Request(objects.to_vec()))
    }

    /// Gives objects back.
    pub fn release_objects(&self, objects: &[(u32, u64)]) -> Result<(), SendError> {
        self.command(Command::Release(objects.to_vec()))
    }

    /// Leaves the room; a [`SessionEnded`](crate::SessionEnded) follows.
    pub fn leave(&self) -> Result<(), SendError> {
        match self.state {
            ConnectionState::Ended { .. } => Err(SendError::Ended),
            _ => self.send(Command::Leave),
        }
    }

    fn command(&self, command: Command) -> Result<(), SendError> {
        match self.state {
            ConnectionState::Joining => Err(SendError::NotJoined),
            ConnectionState::Ended { .. } => Err(SendError::Ended),
            ConnectionState::Joined { .. } => self.send(command),
        }
    }

    fn send(&self, command: Command) -> Result<(), SendError> {
        self.link.commands.try_send(command).map_err(|e| match e {
            TrySendError::Full(_) => SendError::Busy,
            TrySendError::Closed(_) => SendError::Ended,
        })
    }

    /// Moves every waiting event to `out` without waiting, keeping the state in step;
    /// returns the end once, when the network side is over and every event before it
    /// was taken.
    pub(crate) fn drain(&mut self, out: &mut Vec<NetEvent>) -> Option<(EndReason, String)> {
        loop {
            match self.link.events.try_recv() {
                Ok(event) => {
                    match &event {
                        NetEvent::Joined { ssrc, session } => {
                            self.state = ConnectionState::Joined {
                                ssrc: *ssrc,
                                session: session.clone(),
                            }
                        }
                        NetEvent::Reconnected { ssrc, .. } => {
                            if let ConnectionState::Joined { ssrc: s, .. } = &mut self.state {
                                *s = *ssrc;
                            }
                        }
                        _ => {}
                    }
                    out.push(event);
                }
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    if self.end_told {
                        return None;
                    }
                    self.end_told = true;
                    let (reason, message) = self
                        .link
                        .shared
                        .ended()
                        .unwrap_or((EndReason::Left, "the network thread stopped".to_owned()));
                    self.state = ConnectionState::Ended {
                        reason,
                        message: message.clone(),
                    };
                    return Some((reason, message));
                }
            }
        }
    }
}
