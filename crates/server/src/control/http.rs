//! The HTTP API (`docs/api.md`): sessions under `/v1`, plus `/metrics`, `/healthz` and
//! `/readyz`.
//!
//! Handlers never touch relay state: they check the bearer token, parse the body and
//! send a command to the shard owning the room or session through [`Shards`]. Every error is
//! `{"error":{"code","message"}}` with the status the contract names; the codes are
//! listed in `docs/api.md`.
//!
//! The `/v1` routes are guarded by the [`HttpLimits`]: at most `max_in_flight` run at
//! once (more are shed with 503), bodies must arrive within `body_timeout` (408), and
//! joins and interest changes are rate-limited per identity (429). `/metrics`, `/healthz`
//! and `/readyz` are exempt, so probes and scrapes still answer under load. The `/v1`
//! routes and `/client/` answer other origins' pages as [`super::cors`] allows.

mod mirrors;
mod presence;
mod recordings;
mod replays;
mod rooms;

pub use super::error::ApiError;
use super::error::{ErrorCode, draining, relay_stopped};
use super::forward::{self, Forwarder};
use super::limits::{HttpLimits, IdentityLimiter};
use super::recordings::Recordings;
use super::resume::ResumeClaims;
use super::rooms::{Refusal, RoomService};
use super::token::{self, AuthzError, Claims, Right, Tokens};
use crate::cluster::OtherNode;
use crate::cluster::shards::Shards;
use crate::metrics::Metrics;
use crate::metrics::labels::http_limit;
use crate::transport::command::{
    JoinCommand, QuicAnswer, SrtpKeys, TransportAnswer, TransportRequest, WebRtcAnswer, WebRtcOffer,
};
use crate::transport::webrtc;
use crate::transport::webtransport;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::error_handling::HandleErrorLayer;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use gsrelay_core::api::{
    self, JoinAnswerBody, JoinBody, PLAIN_RTP, QuicBody, RtpBody, SrtpBody, StatusBody, WebRtcBody,
    WebTransportBody,
};
use gsrelay_core::relay::{Interest, JoinRequest, format_session_id, parse_session_id};
use gsrelay_core::rtp::SrtpProfile;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::load_shed::error::Overloaded;
use tower::util::option_layer;
use tower::{BoxError, ServiceBuilder};
use tower_http::cors::CorsLayer;

/// Largest request body accepted, in bytes; larger bodies get 413. A join or an interest
/// with the longest allowed filter lists fits easily.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Content type of `/metrics` (Prometheus text exposition format 0.0.4).
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// The join route, whose refusals are counted by reason.
const JOIN_ROUTE: &str = "/v1/rooms/{room}/sessions";

/// How many other nodes a join tries before it is taken here: each failure makes its
/// node suspect, so this bounds only a cluster whose nodes all fail at once.
const MAX_JOIN_FORWARDS: usize = 4;

/// The route of a room's inspection.
const ROOM_ROUTE: &str = "/v1/rooms/{room}";

/// The route of a session's interest.
const INTEREST_ROUTE: &str = "/v1/sessions/{id}/interest";

/// The route of a session.
const SESSION_ROUTE: &str = "/v1/sessions/{id}";

/// What the handlers share.
struct Shared {
    relay: Shards,
    tokens: Tokens,
    metrics: Metrics,
    default_profile: SrtpProfile,
    draining: AtomicBool,
    limits: HttpLimits,
    limiter: IdentityLimiter,
    /// `None` when no other origin is allowed.
    cors: Option<CorsLayer>,
    /// Hands requests to the other nodes of a cluster.
    forwarder: Forwarder,
    /// Participants, metadata, presence and webhooks.
    rooms: Arc<RoomService>,
    /// Room recordings, once the server has set them up.
    recordings: std::sync::OnceLock<Arc<Recordings>>,
}

/// The API's state: the relay handle, the token verifier, metrics, and readiness.
/// Cloning shares it.
#[derive(Clone)]
pub struct ApiState(Arc<Shared>);

impl ApiState {
    /// State for a router driving `relay` under `limits`; joins naming no profile get
    /// `default_profile`. Fails if `limits` are invalid (a malformed allowed origin
    /// among them).
    pub fn new(
        relay: Shards,
        tokens: Tokens,
        metrics: Metrics,
        default_profile: SrtpProfile,
        limits: HttpLimits,
        rooms: Arc<RoomService>,
    ) -> anyhow::Result<Self> {
        limits.validate()?;
        Ok(Self(Arc::new(Shared {
            relay,
            tokens,
            metrics,
            default_profile,
            draining: AtomicBool::new(false),
            limiter: IdentityLimiter::new(&limits)?,
            cors: limits.cors_allowed_origins.layer()?,
            limits,
            forwarder: Forwarder::new(),
            rooms,
            recordings: std::sync::OnceLock::new(),
        })))
    }

