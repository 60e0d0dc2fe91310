//! The server API (`docs/api.md`, "Server API"): a game backend's calls on rooms and
//! their participants. Every route needs an admin token of the room, or a relay-wide
//! admin token ([`token::ANY_ROOM`]); listing every room needs the latter.
//!
//! In a cluster, whichever node a call reaches answers for the whole cluster: reads
//! gather the other nodes' parts (a node that cannot answer is left out and logged), and
//! changes are handed to every other node, since a closed room or a removed identity
//! must be refused wherever a join lands (a node that cannot be reached fails the call
//! with 503, to be retried: every change here may be repeated safely).

use super::{ApiError, ApiState, TimedBody, parse_json, parse_object};
use crate::cluster::shards::merge_counts;
use crate::control::forward;
use crate::control::rooms::{MAX_METADATA_BYTES, ParticipantView};
use crate::control::token::{self, Right};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use gsrelay_core::relay::RoomCounts;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Every room.
pub(super) const ROOMS_ROUTE: &str = "/v1/rooms";
/// A room's participants.
pub(super) const PARTICIPANTS_ROUTE: &str = "/v1/rooms/{room}/participants";
/// One participant.
pub(super) const PARTICIPANT_ROUTE: &str = "/v1/rooms/{room}/participants/{identity}";
/// A room's metadata.
pub(super) const METADATA_ROUTE: &str = "/v1/rooms/{room}/metadata";

/// One room as `GET /v1/rooms` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RoomSummary {
    room: String,
    sessions: usize,
    participants: usize,
    streams: usize,
    objects: usize,
    metadata: Value,
}

/// `GET /v1/rooms`'s answer.
#[derive(Debug, Serialize, Deserialize)]
struct RoomList {
    rooms: Vec<RoomSummary>,
}

/// `GET /v1/rooms/{room}/participants`'s answer.
#[derive(Debug, Serialize, Deserialize)]
struct ParticipantList {
    participants: Vec<ParticipantView>,
}

/// `PATCH /v1/rooms/{room}/participants/{identity}`'s body: what changes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParticipantUpdate {
    /// Publishing allowed (`false` mutes).
    #[serde(default)]
    publish: Option<bool>,
    /// New metadata (any JSON up to [`MAX_METADATA_BYTES`]; `null` clears it).
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Value>,
}

/// A field that is present, `null` included, as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Checks metadata's size, compact, against [`MAX_METADATA_BYTES`].
fn checked_metadata(v: Value) -> Result<Value, ApiError> {
    let len = serde_json::to_vec(&v).map_or(usize::MAX, |b| b.len());
    if len > MAX_METADATA_BYTES {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "metadata_too_large",
            format!("metadata: {len} bytes of JSON; at most {MAX_METADATA_BYTES}"),
        ));
    }
    Ok(v)
}

/// The room and identity of a participant route, checked, for a caller with the room's
/// admin right.
fn participant_for(
    state: &ApiState,
    headers: &HeaderMap,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    let claims = state.authenticate(headers)?;
    let Path((room, identity)) =
        p.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_path", e.body_text()))?;
    token::validate_room(&room)?;
    token::validate_identity(&identity)?;
    token::require(&claims, &room, Right::Admin)?;
    Ok((room, identity))
}

fn room_not_found(room: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "room_not_found",
        format!("no room {room:?}"),
    )
}

fn participant_not_found(identity: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "participant_not_found",
        format!("no participant {identity:?} in the room"),
    )
}

