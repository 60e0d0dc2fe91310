//! Control operations sent to the relay task, which owns the core: the HTTP layer never
//! touches relay state directly, so the core keeps a single owner and needs no lock.

use super::link::Peer;
use super::mirror::MirrorView;
use super::replay::{ReplayOp, ReplaySpec, ReplayStatus};
use super::ring::Tap;
use gsrelay_core::relay::{ControlError, Interest, JoinRequest, RoomCounts, RoomInfo, SessionId};
use gsrelay_core::rtp::SrtpProfile;
use gsrelay_record::PlayError;
use std::net::IpAddr;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub use gsrelay_core::join::{JoinAnswer, QuicAnswer, SrtpKeys, TransportAnswer, WebRtcAnswer};

/// A WebRTC join's offer (WHIP-style signalling, `docs/transports.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebRtcOffer {
    /// The client's SDP offer.
    pub sdp: String,
    /// The address the client reached the API on, for the relay's ICE candidate when the
    /// relay is bound to the unspecified address with no advertised one.
    pub host: Option<IpAddr>,
}

/// Which transport a join asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportRequest {
    /// RTP/RTCP over UDP with this SRTP profile; `None` asks for plain RTP (refused
    /// unless the relay runs with `--insecure-plain-rtp`).
    Rtp(Option<SrtpProfile>),
    /// RTP over QUIC (RoQ); refused when the relay runs no QUIC transport.
    Quic,
    /// WebRTC data channels answering this offer; refused when the relay runs no WebRTC
    /// transport.
    WebRtc(Box<WebRtcOffer>),
    /// WebTransport (RoQ framing over HTTP/3) on the QUIC endpoint; refused likewise.
    WebTransport,
}

/// The room and identity of a session, for authorizing operations on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOwner {
    /// Room name.
    pub room: String,
    /// Identity of the token that joined it.
    pub identity: String,
}

/// A join as the control plane asks it.
#[derive(Debug, Clone)]
pub struct JoinCommand {
    /// The core's join request.
    pub request: JoinRequest,
    /// The new session's resume generation: 0, or one more than the credential's of a
    /// session the relay no longer had.
    pub generation: u32,
    /// The transport, and over UDP the protection, it asks for.
    pub transport: TransportRequest,
    /// The participant's metadata (JSON) as the room service holds it at the join, for
    /// the room's recordings.
    pub metadata: Option<String>,
}

/// Why a command could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The core refused.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Plain RTP asked for, but the relay requires SRTP.
    #[error("plain RTP is disabled; ask for an SRTP profile")]
    PlainRtpDisabled,
    /// QUIC asked for, but the relay runs no QUIC transport.
    #[error("the QUIC transport is not enabled on this relay")]
    QuicDisabled,
    /// WebRTC asked for, but the relay runs no WebRTC transport.
    #[error("the WebRTC transport is not enabled on this relay")]
    WebRtcDisabled,
    /// The WebRTC offer cannot be answered.
    #[error(transparent)]
    WebRtcOffer(#[from] super::offer::OfferError),
    /// The relay task has stopped.
    #[error("the relay is not running")]
    Stopped,
    /// A resume credential of an older generation than the session's (already used), or
    /// whose SSRC another session holds now.
    #[error("this resume credential has been used already")]
    ResumeStale,
    /// The room directory (Redis) cannot be reached: a join cannot be placed now.
    #[error("the room directory is unavailable: {0}")]
    DirectoryUnavailable(String),
    /// The room has no session on this shard.
    #[error("room {0:?} has no session here")]
    NotHere(String),
    /// A replay into a room that has sessions.
    #[error("room {0:?} is live: a replay plays into a room of its own")]
    RoomLive(String),
    /// The replay cannot play as asked (a speed out of range, a start past the end).
    #[error("{0}")]
    Replay(String),
    /// The room is mirrored already.
    #[error("room {0:?} is mirrored already")]
    Mirrored(String),
    /// A join that may publish, into a room a replay or a mirror plays.
    #[error("room {0:?} is played by the relay (a replay or a mirror): join it to watch only")]
    ReadOnly(String),
    /// The room is being recorded already.
    #[error("room {0:?} is being recorded already")]
    Recording(String),
    /// A defect in the relay while carrying out the command (counted and logged; the
    /// room concerned was dropped).
    #[error("internal error in the relay; the room concerned was closed")]
    Internal,
}