    /// Serves `recordings` (once: a second call changes nothing).
    pub fn set_recordings(&self, recordings: Arc<Recordings>) {
        let _ = self.0.recordings.set(recordings);
    }

    /// How the relay plays `room`, if it does: the replay it plays, or the room it
    /// mirrors. A shard that cannot answer (it stopped) plays nothing: a join or a look
    /// at a room never fails for this.
    async fn played(&self, room: &str) -> (Option<api::ReplayInfo>, Option<api::Delayed>) {
        let replay = self
            .0
            .relay
            .replays()
            .await
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.room == room)
            .map(|r| api::ReplayInfo {
                recording: r.recording,
                position_ms: r.position_ms,
                duration_ms: r.duration_ms,
                speed: r.speed,
                paused: r.paused,
                ended: r.ended,
            });
        let delayed = self
            .0
            .relay
            .mirrors()
            .await
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.mirror == room)
            .map(|m| api::Delayed {
                source: m.room,
                delay_ms: m.delay_ms,
            });
        (replay, delayed)
    }

    /// The room recordings, if set up.
    pub fn recordings(&self) -> Option<&Arc<Recordings>> {
        self.0.recordings.get()
    }

    /// Marks the relay as draining: `/readyz` answers 503 and joins are refused.
    pub fn start_draining(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
        self.0.metrics.draining.set(1);
    }

    /// Ends the presence streams, so that stopping the HTTP server waits for none.
    pub fn stop_streams(&self) {
        self.0.rooms.stop();
    }

    /// Whether draining has started.
    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// Verifies the bearer token of a request.
    fn authenticate(&self, headers: &HeaderMap) -> Result<Claims, ApiError> {
        let missing = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "token_missing",
                "expected an Authorization: Bearer <token> header",
            )
        };
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(missing)?
            .to_str()
            .map_err(|_| missing())?;
        let (scheme, token) = value.split_once(' ').ok_or_else(missing)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(missing());
        }
        Ok(self.0.tokens.verify(token.trim(), unix_now())?)
    }

    /// The claims of the resume credential `c` of a join into `room` with `claims`: this
    /// relay's, unexpired, for that room and identity.
    fn resume_claims(
        &self,
        c: &str,
        claims: &Claims,
        room: &str,
    ) -> Result<ResumeClaims, ApiError> {
        let r = self
            .0
            .tokens
            .resume()
            .verify(c, unix_now())
            .map_err(|e| resume_invalid(&e.to_string()))?;
        if r.room != room || r.sub != claims.sub {
            return Err(resume_invalid(
                "the credential is another room's or identity's",
            ));
        }
        Ok(r)
    }

    /// The other node a join is served on: for a resume, the node serving its session if
    /// another does and is alive; else where the cluster places the room. `None`: this
    /// node.
    async fn serving_node(
        &self,
        room: &str,
        resumed: Option<&ResumeClaims>,
    ) -> Result<Option<OtherNode>, ApiError> {
        if let Some(id) = resumed.and_then(|r| parse_session_id(&r.sid))
            && let Some(to) = self.0.relay.session_elsewhere(id).await?
        {
            return Ok(Some(to));
        }
        Ok(self.0.relay.placement(room).await?)
    }

    /// The room of a `{room}` route, checked, for a token that holds one of `rights` in
    /// it (the last one's refusal otherwise).
    fn room_for(
        &self,
        headers: &HeaderMap,
        room: Result<Path<String>, PathRejection>,
        rights: &[Right],
    ) -> Result<String, ApiError> {
        let claims = self.authenticate(headers)?;
        let room = path_param(room)?;
        token::validate_room(&room)?;
        let mut refusal = None;
        for &right in rights {
            match token::require(&claims, &room, right) {
                Ok(()) => return Ok(room),
                Err(e) => refusal = Some(e),
            }
        }
        Err(refusal.unwrap_or(AuthzError::WrongRoom).into())
    }

    /// Counts one join or interest change against the token's identity.
    fn check_rate(&self, claims: &Claims) -> Result<(), ApiError> {
        self.0
            .limiter
            .check(&claims.room, &claims.sub)
            .map_err(|wait| {
                self.count_limited(http_limit::RATE_LIMITED);
                ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!(
                        "identity {:?} in room {:?} is over its rate of joins and interest changes",
                        claims.sub, claims.room
                    ),
                )
                .retry_after(wait)
            })
    }

    /// Counts a request handed to another node on `route`; this node's name, as the
    /// forwarded request gives it.
    fn forwarding(&self, route: &'static str) -> &str {
        self.0
            .metrics
            .cluster_forwarded
            .with_label_values(&[route])
            .inc();
        self.0.relay.node_name().unwrap_or_default()
    }

    /// Forwards a request on `route` to the node at `to` and answers with its answer.
    ///
    /// A forward that fails (refused, reset, timed out, answered 503, or its node found
    /// dead meanwhile, which ends the wait at once) makes the node suspect
    /// (`docs/relay.md`, "Nodes: alive, suspect, dead").
    async fn forward(
        &self,
        to: &OtherNode,
        route: &'static str,
        req: Forwarded<'_>,
    ) -> Result<Response, ApiError> {
        let from = self.forwarding(route);
        let sent =
            self.0
                .forwarder
                .forward(to.http, from, req.method, &req.path, req.headers, req.body);
        let answer = tokio::select! {
            answer = sent => answer,
            () = self.0.relay.fallen(&to.name) => Err(forward::fell(to.http)),
        };
        let failed = match &answer {
            Ok(resp) => resp.status() == StatusCode::SERVICE_UNAVAILABLE,
            Err(_) => true,
        };
        if failed {
            self.0
                .metrics
                .cluster_forward_failures
                .with_label_values(&[route])
                .inc();
            self.0.relay.forward_failed(&to.name);
        }
        answer
    }

    /// Hands a request on session `id` (`method` on `route`) to the node serving the
    /// session when another node does, for a request that reached this node first; its
    /// answer, or `None` to handle it here.
    async fn to_session_node(
        &self,
        headers: &HeaderMap,
        id: &str,
        (method, route): (Method, &'static str),
        body: Bytes,
    ) -> Result<Option<Response>, ApiError> {
        if forward::is_forwarded(headers) {
            return Ok(None);
        }
        // A malformed id is refused as unknown where it is looked up.
        let Some(session) = parse_session_id(id) else {
            return Ok(None);
        };
        let Some(to) = self.0.relay.session_elsewhere(session).await? else {
            return Ok(None);
        };
        let req = Forwarded {
            method,
            path: route.replace("{id}", id),
            headers,
            body,
        };
        self.forward(&to, route, req).await.map(Some)
    }

    fn count_limited(&self, limit: &str) {
        self.0
            .metrics
            .http_limited
            .with_label_values(&[limit])
            .inc();
    }

    /// Checks that `claims` may act on the session `id` and returns its id.
    ///
    /// Only the identity that joined the session, or an admin of its room, may act on it.
    /// A session in another room than the token's answers 404, like a missing one, so a
    /// token for one room cannot probe which session ids exist elsewhere.
    async fn session_for(&self, claims: &Claims, id: &str) -> Result<u64, ApiError> {
        let unknown = || ApiError::not_found("session_not_found", format!("no session {id:?}"));
        let session = parse_session_id(id).ok_or_else(unknown)?;
        let owner = self.0.relay.session_owner(session).await?;
        let owner = owner
            .filter(|o| o.room == claims.room)
            .ok_or_else(unknown)?;
        if owner.identity != claims.sub && !claims.admin {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_session",
                "only the session's own identity or a room admin may change it",
            ));
        }
        Ok(session)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The router serving the whole API, counting and timing requests by route and status.
