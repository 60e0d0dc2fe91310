//! The Rust client: joins a room over the HTTP API, then speaks SRTP/SRTCP with the relay
//! over UDP, RTP over QUIC ([`JoinOptions::quic`]), RTP over QUIC inside WebTransport
//! as a browser does ([`JoinOptions::webtransport`]), or RTP over a WebRTC data channel
//! ([`JoinOptions::webrtc`]). Used by the tests and the bench
//! clients; allocation is fine here.
//!
//! It receives in either delivery mode (`docs/relay.md`, "Delivery modes"):
//! [`JoinOptions::aggregated`] asks for one stream from the relay carrying every sender's
//! objects, and [`Client::recv_updates`] reads both modes as per-sender [`Update`]s that a
//! [`RoomState`] keeps.
//!
//! **When the relay goes away** (its node died, or it restarted and forgot the session),
//! the client notices and comes back through the same HTTP base URL (a Kubernetes Service
//! in front of several relays lands it on a surviving one). A live relay is never silent
//! for long: besides the room's RTP it sends every session an RTCP report at least every
//! 6.2 s (`rtcp_min_interval`, 5 s, randomised; `docs/relay.md`, "RTCP reports"). So the
//! relay counts as gone ([`Client::is_silent`]) once nothing authenticated came from it
//! for [`DEFAULT_SILENCE`] (15 s), or for [`SILENCE_REPORT_GAPS`] (3) times the longer of
//! the last two gaps between its reports when that is longer (RFC 3550 spaces the reports
//! of a quiet room with many streams further apart), or at once when its link failed (port
//! unreachable, QUIC or WebRTC connection closed). An app whose room always carries
//! traffic may set a shorter silence ([`JoinOptions::silence`], [`Client::set_silence`]),
//! used as it is. [`Client::rejoin_if_silent`] then resumes the session with its resume
//! credential, or rejoins with the same room, token, options and SSRC (never waiting for
//! the old session's leave, see [`Client::rejoin`]), and asks for the whole room (a FIR
//! naming the relay), which the new relay answers from its cache; the app starts its
//! [`RoomState`] afresh and sends its own state again. Failed attempts are retried no
//! sooner than 0.25 s later, doubling to 8 s. The session must be heard by the relay for its reports to reach it: a UDP session
//! is latched by its first packet, and one that publishes nothing sends an RR now and then
//! ([`Client::send_rr`]) anyway, or the relay times it out after `session_timeout` (60 s).
//!
//! ```no_run
//! # async fn watch(mut c: gsrelay_client::Client) -> Result<(), gsrelay_client::ClientError> {
//! use gsrelay_client::RoomState;
//! use std::time::{Duration, Instant};
//!
//! let mut room = RoomState::default();
//! loop {
//!     match c.recv_updates(Duration::from_millis(250)).await {
//!         Ok(updates) => updates.iter().flatten().for_each(|u| room.apply(u)),
//!         // The link failed: the relay is gone, and the client knows it.
//!         Err(_) if c.is_silent(Instant::now()) => {}
//!         Err(e) => return Err(e),
//!     }
//!     match c.rejoin_if_silent().await {
//!         Ok(true) => room = RoomState::default(),
//!         Ok(false) => {}
//!         // Nothing to join yet: the client is as it was, and tries again later.
//!         Err(e) => eprintln!("rejoin failed: {e}"),
//!     }
//! }
//! # }
//! ```
//!
//! ```no_run
//! # async fn demo() -> Result<(), gsrelay_client::ClientError> {
//! use gsrelay_client::{Client, JoinOptions};
//! use gsrelay_core::wire::{Head1, Object};
//! use std::time::Duration;
//!
//! let mut c = Client::join("http://127.0.0.1:8080", "token", "lobby", JoinOptions::default()).await?;
//! c.send_objects(&[Object::Head1(Head1::default())]).await?;
//! let next = c.recv(Duration::from_secs(1)).await?;
//! # let _ = next;
//! c.leave().await
//! # }
//! ```

pub mod batch;
mod feedback;
mod http;
mod liveness;
mod objects;

pub use objects::{Notice, notices};
mod presence;
mod quic;
mod state;
mod webrtc;

pub use liveness::{DEFAULT_SILENCE, SILENCE_REPORT_GAPS};
pub use presence::{Presence, PresenceEvent};
pub use quic::{client_config as quic_client_config, client_config_for as quic_client_config_for};
pub use state::{RoomState, Update, updates};
pub use webrtc::WebRtcPeer;

use gsrelay_core::api::{
    self, JoinAnswerBody, JoinBody, PLAIN_RTP, QuicBody, SrtpBody, WebTransportBody,
};
use gsrelay_core::join::{JoinAnswer, QuicAnswer, SrtpKeys, TransportAnswer};
use gsrelay_core::relay::{Delivery, Interest, Joined, SessionId, parse_session_id};
use gsrelay_core::rtp::ntp;
use gsrelay_core::rtp::rtcp::{
    self, FirEntry, ReceptionReport, RtcpError, RtcpWriteError, SenderInfo,
};
use gsrelay_core::rtp::{
    KeyMaterial, PacketClass, RtcpItem, RtpError, RtpHeader, RtpPacket, RtpWriteError, SrtpError,
    SrtpProfile, SrtpSession, classify, parse_compound,
};
use gsrelay_core::wire::{self, DecodeError, Dialect, EncodeError, Object};
use hyper::Method;
use liveness::Liveness;
use quic::QuicLink;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UdpSocket;

/// The payload type the client sends game state with.
pub const PAYLOAD_TYPE: u8 = 96;

/// The RTP clock rate of game state (draft §4).
const CLOCK_RATE: u64 = 90_000;

/// How long a WebRTC join waits for its data channel to open.
const WEBRTC_OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP request (join, leave) may take: a rejoin must not hang on a relay
/// that accepts connections but no longer answers.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the old session's leave, which a [`Client::rejoin`] sends without waiting for
/// it, may take before the client gives it up (a node that died may never answer). Only a
/// rejoin that requires its SSRC ([`JoinOptions::require_ssrc`]) and is refused it
/// because the SSRC is still taken waits for that leave, and no longer than this.
pub const REJOIN_LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the old session's leave is tried again, in the background, when no relay
/// took it (a cluster node that was frozen or cut off holds the session, and its room's
/// members there would see two of this client's streams under one SSRC, the old one
/// refusing the new one's updates, until it times the session out): the relay's
/// `session_timeout`, past which it has removed the session itself. The tries come
/// [`REJOIN_LEAVE_RETRY`] apart at first, then every second (a thawed node must end it soon after it is back); a 404 (the session is gone)
/// or a refused token ends them.
pub const REJOIN_LEAVE_PERSIST: Duration = Duration::from_secs(60);

