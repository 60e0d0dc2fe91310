//! A shard: one tokio task that owns a [`Relay`] core and hosts the transports' ports
//! (UDP+SRTP always, QUIC and WebRTC when given), built and run here for every transport.
//!
//! The task waits on every input at once (control [`Command`]s, the core's next timeout,
//! each port's next input and timer). A port's input starts a batch: the port reads up
//! to `super::port::RECV_BATCH` inputs into the core (`Port::receive`), then the
//! shard drains the core's output, hands each packet to the port of its session
//! (`Port::queue`), sends (`Port::send_queued`), forgets the sessions the core
//! removed, and records each packet's latency from the batch's arrival to the end of its
//! sends. After each input the task exports the core's statistics ([`StatsExporter`]).
//!
//! The core has exactly one owner, so it needs no lock, and every call into it is made
//! from this module: the ports reach it through `Core`, which `Inner` implements. The
//! relay runs one shard per thread ([`start`]), rooms placed on shards by the control
//! plane (`crate::cluster::shards`); the shard reports its sessions' joins and ends as
//! [`super::events::ShardEvent`]s and never calls the directory.

use super::activity::{Activity, Gone, Observer};
use super::command::{
    Command, CommandError, JoinAnswer, JoinCommand, RelayHandle, SessionOwner, SrtpKeys,
    TransportAnswer, TransportRequest, WebRtcAnswer,
};
use super::events::EventSink;
use super::guard::guarded;
use super::link::{LinkEnd, LinkPort, Peer};
use super::mirror::{MirrorPort, MirrorView};
use super::port::{Core, Port};
use super::quic::{self, QuicPort, QuicShard};
use super::recorder::RecorderPort;
use super::replay::{ReplayPort, ReplaySpec, ReplayStatus};
use super::ring::{self, Tap};
use super::udp::{self, UdpConfig, UdpPort};
use super::webrtc::{self, WebRtcPort, WebRtcShard};
use crate::metrics::Metrics;
use crate::metrics::export::StatsExporter;
use anyhow::Context;
use gsrelay_core::relay::{
    ControlError, Event, Input, JoinRequest, Relay, Reply, SessionId, Transmit,
};
use gsrelay_core::rtp::PacketClass;
use gsrelay_record as record;
use prometheus::IntGauge;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Commands that may wait in the channel before senders block.
const COMMAND_DEPTH: usize = 256;

/// Name prefix of the shard threads (`gsr-shard-0`, …): per-shard CPU is read by it.
pub const SHARD_THREADS: &str = "gsr-shard-";

/// Which port carries a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Udp,
    Quic,
    WebRtc,
    /// A link to another shard's replica of the room.
    Link,
    /// A recorder of the room.
    Recorder,
    /// A replay playing a recording into the room.
    Replay,
    /// A mirror playing another room into the room, delayed.
    Mirror,
}

impl Carrier {
    /// Whether its sessions are the room's participants (not links nor recorders).
    fn is_participant(self) -> bool {
        !matches!(
            self,
            Self::Link | Self::Recorder | Self::Replay | Self::Mirror
        )
    }
}

/// A joined session, as the shard keeps it.
struct Joined {
    room: Arc<str>,
    /// Its identity (a link's: its peer; a recorder's: a fixed name).
    identity: Arc<str>,
    /// A participant's metadata (JSON) as the room service held it at its join.
    metadata: Option<Arc<str>>,
    carrier: Carrier,
    /// How many times it was resumed ([`Command::Reattach`]); only a credential of this
    /// generation resumes it.
    generation: u32,
}

/// The core and what the shard keeps beside it: what the ports reach through [`Core`].
struct Inner {
    relay: Relay,
    metrics: Metrics,
    /// Exports the core's statistics after each input.
    exporter: StatsExporter,
    sessions: HashMap<SessionId, Joined>,
    /// Sessions of each room other than links.
    hosted: HashMap<Arc<str>, usize>,
    /// `gsrelay_shard_sessions` of this shard: the sessions of all of `hosted`.
    hosted_gauge: IntGauge,
    /// Rooms whose last session other than links went: their links close at the next
    /// flush.
    emptied: Vec<Arc<str>>,
    /// Rooms whose sessions all went while the core still holds their room objects,
    /// with the last session: its end is reported to the directory only when the core
    /// lets the room go or another session joins it, so that joins keep landing where
    /// the room objects are.
    lingering: HashMap<Arc<str>, SessionId>,
    /// Where the shard reports its sessions' joins and ends, in a sharded relay.
    events: Option<EventSink>,
    /// Who follows the rooms' activity (the room service).
    observer: Option<Arc<dyn Observer>>,
    /// The last session left: the core gives back what its tables and buffers grew to
    /// once nothing is queued or open ([`Shard::release_if_idle`]).
    went_idle: bool,
    /// Rooms recorded here, with how many recordings each.
    recorded: HashMap<Arc<str>, usize>,
    /// Events of recorded rooms, for their recordings at the next flush.
    record_events: Vec<(Arc<str>, gsrelay_record::Event)>,
}

/// The shard's ports.
struct Ports {
    udp: UdpPort,
    quic: Option<QuicPort>,
    webrtc: Option<WebRtcPort>,
    link: Option<LinkPort>,
    recorder: RecorderPort,
    replay: ReplayPort,
    mirror: MirrorPort,
}

/// Everything the relay task owns.
struct Shard {
    inner: Inner,
    ports: Ports,
}

/// A running shard.
pub struct ShardTask {
    /// Handle for the control plane.
    pub handle: RelayHandle,
    /// The bound UDP address.
    pub local_addr: SocketAddr,
    /// The relay task; it ends when every handle is dropped.
    pub task: JoinHandle<()>,
}

