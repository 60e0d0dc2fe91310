//! The network side of a connection: one task on the plugin's own runtime thread joins,
//! reads the relay's packets into the event channel, carries out the game's commands,
//! keeps the session alive and brings it back when the relay goes silent. Bevy's systems
//! never run any of it: they push commands and drain events without waiting
//! (`crates/ffi/src/net.rs` is the same design for the C ABI).

use crate::settings::Connect;
use gsrelay_client::{Client, ClientError, Notice, Received, Update};
use gsrelay_core::Interest;
use gsrelay_core::relay::handover::Kind;
use gsrelay_core::wire::{self, Object};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Most events waiting for the game: at 20 updates a second from 500 senders, 6.5 s of
/// frames that never ran. Past that the oldest state is not kept: newer updates are
/// dropped and counted ([`RelayClient::dropped`](crate::RelayClient::dropped)); an end is never lost (it is not an event).
pub const MAX_QUEUED_EVENTS: usize = 65_536;

/// Most commands waiting for the network thread before a new one is refused as busy.
const MAX_QUEUED_COMMANDS: usize = 1024;

/// The largest payload a publish packs into one packet: under a 1 280-byte IPv6 MTU with
/// the RTP header, SRTP's tag and the QUIC or WebRTC framing around it.
const MAX_PAYLOAD: usize = 1_100;

/// How often a session that publishes nothing sends a receiver report, so that the relay
/// keeps it (the JavaScript client's and the C library's interval).
const REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// The longest a leave waits for the relay.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the task looks at the relay's silence and the report interval.
const TICK: Duration = Duration::from_millis(250);

/// What the game asks of the network side.
#[derive(Debug)]
pub enum Command {
    /// Objects on the session's stream.
    Publish(Vec<Object>),
    /// A request for the whole room (FIR naming the relay).
    Snapshot,
    /// A new interest.
    Interest(Box<Interest>),
    /// Ownership requests.
    Request(Vec<(u32, u64)>),
    /// Ownership releases.
    Release(Vec<(u32, u64)>),
    /// Leave the room; the session ends.
    Leave,
}

/// How a session came back after the relay went silent or away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconnect {
    /// With its SSRC (a resume, or a rejoin that kept it): its stream goes on.
    Resumed,
    /// Under a new SSRC.
    Rejoined,
}

/// What the network side tells the game.
#[derive(Debug)]
pub enum NetEvent {
    /// Joined as `ssrc`, session `session`.
    Joined {
        /// The session's SSRC.
        ssrc: u32,
        /// The session's id.
        session: String,
    },
    /// One sender's objects (a packet, or one sender's part of an aggregated packet).
    Objects {
        /// The sender's stream.
        ssrc: u32,
        /// Its objects, in wire order.
        objects: Vec<Object>,
    },
    /// A stream ended (its sender's BYE, relayed).
    StreamEnded(u32),
    /// An ownership notice (granted, lost, refused).
    Ownership(Notice),
    /// The session came back, now as `ssrc`; a request for the room follows.
    Reconnected {
        /// Its SSRC now.
        ssrc: u32,
        /// Resumed or rejoined.
        how: Reconnect,
    },
    /// Something failed without ending the session.
    Error(String),
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The game left ([`RelayClient::leave`](crate::RelayClient::leave)).
    Left,
    /// The relay ended it (the room closed, the identity removed).
    ByRelay,
    /// The join failed.
    JoinFailed,
}

/// What the task and the game's side share beside the channels.
#[derive(Debug, Default)]
pub struct Shared {
    /// Events dropped because the channel was full.
    pub dropped: AtomicU64,
    /// Why the session ended, set before the task lets go of the channel.
    pub end: Mutex<Option<(EndReason, String)>>,
}

impl Shared {
    fn end(&self, reason: EndReason, message: impl Into<String>) {
        *self.end.lock().unwrap_or_else(PoisonError::into_inner) = Some((reason, message.into()));
    }