/// The first wait before the old session's leave is tried again
/// ([`REJOIN_LEAVE_PERSIST`]).
pub const REJOIN_LEAVE_RETRY: Duration = Duration::from_millis(500);

/// How long a resume's request may go unanswered before a second one is sent beside it
/// ([`Client::resume`]). A relay answers a join in milliseconds, and in a cluster within
/// its link's idle timeout (0.6 s) when the session's old node died; a request that takes
/// longer most likely reached a node that accepts connections and answers nothing (a
/// frozen process), and behind a Service the second one reaches another node.
pub const RESUME_HEDGE: Duration = Duration::from_millis(400);

/// The most resume requests in flight at once ([`RESUME_HEDGE`]).
pub const RESUME_ATTEMPTS: usize = 4;

/// A join the relay answered, not yet connected to.
struct Posted {
    answer: JoinAnswerBody,
    /// The peer whose offer the join carried (WebRTC).
    webrtc: Option<WebRtcPeer>,
}

/// What a join asks for, beyond the room and the token.
#[derive(Debug, Clone, Default)]
pub struct JoinOptions {
    /// Wanted SSRC.
    pub ssrc: Option<u32>,
    /// Fail instead of taking another SSRC when `ssrc` is in use.
    pub require_ssrc: bool,
    /// Wire dialect to speak.
    pub dialect: Dialect,
    /// Initial interest; the relay's default when `None`.
    pub interest: Option<Interest>,
    /// SRTP profile; the relay's default when `None`.
    pub profile: Option<SrtpProfile>,
    /// Ask for plain RTP (only relays run with `--insecure-plain-rtp` accept).
    pub plain_rtp: bool,
    /// Carry the session over QUIC (RoQ) instead of UDP/SRTP.
    pub quic: bool,
    /// Carry the session over WebTransport (as a browser does) instead of UDP/SRTP;
    /// takes precedence over `quic`.
    pub webtransport: bool,
    /// Carry the session over a WebRTC data channel instead of UDP/SRTP (ignored with
    /// `quic` or `webtransport`).
    pub webrtc: bool,
    /// Ask for a room stream ([`Client::send_room_objects`]): objects sent on it belong
    /// to the room and outlive the session.
    pub room_stream: bool,
    /// Silence from the relay after which the client takes it for gone
    /// ([`Client::is_silent`]); `None`: [`DEFAULT_SILENCE`], longer when the relay's
    /// reports come further apart.
    pub silence: Option<Duration>,
}

impl JoinOptions {
    /// Options asking for aggregated delivery: one stream from the relay's SSRC carrying
    /// every sender's objects, each packet sent at most `max_delay_ms` after its oldest
    /// update (the relay's default when `None`). Read it with [`Client::recv_updates`].
    pub fn aggregated(max_delay_ms: Option<u32>) -> Self {
        Self {
            interest: Some(Interest {
                delivery: Delivery::aggregated(max_delay_ms),
                ..Interest::default()
            }),
            ..Self::default()
        }
    }
}