/// Binds the UDP socket and spawns a shard that owns `relay`, UDP only, reporting to no
/// one.
pub async fn spawn(udp: UdpConfig, relay: Relay, metrics: Metrics) -> io::Result<ShardTask> {
    let setup = ShardSetup {
        shard: 0,
        udp,
        quic: None,
        webrtc: None,
        link: None,
        events: None,
        observer: None,
    };
    spawn_with(setup, relay, metrics).await
}

/// Binds the UDP socket and spawns a shard that owns `relay` in the calling runtime,
/// with the ports and the event sink `setup` gives.
pub async fn spawn_with(
    setup: ShardSetup,
    mut relay: Relay,
    metrics: Metrics,
) -> io::Result<ShardTask> {
    let udp = UdpPort::bind(&setup.udp, relay.config().max_packet_bytes, &metrics).await?;
    // The UDP port protects the core's packets where the core wrote them.
    relay.reserve_trailer(udp::trailer_room());
    let local_addr = udp.local_addr()?;
    // The core's NTP time (RTCP reports) from one reading of both clocks.
    let since_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let _ = relay.handle_input(Instant::now(), Input::SetWallclock { since_unix });
    let link = setup.link.map(|end| LinkPort::new(end, &metrics));
    let hosted_gauge = metrics
        .shard_sessions
        .with_label_values(&[&setup.shard.to_string()]);
    let shard = Shard {
        inner: Inner {
            relay,
            exporter: StatsExporter::new(&metrics),
            metrics,
            sessions: HashMap::new(),
            hosted: HashMap::new(),
            hosted_gauge,
            emptied: Vec::new(),
            lingering: HashMap::new(),
            events: setup.events,
            observer: setup.observer,
            went_idle: false,
            recorded: HashMap::new(),
            record_events: Vec::new(),
        },
        ports: Ports {
            udp,
            quic: setup.quic.map(|q| q.port),
            webrtc: setup.webrtc.map(WebRtcShard::start),
            link,
            recorder: RecorderPort::new(),
            replay: ReplayPort::new(),
            mirror: MirrorPort::new(),
        },
    };
    let (handle, commands) = RelayHandle::channel(COMMAND_DEPTH);
    let task = tokio::spawn(shard.run(commands));
    Ok(ShardTask {
        handle,
        local_addr,
        task,
    })
}

/// A shard running on its own thread.
pub struct ShardThread {
    /// Its control handle.
    pub handle: RelayHandle,
    /// Where its UDP socket is bound.
    pub addr: SocketAddr,
    /// The thread; it ends once every handle on the shard is dropped.
    pub thread: std::thread::JoinHandle<()>,
}

/// What a shard is started with: its ports (a share of the QUIC endpoint and of the
/// WebRTC port, when given) and where it reports its sessions' joins and ends.
pub struct ShardSetup {
    /// Its index among the relay's shards.
    pub shard: usize,
    /// Its UDP port.
    pub udp: UdpConfig,
    /// Its share of the QUIC endpoint.
    pub quic: Option<QuicShard>,
    /// Its share of the WebRTC port.
    pub webrtc: Option<WebRtcShard>,
    /// Its end of the links between the relay's shards.
    pub link: Option<LinkEnd>,
    /// Where it reports its sessions' joins and ends.
    pub events: Option<EventSink>,
    /// Who follows the rooms' activity.
    pub observer: Option<Arc<dyn Observer>>,
}

/// Starts shard `k` on its own thread with a single-threaded runtime: its core, its
/// sockets and its sessions never leave that thread, and its CPU time is that thread's.
pub async fn start(
    k: usize,
    setup: ShardSetup,
    relay: Relay,
    metrics: &Metrics,
) -> anyhow::Result<ShardThread> {
    let metrics = metrics.clone();
    let (ready, started) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name(format!("{SHARD_THREADS}{k}"))
        .spawn(move || run_thread(setup, relay, metrics, ready))
        .context("spawning the shard thread")?;
    let (handle, addr) = started.await.context("the shard thread ended at start")??;
    Ok(ShardThread {
        handle,
        addr,
        thread,
    })
}

/// The body of a shard thread: binds, reports the handle, then runs the relay task until
/// every handle is dropped.
fn run_thread(
    setup: ShardSetup,
    relay: Relay,
    metrics: Metrics,
    ready: oneshot::Sender<anyhow::Result<(RelayHandle, SocketAddr)>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e.into()));
            return;
        }
    };
    rt.block_on(async move {
        match spawn_with(setup, relay, metrics).await {
            Ok(t) => {
                let _ = ready.send(Ok((t.handle, t.local_addr)));
                if let Err(e) = t.task.await {
                    tracing::error!(error = %e, "relay shard stopped");
                }
            }
            Err(e) => {
                let _ = ready.send(Err(e.into()));
            }
        }
    });
}

