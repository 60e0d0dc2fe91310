//! Presence for a Rust client: who is in a room, from `GET /v1/rooms/{room}/presence`
//! (`docs/api.md`, "Presence"). [`Presence::watch`] opens the event stream with a token of
//! the room (the `subscribe` right is enough); [`Presence::next`] reads one change at a
//! time and keeps the room's participants, so a client can name the sender of a stream
//! ([`Presence::identity_of`]).

use super::ClientError;
use crate::http::{HttpClient, checked, chunk};
use gsrelay_core::api::{PresenceParticipant, PresenceSnapshot};
use hyper::Method;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One change of a room's presence.
#[derive(Debug, Clone, PartialEq)]
pub enum PresenceEvent {
    /// The whole room, first and again after the watcher fell behind.
    Snapshot,
    /// A participant joined.
    Joined(PresenceParticipant),
    /// A participant changed (metadata, mute, another session of its identity).
    Updated(PresenceParticipant),
    /// A participant left: its identity.
    Left(String),
    /// The room's metadata changed.
    RoomUpdated(Value),
    /// The room was closed; the stream has ended.
    Closed,
    /// The relay is stopping; the stream has ended.
    Stopping,
}

/// A room's presence, as its stream tells it.
#[derive(Debug)]
pub struct Presence {
    body: hyper::body::Incoming,
    buf: String,
    metadata: Value,
    participants: BTreeMap<String, PresenceParticipant>,
    ended: bool,
}

#[derive(Deserialize)]
struct Left {
    identity: String,
}

#[derive(Deserialize)]
struct RoomUpdate {
    metadata: Value,
}

/// How long the relay may take to answer the stream's opening.
const OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn bad(what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::BadAnswer(format!("presence {what}: {e}"))
}

impl Presence {
    /// Opens `room`'s presence on the relay at `base` with `token`.
    pub async fn watch(base: &str, token: &str, room: &str) -> Result<Self, ClientError> {
        let url = format!("{base}/v1/rooms/{room}/presence");
        let resp = HttpClient::new()
            .send(Method::GET, &url, token, None::<&()>, OPEN_TIMEOUT)
            .await?;
        Ok(Self {
            body: checked(resp).await?.into_body(),
            buf: String::new(),
            metadata: Value::Null,
            participants: BTreeMap::new(),
            ended: false,
        })
    }

    /// The next change, applied to what [`Presence::participants`] shows; `None` once the
    /// stream has ended (after [`PresenceEvent::Closed`] or [`PresenceEvent::Stopping`],
    /// or when the relay went).
    pub async fn next(&mut self) -> Result<Option<PresenceEvent>, ClientError> {
        while !self.ended {
            if let Some((name, data)) = self.take_event() {
                return self.apply(&name, &data).map(Some);
            }
            match chunk(&mut self.body).await? {
                Some(chunk) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                None => self.ended = true,
            }
        }
        Ok(None)
    }

    /// The next whole event in the buffer, keep-alive comments skipped.
    fn take_event(&mut self) -> Option<(String, String)> {
        loop {
            let end = self.buf.find("\n\n")?;
            let block: String = self.buf.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = n.trim_start().to_owned();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            if !name.is_empty() {
                return Some((name, data));
            }
        }
    }

    fn apply(&mut self, name: &str, data: &str) -> Result<PresenceEvent, ClientError> {
        let parse = |what| move |e| bad(what, e);
        Ok(match name {
            "snapshot" => {
                let s: PresenceSnapshot = serde_json::from_str(data).map_err(parse(name))?;
                self.metadata = s.metadata;
                self.participants = s
                    .participants
                    .into_iter()
                    .map(|p| (p.identity.clone(), p))
                    .collect();
                PresenceEvent::Snapshot
            }
            "participant_joined" | "participant_updated" => {
                let p: PresenceParticipant = serde_json::from_str(data).map_err(parse(name))?;
                self.participants.insert(p.identity.clone(), p.clone());
                if name == "participant_joined" {
                    PresenceEvent::Joined(p)
                } else {
                    PresenceEvent::Updated(p)
                }
            }
            "participant_left" => {
                let l: Left = serde_json::from_str(data).map_err(parse(name))?;
                self.participants.remove(&l.identity);
                PresenceEvent::Left(l.identity)
            }
            "room_updated" => {
                let r: RoomUpdate = serde_json::from_str(data).map_err(parse(name))?;
                self.metadata = r.metadata.clone();
                PresenceEvent::RoomUpdated(r.metadata)
            }
            "room_closed" => {
                self.ended = true;
                self.participants.clear();
                PresenceEvent::Closed
            }
            "relay_stopping" => {
                self.ended = true;
                PresenceEvent::Stopping
            }
            other => return Err(bad("event", format!("unknown event {other:?}"))),
        })
    }

    /// The room's participants now, by identity.
    pub fn participants(&self) -> impl Iterator<Item = &PresenceParticipant> {
        self.participants.values()
    }

    /// The room's metadata now.
    pub fn metadata(&self) -> &Value {
        &self.metadata
    }

    /// The identity whose session owns the stream `ssrc`.
    pub fn identity_of(&self, ssrc: u32) -> Option<&str> {
        self.participants
            .values()
            .find(|p| p.ssrcs.contains(&ssrc))
            .map(|p| p.identity.as_str())
    }
}