/// A packet received from the relay, after SRTP unprotection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// An RTP packet of one of the room's streams.
    Rtp {
        /// The stream.
        ssrc: u32,
        /// Sequence number (rewritten per subscriber by the relay).
        seq: u16,
        /// RTP timestamp.
        ts: u32,
        /// The game-state payload.
        payload: Vec<u8>,
    },
    /// An RTCP compound packet.
    Rtcp(Vec<RtcpItem>),
}

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The HTTP request failed.
    #[error("HTTP request failed: {0}")]
    Http(Box<dyn std::error::Error + Send + Sync>),
    /// The relay answered with an error status.
    #[error("relay answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The error body.
        body: String,
    },
    /// The join answer does not make sense.
    #[error("bad join answer: {0}")]
    BadAnswer(String),
    /// This client was not joined over HTTP, so it cannot leave over HTTP.
    #[error("client was not joined over HTTP")]
    NoHttp,
    /// Socket error.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// SRTP keying or protection failed.
    #[error("SRTP: {0}")]
    Srtp(#[from] SrtpError),
    /// Objects could not be encoded.
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
    /// A payload could not be decoded.
    #[error("decode: {0}")]
    Decode(#[from] DecodeError),
    /// An RTP header could not be written.
    #[error("RTP: {0}")]
    Rtp(#[from] RtpWriteError),
    /// An RTCP packet could not be written.
    #[error("RTCP: {0}")]
    Rtcp(#[from] RtcpWriteError),
    /// The QUIC connection failed or the relay refused it.
    #[error("QUIC: {0}")]
    Quic(String),
    /// The WebRTC connection failed.
    #[error("WebRTC: {0}")]
    WebRtc(String),
}

/// Where the client's HTTP requests go, and what it joined with (for a rejoin).
#[derive(Debug, Clone)]
struct Http {
    client: http::HttpClient,
    base: String,
    token: String,
    room: String,
    opts: JoinOptions,
}

/// One session with a relay.
#[derive(Debug)]
pub struct Client {
    joined: Joined,
    dialect: Dialect,
    link: Link,
    http: Option<Http>,
    seq: u16,
    fir_seq: u8,
    ts_base: u32,
    epoch: Instant,
    /// Packets built here before protection.
    out: Vec<u8>,
    /// What UDP reads brought and [`recv`](Self::recv) has not handed out yet.
    inbox: batch::Inbox,
    rejected: u64,
    /// The latest SR the relay sent per SSRC, and when it arrived.
    sender_reports: HashMap<u32, (SenderInfo, Instant)>,
    /// Arrivals to report as congestion feedback, once enabled.
    arrivals: Option<feedback::Arrivals>,
    /// What was heard of the relay, to tell when it is gone.
    liveness: Liveness,
    /// The relay ended the session (an RTCP BYE from its SSRC: the room was closed or
    /// this identity removed): the client does not rejoin by itself.
    ended_by_relay: bool,
    /// The resume credential of the last join's answer.
    resume: Option<String>,
    /// Sequence number of the next packet of its room stream.
    room_seq: u16,
    /// Objects of other streams it holds, as the relay's notices said.
    holds: std::collections::HashSet<(u32, u64)>,
}

impl Client {
    /// Joins `room` over the HTTP API at `http_base` (e.g. `http://127.0.0.1:8080`).
    pub async fn join(
        http_base: &str,
        token: &str,
        room: &str,
        opts: JoinOptions,
    ) -> Result<Self, ClientError> {
        let http = Http {
            client: http::HttpClient::new(),
            base: http_base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            room: room.to_owned(),
            opts,
        };
        let ssrc = http.opts.ssrc;
        Self::open(http, ssrc, None).await
    }

    /// Joins again with the same room, token and options, asking for the same SSRC: for
    /// when the relay seems to have forgotten the session, e.g. after a restart, or to be
    /// gone. The new session gets a new socket and new SRTP keys. On failure the client is
    /// unchanged and may try again. It does not ask for the room:
    /// [`rejoin_if_silent`](Self::rejoin_if_silent) does both, and resumes first.
    ///
    /// The old session is left in the background, never waited for: the leave is sent
    /// just before the join, on its own task, and tried again for up to
    /// [`REJOIN_LEAVE_PERSIST`] until a relay takes it or says the session is gone. A relay
    /// that is gone does not answer it, a restarted one answers 404 or 403, a cluster node
    /// may answer 503 for a node that died or is frozen (and takes it once that node
    /// thaws); none of it delays the join. The leave is there for a relay that still holds the old session,
    /// so that its SSRC comes free, and the join may reach that relay before the leave
    /// does. Then:
    ///
    /// - without [`JoinOptions::require_ssrc`], the relay gives another SSRC and the
    ///   client takes it: a client that must keep its SSRC (its objects are the room's by
    ///   it) sets `require_ssrc`, or resumes ([`resume`](Self::resume)), which keeps the
    ///   session itself;
    /// - with it, the relay refuses the join (409 `ssrc_taken`); the client then waits for
    ///   the old session's leave (at most [`REJOIN_LEAVE_TIMEOUT`]: only here is it on the
    ///   way) and, if the relay took it, joins once more. If it did not (the SSRC is held
    ///   by a session that leave cannot end), the 409 is returned, to try again later.
    pub async fn rejoin(&mut self) -> Result<(), ClientError> {
        let http = self.http.clone().ok_or(ClientError::NoHttp)?;
        let left = leave_in_background(&http, self.joined.session);
        let ssrc = Some(self.joined.ssrc);
        let next = match Self::open(http.clone(), ssrc, None).await {
            // Still the old session's, on a relay that has not had its leave yet.
            Err(e) if http.opts.require_ssrc && is_ssrc_taken(&e) => match left.await {
                Ok(true) => Self::open(http, ssrc, None).await,
                _ => Err(e),
            },
            next => next,
        }?;
        *self = next;
        Ok(())
    }

    /// Takes the same session back with the resume credential of the last join's answer
    /// (`docs/api.md`, "Resume"), over a new socket or connection and new keys: for when
    /// the client lost its path. Where the relay still holds the session, nothing else
    /// changes (the room sees no BYE, the stream's numbering goes on); where it has
    /// forgotten it (it restarted), the relay opens a session with the same SSRC. On
    /// failure the client is unchanged and may try again, or [`rejoin`](Self::rejoin).
    pub async fn resume(&mut self) -> Result<(), ClientError> {
        let http = self.http.clone().ok_or(ClientError::NoHttp)?;
        let credential = self
            .resume
            .clone()
            .ok_or_else(|| ClientError::BadAnswer("no resume credential".into()))?;
        let mut next = Self::open_hedged(http, self.joined.ssrc, credential).await?;
        // The stream goes on: its numbering and clock, as if the path had never broken.
        next.seq = self.seq;
        next.ts_base = self.ts_base;
        next.epoch = self.epoch;
        next.fir_seq = self.fir_seq;
        next.room_seq = self.room_seq;
        // The same session keeps what it holds; a session opened afresh (the relay
        // restarted) holds nothing.
        if next.joined.session == self.joined.session {
            next.holds = std::mem::take(&mut self.holds);
        }
        *self = next;
        Ok(())
    }

    /// Posts a resume, and another beside those under way each time none has been
    /// answered for [`RESUME_HEDGE`] or one could not reach a relay, up to
    /// [`RESUME_ATTEMPTS`] in all; connects to the first answered, and leaves in the
    /// background a session another one opened after all. Only the request is hedged:
    /// setting up the transport (a WebRTC connection's ICE and DTLS) is not a sign of a
    /// dead node. A relay's refusal (an HTTP error status) ends the hedging, and is the
    /// answer unless a request still under way succeeds within [`RESUME_HEDGE`] (the
    /// refusal may be of the SSRC that request just took back); otherwise it fails when
    /// every attempt failed.
    async fn open_hedged(http: Http, ssrc: u32, credential: String) -> Result<Self, ClientError> {
        let mut attempts = tokio::task::JoinSet::new();
        let mut started = 0;
        let mut another = true;
        let mut last_error = None;
        let mut refused = None;
        let mut give_up = None;
        let posted = loop {
            if another && started < RESUME_ATTEMPTS {
                let (http, credential) = (http.clone(), credential.clone());
                attempts.spawn(async move {
                    Self::post_join(&http, Some(ssrc), Some(&credential)).await
                });
                started += 1;
            }
            tokio::select! {
                done = attempts.join_next() => match done {
                    Some(Ok(Ok(posted))) => break posted,
                    // A refusal is an answer: no more attempts, but one under way may yet
                    // succeed (the refusal may be of the SSRC it just took back).
                    Some(Ok(Err(e @ ClientError::Status { .. }))) => {
                        refused = Some(e);
                        started = RESUME_ATTEMPTS;
                        give_up = Some(tokio::time::Instant::now() + RESUME_HEDGE);
                    }
                    Some(Ok(Err(e))) => {
                        last_error = Some(e);
                        another = true;
                    }
                    Some(Err(e)) => {
                        last_error = Some(ClientError::Io(std::io::Error::other(e)));
                        another = true;
                    }
                    None => {
                        return Err(refused.or(last_error).unwrap_or_else(|| {
                            ClientError::BadAnswer("no resume attempt".into())
                        }));
                    }
                },
                () = tokio::time::sleep(RESUME_HEDGE), if started < RESUME_ATTEMPTS => {
                    tracing::debug!(started, "resume unanswered; another request beside it");
                    another = true;
                }
                () = tokio::time::sleep_until(give_up.unwrap_or_else(tokio::time::Instant::now)),
                    if give_up.is_some() =>
                {
                    leave_extras(attempts, http, None);
                    return Err(refused.unwrap_or_else(|| {
                        ClientError::BadAnswer("resume refused".into())
                    }));
                }
            }
        };
        let kept = posted.answer.session_id.clone();
        leave_extras(attempts, http.clone(), Some(kept));
        Self::connect(http, posted).await
    }

    /// The resume credential of the last join's answer, if the relay gave one.
    pub fn resume_credential(&self) -> Option<&str> {
        self.resume.as_deref()
    }

    /// [`resume`](Self::resume) when the client has a credential, else, or when the
    /// relay refuses it, [`rejoin`](Self::rejoin).
    async fn resume_or_rejoin(&mut self) -> Result<(), ClientError> {
        if self.resume.is_some() {
            match self.resume().await {
                Ok(()) => return Ok(()),
                Err(e) => tracing::debug!(error = %e, "resume refused; rejoining"),
            }
        }
        self.rejoin().await
    }

    /// Whether the relay ended the session: it sent an RTCP BYE from its own SSRC, as it
    /// does when the room's admin closes the room or removes this identity
    /// (`docs/backend.md`). Such a client is not rejoined by
    /// [`rejoin_if_silent`](Self::rejoin_if_silent): the backend meant it to go.
    pub fn ended_by_relay(&self) -> bool {
        self.ended_by_relay
    }

    /// When the client last heard from the relay: the latest packet that authenticated,
    /// or the (re)join when none came since.
    pub fn last_heard(&self) -> Instant {
        self.liveness.last_heard()
    }

    /// The silence after which the relay counts as gone: the one set
    /// ([`JoinOptions::silence`], [`set_silence`](Self::set_silence)), else
    /// [`DEFAULT_SILENCE`] or [`SILENCE_REPORT_GAPS`] times the longer of the last two gaps
    /// between the relay's reports, whichever is longer.
    pub fn silence(&self) -> Duration {
        self.liveness.threshold()
    }

    /// Sets the silence after which the relay counts as gone (`None`: automatic, see
    /// [`silence`](Self::silence)); rejoins keep it.
    pub fn set_silence(&mut self, silence: Option<Duration>) {
        self.liveness.set_silence(silence);
        if let Some(http) = &mut self.http {
            http.opts.silence = silence;
        }
    }

    /// Replaces the token that rejoins and [`leave`](Self::leave) present, e.g. when a
    /// rejoin failed with 401 because the first one expired.
    pub fn set_token(&mut self, token: &str) {
        if let Some(http) = &mut self.http {
            http.token = token.to_owned();
        }
    }

    /// Whether the relay seems gone at `now`: nothing came from it for
    /// [`silence`](Self::silence), or its link failed (port unreachable, QUIC or WebRTC
    /// connection closed; for the rest of the session). Packets are heard as
    /// [`recv`](Self::recv) and the other receiving methods read them, so a client that
    /// stops reading hears nothing.
    pub fn is_silent(&self, now: Instant) -> bool {
        self.liveness.is_silent(now)
    }

    /// When the relay is silent ([`is_silent`](Self::is_silent)), resumes the session
    /// ([`resume`](Self::resume); or, without a credential or when the relay refuses it,
    /// rejoins as [`rejoin`](Self::rejoin) does) and asks for the whole room (a FIR naming
    /// the relay, which also latches a UDP session's address); true if it came back.
    /// The app then starts its [`RoomState`] afresh and sends its own state again. A failed
    /// rejoin leaves the client as it was and returns the error; until the next attempt is
    /// due (0.25 s after the first failure, doubling to 8 s, randomised) this returns
    /// false.
    pub async fn rejoin_if_silent(&mut self) -> Result<bool, ClientError> {
        let now = Instant::now();
        if self.ended_by_relay || !self.liveness.is_silent(now) || !self.liveness.may_retry(now) {
            return Ok(false);
        }
        tracing::debug!(
            session = %gsrelay_core::relay::format_session_id(self.joined.session),
            silent = ?now.saturating_duration_since(self.liveness.last_heard()),
            "relay silent; rejoining"
        );
        if let Err(e) = self.resume_or_rejoin().await {
            self.liveness.retry_failed(Instant::now(), jitter());
            return Err(e);
        }
        // The client has rejoined whatever happens to the FIR: an error here would tell
        // the app otherwise. A lost FIR is the app's to repeat, as after a join.
        if let Err(e) = self.send_fir(self.joined.relay_ssrc).await {
            tracing::debug!(error = %e, "FIR after a rejoin not sent");
        }
        Ok(true)
    }

    /// Posts the join for `http`'s room and options, wanting `ssrc`, and connects to the
    /// session it answers.
    async fn open(
        http: Http,
        ssrc: Option<u32>,
        resume: Option<&str>,
    ) -> Result<Self, ClientError> {
        let posted = Self::post_join(&http, ssrc, resume).await?;
        Self::connect(http, posted).await
    }

    /// Posts the join for `http`'s room and options, wanting `ssrc`: the relay's answer,
    /// and the WebRTC peer whose offer it carried.
    async fn post_join(
        http: &Http,
        ssrc: Option<u32>,
        resume: Option<&str>,
    ) -> Result<Posted, ClientError> {
        let opts = &http.opts;
        let over_quic = opts.quic || opts.webtransport;
        let webrtc = match opts.webrtc && !over_quic {
            true => Some(WebRtcPeer::offer()?),
            false => None,
        };
        let body = JoinBody {
            transport: match (opts.webtransport, opts.quic, &webrtc) {
                (true, _, _) => "webtransport",
                (false, true, _) => "quic",
                (false, false, Some(_)) => "webrtc",
                (false, false, None) => "rtp",
            }
            .to_owned(),
            ssrc,
            require_ssrc: opts.require_ssrc,
            dialect: opts.dialect,
            interest: opts.interest.clone().unwrap_or_default(),
            srtp_profile: if over_quic || webrtc.is_some() {
                None
            } else if opts.plain_rtp {
                Some(PLAIN_RTP.to_owned())
            } else {
                opts.profile.map(|p| p.name().to_owned())
            },
            sdp_offer: webrtc.as_ref().map(WebRtcPeer::offer_sdp).transpose()?,
            resume: resume.map(str::to_owned),
            room_stream: opts.room_stream,
        };
        let url = format!("{}/v1/rooms/{}/sessions", http.base, http.room);
        let resp = (http.client)
            .send(Method::POST, &url, &http.token, Some(&body), HTTP_TIMEOUT)
            .await?;
        let answer: JoinAnswerBody = http::json(http::checked(resp).await?, HTTP_TIMEOUT).await?;
        Ok(Posted { answer, webrtc })
    }

    /// Connects to the session of a join's answer.
    async fn connect(http: Http, posted: Posted) -> Result<Self, ClientError> {
        let Posted { answer, webrtc } = posted;
        let credential = answer.resume.clone();
        let session = parse_session_id(&answer.session_id)
            .ok_or_else(|| ClientError::BadAnswer(format!("session_id {}", answer.session_id)))?;
        let joined = Joined {
            session,
            ssrc: answer.ssrc,
            relay_ssrc: answer.relay_ssrc,
            streams: answer.streams,
            room_ssrc: answer.room_ssrc,
        };
        let (link, transport) = match (webrtc, answer.transport) {
            (Some(mut peer), api::TransportAnswer::WebRtc(w)) => {
                let relay = resolve(&w.addr, "webrtc.addr").await?;
                let deadline = tokio::time::Instant::now() + WEBRTC_OPEN_TIMEOUT;
                peer.accept(relay, &w.sdp_answer, deadline).await?;
                (Some(Link::WebRtc(Box::new(peer))), None)
            }
            (Some(_), _) => return Err(ClientError::BadAnswer("no webrtc answer".into())),
            (None, api::TransportAnswer::Rtp(rtp)) => {
                let addr = resolve(&rtp.addr, "rtp.addr").await?;
                let srtp = rtp.srtp.map(srtp_keys);
                (None, Some(TransportAnswer::Rtp { addr, srtp }))
            }
            (None, api::TransportAnswer::Quic(q)) => {
                (None, Some(TransportAnswer::Quic(quic_answer(q).await?)))
            }
            (None, api::TransportAnswer::WebTransport(w)) => {
                let answer = webtransport_answer(w).await?;
                (None, Some(TransportAnswer::WebTransport(answer)))
            }
            (None, api::TransportAnswer::WebRtc(_)) => {
                return Err(ClientError::BadAnswer("webrtc answer to no offer".into()));
            }
        };
        let mut client = match (link, transport) {
            (Some(link), _) => Self::with_link(joined, http.opts.dialect, link)?,
            (None, Some(transport)) => {
                let answer = JoinAnswer {
                    joined,
                    generation: 0,
                    transport,
                };
                Self::from_answer(answer, http.opts.dialect).await?
            }
            (None, None) => return Err(ClientError::BadAnswer("no transport answer".into())),
        };
        client.liveness.set_silence(http.opts.silence);
        client.http = Some(http);
        client.resume = credential;
        Ok(client)
    }

    /// A client for a session joined some other way (e.g. through
    /// the server's `RelayHandle` in tests). It cannot
    /// [`leave`](Self::leave).
    pub async fn from_answer(answer: JoinAnswer, dialect: Dialect) -> Result<Self, ClientError> {
        let link = match answer.quic() {
            Some(q) => Link::Quic(Box::new(QuicLink::connect(q).await?)),
            None => udp_link(&answer).await?,
        };
        Self::with_link(answer.joined, dialect, link)
    }

    /// A client for a joined session reached over `link`.
    fn with_link(joined: Joined, dialect: Dialect, link: Link) -> Result<Self, ClientError> {
        let mut random = [0u8; 7];
        getrandom::fill(&mut random)
            .map_err(|e| ClientError::Io(std::io::Error::other(e.to_string())))?;
        let [s0, s1, t0, t1, t2, t3, f] = random;
        Ok(Self {
            joined,
            dialect,
            link,
            http: None,
            seq: u16::from_be_bytes([s0, s1]),
            fir_seq: f,
            ts_base: u32::from_be_bytes([t0, t1, t2, t3]),
            epoch: Instant::now(),
            out: Vec::with_capacity(1500),
            inbox: batch::Inbox::default(),
            rejected: 0,
            sender_reports: HashMap::new(),
            arrivals: None,
            liveness: Liveness::new(None, Instant::now()),
            ended_by_relay: false,
            resume: None,
            room_seq: u16::from_be_bytes([s1, s0]),
            holds: std::collections::HashSet::new(),
        })
    }

    /// The session id.
    pub fn session(&self) -> SessionId {
        self.joined.session
    }

    /// The SSRC this client publishes and signs its RTCP with.
    pub fn ssrc(&self) -> u32 {
        self.joined.ssrc
    }

    /// The relay's own SSRC (a FIR naming it asks for every stream).
    pub fn relay_ssrc(&self) -> u32 {
        self.joined.relay_ssrc
    }

    /// Streams that were in the room at join.
    pub fn streams(&self) -> &[u32] {
        &self.joined.streams
    }

    /// The dialect the client encodes and decodes with.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The local UDP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.link {
            Link::Udp { socket, .. } => socket.local_addr(),
            Link::Quic(q) => q.local_addr(),
            Link::WebRtc(w) => w.socket()?.local_addr(),
        }
    }

    /// Moves the session to a new local socket, as when the client's address changes.
    /// QUIC migrates its connection; over UDP the relay moves the session on the next
    /// packet it authenticates from the new address (send one, an RR will do). A WebRTC
    /// session cannot move this way (its ICE would have to restart).
    pub fn rebind(&mut self) -> Result<(), ClientError> {
        match &mut self.link {
            Link::Quic(q) => Ok(q.rebind()?),
            Link::Udp { socket, .. } => {
                let local = SocketAddr::new(socket.local_addr()?.ip(), 0);
                let fresh = std::net::UdpSocket::bind(local)?;
                fresh.connect(socket.peer_addr()?)?;
                fresh.set_nonblocking(true)?;
                *socket = UdpSocket::from_std(fresh)?;
                coalesce(socket);
                Ok(())
            }
            Link::WebRtc(_) => Err(ClientError::Io(std::io::Error::other(
                "a WebRTC session cannot change its address",
            ))),
        }
    }

    /// How the QUIC connection ended, if it has (`None` for UDP).
    pub fn quic_close_reason(&self) -> Option<quinn::ConnectionError> {
        match &self.link {
            Link::Quic(q) => q.close_reason(),
            Link::Udp { .. } | Link::WebRtc(_) => None,
        }
    }

    /// The relay address this session sends to (its shard's RTP address, or the QUIC
    /// endpoint's).
    pub fn relay_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.link {
            Link::Udp { socket, .. } => socket.peer_addr(),
            Link::Quic(q) => Ok(q.remote_address()),
            Link::WebRtc(w) => w.socket()?.peer_addr(),
        }
    }

    /// Asks the kernel for a receive buffer of `bytes` (capped by `net.core.rmem_max`):
    /// a snapshot of thousands of objects arrives as one burst of packets.
    pub fn set_recv_buffer(&self, bytes: usize) -> std::io::Result<()> {
        match &self.link {
            Link::Udp { socket, .. } => socket2::SockRef::from(socket).set_recv_buffer_size(bytes),
            Link::WebRtc(w) => socket2::SockRef::from(w.socket()?).set_recv_buffer_size(bytes),
            // The QUIC endpoint's socket is made with large buffers.
            Link::Quic(_) => Ok(()),
        }
    }

    /// The latest Sender Report the relay sent for `ssrc` (a forwarded stream, or
    /// `relay_ssrc` in aggregated delivery): its clock mapping and what it sent this
    /// session.
    pub fn sender_report(&self, ssrc: u32) -> Option<SenderInfo> {
        self.sender_reports.get(&ssrc).map(|(info, _)| *info)
    }

    /// Datagrams received that did not unprotect or parse, and were skipped.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Encodes `objects` in the session's dialect and sends them as one RTP packet.
    pub async fn send_objects(&mut self, objects: &[Object]) -> Result<(), ClientError> {
        let payload = wire::encode(objects, self.dialect)?;
        self.send_payload(&payload).await
    }

    /// Sends `payload` as one RTP packet: own SSRC, next sequence number, the 90 kHz
    /// timestamp of now, PT 96.
    pub async fn send_payload(&mut self, payload: &[u8]) -> Result<(), ClientError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.send_rtp(self.joined.ssrc, seq, payload).await
    }

    /// Sends `payload` as one RTP packet of stream `ssrc` numbered `seq`, with the 90 kHz
    /// timestamp of now and PT 96.
    async fn send_rtp(&mut self, ssrc: u32, seq: u16, payload: &[u8]) -> Result<(), ClientError> {
        let ticks = self.epoch.elapsed().as_micros() as u64 * CLOCK_RATE / 1_000_000;
        let header = RtpHeader {
            marker: false,
            payload_type: PAYLOAD_TYPE,
            sequence_number: seq,
            // RTP timestamps wrap: truncation is the arithmetic RFC 3550 wants.
            timestamp: self.ts_base.wrapping_add(ticks as u32),
            ssrc,
            csrcs: &[],
            extension: None,
        };
        self.out.clear();
        header.append_to(&mut self.out)?;
        self.out.extend_from_slice(payload);
        self.send_out(PacketClass::Rtp).await
    }

    /// Sends a FIR for `media_ssrc` (the relay's SSRC asks for every stream), with the
    /// next FIR command sequence number.
    pub async fn send_fir(&mut self, media_ssrc: u32) -> Result<(), ClientError> {
        self.fir_seq = self.fir_seq.wrapping_add(1);
        let entry = FirEntry {
            ssrc: media_ssrc,
            sequence_number: self.fir_seq,
        };
        self.out.clear();
        rtcp::write_fir(&mut self.out, self.joined.ssrc, &[entry])?;
        self.send_out(PacketClass::Rtcp).await
    }

    /// Sends a PLI for `media_ssrc`.
    pub async fn send_pli(&mut self, media_ssrc: u32) -> Result<(), ClientError> {
        self.out.clear();
        rtcp::write_pli(&mut self.out, self.joined.ssrc, media_ssrc)?;
        self.send_out(PacketClass::Rtcp).await
    }

    /// Sends a generic NACK for sequence numbers `lost` of `media_ssrc`.
    pub async fn send_nack(&mut self, media_ssrc: u32, lost: &[u16]) -> Result<(), ClientError> {
        self.out.clear();
        rtcp::write_nack(&mut self.out, self.joined.ssrc, media_ssrc, lost)?;
        self.send_out(PacketClass::Rtcp).await
    }

    /// Sends a receiver report: what a subscriber that publishes nothing sends first so
    /// the relay latches its address, and then to stay alive. It echoes each SR the relay
    /// sent (LSR, DLSR), so the relay learns the round trip; the client keeps no
    /// reception statistics, so loss and jitter read 0.
    pub async fn send_rr(&mut self) -> Result<(), ClientError> {
        self.out.clear();
        let now = Instant::now();
        let blocks: Vec<ReceptionReport> = self
            .sender_reports
            .iter()
            .take(31)
            .map(|(ssrc, (info, at))| ReceptionReport {
                ssrc: *ssrc,
                last_sender_report: ntp::compact(info.ntp_time),
                delay: ntp::compact_from_duration(now.saturating_duration_since(*at)),
                ..ReceptionReport::default()
            })
            .collect();
        rtcp::write_rr(&mut self.out, self.joined.ssrc, &blocks)?;
        self.send_out(PacketClass::Rtcp).await
    }

    /// Records the arrival of every RTP packet from now on, for
    /// [`send_congestion_feedback`](Self::send_congestion_feedback).
    pub fn enable_congestion_feedback(&mut self) {
        self.arrivals.get_or_insert_with(Default::default);
    }

    /// Sends RFC 8888 congestion control feedback on the packets received since the last
    /// call (the relay derives this session's send budget from it); false when there was
    /// nothing to report or feedback is not enabled.
    pub async fn send_congestion_feedback(&mut self) -> Result<bool, ClientError> {
        let Some(arrivals) = &mut self.arrivals else {
            return Ok(false);
        };
        let since_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let ntp_now = ntp::Wallclock::new(Instant::now(), since_unix).ntp(Instant::now());
        self.out.clear();
        if !arrivals.write(&mut self.out, self.joined.ssrc, Instant::now(), ntp_now)? {
            return Ok(false);
        }
        self.send_out(PacketClass::Rtcp).await?;
        Ok(true)
    }

    /// Sends a BYE for the client's own stream.
    pub async fn send_bye(&mut self) -> Result<(), ClientError> {
        self.out.clear();
        rtcp::write_bye(&mut self.out, &[self.joined.ssrc])?;
        self.send_out(PacketClass::Rtcp).await
    }

    /// Protects the packet in `self.out` in place and sends it.
    async fn send_out(&mut self, class: PacketClass) -> Result<(), ClientError> {
        match &mut self.link {
            Link::Udp { socket, srtp } => {
                if let Some(srtp) = srtp {
                    match class {
                        PacketClass::Rtcp => srtp.protect_rtcp(&mut self.out)?,
                        _ => srtp.protect_rtp(&mut self.out)?,
                    }
                }
                socket
                    .send(&self.out)
                    .await
                    .inspect_err(|e| note_refused(&mut self.liveness, e))?;
                Ok(())
            }
            Link::Quic(q) => q.send(&self.out).await,
            Link::WebRtc(w) => w.send(&self.out).await.inspect_err(|e| {
                if let ClientError::Io(io) = e {
                    note_refused(&mut self.liveness, io);
                }
            }),
        }
    }

    /// The next packet from the relay, or `None` when none arrives within `timeout`.
    /// Datagrams that fail to unprotect or parse are skipped and counted in
    /// [`rejected`](Self::rejected). The relay's periodic reports (compounds of SR, RR and
    /// SDES only) are consumed here: see [`sender_report`](Self::sender_report).
    pub async fn recv(&mut self, timeout: Duration) -> Result<Option<Received>, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let got = match &mut self.link {
                Link::Udp { socket, srtp } => {
                    let next = self.inbox.next(socket, deadline).await;
                    match next.inspect_err(|e| note_refused(&mut self.liveness, e))? {
                        Some(datagram) => open(srtp, datagram),
                        None => return Ok(None),
                    }
                }
                Link::Quic(q) => match tokio::time::timeout_at(deadline, q.recv()).await {
                    Ok(Some(packet)) => parse(classify(&packet), &packet),
                    Ok(None) => {
                        self.liveness.failed();
                        return Err(ClientError::Quic(format!(
                            "connection closed: {:?}",
                            q.close_reason()
                        )));
                    }
                    Err(_elapsed) => return Ok(None),
                },
                Link::WebRtc(w) => match w.recv(deadline).await {
                    Ok(Some(packet)) => parse(classify(&packet), &packet),
                    Ok(None) => return Ok(None),
                    Err(e) => {
                        if w.is_closed() {
                            self.liveness.failed();
                        }
                        if let ClientError::Io(io) = &e {
                            note_refused(&mut self.liveness, io);
                        }
                        return Err(e);
                    }
                },
            };
            let now = Instant::now();
            let report = matches!(&got, Ok(Received::Rtcp(items)) if is_report(items));
            if got.is_ok() {
                self.liveness.heard(now, report);
            }
            if let Ok(Received::Rtcp(items)) = &got {
                let relay = self.joined.relay_ssrc;
                self.ended_by_relay |= items
                    .iter()
                    .any(|i| matches!(i, RtcpItem::Bye { ssrcs } if ssrcs.contains(&relay)));
                self.note_ownership(items);
            }
            match got {
                Ok(Received::Rtcp(items)) if report => {
                    for item in items {
                        if let RtcpItem::SenderReport { ssrc, info, .. } = item {
                            self.sender_reports.insert(ssrc, (info, now));
                        }
                    }
                }
                Ok(received) => {
                    if let (Some(a), Received::Rtp { ssrc, seq, .. }) =
                        (&mut self.arrivals, &received)
                    {
                        a.record(*ssrc, *seq, now);
                    }
                    return Ok(Some(received));
                }
                Err(reason) => {
                    tracing::debug!(reason, "client skipped a datagram");
                    self.rejected += 1;
                }
            }
        }
    }

    /// The next RTP packet (RTCP is skipped), with its stream's SSRC and payload decoded
    /// in the session's dialect; `None` on timeout.
    pub async fn recv_objects(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<(u32, Vec<Object>)>, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.recv(left).await? {
                Some(Received::Rtp { ssrc, payload, .. }) => {
                    return Ok(Some((ssrc, wire::decode(&payload, self.dialect)?)));
                }
                Some(Received::Rtcp(_)) => continue,
                None => return Ok(None),
            }
        }
    }

    /// The updates of the next packet that carries any (objects, or senders leaving), in
    /// either delivery mode: an aggregated packet gives one update per sender. `None` on
    /// timeout. Apply them to a [`RoomState`] to keep every sender's latest state.
    pub async fn recv_updates(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<Vec<Update>>, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(received) = self.recv(left).await? else {
                return Ok(None);
            };
            let got = updates(&received, self.dialect)?;
            if !got.is_empty() {
                return Ok(Some(got));
            }
        }
    }

    /// Changes what the session receives (`docs/interest.md`) through the HTTP API; a
    /// rejoin keeps the new interest. Fails on a client made from a join answer (no HTTP).
    pub async fn set_interest(&mut self, interest: Interest) -> Result<(), ClientError> {
        let http = self.http.as_mut().ok_or(ClientError::NoHttp)?;
        put_interest(http, self.joined.session, &interest, HTTP_TIMEOUT).await?;
        http.opts.interest = Some(interest);
        Ok(())
    }

    /// Leaves the session (`DELETE /v1/sessions/{id}`); the relay sends the others a BYE.
    pub async fn leave(self) -> Result<(), ClientError> {
        let http = self.http.ok_or(ClientError::NoHttp)?;
        delete_session(&http, self.joined.session, HTTP_TIMEOUT).await
    }
}