pub fn router(state: ApiState) -> Router {
    let metrics = state.0.metrics.clone();
    let shed = state.0.metrics.clone();
    let max_in_flight = state.0.limits.max_in_flight;
    // One semaphore for every /v1 route; a request finding it empty is answered at once
    // rather than queued, so a saturated relay says so instead of hanging.
    let in_flight = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(move |e: BoxError| {
            let metrics = shed.clone();
            async move { shed_error(&metrics, max_in_flight, &e) }
        }))
        .layer(LoadShedLayer::new())
        .layer(GlobalConcurrencyLimitLayer::new(max_in_flight));
    let api = Router::new()
        .route(JOIN_ROUTE, post(join))
        .route(INTEREST_ROUTE, put(set_interest))
        .route(SESSION_ROUTE, delete(leave))
        .route(ROOM_ROUTE, get(room_info).delete(rooms::close_room))
        .route(rooms::ROOMS_ROUTE, get(rooms::list_rooms))
        .route(rooms::PARTICIPANTS_ROUTE, get(rooms::participants))
        .route(
            rooms::PARTICIPANT_ROUTE,
            get(rooms::participant)
                .patch(rooms::update_participant)
                .delete(rooms::remove_participant),
        )
        .route(rooms::METADATA_ROUTE, put(rooms::set_metadata))
        .route(
            recordings::ROOM_RECORDING_ROUTE,
            post(recordings::start)
                .get(recordings::running)
                .delete(recordings::stop),
        )
        .route(recordings::RECORDINGS_ROUTE, get(recordings::list))
        .route(
            recordings::RECORDING_ROUTE,
            get(recordings::info).delete(recordings::delete),
        )
        .route(recordings::RECORDING_PCAPNG_ROUTE, get(recordings::pcapng))
        .route(
            mirrors::MIRROR_ROUTE,
            put(mirrors::start).get(mirrors::show).delete(mirrors::stop),
        )
        .route(
            replays::REPLAYS_ROUTE,
            get(replays::list).post(replays::start),
        )
        .route(
            replays::REPLAY_ROUTE,
            get(replays::status)
                .patch(replays::control)
                .delete(replays::stop),
        )
        .route_layer(in_flight)
        // A presence stream lasts as long as its watcher: it takes no in-flight slot.
        .route(presence::PRESENCE_ROUTE, get(presence::presence))
        .route(super::openapi::ROUTE, get(super::openapi::serve));
    // Outside the in-flight limit, so a preflight never takes a slot and a shed answer
    // still reaches the page. A preflight is an OPTIONS, which no route has: it reaches
    // the 405 fallback, set here under the layer because the outer router's would
    // replace it unlayered.
    let cors = |routes: Router<ApiState>| {
        routes
            .method_not_allowed_fallback(method_not_allowed)
            .layer(option_layer(state.0.cors.clone()))
    };
    Router::new()
        .merge(cors(api))
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(cors(super::web::client_router()))
        .merge(super::web::viewer_router())
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(metrics, count_requests))
        .with_state(state)
}

