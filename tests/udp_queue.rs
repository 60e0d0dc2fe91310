//! Drop, don't queue: a shard's UDP socket on loopback, its datagrams made to wait in the
//! kernel's receive queue by stalling the shard. Each test runs on a current-thread
//! runtime, which is also the shard's (`shard::spawn` spawns on the caller's runtime), so
//! blocking the test's thread is what stalls the shard: whatever is sent before the
//! block waits in the socket at least as long as the block lasts. No timing is hoped for:
//! the waits are lower bounds, and what follows polls with deadlines.
//!
//! The kernel stamps a datagram on arrival only once its timestamping switch is on, which
//! it turns on lazily, from a work queue, when the first socket on the machine asks for
//! stamps (`net_enable_timestamp`). What arrives before that is stamped when it is read,
//! so it looks as if it waited no time. On a loaded machine that lag outlasts a test's
//! set-up, so the shedding tests first confirm the stamps with [`Harness::stamps_arrivals`].

mod support;

use gsrelay::client::Client;
use gsrelay::internal::Metrics;
use gsrelay::internal::command::{JoinCommand, TransportRequest};
use gsrelay::internal::shard::{self, ShardTask};
use gsrelay::internal::udp::UdpConfig;
use gsrelay::rtp::SrtpProfile;
use gsrelay::wire::{Dialect, Head1, Loc2, Object};
use gsrelay::{JoinRequest, Relay, RelayConfig};
use std::time::Duration;
use tokio::time::Instant;

/// How long a test waits for what must happen.
const WAIT: Duration = Duration::from_secs(5);

/// The queueing budget of the shedding tests: far above what a loaded test machine
/// delays a woken thread by, so that only the stall below makes anything stale.
const BUDGET: Duration = Duration::from_millis(100);

/// How long the shard is stalled: well past the budget.
const STALL: Duration = Duration::from_millis(250);

/// How long a probe of arrival stamps stalls the shard: within the budget.
const PROBE_STALL: Duration = Duration::from_millis(20);

struct Harness {
    t: ShardTask,
    metrics: Metrics,
}

async fn relay(cfg: UdpConfig) -> Harness {
    let metrics = Metrics::new();
    let relay = Relay::new(RelayConfig::default(), 7);
    let t = shard::spawn(cfg, relay, metrics.clone()).await.unwrap();
    Harness { t, metrics }
}

/// A shard on loopback that sheds past [`BUDGET`].
async fn budgeted() -> Harness {
    relay(UdpConfig {
        max_queue_delay: Some(BUDGET),
        ..loopback()
    })
    .await
}

fn loopback() -> UdpConfig {
    UdpConfig::new("127.0.0.1:0".parse().unwrap())
}

impl Harness {
    async fn client(&self, publish: bool, subscribe: bool) -> Client {
        let request = JoinRequest {
            room: "r".into(),
            identity: "someone".into(),
            publish,
            subscribe,
            ..JoinRequest::default()
        };
        let answer = self
            .t
            .handle
            .join(JoinCommand {
                request,
                generation: 0,
                metadata: None,
                transport: TransportRequest::Rtp(Some(SrtpProfile::default())),
            })
            .await
            .unwrap();
        Client::from_answer(answer, Dialect::Draft01).await.unwrap()
    }