impl Shard {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        tracing::info!(addr = %self.ports.udp.rtp_addr, "relay task running");
        loop {
            let deadline = self.inner.relay.poll_timeout();
            let webrtc_deadline = self.ports.webrtc.as_ref().and_then(Port::next_timeout);
            let link_deadline = self.ports.link.as_ref().and_then(Port::next_timeout);
            let recorder_deadline = self.ports.recorder.next_timeout();
            let replay_deadline = self.ports.replay.next_timeout();
            let mirror_deadline = self.ports.mirror.next_timeout();
            let Ports {
                udp,
                quic,
                webrtc,
                link,
                replay,
                ..
            } = &mut self.ports;
            // Biased, commands first: a join or an interest change waits behind at most
            // one input batch, however saturated the sockets; timers before the sockets
            // so pacing and deadlines are not starved by input.
            tokio::select! {
                biased;
                cmd = commands.recv() => match cmd {
                    Some(cmd) => self.command(cmd).await,
                    None => break,
                },
                () = sleep_until(deadline) => self.timeout().await,
                ready = udp.next() => self.batch(|p| Some(&mut p.udp), ready).await,
                event = next_of(quic) => self.batch(|p| p.quic.as_mut(), event).await,
                got = next_of(webrtc) => self.batch(|p| p.webrtc.as_mut(), got).await,
                frame = next_of(link) => self.batch(|p| p.link.as_mut(), frame).await,
                loaded = replay.next() => self.batch(|p| Some(&mut p.replay), loaded).await,
                () = sleep_until(webrtc_deadline) => self.port_timeout(|p| p.webrtc.as_mut()).await,
                () = sleep_until(link_deadline) => self.port_timeout(|p| p.link.as_mut()).await,
                () = sleep_until(recorder_deadline) => self.port_timeout(|p| Some(&mut p.recorder)).await,
                () = sleep_until(replay_deadline) => self.port_timeout(|p| Some(&mut p.replay)).await,
                () = sleep_until(mirror_deadline) => self.port_timeout(|p| Some(&mut p.mirror)).await,
            }
            self.inner.exporter.export(&mut self.inner.relay);
        }
        tracing::info!("relay task stopped: every relay handle dropped");
    }

    /// One batch of a port's inputs, from `first`: handled, answered, and timed.
    async fn batch<P: Port>(&mut self, pick: fn(&mut Ports) -> Option<&mut P>, first: P::Input) {
        let now = Instant::now();
        if let Some(port) = pick(&mut self.ports) {
            port.receive(now, first, &mut self.inner);
        }
        self.end_batch(now).await;
        let latency = now.elapsed().as_secs_f64();
        if let Some(port) = pick(&mut self.ports) {
            port.observe_latency(latency);
        }
    }

    /// Runs a port's timers that are due, then sends what they produced.
    async fn port_timeout<P: Port>(&mut self, pick: fn(&mut Ports) -> Option<&mut P>) {
        let now = Instant::now();
        if let Some(port) = pick(&mut self.ports) {
            port.handle_timeout(now, &mut self.inner);
        }
        self.end_batch(now).await;
    }

    /// After a batch of inputs: sends the aggregated packets the batch completed
    /// (`max_delay_ms: 0`), everything queued, and forgets sessions the core removed.
    async fn end_batch(&mut self, now: Instant) {
        self.inner.input("aggregate", now, Input::BatchEnd);
        self.flush().await;
        self.forget_closed(Gone::Timeout);
    }

    /// Sends everything the core has queued, each packet by its session's port.
    async fn flush(&mut self) {
        let now = Instant::now();
        // Before a recording of a room that just emptied ends with it.
        for (room, event) in self.inner.record_events.drain(..) {
            self.ports.recorder.event(now, &room, &event);
        }
        self.close_emptied(now);
        let Self { inner, ports } = self;
        while let Some(t) = inner.relay.poll_transmit() {
            let carrier = inner.sessions.get(&t.session).map(|s| s.carrier);
            ports.queue(now, carrier, &t, &mut inner.exporter);
        }
        let (transmitted, stats) = (inner.relay.transmitted(), &mut inner.exporter);
        ports.udp.send_queued(transmitted, stats).await;
        if let Some(port) = &mut ports.quic {
            port.send_queued(transmitted, stats).await;
        }
        if let Some(port) = &mut ports.webrtc {
            port.send_queued(transmitted, stats).await;
        }
        if let Some(port) = &mut ports.link {
            port.send_queued(transmitted, stats).await;
        }
        ports.recorder.send_queued(transmitted, stats).await;
        self.release_if_idle();
    }

    /// Once the last session has left and the core has sent what it queued: the core
    /// gives back the capacity its tables and buffers grew to under load, and the
    /// allocator the pages that freed (a relay that was busy falls back to its idle
    /// size).
    fn release_if_idle(&mut self) {
        let inner = &mut self.inner;
        if !inner.went_idle || !inner.sessions.is_empty() {
            inner.went_idle = false;
            return;
        }
        if inner.relay.release_idle() {
            inner.went_idle = false;
            self.ports.udp.release_idle();
            super::trim_heap();
            tracing::debug!("shard idle: buffers released");
        }
    }

    /// Closes the links of the rooms whose last session other than links went: a room
    /// is not kept on a shard for its links alone.
    fn close_emptied(&mut self, now: Instant) {
        let Self { inner, ports } = self;
        while let Some(room) = inner.emptied.pop() {
            if inner.hosts(&room) {
                continue;
            }
            if let Some(link) = &mut ports.link {
                link.close_room(now, &room, inner);
            }
            ports.recorder.stop_room(now, &room, "room_ended", inner);
        }
    }

    /// Runs the core's timers, sends what they produce and forgets removed sessions.
    async fn timeout(&mut self) {
        let now = Instant::now();
        self.inner.input("timeout", now, Input::Timeout);
        self.inner.release_lingering();
        self.flush().await;
        self.forget_closed(Gone::Timeout);
    }

    /// Takes the core's events: reports streams begun and ended, forgets the sessions it
    /// removed by itself (gone `why`), and hands its measurements to the exporter.
    fn forget_closed(&mut self, why: Gone) {
        while let Some(e) = self.inner.relay.poll_event() {
            match e {
                Event::SessionClosed(id) => self.unlink(id, why),
                Event::Stat(s) => self.inner.exporter.observe(s),
                Event::StreamStarted {
                    room,
                    session,
                    ssrc,
                } => {
                    self.inner
                        .note(&room, || record::Event::StreamStarted { ssrc, session });
                    self.inner.observe(|| Activity::StreamStarted {
                        room,
                        session,
                        ssrc,
                    });
                }
                Event::Ownership {
                    room,
                    ssrc,
                    object,
                    holder,
                } => {
                    let event = || record::Event::Ownership {
                        ssrc,
                        object,
                        holder,
                    };
                    self.inner.note(&room, event);
                }
                Event::StreamEnded {
                    room,
                    session,
                    ssrc,
                } => {
                    self.inner
                        .note(&room, || record::Event::StreamEnded { ssrc, session });
                    self.inner.observe(|| Activity::StreamEnded {
                        room,
                        session,
                        ssrc,
                    });
                }
            }
        }
    }

    /// Forgets a session: its port's state (closing its QUIC or WebRTC connection, if
    /// any), and reports it gone (`why`).
    fn unlink(&mut self, id: SessionId, why: Gone) {
        if let Some(carrier) = self.inner.forget(id, why) {
            self.ports.forget(carrier, id);
        }
    }

    async fn command(&mut self, cmd: Command) {
        let now = Instant::now();
        let fault = || CommandError::Internal;
        match cmd {
            Command::Join(join, peers, reply) => {
                let room: Arc<str> = Arc::from(join.request.room.as_str());
                if let Some(link) = &mut self.ports.link {
                    link.ensure(now, &room, &peers, &mut self.inner);
                }
                let answer = self.join(join);
                if answer.is_err() {
                    self.inner.emptied.push(room);
                }
                self.flush().await;
                let _ = reply.send(answer);
            }
            Command::Reattach(id, resumed, transport, reply) => {
                let answer = self.reattach(id, resumed, transport);
                self.flush().await;
                let _ = reply.send(answer);
            }
            Command::Link(room, peers, reply) => {
                if let Some(link) = &mut self.ports.link {
                    link.ensure(now, &Arc::from(room.as_str()), &peers, &mut self.inner);
                }
                self.flush().await;
                let _ = reply.send(());
            }
            Command::Leave(id, reply) => {
                let result = self
                    .inner
                    .input("command", now, Input::Leave(id))
                    .ok_or_else(fault)
                    .and_then(|r| r.map(|_| ()).map_err(CommandError::from));
                self.forget_closed(Gone::Left);
                self.unlink(id, Gone::Left);
                // The BYEs for its stream go to the others now, not at the next input.
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::SetInterest(id, interest, reply) => {
                let input = Input::SetInterest {
                    session: id,
                    interest,
                };
                let result = self
                    .inner
                    .input("command", now, input)
                    .ok_or_else(fault)
                    .and_then(|r| r.map(|_| ()).map_err(CommandError::from));
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::SessionOwner(id, reply) => {
                let owner = self.inner.relay.session(id).map(|s| SessionOwner {
                    room: s.room.to_string(),
                    identity: s.identity.clone(),
                });
                let _ = reply.send(owner);
            }
            Command::RoomInfo(room, reply) => {
                let _ = reply.send(self.inner.relay.room_info(&room));
            }
            Command::Rooms(reply) => {
                let _ = reply.send(self.inner.relay.room_counts());
            }
            Command::Evict(room, identity, reply) => {
                // A room closed is closed to its replay and its recordings too.
                if identity.is_none() {
                    if let Some(id) = self.ports.replay.session_of(&room) {
                        self.ports.replay.forget(id);
                        self.inner.leave(now, id);
                    }
                    let recorder = &mut self.ports.recorder;
                    recorder.stop_room(now, &room, "room_closed", &mut self.inner);
                }
                let input = Input::Evict {
                    room: &room,
                    identity: identity.as_deref(),
                };
                let n = self.sessions_concerned(now, input);
                self.flush().await;
                self.forget_closed(Gone::Removed);
                let _ = reply.send(n);
            }
            Command::Mute(room, identity, muted, reply) => {
                let input = Input::Mute {
                    room: &room,
                    identity: &identity,
                    muted,
                };
                let _ = reply.send(self.sessions_concerned(now, input));
            }
            Command::Record(room, tap, every, reply) => {
                let result = self.record(now, &room, tap, every);
                // Its first checkpoint is taken before the answer: whatever the room
                // accepts after it is answered comes after that checkpoint.
                self.port_timeout(|p| Some(&mut p.recorder)).await;
                let _ = reply.send(result);
            }
            Command::StopRecording(room, reason, reply) => {
                let n = self
                    .ports
                    .recorder
                    .stop_room(now, &room, &reason, &mut self.inner);
                self.flush().await;
                let _ = reply.send(n);
            }
            Command::Replay(room, spec, reply) => {
                let result = self.replay(now, &room, *spec);
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::ReplayControl(room, op, reply) => {
                let result = self.ports.replay.control(now, &room, op, &mut self.inner);
                self.flush().await;
                let _ = reply.send(result);
            }
            Command::Replays(reply) => {
                let all = self.ports.replay.rooms();
                let status = all
                    .iter()
                    .filter_map(|room| self.ports.replay.status(now, room))
                    .collect();
                let _ = reply.send(status);
            }
            Command::StopReplay(room, reply) => {
                let id = self.ports.replay.session_of(&room);
                if let Some(id) = id {
                    self.ports.replay.forget(id);
                    self.inner.leave(now, id);
                }
                self.flush().await;
                let _ = reply.send(id.is_some());
            }
            Command::Mirror(source, mirror, delay, reply) => {
                let result = self.mirror(now, (&source, &mirror), delay);
                self.port_timeout(|p| Some(&mut p.recorder)).await;
                let _ = reply.send(result);
            }
            Command::Mirrors(reply) => {
                let rooms: Vec<String> = self.inner.hosted.keys().map(|r| r.to_string()).collect();
                let mut views: Vec<MirrorView> = rooms
                    .iter()
                    .filter_map(|r| self.ports.mirror.view(r))
                    .collect();
                views.sort_by(|a, b| a.room.cmp(&b.room));
                views.dedup();
                let _ = reply.send(views);
            }
            Command::StopMirror(source, reply) => {
                let found = self.ports.mirror.of_source(&source);
                if let Some((id, recorder)) = found {
                    self.ports.mirror.forget(id);
                    self.inner.leave(now, id);
                    self.ports
                        .recorder
                        .stop(now, recorder, "mirror_stopped", &mut self.inner);
                }
                self.flush().await;
                let _ = reply.send(found.is_some());
            }
            Command::Drain(reply) => {
                self.inner.input("command", now, Input::SetDraining(true));
                let _ = reply.send(self.inner.relay.session_count());
            }
        }
    }

    /// Whether the relay plays `room` (a replay or a mirror): nobody else publishes in it.
    fn plays(&self, room: &str) -> bool {
        self.ports.replay.session_of(room).is_some() || self.ports.mirror.plays(room)
    }

    /// Starts playing a recording into `room`, which must have no session here: a replay
    /// session joins the core and holds the room (it counts as one of its sessions, so
    /// the room stays here and later joins find it), and plays from the spec's start.
    fn replay(
        &mut self,
        now: Instant,
        room: &str,
        spec: ReplaySpec,
    ) -> Result<ReplayStatus, CommandError> {
        let (id, ssrc, room) = self.join_player(now, room, Carrier::Replay)?;
        let play = (spec.from_ns, spec.speed, spec.paused);
        let added = self.ports.replay.add(
            now,
            (id, ssrc),
            room.clone(),
            spec.recording,
            play,
            &mut self.inner,
        );
        if let Err(e) = added {
            self.inner.leave(now, id);
            return Err(CommandError::Replay(e.to_string()));
        }
        self.ports
            .replay
            .status(now, &room)
            .ok_or(CommandError::Internal)
    }

    /// Starts recording `room`, which must have a session here and no recording, into
    /// `tap`, a checkpoint at once and every `every`.
    fn record(
        &mut self,
        now: Instant,
        room: &str,
        tap: Tap,
        every: Duration,
    ) -> Result<(), CommandError> {
        if self.ports.recorder.records(room) {
            return Err(CommandError::Recording(room.into()));
        }
        self.attach_recorder(now, room, tap, Some(every), true)
            .map(drop)
    }

    /// Joins a recorder session to `room`, which must have a session here, feeding
    /// `tap`: the room's participants are written down and a checkpoint taken at once,
    /// then every `every` if given; `disk` for a recording's (else a mirror's).
    fn attach_recorder(
        &mut self,
        now: Instant,
        room: &str,
        tap: Tap,
        every: Option<Duration>,
        disk: bool,
    ) -> Result<SessionId, CommandError> {
        if !self.inner.hosts(room) {
            return Err(CommandError::NotHere(room.into()));
        }
        let (joined, room) =
            self.join_service(now, JoinRequest::recording(room), Carrier::Recorder)?;
        let inner = &mut self.inner;
        *inner.recorded.entry(room.clone()).or_default() += 1;
        let mut present: Vec<(SessionId, Arc<str>, Option<Arc<str>>)> = inner
            .sessions
            .iter()
            .filter(|(_, j)| j.room == room && j.carrier.is_participant())
            .map(|(id, j)| (*id, j.identity.clone(), j.metadata.clone()))
            .collect();
        present.sort_unstable();
        for (session, identity, metadata) in present {
            inner.note(&room, || record::Event::ParticipantJoined {
                session,
                identity: identity.to_string(),
                metadata: metadata.as_deref().map(str::to_owned),
            });
        }
        let id = joined.session;
        self.ports.recorder.add(now, (id, room), tap, every, disk);
        Ok(id)
    }

    /// Starts mirroring `source`, which must have a session here, into `mirror`, which
    /// must have none, `delay` late: a replay session holds the mirror room here (its
    /// spectators' joins are placed where it is) and a recorder of the source feeds it.
    fn mirror(
        &mut self,
        now: Instant,
        (source, mirror): (&str, &str),
        delay: Duration,
    ) -> Result<MirrorView, CommandError> {
        if !self.inner.hosts(source) {
            return Err(CommandError::NotHere(source.into()));
        }
        if self.ports.mirror.of_source(source).is_some() {
            return Err(CommandError::Mirrored(source.into()));
        }
        let (id, ssrc, room) = self.join_player(now, mirror, Carrier::Mirror)?;
        let (tap, drain) = ring::ring(ring::RING_BYTES);
        let recorder = match self.attach_recorder(now, source, tap, None, false) {
            Ok(r) => r,
            Err(e) => {
                self.inner.leave(now, id);
                return Err(e);
            }
        };
        let rooms = (Arc::from(source), room);
        self.ports
            .mirror
            .add(now, (id, ssrc), rooms, (recorder, drain), delay);
        self.ports.mirror.view(source).ok_or(CommandError::Internal)
    }

    /// Joins a replay session (a replay's or a mirror's, carried by `carrier`) to `room`,
    /// which must have no session here: it holds the room as one of its sessions, so
    /// the room stays here and later joins find it. Its id, SSRC and room.
    fn join_player(
        &mut self,
        now: Instant,
        room: &str,
        carrier: Carrier,
    ) -> Result<(SessionId, u32, Arc<str>), CommandError> {
        if self.inner.hosts(room) {
            return Err(CommandError::RoomLive(room.into()));
        }
        let (joined, room) = self.join_service(now, JoinRequest::replaying(room), carrier)?;
        let id = joined.session;
        let inner = &mut self.inner;
        *inner.hosted.entry(room.clone()).or_default() += 1;
        inner.hosted_gauge.inc();
        if let Some(events) = &inner.events {
            events.joined(room.clone(), id);
        }
        Ok((id, joined.ssrc, room))
    }

    /// Joins one of the relay's own sessions (a recorder, a replay's or a mirror's) to the
    /// core, carried by `carrier`, and keeps it: its join and its room.
    fn join_service(
        &mut self,
        now: Instant,
        request: JoinRequest,
        carrier: Carrier,
    ) -> Result<(gsrelay_core::relay::Joined, Arc<str>), CommandError> {
        let room: Arc<str> = Arc::from(request.room.as_str());
        let identity: Arc<str> = Arc::from(request.identity.as_str());
        let joined = self
            .inner
            .input("command", now, Input::Join(request))
            .ok_or(CommandError::Internal)??
            .joined()
            .ok_or(CommandError::Internal)?;
        let entry = Joined {
            room: room.clone(),
            identity,
            metadata: None,
            carrier,
            generation: 0,
        };
        self.inner.sessions.insert(joined.session, entry);
        Ok((joined, room))
    }

    /// Hands the core an input that answers [`Reply::Sessions`]; how many sessions it
    /// concerned (none when it failed).
    fn sessions_concerned(&mut self, now: Instant, input: Input<'_>) -> usize {
        match self.inner.input("command", now, input) {
            Some(Ok(Reply::Sessions(n))) => n,
            _ => 0,
        }
    }

    /// Prepares the session's link on its port (keys, token or peer connection), joins it
    /// to the core, then hands the link to the port.
    fn join(&mut self, cmd: JoinCommand) -> Result<JoinAnswer, CommandError> {
        let room = cmd.request.room.as_str();
        if cmd.request.publish && self.plays(room) {
            return Err(CommandError::ReadOnly(room.into()));
        }
        let link = new_link(&mut self.ports, cmd.transport)?;
        let now = Instant::now();
        let room: Arc<str> = Arc::from(cmd.request.room.as_str());
        let req = &cmd.request;
        let (identity, declared) = (req.identity.clone(), req.ssrcs.clone());
        let (publish, subscribe, muted) = (req.publish, req.subscribe, req.muted);
        let inner = &mut self.inner;
        let joined = inner
            .input("command", now, Input::Join(cmd.request))
            .ok_or(CommandError::Internal)??
            .joined()
            .ok_or(CommandError::Internal)?;
        let id = joined.session;
        let (carrier, transport) = link.attach(inner, now, id);
        let lingered = inner.lingering.remove(&room);
        if let Some(events) = &inner.events {
            events.joined(room.clone(), id);
            if let Some(last) = lingered {
                events.gone(room.clone(), last);
            }
        }
        let who: Arc<str> = Arc::from(identity.as_str());
        let metadata: Option<Arc<str>> = cmd.metadata.as_deref().map(Arc::from);
        inner.note(&room, || record::Event::ParticipantJoined {
            session: id,
            identity: identity.clone(),
            metadata: metadata.as_deref().map(str::to_owned),
        });
        inner.observe(|| Activity::Joined {
            room: room.clone(),
            session: id,
            identity,
            ssrcs: std::iter::once(joined.ssrc)
                .chain(declared)
                .chain(joined.room_ssrc)
                .collect(),
            publish,
            subscribe,
            muted,
        });
        *inner.hosted.entry(room.clone()).or_default() += 1;
        inner.hosted_gauge.inc();
        let generation = cmd.generation;
        let entry = Joined {
            room,
            identity: who,
            metadata,
            carrier,
            generation,
        };
        inner.sessions.insert(id, entry);
        Ok(JoinAnswer {
            joined,
            generation,
            transport,
        })
    }

    /// Gives session `id`, of resume generation `generation` and SSRC `ssrc`, a new link
    /// over `transport` in place of its old one, which is forgotten (a QUIC or WebRTC
    /// connection closed); the core's session, its SSRC and its numbering go on.
    fn reattach(
        &mut self,
        id: SessionId,
        (generation, ssrc): (u32, u32),
        transport: TransportRequest,
    ) -> Result<JoinAnswer, CommandError> {
        let unknown = || CommandError::Control(ControlError::NoSuchSession(id));
        let entry = self.inner.sessions.get(&id).ok_or_else(unknown)?;
        if !entry.carrier.is_participant() {
            return Err(unknown());
        }
        // Session ids start again with a restarted relay: another session may have
        // this one's id now, never its SSRC. Only this session's credentials are stale.
        let session = self.inner.relay.session(id).ok_or_else(unknown)?;
        if session.ssrc != ssrc {
            return Err(unknown());
        }
        if entry.generation != generation {
            return Err(CommandError::ResumeStale);
        }
        let (old, room) = (entry.carrier, entry.room.clone());
        // The old link goes first: the client lost it, and asks for this one instead.
        self.ports.forget(old, id);
        let link = new_link(&mut self.ports, transport)?;
        let now = Instant::now();
        let inner = &mut self.inner;
        let (carrier, transport) = link.attach(inner, now, id);
        let joined = gsrelay_core::relay::Joined {
            session: id,
            ssrc,
            relay_ssrc: inner.relay.relay_ssrc(),
            streams: inner
                .relay
                .room_info(&room)
                .map(|r| r.streams.iter().map(|s| s.ssrc).collect())
                .unwrap_or_default(),
            room_ssrc: inner.relay.session(id).and_then(|s| s.room_ssrc),
        };
        let generation = generation + 1;
        if let Some(entry) = inner.sessions.get_mut(&id) {
            entry.carrier = carrier;
            entry.generation = generation;
        }
        Ok(JoinAnswer {
            joined,
            generation,
            transport,
        })
    }
}

/// Makes a new session's link ready on the port of `transport`.
fn new_link(ports: &mut Ports, transport: TransportRequest) -> Result<Link<'_>, CommandError> {
    let Ports {
        udp, quic, webrtc, ..
    } = ports;
    Ok(match transport {
        TransportRequest::Rtp(profile) => {
            let (peer, srtp) = udp.new_link(profile)?;
            Link::Udp(udp, peer, srtp)
        }
        TransportRequest::Quic => quic_link(quic, quic::Protocol::Roq)?,
        TransportRequest::WebTransport => quic_link(quic, quic::Protocol::WebTransport)?,
        TransportRequest::WebRtc(offer) => {
            let port = webrtc.as_mut().ok_or(CommandError::WebRtcDisabled)?;
            let (peer, answer) = port.new_link(&offer)?;
            Link::WebRtc(port, Box::new(peer), answer)
        }
    })
}

impl Link<'_> {
    /// Hands the link to its port as session `id`'s; what carries it, and the join
    /// answer's transport part.
    fn attach(self, inner: &mut Inner, now: Instant, id: SessionId) -> (Carrier, TransportAnswer) {
        match self {
            Link::Udp(port, peer, srtp) => {
                port.register(id, peer);
                let addr = port.rtp_addr;
                (Carrier::Udp, TransportAnswer::Rtp { addr, srtp })
            }
            Link::Quic(port, peer, protocol) => {
                let answer = port.register(id, peer);
                let transport = match protocol {
                    quic::Protocol::Roq => TransportAnswer::Quic(answer),
                    quic::Protocol::WebTransport => TransportAnswer::WebTransport(answer),
                };
                (Carrier::Quic, transport)
            }
            Link::WebRtc(port, peer, answer) => {
                port.register(id, *peer);
                inner.set_path(now, id, webrtc::MAX_SEND_PACKET, None);
                (Carrier::WebRtc, TransportAnswer::WebRtc(answer))
            }
        }
    }
}