/// Counts and times each request by route: the matched path template (bounded, unlike
/// the path itself), or `unmatched` for requests no route took.
async fn count_requests(State(metrics): State<Metrics>, req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let resp = next.run(req).await;
    metrics.observe_http(&route, resp.status().as_u16(), started.elapsed());
    if route == JOIN_ROUTE
        && let Some(ErrorCode(code)) = resp.extensions().get::<ErrorCode>()
    {
        metrics.refuse_join(code);
    }
    resp
}

/// The answer to a request the in-flight limit shed.
fn shed_error(metrics: &Metrics, max_in_flight: usize, e: &BoxError) -> ApiError {
    if !e.is::<Overloaded>() {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string());
    }
    metrics
        .http_limited
        .with_label_values(&[http_limit::OVERLOADED])
        .inc();
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "overloaded",
        format!(
            "the relay is already handling its maximum of {max_in_flight} API requests; \
             retry shortly"
        ),
    )
    .retry_after(Duration::from_secs(1))
}

async fn no_route() -> ApiError {
    ApiError::not_found("not_found", "no such endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this endpoint",
    )
}

fn path_param(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(s)| s)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_path", e.body_text()))
}

/// A request body, read whole within the body timeout (408 otherwise) and the size limit
/// (413 otherwise).
struct TimedBody(Bytes);

impl FromRequest<ApiState> for TimedBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, ApiError> {
        let timeout = state.0.limits.body_timeout;
        match tokio::time::timeout(timeout, Bytes::from_request(req, state)).await {
            Ok(body) => body_bytes(body).map(TimedBody),
            Err(_) => {
                state.count_limited(http_limit::BODY_TIMEOUT);
                Err(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    format!(
                        "the request body did not arrive within {} s",
                        timeout.as_secs_f64()
                    ),
                ))
            }
        }
    }
}

fn body_bytes(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    b.map_err(|e| {
        let status = e.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "body_too_large"
        } else {
            "bad_body"
        };
        ApiError::new(status, code, e.body_text())
    })
}

/// Parses a JSON body that must be an object (serde would read a struct from an array of
/// its fields in order too, which no client means): otherwise as [`parse_json`].
fn parse_object<T: DeserializeOwned>(body: &[u8], prefix: Option<&str>) -> Result<T, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        let (code, what) = match prefix {
            Some(p) => ("invalid_interest", p),
            None => ("invalid_request", "the body"),
        };
        return Err(ApiError::unprocessable(
            code,
            format!("{what}: must be a JSON object"),
        ));
    }
    parse_json(body, prefix)
}

/// Parses a JSON body: syntax errors are 400, well-formed JSON of the wrong shape is 422
/// with the offending field's path (`prefix` is prepended, e.g. `interest`).
fn parse_json<T: DeserializeOwned>(body: &[u8], prefix: Option<&str>) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner();
        if !inner.is_data() {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                format!("body is not valid JSON: {inner}"),
            );
        }
        let path = match (prefix, e.path().to_string()) {
            (Some(p), rest) if rest == "." => p.to_owned(),
            (Some(p), rest) => format!("{p}.{rest}"),
            (None, rest) => rest,
        };
        let code = if path.starts_with("interest") {
            "invalid_interest"
        } else {
            "invalid_request"
        };
        ApiError::unprocessable(code, format!("{path}: {inner}"))
    })
}

