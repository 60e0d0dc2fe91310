//! A relay core behind the UDP transport and the QUIC endpoint (RoQ and WebTransport), on
//! loopback, without the HTTP API: joins go to the transport as the API would send them.

use gsrelay::client::{Client, Received};
use gsrelay::internal::Metrics;
use gsrelay::internal::command::{JoinAnswer, JoinCommand, TransportRequest};
use gsrelay::internal::quic::{self, QuicConfig, QuicEndpoint};
use gsrelay::internal::shard::{self, ShardSetup, ShardTask};
use gsrelay::internal::udp::UdpConfig;
use gsrelay::wire::{Dialect, Object};
use gsrelay::{JoinRequest, Relay, RelayConfig};
use std::net::SocketAddr;
use std::time::Duration;

/// How long what must happen may take.
pub const WAIT: Duration = Duration::from_secs(5);

/// Loopback, port 0.
pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A running relay: its UDP transport, its QUIC endpoint, its metrics.
pub struct Harness {
    pub t: ShardTask,
    pub quic: QuicEndpoint,
    pub metrics: Metrics,
}

impl Harness {
    /// A relay with `relay` on a UDP transport and a QUIC endpoint bound with `quic`.
    pub async fn start(relay: RelayConfig, quic: QuicConfig) -> Self {
        let metrics = Metrics::new();
        let udp_cfg = UdpConfig::new(loopback());
        let (quic, mut shards) = quic::bind(quic, &metrics, 1).unwrap();
        let relay = Relay::new(relay, 7);
        let t = shard::spawn_with(
            ShardSetup {
                shard: 0,
                udp: udp_cfg,
                quic: shards.pop(),
                webrtc: None,
                link: None,
                events: None,
                observer: None,
            },
            relay,
            metrics.clone(),
        )
        .await
        .unwrap();
        Self { t, quic, metrics }
    }

    /// The answer to a join of `room` over `transport`, as a publisher or a subscriber.
    pub async fn answer(
        &self,
        room: &str,
        publish: bool,
        transport: TransportRequest,
    ) -> JoinAnswer {
        let request = JoinRequest {
            room: room.into(),
            identity: "someone".into(),
            publish,
            subscribe: !publish,
            ..JoinRequest::default()
        };
        let cmd = JoinCommand {
            request,
            generation: 0,
            metadata: None,
            transport,
        };
        self.t.handle.join(cmd).await.unwrap()
    }

    /// A client joined to `room` over `transport`.
    pub async fn client(&self, room: &str, publish: bool, transport: TransportRequest) -> Client {
        let answer = self.answer(room, publish, transport).await;
        Client::from_answer(answer, Dialect::default())
            .await
            .unwrap()
    }

    /// Packets dropped for `reason`.
    pub fn dropped(&self, reason: &str) -> u64 {
        self.metrics.dropped.with_label_values(&[reason]).get()
    }
}

/// Polls `f` until it holds, for at most [`WAIT`].
pub async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The objects of the next RTP packet `subscriber` receives (RTCP skipped).
pub async fn next_update(subscriber: &mut Client) -> Vec<Object> {
    loop {
        match subscriber.recv(WAIT).await.unwrap() {
            Some(Received::Rtp { payload, .. }) => {
                return gsrelay::wire::decode(&payload, Dialect::default()).unwrap();
            }
            Some(Received::Rtcp(_)) => continue,
            None => panic!("the healthy session got nothing within {WAIT:?}"),
        }
    }
}

/// Asserts one update from `publisher` is the next `subscriber` receives, unaltered.
pub async fn assert_flows(publisher: &mut Client, subscriber: &mut Client, x: f32) {
    let object = super::head(1, x);
    publisher
        .send_objects(std::slice::from_ref(&object))
        .await
        .unwrap();
    assert_eq!(next_update(subscriber).await, vec![object]);
}

/// Asserts the relay's status `line` for a presented session token attached it.
pub fn assert_attached(line: Option<String>) {
    let line = line.expect("a status line");
    assert!(line.starts_with("OK "), "{line}");
}