/// One operation for the relay task, with the channel its answer goes back on.
#[derive(Debug)]
pub enum Command {
    /// Join a session, after linking its room to the replicas listed (the other shards,
    /// of this node or others, the room is on).
    Join(
        JoinCommand,
        Vec<Peer>,
        oneshot::Sender<Result<JoinAnswer, CommandError>>,
    ),
    /// Link a room this shard holds to the replicas listed, where it has no link yet.
    Link(String, Vec<Peer>, oneshot::Sender<()>),
    /// Give a session of resume generation and SSRC `.1` a new transport (`.2`), its old
    /// one forgotten: the session, its SSRC and its numbering go on.
    Reattach(
        SessionId,
        (u32, u32),
        TransportRequest,
        oneshot::Sender<Result<JoinAnswer, CommandError>>,
    ),
    /// Remove a session (BYE to the others).
    Leave(SessionId, oneshot::Sender<Result<(), CommandError>>),
    /// Replace a session's interest.
    SetInterest(
        SessionId,
        Interest,
        oneshot::Sender<Result<(), CommandError>>,
    ),
    /// Who owns a session and where it is, if it exists.
    SessionOwner(SessionId, oneshot::Sender<Option<SessionOwner>>),
    /// A room's sessions and streams.
    RoomInfo(String, oneshot::Sender<Option<RoomInfo>>),
    /// Every room's size.
    Rooms(oneshot::Sender<Vec<RoomCounts>>),
    /// End the sessions of a room, of one identity only when given, by the relay's will
    /// (BYE); answers how many.
    Evict(String, Option<String>, oneshot::Sender<usize>),
    /// Mute (or unmute) an identity in a room; answers how many sessions it has here.
    Mute(String, String, bool, oneshot::Sender<usize>),
    /// Refuse new joins; answers with the number of sessions still joined.
    Drain(oneshot::Sender<usize>),
    /// Record a room this shard holds a session of into the ring's tap, with a
    /// checkpoint at once and then every so often.
    Record(
        String,
        Tap,
        Duration,
        oneshot::Sender<Result<(), CommandError>>,
    ),
    /// Stop recording a room for a reason; answers how many recordings stopped.
    StopRecording(String, String, oneshot::Sender<usize>),
    /// Play a recording into a room that has no session here.
    Replay(
        String,
        Box<ReplaySpec>,
        oneshot::Sender<Result<ReplayStatus, CommandError>>,
    ),
    /// Seek, change the speed of, pause or resume the replay of a room; `None` when no
    /// replay of it plays here.
    ReplayControl(
        String,
        ReplayOp,
        oneshot::Sender<Option<Result<ReplayStatus, PlayError>>>,
    ),
    /// Every replay here.
    Replays(oneshot::Sender<Vec<ReplayStatus>>),
    /// Stop the replay of a room; answers whether one played here.
    StopReplay(String, oneshot::Sender<bool>),
    /// Mirror a room this shard holds a session of into another, with a delay.
    Mirror(
        String,
        String,
        Duration,
        oneshot::Sender<Result<MirrorView, CommandError>>,
    ),
    /// Every mirror here.
    Mirrors(oneshot::Sender<Vec<MirrorView>>),
    /// Stop the mirror of a source room; answers whether it had one here.
    StopMirror(String, oneshot::Sender<bool>),
}

/// A cloneable handle on the relay task.
#[derive(Debug, Clone)]
pub struct RelayHandle {
    tx: mpsc::Sender<Command>,
}

impl RelayHandle {
    /// A handle and the receiving end the relay task reads.
    pub fn channel(depth: usize) -> (Self, mpsc::Receiver<Command>) {
        let (tx, rx) = mpsc::channel(depth);
        (Self { tx }, rx)
    }