impl ApiState {
    /// The other nodes' JSON answers to this request, forwarded: `nodes`' parts, those
    /// that hold any (404 answers none).
    async fn gather(
        &self,
        nodes: Vec<SocketAddr>,
        (method, route, path): (Method, &'static str, &str),
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Vec<Result<Option<Value>, ApiError>> {
        let mut parts = Vec::with_capacity(nodes.len());
        for to in nodes {
            let from = self.forwarding(route);
            let call = (method.clone(), path);
            let part = self
                .0
                .forwarder
                .json(to, from, call, headers, body.clone())
                .await;
            parts.push(part);
        }
        parts
    }

    /// The other nodes a read of `room` gathers from: none for a forwarded request,
    /// which answers for this node alone.
    async fn room_nodes(
        &self,
        room: &str,
        headers: &HeaderMap,
    ) -> Result<Vec<SocketAddr>, ApiError> {
        if forward::is_forwarded(headers) {
            return Ok(Vec::new());
        }
        Ok(self.0.relay.room_elsewhere(room).await?)
    }

    /// The other nodes a change is handed to: every one, unless it was forwarded.
    fn change_nodes(&self, headers: &HeaderMap) -> Vec<SocketAddr> {
        if forward::is_forwarded(headers) {
            return Vec::new();
        }
        self.0.relay.other_nodes()
    }

    /// Hands a change to `nodes`; how many of them had what it changes (did not answer
    /// 404). The first failure fails the call.
    async fn spread(
        &self,
        nodes: Vec<SocketAddr>,
        call: (Method, &'static str, &str),
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<usize, ApiError> {
        let mut found = 0;
        for part in self.gather(nodes, call, headers, body).await {
            if part?.is_some() {
                found += 1;
            }
        }
        Ok(found)
    }

    /// `room`'s participants here and, unless forwarded, on the room's other nodes,
    /// merged by identity.
    async fn all_participants(
        &self,
        room: &str,
        headers: &HeaderMap,
    ) -> Result<Vec<ParticipantView>, ApiError> {
        let mut merged: BTreeMap<String, ParticipantView> = BTreeMap::new();
        let mut add = |p: ParticipantView| match merged.get_mut(&p.identity) {
            Some(m) => merge_participant(m, p),
            None => {
                merged.insert(p.identity.clone(), p);
            }
        };
        self.0
            .rooms
            .participants(room)
            .into_iter()
            .for_each(&mut add);
        let path = PARTICIPANTS_ROUTE.replace("{room}", room);
        let nodes = self.room_nodes(room, headers).await?;
        let call = (Method::GET, PARTICIPANTS_ROUTE, path.as_str());
        for part in self.gather(nodes, call, headers, &Bytes::new()).await {
            match part.map(|p| p.map(serde_json::from_value::<ParticipantList>)) {
                Ok(Some(Ok(list))) => list.participants.into_iter().for_each(&mut add),
                Ok(None) => {}
                Ok(Some(Err(e))) => {
                    tracing::warn!(error = %e, "a node's participants were unreadable")
                }
                Err(e) => tracing::warn!(error = ?e, "a node's participants are missing"),
            }
        }
        Ok(merged.into_values().collect())
    }
}

/// Adds another node's sessions of one participant to `m`.
fn merge_participant(m: &mut ParticipantView, p: ParticipantView) {
    m.sessions.extend(p.sessions);
    m.ssrcs.extend(p.ssrcs);
    m.publish |= p.publish;
    m.subscribe |= p.subscribe;
    m.muted |= p.muted;
    m.joined_at = m.joined_at.min(p.joined_at);
    if m.metadata.is_null() {
        m.metadata = p.metadata;
    }
}

/// `GET /v1/rooms`: every room of the relay (of the cluster), with its counts.
pub(super) async fn list_rooms(
    State(state): State<ApiState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let claims = state.authenticate(&headers)?;
    token::require_relay_admin(&claims)?;
    let mut counts: BTreeMap<String, RoomCounts> = BTreeMap::new();
    for c in state.0.relay.rooms().await? {
        merge_counts(&mut counts, c);
    }
    let mut rooms: BTreeMap<String, RoomSummary> = counts
        .into_values()
        .map(|c| {
            let participants = state.0.rooms.participants(&c.room).len();
            let metadata = state.0.rooms.room_metadata(&c.room).unwrap_or_default();
            let summary = RoomSummary {
                room: c.room,
                sessions: c.sessions,
                participants,
                streams: c.streams,
                objects: c.objects,
                metadata,
            };
            (summary.room.clone(), summary)
        })
        .collect();
    let nodes = state.change_nodes(&headers);
    let call = (Method::GET, ROOMS_ROUTE, ROOMS_ROUTE);
    for part in state.gather(nodes, call, &headers, &Bytes::new()).await {
        match part.map(|p| p.map(serde_json::from_value::<RoomList>)) {
            Ok(Some(Ok(list))) => list
                .rooms
                .into_iter()
                .for_each(|r| merge_summary(&mut rooms, r)),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = ?e, "a node's rooms are missing"),
        }
    }
    let list = RoomList {
        rooms: rooms.into_values().collect(),
    };
    Ok(Json(list).into_response())
}

/// Adds another node's summary of a room to `rooms`.
fn merge_summary(rooms: &mut BTreeMap<String, RoomSummary>, r: RoomSummary) {
    match rooms.get_mut(&r.room) {
        Some(m) => {
            m.sessions += r.sessions;
            m.participants += r.participants;
            m.streams = m.streams.max(r.streams);
            m.objects = m.objects.max(r.objects);
            if m.metadata.is_null() {
                m.metadata = r.metadata;
            }
        }
        None => {
            rooms.insert(r.room.clone(), r);
        }
    }
}

/// `DELETE /v1/rooms/{room}`: closes the room. Its sessions end (each is sent a BYE
/// from the relay's SSRC) and joins are refused for the configured time; idempotent.
pub(super) async fn close_room(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let path = format!("/v1/rooms/{room}");
    let call = (Method::DELETE, super::ROOM_ROUTE, path.as_str());
    let nodes = state.change_nodes(&headers);
    state.spread(nodes, call, &headers, &Bytes::new()).await?;
    state.0.rooms.close(&room);
    let ended = state.0.relay.evict(&room, None).await?;
    tracing::info!(room = %room, sessions = ended, "room closed");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/rooms/{room}/participants`.
pub(super) async fn participants(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let participants = state.all_participants(&room, &headers).await?;
    if participants.is_empty() {
        return Err(room_not_found(&room));
    }
    Ok(Json(ParticipantList { participants }).into_response())
}

/// `GET /v1/rooms/{room}/participants/{identity}`.
pub(super) async fn participant(
    State(state): State<ApiState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (room, identity) = participant_for(&state, &headers, path)?;
    let view = found_participant(&state, &room, &identity, &headers).await?;
    Ok(view.into_response())
}

/// The participant `identity` of `room` across the cluster, or 404.
async fn found_participant(
    state: &ApiState,
    room: &str,
    identity: &str,
    headers: &HeaderMap,
) -> Result<Json<ParticipantView>, ApiError> {
    state
        .all_participants(room, headers)
        .await?
        .into_iter()
        .find(|p| p.identity == identity)
        .map(Json)
        .ok_or_else(|| participant_not_found(identity))
}

/// `PATCH /v1/rooms/{room}/participants/{identity}`: mutes or unmutes it, sets its
/// metadata; answers the participant as it is now.
pub(super) async fn update_participant(
    State(state): State<ApiState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let (room, identity) = participant_for(&state, &headers, path)?;
    let update: ParticipantUpdate = parse_object(&body, None)?;
    let metadata = update.metadata.map(checked_metadata).transpose()?;
    let path = PARTICIPANT_ROUTE
        .replace("{room}", &room)
        .replace("{identity}", &identity);
    let call = (Method::PATCH, PARTICIPANT_ROUTE, path.as_str());
    let nodes = state.change_nodes(&headers);
    let elsewhere = state.spread(nodes, call, &headers, &body).await?;
    let mut here = state
        .0
        .rooms
        .participants(&room)
        .iter()
        .any(|p| p.identity == identity);
    if let Some(publish) = update.publish {
        state.0.rooms.set_muted(&room, &identity, !publish);
        here |= state.0.relay.mute(&room, &identity, !publish).await? > 0;
    }
    if let Some(m) = metadata {
        here |= state.0.rooms.set_participant_metadata(&room, &identity, m);
    }
    // A forwarded request is handed to no other node: there, here alone counts.
    if !here && elsewhere == 0 {
        return Err(participant_not_found(&identity));
    }
    let view = found_participant(&state, &room, &identity, &headers).await?;
    Ok(view.into_response())
}

/// `DELETE /v1/rooms/{room}/participants/{identity}`: ends its sessions (BYE) and
/// refuses its tokens issued until now; idempotent.
pub(super) async fn remove_participant(
    State(state): State<ApiState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (room, identity) = participant_for(&state, &headers, path)?;
    let path = PARTICIPANT_ROUTE
        .replace("{room}", &room)
        .replace("{identity}", &identity);
    let call = (Method::DELETE, PARTICIPANT_ROUTE, path.as_str());
    let nodes = state.change_nodes(&headers);
    state.spread(nodes, call, &headers, &Bytes::new()).await?;
    state.0.rooms.remove(&room, &identity, super::unix_now());
    let ended = state.0.relay.evict(&room, Some(&identity)).await?;
    tracing::info!(room = %room, identity = %identity, sessions = ended, "participant removed");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `PUT /v1/rooms/{room}/metadata`: the room's metadata, any JSON up to
/// [`MAX_METADATA_BYTES`]; the room must have sessions.
pub(super) async fn set_metadata(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let metadata = checked_metadata(parse_json(&body, None)?)?;
    let path = METADATA_ROUTE.replace("{room}", &room);
    let nodes = state.room_nodes(&room, &headers).await?;
    let call = (Method::PUT, METADATA_ROUTE, path.as_str());
    let mut found = state.spread(nodes, call, &headers, &body).await?;
    if state.0.rooms.set_room_metadata(&room, metadata) {
        found += 1;
    }
    if found == 0 {
        return Err(room_not_found(&room));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