/// The `webtransport` object of a WebTransport join's answer, from the QUIC endpoint's.
fn webtransport_body(q: QuicAnswer, headers: &HeaderMap) -> WebTransportBody {
    WebTransportBody {
        url: webtransport::url(&advertised_addr(q.addr, headers)),
        cert_sha256: q.self_signed.then_some(q.cert_sha256),
        flow_id: q.flow_id,
        session_token: q.session_token,
    }
}

/// The `quic` object of a QUIC join's answer.
fn quic_body(q: QuicAnswer, headers: &HeaderMap) -> QuicBody {
    QuicBody {
        addr: advertised_addr(q.addr, headers),
        alpn: q.alpn.to_owned(),
        cert_sha256: q.cert_sha256,
        flow_id: q.flow_id,
        session_token: q.session_token,
    }
}

/// The `webrtc` object of a WebRTC join's answer.
fn webrtc_body(w: WebRtcAnswer) -> WebRtcBody {
    WebRtcBody {
        sdp_answer: w.sdp_answer,
        addr: w.addr.to_string(),
        channel: w.channel.to_owned(),
        max_message_size: w.max_message_size,
        max_packet: w.max_packet,
    }
}

/// The `rtp` object of an RTP join's answer.
fn rtp_body(addr: std::net::SocketAddr, srtp: Option<SrtpKeys>, headers: &HeaderMap) -> RtpBody {
    RtpBody {
        addr: advertised_addr(addr, headers),
        srtp: srtp.map(|k| SrtpBody {
            profile: k.profile,
            client_key: k.client_key,
            relay_key: k.relay_key,
        }),
    }
}