/// Opens a UDP socket towards the relay, with the session's SRTP context.
async fn udp_link(answer: &JoinAnswer) -> Result<Link, ClientError> {
    let rtp_addr = answer
        .rtp_addr()
        .ok_or_else(|| ClientError::BadAnswer("no rtp address".into()))?;
    let srtp = match answer.srtp() {
        Some(keys) => {
            let client_key = KeyMaterial::from_base64(keys.profile, &keys.client_key)?;
            let relay_key = KeyMaterial::from_base64(keys.profile, &keys.relay_key)?;
            Some(Box::new(SrtpSession::for_client(
                keys.profile,
                &client_key,
                &relay_key,
            )?))
        }
        None => None,
    };
    let local: SocketAddr = if rtp_addr.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).await?;
    // Connected: only the relay's datagrams are received.
    socket.connect(rtp_addr).await?;
    coalesce(&socket);
    Ok(Link::Udp { socket, srtp })
}

/// Turns UDP GRO on: the relay sends a subscriber's aggregated packets of one deadline as
/// one GSO buffer, which then arrives in one read (cut apart by [`batch`]). A kernel
/// without it (before Linux 5.0) delivers them one by one, which works as well.
fn coalesce(socket: &UdpSocket) {
    if let Err(e) = gsrelay_net::udp::recv::enable_gro(socket) {
        tracing::debug!(error = %e, "UDP GRO not available");
    }
}