    /// Waits until the shard's socket is stamped on arrival: a probe update sent, the
    /// shard stalled for [`PROBE_STALL`], the update forwarded, and the wait the relay
    /// measured (its UDP forwarding latency, which counts the time in the socket) is at
    /// least the stall. Sends probes (x = `x`) until one shows it; panics at the deadline.
    async fn stamps_arrivals(&self, publisher: &mut Client, sub: &mut Client, x: f32) {
        let latency = self.metrics.transport("udp").latency;
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(
                Instant::now() < deadline,
                "the kernel never stamped arrivals"
            );
            let before = latency.get_sample_sum();
            publisher.send_objects(&[head(x)]).await.unwrap();
            std::thread::sleep(PROBE_STALL);
            let (_, objects) = sub.recv_objects(WAIT).await.unwrap().expect("the probe");
            assert_eq!(x_of(&objects), x);
            if latency.get_sample_sum() - before >= PROBE_STALL.as_secs_f64() {
                return;
            }
        }
    }

    fn dropped(&self, reason: &str) -> u64 {
        self.metrics.dropped.with_label_values(&[reason]).get()
    }

    /// Waits until `dropped(reason)` reaches `want`; panics at the deadline.
    async fn await_dropped(&self, reason: &str, want: u64) {
        let deadline = Instant::now() + WAIT;
        while self.dropped(reason) < want {
            assert!(
                Instant::now() < deadline,
                "{reason}: {} of {want}",
                self.dropped(reason)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn head(x: f32) -> Object {
    Object::Head1(Head1 {
        id: 1,
        location: Loc2 {
            x,
            ..Loc2::default()
        },
        ..Head1::default()
    })
}

/// The x of the one head a packet carried.
fn x_of(objects: &[Object]) -> f32 {
    match objects {
        [Object::Head1(h)] => h.location.x,
        other => panic!("expected one head: {other:?}"),
    }
}

/// A latched publisher and subscriber, the pair shown to work with one update (x = 1).
async fn pair(h: &Harness) -> (Client, Client) {
    let mut publisher = h.client(true, false).await;
    let mut sub = h.client(false, true).await;
    sub.send_rr().await.unwrap();
    publisher.send_objects(&[head(1.0)]).await.unwrap();
    let got = sub.recv_objects(WAIT).await.unwrap().expect("first update");
    assert_eq!(got, (publisher.ssrc(), vec![head(1.0)]));
    (publisher, sub)
}

/// Sends fresh updates (x = `x`) until the subscriber gets one; returns the x of every
/// update it got before it, and how many fresh ones were sent. Each send is given a
/// moment, and sent again when nothing came: the first goes to a queue the shard has not
/// read yet, where it may be shed or dropped with the rest.
async fn fresh_arrives(publisher: &mut Client, sub: &mut Client, x: f32) -> (Vec<f32>, u64) {
    let deadline = Instant::now() + WAIT;
    let (mut before, mut sent) = (Vec::new(), 0);
    loop {
        assert!(Instant::now() < deadline, "no fresh update got through");
        publisher.send_objects(&[head(x)]).await.unwrap();
        sent += 1;
        while let Some((_, objects)) = sub.recv_objects(Duration::from_millis(200)).await.unwrap() {
            match x_of(&objects) {
                got if got == x => return (before, sent),
                got => before.push(got),
            }
        }
    }
}

/// RTP that waited in the socket past the budget is dropped as `stale` before anything is
/// done with it when a newer packet of its stream was read with it: the subscriber never
/// sees it and the store never takes it. The stream's newest packet is handled however
/// long it waited (it may hold the only copy of a state), so the store and the
/// subscriber get it. A FIR that waited as long is still answered: RTCP is never shed. A
/// fresh packet after the stall goes through.
#[tokio::test]
async fn rtp_past_the_budget_is_shed_but_each_streams_newest_and_rtcp_are_not() {
    let h = budgeted().await;
    let (mut publisher, mut sub) = pair(&h).await;
    h.stamps_arrivals(&mut publisher, &mut sub, 1.0).await;
    assert_eq!(h.dropped("stale"), 0);

    // Both clients have sent already, so these sends find their sockets writable and
    // complete without yielding: the shard does not run between them and the sleep.
    // Fewer than a receive batch, so that one read takes them all.
    const QUEUED: u64 = 10;
    for i in 0..QUEUED {
        publisher
            .send_objects(&[head(10.0 + i as f32)])
            .await
            .unwrap();
    }
    sub.send_fir(publisher.ssrc()).await.unwrap();
    std::thread::sleep(STALL);

    h.await_dropped("stale", QUEUED - 1).await;
    let newest = 10.0 + (QUEUED - 1) as f32;
    // The newest was forwarded, then the FIR's snapshot holds it: the store took it.
    let mut got = Vec::new();
    while got.len() < 2 {
        let (ssrc, objects) = sub.recv_objects(WAIT).await.unwrap().expect("an update");
        assert_eq!(ssrc, publisher.ssrc());
        got.push(x_of(&objects));
    }
    assert_eq!(got, [newest, newest], "the newest, then the snapshot");
    assert_eq!(
        h.dropped("stale"),
        QUEUED - 1,
        "exactly what the newest replaced"
    );
    let (before, sent) = fresh_arrives(&mut publisher, &mut sub, 99.0).await;
    assert!(before.is_empty(), "shed updates were forwarded: {before:?}");
    // Nothing else was shed but, at most, fresh updates the subscriber did not get in
    // time (a shard descheduled past the budget on a busy machine sheds them, rightly).
    assert!(h.dropped("stale") < QUEUED + sent);
    for reason in ["auth_failed", "replay", "unknown_ssrc"] {
        assert_eq!(h.dropped(reason), 0, "{reason}: shed before SRTP");
    }
}

/// Two streams queued past the budget, interleaved: each keeps its own newest, whatever
/// the other sent after it.
#[tokio::test]
async fn past_the_budget_every_stream_keeps_its_newest() {
    let h = budgeted().await;
    let (mut a, mut sub) = pair(&h).await;
    h.stamps_arrivals(&mut a, &mut sub, 1.0).await;
    let mut b = h.client(true, false).await;
    b.send_objects(&[head(2.0)]).await.unwrap();
    let (ssrc, objects) = sub.recv_objects(WAIT).await.unwrap().expect("b's first");
    assert_eq!((ssrc, x_of(&objects)), (b.ssrc(), 2.0));

    for i in 0..5 {
        a.send_objects(&[head(10.0 + i as f32)]).await.unwrap();
        b.send_objects(&[head(20.0 + i as f32)]).await.unwrap();
    }
    // a's last, after b's last but one: b's newest stays the newest of its stream.
    a.send_objects(&[head(30.0)]).await.unwrap();
    std::thread::sleep(STALL);

    h.await_dropped("stale", 9).await;
    let mut newest = std::collections::HashMap::new();
    while newest.len() < 2 {
        let (ssrc, objects) = sub.recv_objects(WAIT).await.unwrap().expect("an update");
        assert!(newest.insert(ssrc, x_of(&objects)).is_none(), "one each");
    }
    assert_eq!(newest[&a.ssrc()], 30.0);
    assert_eq!(newest[&b.ssrc()], 24.0);
    assert_eq!(h.dropped("stale"), 9, "a's five and b's four older ones");
}

/// Without a budget the same wait sheds nothing: every queued update is forwarded, late.
#[tokio::test]
async fn without_a_budget_queued_rtp_is_forwarded_late() {
    let h = relay(loopback()).await;
    let (mut publisher, mut sub) = pair(&h).await;
    for i in 0..5 {
        publisher
            .send_objects(&[head(10.0 + i as f32)])
            .await
            .unwrap();
    }
    std::thread::sleep(STALL);
    let (before, _) = fresh_arrives(&mut publisher, &mut sub, 99.0).await;
    assert_eq!(before, [10.0, 11.0, 12.0, 13.0, 14.0]);
    assert_eq!(h.dropped("stale"), 0);
}

/// What the kernel drops because the socket's buffer is full is counted on the socket,
/// as `socket_overflow`, from the drop count the kernel hands over with the next datagram
/// (`SO_RXQ_OVFL`): every update of a burst is either forwarded or counted there.
#[tokio::test]
async fn the_kernels_drops_on_a_full_socket_are_counted_as_socket_overflow() {
    // The smallest buffer the kernel grants (a few datagrams); nothing shed as stale.
    let h = relay(UdpConfig {
        recv_buffer: Some(1),
        ..loopback()
    })
    .await;
    let (mut publisher, mut sub) = pair(&h).await;
    assert_eq!(h.dropped("socket_overflow"), 0);

    const BURST: u64 = 64;
    for i in 0..BURST {
        publisher
            .send_objects(&[head(10.0 + i as f32)])
            .await
            .unwrap();
    }
    std::thread::sleep(STALL);

    // The fresh update, queued after the drops, brings their count with it.
    let (forwarded, sent) = fresh_arrives(&mut publisher, &mut sub, 999.0).await;
    let overflow = h.dropped("socket_overflow");
    assert!(
        overflow > 0,
        "a burst of {BURST} overflows the smallest buffer"
    );
    // Every fresh update sent before the one that came through was dropped too (the
    // first finds the queue still full).
    assert_eq!(
        forwarded.len() as u64 + overflow,
        BURST + sent - 1,
        "each update forwarded or counted: {forwarded:?}, {overflow} dropped of {sent} fresh"
    );
    // The ones that fitted were the first: the kernel drops what comes to a full queue.
    let first: Vec<f32> = (0..forwarded.len()).map(|i| 10.0 + i as f32).collect();
    assert_eq!(forwarded, first);
}