/// A session's link, made ready on its port before its join.
enum Link<'a> {
    Udp(&'a mut UdpPort, udp::Peer, Option<SrtpKeys>),
    Quic(&'a mut QuicPort, quic::Peer, quic::Protocol),
    /// Boxed: a peer connection is large beside the others.
    WebRtc(&'a mut WebRtcPort, Box<webrtc::Peer>, WebRtcAnswer),
}

/// A new session's link over `protocol`; refused when the relay runs no QUIC.
fn quic_link(
    port: &mut Option<QuicPort>,
    protocol: quic::Protocol,
) -> Result<Link<'_>, CommandError> {
    let port = port.as_mut().ok_or(CommandError::QuicDisabled)?;
    let peer = port.new_link(protocol)?;
    Ok(Link::Quic(port, peer, protocol))
}

impl Ports {
    /// Forgets session `id`'s state on the port `carrier` names (closing its QUIC or
    /// WebRTC connection, if any).
    fn forget(&mut self, carrier: Carrier, id: SessionId) {
        match carrier {
            Carrier::Udp => self.udp.forget(id),
            Carrier::Quic => {
                if let Some(port) = &mut self.quic {
                    port.forget(id);
                }
            }
            Carrier::WebRtc => {
                if let Some(port) = &mut self.webrtc {
                    port.forget(id);
                }
            }
            Carrier::Link => {
                if let Some(port) = &mut self.link {
                    port.forget(id);
                }
            }
            Carrier::Recorder => self.recorder.forget(id),
            Carrier::Replay => self.replay.forget(id),
            Carrier::Mirror => self.mirror.forget(id),
        }
    }

    /// Queues one of the core's packets on the port of its session.
    fn queue(
        &mut self,
        now: Instant,
        carrier: Option<Carrier>,
        t: &Transmit<'_>,
        stats: &mut StatsExporter,
    ) {
        match carrier {
            Some(Carrier::Udp) => self.udp.queue(now, t, stats),
            Some(Carrier::Quic) => {
                if let Some(port) = &mut self.quic {
                    port.queue(now, t, stats);
                }
            }
            Some(Carrier::WebRtc) => {
                if let Some(port) = &mut self.webrtc {
                    port.queue(now, t, stats);
                }
            }
            Some(Carrier::Link) => {
                if let Some(port) = &mut self.link {
                    port.queue(now, t, stats);
                }
            }
            Some(Carrier::Recorder) => self.recorder.queue(now, t, stats),
            Some(Carrier::Replay) => self.replay.queue(now, t, stats),
            Some(Carrier::Mirror) => self.mirror.queue(now, t, stats),
            None => {}
        }
    }
}

impl Inner {
    /// Hands the core one input through its one door, isolated: a defect quarantines
    /// the room it concerned (`place` names where, for the metrics); `None` then.
    fn input(
        &mut self,
        place: &'static str,
        now: Instant,
        input: Input<'_>,
    ) -> Option<Result<Reply, ControlError>> {
        guarded(&mut self.relay, &self.metrics, place, now, |r| {
            r.handle_input(now, input)
        })
    }

    /// Writes the event `make` describes to the recordings of `room`, if it has any.
    fn note(&mut self, room: &Arc<str>, make: impl FnOnce() -> record::Event) {
        if self.recorded.contains_key(room) {
            self.record_events.push((room.clone(), make()));
        }
    }

    /// Tells the observer, if any, of the change `make` describes.
    fn observe(&self, make: impl FnOnce() -> Activity) {
        if let Some(o) = &self.observer {
            o.observe(make());
        }
    }

    /// Forgets a session the core no longer holds and reports it gone (`why`); which
    /// port carried it, if it was joined here.
    fn forget(&mut self, id: SessionId, why: Gone) -> Option<Carrier> {
        let joined = self.sessions.remove(&id)?;
        if self.sessions.is_empty() {
            self.went_idle = true;
            self.sessions.shrink_to_fit();
            self.hosted.shrink_to_fit();
        }
        if joined.carrier == Carrier::Recorder {
            if let Some(n) = self.recorded.get_mut(&joined.room) {
                *n -= 1;
                if *n == 0 {
                    self.recorded.remove(&joined.room);
                }
            }
            return Some(Carrier::Recorder);
        }
        if joined.carrier == Carrier::Link {
            // Links are the shards' own: the directory counts only the room's sessions.
            return Some(Carrier::Link);
        }
        if joined.carrier.is_participant() {
            self.note(&joined.room, || record::Event::ParticipantLeft {
                session: id,
                identity: joined.identity.to_string(),
            });
        }
        let mut linger = false;
        if let Some(n) = self.hosted.get_mut(&joined.room) {
            *n -= 1;
            self.hosted_gauge.dec();
            linger = *n == 0 && self.relay.holds_room_objects(&joined.room);
            if *n == 0 && !linger {
                self.hosted.remove(&joined.room);
                self.emptied.push(joined.room.clone());
            }
        }
        if joined.carrier.is_participant() {
            self.observe(|| Activity::Gone {
                room: joined.room.clone(),
                session: id,
                why,
            });
        }
        if linger {
            self.lingering.insert(joined.room, id);
        } else if let Some(events) = &self.events {
            events.gone(joined.room, id);
        }
        Some(joined.carrier)
    }

    /// Lets go of the lingering rooms whose room objects the core has dropped (expired,
    /// or the room was closed).
    fn release_lingering(&mut self) {
        if self.lingering.is_empty() {
            return;
        }
        let relay = &self.relay;
        let gone: Vec<(Arc<str>, SessionId)> = self
            .lingering
            .iter()
            .filter(|(room, _)| !relay.holds_room_objects(room))
            .map(|(room, id)| (room.clone(), *id))
            .collect();
        for (room, id) in gone {
            self.lingering.remove(&room);
            if self.hosted.get(&room) == Some(&0) {
                self.hosted.remove(&room);
                self.emptied.push(room.clone());
            }
            if let Some(events) = &self.events {
                events.gone(room, id);
            }
        }
    }
}

impl Core for Inner {
    fn packet(&mut self, now: Instant, id: SessionId, class: PacketClass, plain: &[u8]) {
        let (place, input) = match class {
            PacketClass::Rtp => (
                "rtp",
                Input::Rtp {
                    from: id,
                    packet: plain,
                },
            ),
            // The ports classify before they hand a packet over: what is not RTP is RTCP.
            PacketClass::Rtcp | PacketClass::Other => (
                "rtcp",
                Input::Rtcp {
                    from: id,
                    packet: plain,
                },
            ),
        };
        self.input(place, now, input);
    }

    fn set_path(&mut self, now: Instant, id: SessionId, max_packet: usize, send_bps: Option<u64>) {
        let path = Input::SetPath {
            session: id,
            max_packet,
            send_bps,
        };
        self.input("path", now, path);
    }

    fn leave(&mut self, now: Instant, id: SessionId) {
        self.input("command", now, Input::Leave(id));
        self.forget(id, Gone::Disconnected);
    }

    fn session_by_ssrc(&self, ssrc: u32) -> Option<SessionId> {
        self.relay.session_by_ssrc(ssrc)
    }

    fn max_packet(&self) -> usize {
        self.relay.config().max_packet_bytes
    }

    fn drop_packets(&mut self, reason: &'static str, n: u64) {
        self.exporter.drop_n(reason, n);
    }

    fn join_link(
        &mut self,
        now: Instant,
        room: &Arc<str>,
        peer: Peer,
        peer_ssrc: u32,
    ) -> Option<SessionId> {
        let request = JoinRequest::link(room, peer.to_string(), peer_ssrc);
        let joined = match self.input("command", now, Input::Join(request))? {
            Ok(reply) => reply.joined()?,
            Err(e) => {
                tracing::warn!(%room, %peer, error = %e, "link session refused");
                return None;
            }
        };
        let link = Joined {
            room: room.clone(),
            identity: Arc::from(peer.to_string()),
            metadata: None,
            carrier: Carrier::Link,
            generation: 0,
        };
        self.sessions.insert(joined.session, link);
        Some(joined.session)
    }

    fn hosts(&self, room: &str) -> bool {
        self.hosted.contains_key(room)
    }

    fn checkpoint(&mut self, now: Instant, id: SessionId) {
        self.input("checkpoint", now, Input::Checkpoint(id));
    }
}

/// The next input of `port` when there is one; otherwise never completes.
async fn next_of<P: Port>(port: &mut Option<P>) -> P::Input {
    match port {
        Some(port) => port.next().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