/// The SRTP keys of an RTP answer.
fn srtp_keys(s: SrtpBody) -> SrtpKeys {
    SrtpKeys {
        profile: s.profile,
        client_key: s.client_key,
        relay_key: s.relay_key,
    }
}

/// How to reach a session a QUIC answer describes.
async fn quic_answer(q: QuicBody) -> Result<QuicAnswer, ClientError> {
    Ok(QuicAnswer {
        addr: resolve(&q.addr, "quic.addr").await?,
        alpn: gsrelay_core::roq::ALPN,
        cert_sha256: q.cert_sha256,
        self_signed: true,
        flow_id: q.flow_id,
        session_token: q.session_token,
    })
}

/// The QUIC side of a WebTransport answer: the URL's authority (the path is always
/// the relay's `/webtransport`) and the pinned certificate, which the client needs (it
/// verifies no web PKI).
async fn webtransport_answer(w: WebTransportBody) -> Result<QuicAnswer, ClientError> {
    let bad = |what: &str| ClientError::BadAnswer(format!("webtransport.{what}"));
    let url = url::Url::parse(&w.url).map_err(|_| bad("url"))?;
    let authority = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => format!("{host}:443"),
        _ => return Err(bad("url")),
    };
    Ok(QuicAnswer {
        addr: resolve(&authority, "webtransport.url").await?,
        alpn: web_transport_quinn::ALPN,
        cert_sha256: w
            .cert_sha256
            .ok_or_else(|| bad("cert_sha256 (none to pin)"))?,
        self_signed: true,
        flow_id: w.flow_id,
        session_token: w.session_token,
    })
}