async fn join(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let claims = state.authenticate(&headers)?;
    let room = path_param(room)?;
    token::validate_room(&room)?;
    if claims.room != room {
        return Err(AuthzError::WrongRoom.into());
    }
    state.check_rate(&claims)?;
    let rights = claims.rights();
    if !(rights.publish || rights.subscribe) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_right",
            "joining needs the publish or subscribe right",
        ));
    }
    let muted = state
        .0
        .rooms
        .admit(&room, &claims.sub, claims.iat.unwrap_or(0))
        .map_err(refused)?;
    let raw = body.clone();
    let body: JoinBody = parse_object(&body, None)?;
    let webrtc = webrtc_offer(&body, &headers)?;
    let resumed = match body.resume.as_deref() {
        Some(c) => Some(state.resume_claims(c, &claims, &room)?),
        None => None,
    };
    // The QUIC endpoint's transport the join asks for, if any.
    let quic = match body.transport.as_str() {
        "rtp" | "webrtc" => None,
        "quic" | "webtransport" if body.srtp_profile.is_some() => {
            return Err(ApiError::unprocessable(
                "invalid_request",
                "srtp_profile: QUIC encrypts; a QUIC or WebTransport join names no SRTP profile",
            ));
        }
        "quic" => Some(TransportRequest::Quic),
        "webtransport" => Some(TransportRequest::WebTransport),
        other => {
            return Err(ApiError::unprocessable(
                "unsupported_transport",
                format!(
                    "transport: {other:?} is not supported; use \"rtp\", \"quic\", \"webtransport\" or \"webrtc\""
                ),
            ));
        }
    };
    let profile = match body.srtp_profile.as_deref() {
        None => Some(state.0.default_profile),
        Some(PLAIN_RTP) => None,
        Some(name) => Some(name.parse::<SrtpProfile>().map_err(|_| {
            let names: Vec<_> = SrtpProfile::ALL.iter().map(|p| p.name()).collect();
            ApiError::unprocessable(
                "invalid_request",
                format!(
                    "srtp_profile: {name:?} is not one of {}, {PLAIN_RTP}",
                    names.join(", ")
                ),
            )
        })?),
    };
    body.interest
        .validate()
        .map_err(|m| ApiError::unprocessable("invalid_interest", m))?;
    if !forward::is_forwarded(&headers) {
        // Each failed forward makes its node suspect, so the next placement skips it: the
        // join goes to the next candidate, or is taken here.
        for _ in 0..MAX_JOIN_FORWARDS {
            let Some(to) = state.serving_node(&room, resumed.as_ref()).await? else {
                break;
            };
            let req = Forwarded {
                method: Method::POST,
                path: format!("/v1/rooms/{room}/sessions"),
                headers: &headers,
                body: raw.clone(),
            };
            match state.forward(&to, JOIN_ROUTE, req).await {
                Ok(answer) if answer.status() != StatusCode::SERVICE_UNAVAILABLE => {
                    return Ok(answer);
                }
                failed => {
                    let status = failed.as_ref().map(|a| a.status()).ok();
                    tracing::warn!(node = %to.name, ?status, "a forwarded join failed; placing it again");
                }
            }
        }
    }
    if state.is_draining() {
        return Err(draining());
    }
    if forward::is_forwarded(&headers) && !state.0.relay.cluster_settled() {
        // Not linked to the room's other nodes yet: the node that forwarded it places it
        // again, elsewhere, rather than have it wait for links here.
        return Err(cluster_linking());
    }

    let declared = resumed
        .as_ref()
        .map(|r| r.ssrcs.clone())
        .unwrap_or_default();
    let cmd = JoinCommand {
        request: JoinRequest {
            room: room.clone(),
            identity: claims.sub.clone(),
            publish: rights.publish,
            subscribe: rights.subscribe,
            ssrc: resumed.as_ref().map(|r| r.ssrc).or(body.ssrc),
            require_ssrc: body.require_ssrc,
            dialect: body.dialect,
            interest: body.interest,
            muted,
            ssrcs: declared.clone(),
            room_stream: body.room_stream
                || resumed.as_ref().is_some_and(|r| r.room_ssrc.is_some()),
            room_ssrc: resumed.as_ref().and_then(|r| r.room_ssrc),
            ..JoinRequest::default()
        },
        generation: 0,
        metadata: state
            .0
            .rooms
            .participants(&room)
            .into_iter()
            .find(|p| p.identity == claims.sub)
            .map(|p| p.metadata)
            .filter(|m| !m.is_null())
            .map(|m| m.to_string()),
        transport: match (webrtc, quic) {
            (Some(offer), _) => TransportRequest::WebRtc(Box::new(offer)),
            (None, Some(q)) => q,
            (None, None) => TransportRequest::Rtp(profile),
        },
    };
    let answer = match &resumed {
        Some(r) => {
            let id = parse_session_id(&r.sid).ok_or_else(|| resume_invalid("no session id"))?;
            state.0.relay.resume(id, r.generation, cmd).await?
        }
        None => state.0.relay.join(cmd).await?,
    };
    if let Some(recordings) = state.recordings() {
        let (recordings, room) = (recordings.clone(), room.clone());
        // Beside the join, never delaying its answer.
        tokio::spawn(async move { recordings.joined(&room).await });
    }
    let session_id = format_session_id(answer.joined.session);
    let credential = ResumeClaims {
        typ: String::new(),
        room: room.clone(),
        sub: claims.sub.clone(),
        sid: session_id.clone(),
        ssrc: answer.joined.ssrc,
        ssrcs: declared,
        room_ssrc: answer.joined.room_ssrc,
        generation: answer.generation,
        exp: claims.exp,
    };
    tracing::info!(
        room = %room,
        identity = %claims.sub,
        session = %session_id,
        ssrc = answer.joined.ssrc,
        "session joined"
    );
    let location = HeaderValue::from_str(&format!("/v1/sessions/{session_id}"))
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    let transport = match answer.transport {
        TransportAnswer::Rtp { addr, srtp } => {
            api::TransportAnswer::Rtp(rtp_body(addr, srtp, &headers))
        }
        TransportAnswer::Quic(q) => api::TransportAnswer::Quic(quic_body(q, &headers)),
        TransportAnswer::WebTransport(q) => {
            api::TransportAnswer::WebTransport(webtransport_body(q, &headers))
        }
        TransportAnswer::WebRtc(w) => api::TransportAnswer::WebRtc(webrtc_body(w)),
    };
    let (replay, delayed) = state.played(&room).await;
    let body = JoinAnswerBody {
        session_id,
        ssrc: answer.joined.ssrc,
        relay_ssrc: answer.joined.relay_ssrc,
        streams: answer.joined.streams,
        room_ssrc: answer.joined.room_ssrc,
        resume: Some(state.0.tokens.resume().issue(credential)),
        transport,
        replay,
        delayed,
    };
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response())
}

/// A resume credential refused: 403 `resume_invalid`, saying why.
fn resume_invalid(why: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "resume_invalid",
        format!("resume: {why}"),
    )
}

/// The answer to a join the room service refuses.
fn refused(r: Refusal) -> ApiError {
    match r {
        Refusal::Closed(wait) => {
            ApiError::new(StatusCode::CONFLICT, "room_closed", r.to_string()).retry_after(wait)
        }
        Refusal::Removed => ApiError::new(StatusCode::FORBIDDEN, "removed", r.to_string()),
    }
}

