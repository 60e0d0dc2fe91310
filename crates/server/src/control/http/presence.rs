//! `GET /v1/rooms/{room}/presence`: who is in a room, for its players, as a stream of
//! server-sent events (`docs/api.md`, "Presence").
//!
//! Why an HTTP event stream rather than RTCP SDES and APP on the media path: metadata is
//! JSON of up to 4 KiB, where an SDES item holds 255 bytes and an APP packet would have
//! to be cut up and made reliable over a path that drops; presence must arrive whole and
//! in order, which TCP gives; every browser reads it with `fetch` (bearer token
//! included); and it costs the data path nothing. The stream opens with the whole room
//! (`snapshot`), then tells each change; a watcher that falls behind is sent the whole
//! room again rather than a gap.

use super::{ApiError, ApiState};
use crate::control::forward;
use crate::control::rooms::{Notice, STOPPING};
use crate::control::token::Right;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use gsrelay_core::api::PresenceSnapshot;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};

/// The presence route.
pub(super) const PRESENCE_ROUTE: &str = "/v1/rooms/{room}/presence";

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What the stream sends next.
enum Next {
    /// The whole room (first, or after falling behind).
    Snapshot,
    /// The next notice.
    Notices,
    /// Nothing more: the room closed.
    Done,
}

/// One watcher's stream.
struct Watcher {
    state: ApiState,
    room: String,
    rx: broadcast::Receiver<Arc<Notice>>,
    next: Next,
    first: Option<PresenceSnapshot>,
}

fn snapshot_event(s: &PresenceSnapshot) -> Event {
    Event::default()
        .event("snapshot")
        .data(serde_json::to_string(s).unwrap_or_else(|_| "{}".to_owned()))
}

fn empty(room: &str) -> PresenceSnapshot {
    PresenceSnapshot {
        room: room.to_owned(),
        metadata: serde_json::Value::Null,
        participants: Vec::new(),
    }
}

impl Watcher {
    /// The next event, or `None` when the stream ends.
    async fn step(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            match self.next {
                Next::Done => return None,
                Next::Snapshot => {
                    let s = self
                        .first
                        .take()
                        .or_else(|| self.state.0.rooms.snapshot(&self.room))
                        .unwrap_or_else(|| empty(&self.room));
                    self.next = Next::Notices;
                    return Some((Ok(snapshot_event(&s)), self));
                }
                Next::Notices => match self.rx.recv().await {
                    Ok(n) if *n.room == *self.room || n.event == STOPPING => {
                        if n.event == "room_closed" || n.event == STOPPING {
                            self.next = Next::Done;
                        }
                        let e = Event::default().event(n.event).data(n.data.as_str());
                        return Some((Ok(e), self));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.next = Next::Snapshot,
                    Err(RecvError::Closed) => return None,
                },
            }
        }
    }
}

/// Streams `room`'s presence to a holder of a subscribe or admin token of the room.
pub(super) async fn presence(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin, Right::Subscribe])?;
    let (first, rx) = state.0.rooms.watch(&room);
    if first.is_none()
        && !forward::is_forwarded(&headers)
        && let Some(&to) = state.0.relay.room_elsewhere(&room).await?.first()
    {
        // The room is served elsewhere: its presence is that node's.
        let from = state.forwarding(PRESENCE_ROUTE);
        let path = PRESENCE_ROUTE.replace("{room}", &room);
        return state.0.forwarder.stream(to, from, &path, &headers).await;
    }
    let watcher = Watcher {
        state,
        room,
        rx,
        next: Next::Snapshot,
        first,
    };
    let events: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(stream::unfold(watcher, Watcher::step));
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}