/// Notes a UDP socket error that says the relay's port is closed (an ICMP port
/// unreachable came back): the relay is gone.
fn note_refused(liveness: &mut Liveness, e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        liveness.failed();
    }
}

/// A factor in [0.5, 1.5) to spread retries; 1 if the system has no randomness to give.
fn jitter() -> f64 {
    let mut b = [0u8; 2];
    match getrandom::fill(&mut b) {
        Ok(()) => 0.5 + f64::from(u16::from_be_bytes(b)) / 65_536.0,
        Err(_) => 1.0,
    }
}

/// Resolves an address of a join answer.
async fn resolve(addr: &str, field: &str) -> Result<SocketAddr, ClientError> {
    tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| ClientError::BadAnswer(format!("{field} {addr}")))
}

/// How the client's packets travel.
#[derive(Debug)]
enum Link {
    /// UDP, with SRTP unless plain.
    Udp {
        socket: UdpSocket,
        /// Boxed: the keyed ciphers are far larger than the QUIC variant.
        srtp: Option<Box<SrtpSession>>,
    },
    /// RTP over QUIC.
    Quic(Box<QuicLink>),
    /// RTP over a WebRTC data channel (boxed: a peer connection is large).
    WebRtc(Box<WebRtcPeer>),
}

/// `PUT /v1/sessions/{id}/interest`, given at most `timeout`.
async fn put_interest(
    http: &Http,
    session: SessionId,
    interest: &Interest,
    timeout: Duration,
) -> Result<(), ClientError> {
    let id = gsrelay_core::relay::format_session_id(session);
    let url = format!("{}/v1/sessions/{id}/interest", http.base);
    let resp = (http.client)
        .send(Method::PUT, &url, &http.token, Some(interest), timeout)
        .await?;
    http::checked(resp).await?;
    Ok(())
}