/// The offer of a WebRTC join, checked; `None` for the other transports. An offer
/// belongs to a WebRTC join only, and a WebRTC join names no SRTP profile.
fn webrtc_offer(body: &JoinBody, headers: &HeaderMap) -> Result<Option<WebRtcOffer>, ApiError> {
    let invalid = |m: &str| ApiError::unprocessable("invalid_request", m);
    match (body.transport.as_str(), &body.sdp_offer) {
        ("webrtc", None) => Err(invalid(
            "sdp_offer: a WebRTC join carries the client's SDP offer",
        )),
        ("webrtc", Some(_)) if body.srtp_profile.is_some() => Err(invalid(
            "srtp_profile: DTLS protects WebRTC; a WebRTC join names no SRTP profile",
        )),
        ("webrtc", Some(sdp)) => {
            webrtc::check_offer(sdp)
                .map_err(|e| ApiError::unprocessable(e.code(), e.to_string()))?;
            Ok(Some(WebRtcOffer {
                sdp: sdp.clone(),
                host: host_ip(headers),
            }))
        }
        (_, Some(_)) => Err(invalid(
            "sdp_offer: only a WebRTC join carries an SDP offer",
        )),
        (_, None) => Ok(None),
    }
}

/// The IP address of the host the client reached the API on (its `Host` header, an
/// address or `localhost`): the relay's ICE candidate when it is bound to the unspecified
/// address with none advertised. A name is not resolved: a client-chosen header must not
/// make the relay query DNS, and a relay reached by name should advertise its address.
fn host_ip(headers: &HeaderMap) -> Option<std::net::IpAddr> {
    let authority = headers
        .get(header::HOST)?
        .to_str()
        .ok()?
        .parse::<axum::http::uri::Authority>()
        .ok()?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return Some(std::net::Ipv4Addr::LOCALHOST.into());
    }
    host.parse().ok()
}

/// Where clients send RTP. A relay bound to the unspecified address with no advertised
/// address answers with the host the client reached the HTTP API on (its `Host` header),
/// which is the address that works from where the client stands.
fn advertised_addr(rtp: std::net::SocketAddr, headers: &HeaderMap) -> String {
    if !rtp.ip().is_unspecified() {
        return rtp.to_string();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
        .map(|a| a.host().to_owned());
    match host {
        Some(h) if h.contains(':') && !h.starts_with('[') => format!("[{h}]:{}", rtp.port()),
        Some(h) => format!("{h}:{}", rtp.port()),
        None => rtp.to_string(),
    }
}

async fn set_interest(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    let id = path_param(id)?;
    let claims = state.authenticate(&headers)?;
    let route = (Method::PUT, INTEREST_ROUTE);
    if let Some(answer) = state
        .to_session_node(&headers, &id, route, body.clone())
        .await?
    {
        return Ok(answer);
    }
    state.check_rate(&claims)?;
    let session = state.session_for(&claims, &id).await?;
    let interest: Interest = parse_object(&body, Some("interest"))?;
    interest
        .validate()
        .map_err(|m| ApiError::unprocessable("invalid_interest", m))?;
    state.0.relay.set_interest(session, interest).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn leave(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = path_param(id)?;
    let claims = state.authenticate(&headers)?;
    let route = (Method::DELETE, SESSION_ROUTE);
    if let Some(answer) = state
        .to_session_node(&headers, &id, route, Bytes::new())
        .await?
    {
        return Ok(answer);
    }
    let session = state.session_for(&claims, &id).await?;
    state.0.relay.leave(session).await?;
    tracing::info!(session = %id, "session left");
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn room_info(
    State(state): State<ApiState>,
    room: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room = state.room_for(&headers, room, &[Right::Admin])?;
    let local = state.0.relay.room_info(room.clone()).await?;
    let mut merged = local
        .map(|info| serde_json::to_value(info).unwrap_or_default())
        .filter(serde_json::Value::is_object);
    if let Some(serde_json::Value::Object(m)) = &mut merged {
        let metadata = state.0.rooms.room_metadata(&room).unwrap_or_default();
        m.insert("metadata".to_owned(), metadata);
        let (replay, delayed) = state.played(&room).await;
        if let Some(r) = replay {
            m.insert(
                "replay".to_owned(),
                serde_json::to_value(r).unwrap_or_default(),
            );
        }
        if let Some(d) = delayed {
            m.insert(
                "delayed".to_owned(),
                serde_json::to_value(d).unwrap_or_default(),
            );
        }
    }
    if !forward::is_forwarded(&headers) {
        for to in state.0.relay.room_elsewhere(&room).await? {
            let from = state.forwarding(ROOM_ROUTE);
            let path = format!("/v1/rooms/{room}");
            let get = (Method::GET, path.as_str());
            match state
                .0
                .forwarder
                .json(to, from, get, &headers, Bytes::new())
                .await
            {
                Ok(Some(part)) => merge_room(&mut merged, part),
                Ok(None) => {}
                // A node that cannot answer (it is dying) leaves its sessions out; the
                // room's streams are whole on every replica.
                Err(e) => {
                    tracing::warn!(node = %to, error = ?e, "a node's part of a room is missing")
                }
            }
        }
    }
    match merged {
        Some(info) => Ok(Json(info).into_response()),
        None => Err(ApiError::not_found(
            "room_not_found",
            format!("no room {room:?}"),
        )),
    }
}

/// A request to hand to another node.
struct Forwarded<'a> {
    method: Method,
    path: String,
    headers: &'a HeaderMap,
    body: Bytes,
}

/// Adds another node's sessions of a room to `merged`; its streams are taken only when
/// this node holds none of the room (every replica's cache is whole).
fn merge_room(merged: &mut Option<serde_json::Value>, part: serde_json::Value) {
    let Some(m) = merged else {
        *merged = Some(part);
        return;
    };
    let sessions = part.get("sessions").and_then(|s| s.as_array()).cloned();
    if let (Some(list), Some(more)) = (
        m.get_mut("sessions").and_then(|s| s.as_array_mut()),
        sessions,
    ) {
        list.extend(more);
    }
    let theirs = part.get("metadata").filter(|v| !v.is_null()).cloned();
    if let (Some(obj), Some(theirs)) = (m.as_object_mut(), theirs) {
        obj.entry("metadata")
            .and_modify(|v| {
                if v.is_null() {
                    *v = theirs.clone();
                }
            })
            .or_insert(theirs);
    }
}

async fn render_metrics(State(state): State<ApiState>) -> Response {
    let ready = readiness(&state).is_ok();
    state.0.metrics.ready.set(i64::from(ready));
    let directory = state.0.relay.directory_available();
    state
        .0
        .metrics
        .directory_available
        .set(i64::from(directory));
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        state.0.metrics.render(),
    )
        .into_response()
}

/// Alive while a shard runs: a relay whose every shard has stopped serves nothing, so the
/// orchestrator should restart it. One stopped shard costs only its rooms (readiness
/// fails, so no new clients come; the others' sessions go on).
async fn healthz(State(state): State<ApiState>) -> Result<Json<StatusBody>, ApiError> {
    if state.0.relay.all_stopped() {
        return Err(relay_stopped());
    }
    Ok(Json(StatusBody {
        status: "ok".to_owned(),
    }))
}

async fn readyz(State(state): State<ApiState>) -> Result<Json<StatusBody>, ApiError> {
    readiness(&state)?;
    Ok(Json(StatusBody {
        status: "ready".to_owned(),
    }))
}

/// A node that has not yet linked to the cluster's nodes it found at start.
fn cluster_linking() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "cluster_linking",
        "the node is linking to the cluster's other nodes",
    )
    .retry_after(Duration::from_secs(1))
}