    /// Whether the relay task has stopped (its end of the channel is gone).
    pub fn is_stopped(&self) -> bool {
        self.tx.is_closed()
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, CommandError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| CommandError::Stopped)?;
        answer.await.map_err(|_| CommandError::Stopped)
    }

    /// Joins a session.
    pub async fn join(&self, cmd: JoinCommand) -> Result<JoinAnswer, CommandError> {
        self.join_linked(cmd, Vec::new()).await
    }

    /// Joins a session to a room that is also on the replicas `peers`: the shard links
    /// the room to each first.
    pub async fn join_linked(
        &self,
        cmd: JoinCommand,
        peers: Vec<Peer>,
    ) -> Result<JoinAnswer, CommandError> {
        self.call(|r| Command::Join(cmd, peers, r)).await?
    }

    /// Links `room` to the replicas `peers` where this shard has no link of it yet.
    pub async fn link(&self, room: String, peers: Vec<Peer>) -> Result<(), CommandError> {
        self.call(|r| Command::Link(room, peers, r)).await
    }

    /// Gives session `id`, of resume generation `generation` and SSRC `ssrc`, the new
    /// transport asked for.
    pub async fn reattach(
        &self,
        id: SessionId,
        (generation, ssrc): (u32, u32),
        transport: TransportRequest,
    ) -> Result<JoinAnswer, CommandError> {
        self.call(|r| Command::Reattach(id, (generation, ssrc), transport, r))
            .await?
    }

    /// Removes a session.
    pub async fn leave(&self, id: SessionId) -> Result<(), CommandError> {
        self.call(|r| Command::Leave(id, r)).await?
    }

    /// Replaces a session's interest.
    pub async fn set_interest(
        &self,
        id: SessionId,
        interest: Interest,
    ) -> Result<(), CommandError> {
        self.call(|r| Command::SetInterest(id, interest, r)).await?
    }

    /// Who owns a session and where it is.
    pub async fn session_owner(&self, id: SessionId) -> Result<Option<SessionOwner>, CommandError> {
        self.call(|r| Command::SessionOwner(id, r)).await
    }

    /// A room's sessions and streams.
    pub async fn room_info(&self, room: String) -> Result<Option<RoomInfo>, CommandError> {
        self.call(|r| Command::RoomInfo(room, r)).await
    }

    /// Ends the sessions of `room` (of `identity` only, when given) by the relay's will;
    /// how many there were on this shard.
    pub async fn evict(
        &self,
        room: String,
        identity: Option<String>,
    ) -> Result<usize, CommandError> {
        self.call(|r| Command::Evict(room, identity, r)).await
    }

    /// Mutes or unmutes `identity` in `room`; how many of its sessions are on this shard.
    pub async fn mute(
        &self,
        room: String,
        identity: String,
        muted: bool,
    ) -> Result<usize, CommandError> {
        self.call(|r| Command::Mute(room, identity, muted, r)).await
    }

    /// Every room's size on this shard.
    pub async fn rooms(&self) -> Result<Vec<RoomCounts>, CommandError> {
        self.call(Command::Rooms).await
    }

    /// Records `room` into `tap`, a checkpoint every `every`.
    pub async fn record(
        &self,
        room: String,
        tap: Tap,
        every: Duration,
    ) -> Result<(), CommandError> {
        self.call(|r| Command::Record(room, tap, every, r)).await?
    }

    /// Stops recording `room` for `reason`; how many recordings stopped.
    pub async fn stop_recording(
        &self,
        room: String,
        reason: String,
    ) -> Result<usize, CommandError> {
        self.call(|r| Command::StopRecording(room, reason, r)).await
    }

    /// Plays a recording into `room`.
    pub async fn replay(
        &self,
        room: String,
        spec: ReplaySpec,
    ) -> Result<ReplayStatus, CommandError> {
        self.call(|r| Command::Replay(room, Box::new(spec), r))
            .await?
    }

    /// Carries out `op` on the replay of `room`, if one plays here.
    pub async fn replay_control(
        &self,
        room: String,
        op: ReplayOp,
    ) -> Result<Option<Result<ReplayStatus, PlayError>>, CommandError> {
        self.call(|r| Command::ReplayControl(room, op, r)).await
    }

    /// Every replay here.
    pub async fn replays(&self) -> Result<Vec<ReplayStatus>, CommandError> {
        self.call(Command::Replays).await
    }

    /// Stops the replay of `room`; whether one played here.
    pub async fn stop_replay(&self, room: String) -> Result<bool, CommandError> {
        self.call(|r| Command::StopReplay(room, r)).await
    }

    /// Mirrors `source` into `mirror`, `delay` late.
    pub async fn mirror(
        &self,
        source: String,
        mirror: String,
        delay: Duration,
    ) -> Result<MirrorView, CommandError> {
        self.call(|r| Command::Mirror(source, mirror, delay, r))
            .await?
    }

    /// Every mirror here.
    pub async fn mirrors(&self) -> Result<Vec<MirrorView>, CommandError> {
        self.call(Command::Mirrors).await
    }

    /// Stops the mirror of `source`; whether it had one here.
    pub async fn stop_mirror(&self, source: String) -> Result<bool, CommandError> {
        self.call(|r| Command::StopMirror(source, r)).await
    }

    /// Starts draining; returns the sessions still joined.
    pub async fn drain(&self) -> Result<usize, CommandError> {
        self.call(Command::Drain).await
    }
}