/// Leaves in the background every session the resume requests still under way in
/// `attempts` open, but `kept` (the one the client took): another node took the same
/// resume, and its session would hold the SSRC.
fn leave_extras(
    mut attempts: tokio::task::JoinSet<Result<Posted, ClientError>>,
    http: Http,
    kept: Option<String>,
) {
    tokio::spawn(async move {
        while let Some(done) = attempts.join_next().await {
            let Ok(Ok(extra)) = done else {
                continue;
            };
            if Some(&extra.answer.session_id) != kept.as_ref()
                && let Some(session) = parse_session_id(&extra.answer.session_id)
            {
                let _ = delete_session(&http, session, REJOIN_LEAVE_TIMEOUT).await;
            }
        }
    });
}

/// Leaves `session` on a task of its own: the first try, given at most
/// [`REJOIN_LEAVE_TIMEOUT`], says whether the relay took the leave, for whoever cares to
/// wait; a try that failed is made again in the background ([`REJOIN_LEAVE_PERSIST`]).
fn leave_in_background(http: &Http, session: SessionId) -> tokio::sync::oneshot::Receiver<bool> {
    let http = http.clone();
    let (first, answer) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + REJOIN_LEAVE_PERSIST;
        let mut first = Some(first);
        let mut wait = REJOIN_LEAVE_RETRY;
        loop {
            let leave = delete_session(&http, session, REJOIN_LEAVE_TIMEOUT);
            let outcome = tokio::time::timeout(REJOIN_LEAVE_TIMEOUT, leave).await;
            let done = match &outcome {
                Ok(Ok(())) => true,
                // Gone already, or this token may no longer leave it: nothing to retry.
                Ok(Err(ClientError::Status { status, .. })) => {
                    matches!(status, 401 | 403 | 404 | 410)
                }
                Ok(Err(_)) | Err(_) => false,
            };
            if let Some(first) = first.take() {
                let _ = first.send(matches!(outcome, Ok(Ok(()))));
            }
            if done || tokio::time::Instant::now() + wait >= deadline {
                if !done {
                    tracing::debug!("the old session's leave was never taken");
                }
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    });
    answer
}