/// Ready while every shard runs, the room directory answers (with `--redis-url`: from
/// the node's first registration on), the node has linked to the cluster's nodes it found
/// at start, and no drain has started.
fn readiness(state: &ApiState) -> Result<(), ApiError> {
    if state.0.relay.any_stopped() {
        return Err(relay_stopped());
    }
    if !state.0.relay.cluster_settled() {
        return Err(cluster_linking());
    }
    if state.0.relay.cluster_isolated() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "cluster_isolated",
            "the node is cut off from the cluster's majority: joins reaching it go there",
        ));
    }
    if !state.0.relay.directory_available() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "directory_unavailable",
            "the room directory is unavailable: joins cannot be placed",
        ));
    }
    if state.is_draining() {
        return Err(draining());
    }
    Ok(())
}

#[cfg(test)]
mod advertise_tests {
    use super::*;

    fn host(h: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::HOST, HeaderValue::from_str(h).unwrap());
        m
    }

    #[test]
    fn unspecified_bind_answers_with_the_host_the_client_used() {
        let any: std::net::SocketAddr = "0.0.0.0:5004".parse().unwrap();
        assert_eq!(
            advertised_addr(any, &host("127.0.0.1:8080")),
            "127.0.0.1:5004"
        );
        assert_eq!(
            advertised_addr(any, &host("relay.example:8080")),
            "relay.example:5004"
        );
        assert_eq!(advertised_addr(any, &host("[::1]:8080")), "[::1]:5004");
        assert_eq!(advertised_addr(any, &HeaderMap::new()), "0.0.0.0:5004");
        let bound: std::net::SocketAddr = "10.1.2.3:5004".parse().unwrap();
        assert_eq!(advertised_addr(bound, &host("other:1")), "10.1.2.3:5004");
    }

    #[test]
    fn a_webrtc_candidate_comes_from_an_address_host_never_a_name() {
        let ip = |h: &str| host_ip(&host(h)).map(|a| a.to_string());
        assert_eq!(ip("127.0.0.1:8080").as_deref(), Some("127.0.0.1"));
        assert_eq!(ip("[::1]:8080").as_deref(), Some("::1"));
        assert_eq!(ip("LocalHost:8080").as_deref(), Some("127.0.0.1"));
        assert_eq!(ip("relay.example:8080"), None);
        assert_eq!(host_ip(&HeaderMap::new()), None);
    }
}
