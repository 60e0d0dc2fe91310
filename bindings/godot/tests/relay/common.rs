//! A real relay on loopback (every port 0, so tests run in parallel) and players that
//! join it through the binding's session and mapper, as the node does, without Godot.

use godot::builtin::Vector3;
use gsrelay_godot::convert::Axes;
use gsrelay_godot::session::{JoinSettings, Session};
use gsrelay_godot::signals::{EventMapper, ObjectUpdate, Signal};
use gsrelay_server::serve::{self, ServeConfig, Server};
use gsrelay_server::token::{Rights, Tokens};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::runtime::Runtime;

/// The token secret of the relays started here.
const SECRET: &str = "gsrelay-godot-test-secret-0123456789";

/// How long any one condition is waited for.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A relay's configuration: HTTP and RTP on `http` and `rtp`, the rest on free loopback
/// ports, tokens signed with [`SECRET`].
fn config(http: SocketAddr, rtp: SocketAddr) -> ServeConfig {
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    ServeConfig {
        http_addr: http,
        rtp_addr: rtp,
        quic_addr: local,
        webrtc_addr: local,
        token_secret: Some(SECRET.into()),
        drain_grace_secs: 1,
        // A loaded machine may keep a shard from its CPU longer than the default 5 ms;
        // an update shed for that would fail a test for the machine's sake.
        udp_max_queue_delay_ms: 250,
        ..ServeConfig::default()
    }
}

/// A relay and the runtime it runs on (the players' network runs on the C ABI's thread).
pub struct Relay {
    server: Option<Server>,
    runtime: Runtime,
}

impl Relay {
    pub fn start() -> Self {
        let runtime = Runtime::new().expect("a runtime for the relay");
        let local = "127.0.0.1:0".parse().unwrap();
        let server = runtime
            .block_on(serve::start(config(local, local)))
            .expect("start the relay");
        Self {
            server: Some(server),
            runtime,
        }
    }

    /// Stops the relay (its sessions are forgotten) and starts another on the same HTTP
    /// and RTP ports, as a relay that crashed and came back; retried while the ports are
    /// still held, for at most [`DEADLINE`].
    pub fn restart(&mut self) {
        let old = self.server.take().expect("running");
        let (http, rtp) = (old.http_addr, old.rtp_addr);
        {
            let _guard = self.runtime.enter();
            drop(old);
        }
        let start = Instant::now();
        loop {
            match self.runtime.block_on(serve::start(config(http, rtp))) {
                Ok(server) => {
                    self.server = Some(server);
                    return;
                }
                Err(e) if start.elapsed() > DEADLINE => panic!("no relay again on {http}: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    pub fn http_base(&self) -> String {
        let server = self.server.as_ref().expect("running");
        format!("http://{}", server.http_addr)
    }

    /// A token for `room` to publish and subscribe, as `identity`.
    pub fn token(&self, room: &str, identity: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let rights = Rights {
            publish: true,
            subscribe: true,
            admin: false,
        };
        Tokens::new(SECRET.as_bytes())
            .unwrap()
            .issue(room, identity, rights, 600, now)
            .unwrap()
    }

    pub fn settings(&self, room: &str, identity: &str) -> JoinSettings {
        JoinSettings::new(&self.http_base(), &self.token(room, identity), room).unwrap()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // The server's tasks are the runtime's: it goes first, within it.
        let _guard = self.runtime.enter();
        drop(self.server.take());
    }
}

/// A player: a session and the mapper the node would use, with every signal it made.
pub struct Player {
    pub session: Session,
    mapper: EventMapper,
    pub signals: Vec<Signal>,
}

impl Player {
    pub fn join(settings: &JoinSettings) -> Self {
        Self {
            session: Session::join(settings).expect("join starts"),
            mapper: EventMapper::new(Axes::Draft),
            signals: Vec::new(),
        }
    }

    /// Polls once; returns how many signals it added.
    pub fn poll(&mut self) -> usize {
        let before = self.signals.len();
        let (mapper, signals) = (&mut self.mapper, &mut self.signals);
        self.session.poll(|e| mapper.map(e, signals)).expect("poll");
        self.signals.len() - before
    }

    /// Polls until a signal `found` picks appears (after those already seen), doing
    /// `meanwhile` between polls; panics after [`DEADLINE`].
    pub fn wait_for<T>(
        &mut self,
        what: &str,
        mut meanwhile: impl FnMut(),
        found: impl Fn(&Signal) -> Option<T>,
    ) -> T {
        let start = Instant::now();
        let mut seen = 0;
        loop {
            self.poll();
            if let Some(t) = self.signals[seen..].iter().find_map(&found) {
                return t;
            }
            seen = self.signals.len();
            assert!(
                start.elapsed() < DEADLINE,
                "no {what} within {DEADLINE:?}; signals: {:?}",
                self.signals
            );
            meanwhile();
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for `joined`; returns the session's SSRC.
    pub fn joined(&mut self) -> u32 {
        self.wait_for(
            "joined",
            || {},
            |s| match s {
                Signal::Joined { ssrc, .. } => Some(*ssrc),
                _ => None,
            },
        )
    }
}

/// The update of object `id` of stream `ssrc`, if `s` is one.
pub fn update_of(s: &Signal, ssrc: u32, id: u64) -> Option<ObjectUpdate> {
    match s {
        Signal::ObjectUpdated(u) if u.ssrc == ssrc && u.object_id == id => Some(u.clone()),
        _ => None,
    }
}

/// Whether two points are within `tolerance` of each other.
pub fn near(a: Vector3, b: Vector3, tolerance: f32) -> bool {
    (a - b).length() <= tolerance
}