/// Whether a join was refused because the SSRC it required is taken (409 `ssrc_taken`).
fn is_ssrc_taken(e: &ClientError) -> bool {
    matches!(e, ClientError::Status { status: 409, body } if body.contains("\"ssrc_taken\""))
}

/// `DELETE /v1/sessions/{id}`, given at most `timeout`.
async fn delete_session(
    http: &Http,
    session: SessionId,
    timeout: Duration,
) -> Result<(), ClientError> {
    let id = gsrelay_core::relay::format_session_id(session);
    let url = format!("{}/v1/sessions/{id}", http.base);
    let resp = (http.client)
        .send(Method::DELETE, &url, &http.token, None::<&()>, timeout)
        .await?;
    http::checked(resp).await?;
    Ok(())
}

/// Unprotects (in place) and parses one datagram from the relay.
/// Whether a compound holds only periodic reports (SR, RR, SDES).
fn is_report(items: &[RtcpItem]) -> bool {
    items.iter().all(|i| {
        matches!(
            i,
            RtcpItem::SenderReport { .. } | RtcpItem::ReceiverReport { .. } | RtcpItem::Sdes { .. }
        )
    })
}

fn open(
    srtp: &mut Option<Box<SrtpSession>>,
    datagram: &mut [u8],
) -> Result<Received, &'static str> {
    let class = classify(datagram);
    let plain_len = match srtp {
        Some(s) => match class {
            PacketClass::Rtp => s.unprotect_rtp(datagram),
            PacketClass::Rtcp => s.unprotect_rtcp(datagram),
            PacketClass::Other => return Err("not_rtp"),
        }
        .map_err(|e| e.reason())?,
        None => datagram.len(),
    };
    parse(class, datagram.get(..plain_len).unwrap_or_default())
}

/// Parses one plaintext packet from the relay.
fn parse(class: PacketClass, plain: &[u8]) -> Result<Received, &'static str> {
    match class {
        PacketClass::Rtp => {
            let p = RtpPacket::parse(plain).map_err(|e: RtpError| e.reason())?;
            Ok(Received::Rtp {
                ssrc: p.ssrc(),
                seq: p.sequence_number(),
                ts: p.timestamp(),
                payload: p.payload().to_vec(),
            })
        }
        PacketClass::Rtcp => Ok(Received::Rtcp(
            parse_compound(plain).map_err(|e: RtcpError| e.reason())?,
        )),
        PacketClass::Other => Err("not_rtp"),
    }
}