    /// Why the session ended, once it did.
    pub fn ended(&self) -> Option<(EndReason, String)> {
        self.end
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The game's end of a connection.
#[derive(Debug)]
pub struct Link {
    /// Commands to the task.
    pub commands: mpsc::Sender<Command>,
    /// Events from the task; disconnected once it ended.
    pub events: mpsc::Receiver<NetEvent>,
    /// The dropped count and the end.
    pub shared: Arc<Shared>,
}

/// The plugin's runtime: one thread of its own, made on first use, shared by every
/// connection of the process. One: a game holds one or a few sessions, and a second
/// worker only adds the cost of tasks moving between the two (the C library's measurement,
/// `gsrelay bench ffi`).
fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("gsrelay-bevy-net")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the network thread: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Starts joining on the runtime's thread; returns at once.
pub fn start(connect: Connect) -> Result<Link, String> {
    let runtime = runtime()?;
    let (commands, commands_rx) = mpsc::channel(MAX_QUEUED_COMMANDS);
    let (events_tx, events) = mpsc::channel(MAX_QUEUED_EVENTS);
    let shared = Arc::new(Shared::default());
    let out = Out {
        events: events_tx,
        shared: Arc::clone(&shared),
    };
    runtime.spawn(run(connect, out, commands_rx));
    Ok(Link {
        commands,
        events,
        shared,
    })
}

/// The task's end of the events.
struct Out {
    events: mpsc::Sender<NetEvent>,
    shared: Arc<Shared>,
}

impl Out {
    /// Queues `event`, or counts it dropped: the network thread never waits for a game
    /// that does not poll.
    fn send(&self, event: NetEvent) {
        if self.events.try_send(event).is_err() {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One packet from the relay: objects per sender, ended streams, ownership notices.
    fn received(&self, received: &Received, client: &Client) {
        let relay = client.relay_ssrc();
        match gsrelay_client::updates(received, client.dialect()) {
            Ok(updates) => {
                for update in updates {
                    match update {
                        Update::Objects { ssrc, objects } => {
                            self.send(NetEvent::Objects { ssrc, objects })
                        }
                        // The relay's own BYE ends the session: the tick sees it.
                        Update::Left(ssrcs) => ssrcs
                            .into_iter()
                            .filter(|&s| s != relay)
                            .for_each(|s| self.send(NetEvent::StreamEnded(s))),
                    }
                }
            }
            Err(e) => self.send(NetEvent::Error(format!("a packet did not decode: {e}"))),
        }
        if let Received::Rtcp(items) = received {
            gsrelay_client::notices(items)
                .into_iter()
                .filter(|n| matches!(n.kind, Kind::Granted | Kind::Lost | Kind::Refused))
                .for_each(|n| self.send(NetEvent::Ownership(n)));
        }
    }
}

/// The task: join, then serve the session until it ends.
async fn run(connect: Connect, out: Out, mut commands: mpsc::Receiver<Command>) {
    let joined = Client::join(
        &connect.http,
        &connect.token,
        &connect.room,
        connect.options,
    )
    .await;
    let mut client = match joined {
        Ok(c) => c,
        Err(e) => {
            return out
                .shared
                .end(EndReason::JoinFailed, format!("join failed: {e}"));
        }
    };
    out.send(NetEvent::Joined {
        ssrc: client.ssrc(),
        session: gsrelay_core::format_session_id(client.session()),
    });
    if connect.snapshot {
        ask_for_room(&mut client, &out).await;
    }
    let mut tick = tokio::time::interval(TICK);
    let mut last_report = Instant::now();
    // A link that failed (port unreachable, connection closed) fails every read at once:
    // it is read again at the next tick, not in a busy loop, until the session is back.
    let mut link_failed = false;
    loop {
        tokio::select! {
            command = commands.recv() => {
                let Some(command) = command else {
                    // The game let go of the connection: leave, bounded, and stop.
                    let _ = tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await;
                    return out.shared.end(EndReason::Left, "the connection was dropped");
                };
                if matches!(command, Command::Leave) {
                    let note = match tokio::time::timeout(LEAVE_TIMEOUT, client.leave()).await {
                        Ok(Ok(())) => "left".to_owned(),
                        Ok(Err(e)) => format!("left; the relay answered: {e}"),
                        Err(_) => "left; the relay did not answer in time".to_owned(),
                    };
                    return out.shared.end(EndReason::Left, note);
                }
                if let Err(e) = apply(&mut client, command, &out).await {
                    out.send(NetEvent::Error(e.to_string()));
                }
            }
            got = client.recv(TICK), if !link_failed => match got {
                Ok(Some(received)) => out.received(&received, &client),
                Ok(None) => {}
                // The relay's silence, which the tick takes care of.
                Err(_) => link_failed = true,
            },
            _ = tick.tick() => {
                link_failed = false;
                if client.ended_by_relay() {
                    return out.shared.end(EndReason::ByRelay, "the relay ended the session");
                }
                if last_report.elapsed() >= REPORT_INTERVAL {
                    last_report = Instant::now();
                    let _ = client.send_rr().await;
                }
                come_back_if_silent(&mut client, &out).await;
            }
        }
    }
}

/// Sends a FIR naming the relay: it answers with every stream's state from its cache.
async fn ask_for_room(client: &mut Client, out: &Out) {
    if let Err(e) = client.send_fir(client.relay_ssrc()).await {
        out.send(NetEvent::Error(format!(
            "the request for the room failed: {e}"
        )));
    }
}

/// When the relay is silent, resumes or rejoins (which asks for the room), and tells how.
async fn come_back_if_silent(client: &mut Client, out: &Out) {
    let before = client.ssrc();
    match client.rejoin_if_silent().await {
        Ok(false) => {}
        Ok(true) => {
            let how = if client.ssrc() == before {
                Reconnect::Resumed
            } else {
                Reconnect::Rejoined
            };
            out.send(NetEvent::Reconnected {
                ssrc: client.ssrc(),
                how,
            });
        }
        Err(e) => out.send(NetEvent::Error(format!(
            "the relay is silent and coming back failed (retrying): {e}"
        ))),
    }
}

async fn apply(client: &mut Client, command: Command, out: &Out) -> Result<(), ClientError> {
    match command {
        Command::Publish(objects) => publish(client, &objects).await,
        Command::Snapshot => {
            ask_for_room(client, out).await;
            Ok(())
        }
        Command::Interest(interest) => client.set_interest(*interest).await,
        Command::Request(objects) => client.request_objects(&objects).await,
        Command::Release(objects) => client.release_objects(&objects).await,
        // Taken by the loop before it gets here.
        Command::Leave => Ok(()),
    }
}

/// Sends `objects` in as few packets as fit [`MAX_PAYLOAD`]: each object whole in one
/// packet (an object larger than that alone in its own).
async fn publish(client: &mut Client, objects: &[Object]) -> Result<(), ClientError> {
    let dialect = client.dialect();
    let mut payload = Vec::with_capacity(MAX_PAYLOAD);
    for object in objects {
        let one = wire::encode(std::slice::from_ref(object), dialect)?;
        if !payload.is_empty() && payload.len() + one.len() > MAX_PAYLOAD {
            client.send_payload(&payload).await?;
            payload.clear();
        }
        payload.extend_from_slice(&one);
    }
    if !payload.is_empty() {
        client.send_payload(&payload).await?;
    }
    Ok(())
}
