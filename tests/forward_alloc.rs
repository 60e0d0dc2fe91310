//! The whole forwarding path allocates nothing per packet in steady state: a relay on
//! loopback receives SRTP from a publisher and forwards it to per-stream and aggregated
//! subscribers (both SRTP profiles) while a global allocator counts the allocations made on
//! the relay's shard threads — receive, unprotect, the core, protect and send.

mod support;

use gsrelay::client::{Client, JoinOptions, Update};
use gsrelay::internal::shard::SHARD_THREADS;
use gsrelay::rtp::srtp::SrtpProfile;
use gsrelay::serve::Server;
use gsrelay::token::Rights;
use gsrelay::wire::Object;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::head;
use support::server::{PUBLISH, SUBSCRIBE, base, metric, start, token};

/// The system allocator, counting the allocations made on the relay's shard threads.
struct Counting;

/// Allocations made on shard threads since the process started.
static SHARD_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Whether this thread is a shard thread, once known.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Unknown,
    /// Being determined: allocations made while reading the thread's name are not counted.
    Asking,
    Shard,
    Other,
}

thread_local! {
    // `const` and without a destructor: touching it never allocates.
    static KIND: Cell<Kind> = const { Cell::new(Kind::Unknown) };
}

/// Counts one allocation if it is made on a shard thread.
fn count() {
    let kind = KIND.with(|k| {
        if k.get() == Kind::Unknown {
            k.set(Kind::Asking);
            let shard = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with(SHARD_THREADS));
            k.set(if shard { Kind::Shard } else { Kind::Other });
        }
        k.get()
    });
    if kind == Kind::Shard {
        SHARD_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over. The counting touches a thread-local `Cell` and an
// atomic, never memory handed out; reading the thread's name may allocate, which
// re-enters here with the state `Asking` and is then forwarded without recursion.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// How long one forwarded packet may take to arrive.
const WAIT: Duration = Duration::from_secs(5);

async fn join(server: &Server, room: &str, rights: Rights, opts: JoinOptions) -> Client {
    let mut c = Client::join(&base(server), &token(room, rights), room, opts)
        .await
        .unwrap();
    // Latches the subscriber's address at the relay.
    c.send_rr().await.unwrap();
    c
}

/// Publishes `rounds` updates of three objects and waits until every subscriber holds
/// the last x of object 1 before the next round, so the relay sees one input at a time.
async fn publish_rounds(
    publisher: &mut Client,
    subscribers: &mut [Client],
    from: u32,
    rounds: u32,
) {
    for i in from..from + rounds {
        // Positions cycle over a bounded stretch, as players' do in a game.
        let x = (i % 64) as f32;
        publisher
            .send_objects(&[head(1, x), head(2, -x), head(3, x * 0.5)])
            .await
            .unwrap();
        for s in subscribers.iter_mut() {
            wait_for_x(s, x).await;
        }
    }
}

/// Receives until an update puts object 1 at `x`.
async fn wait_for_x(s: &mut Client, x: f32) {
    loop {
        let updates = s
            .recv_updates(WAIT)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no update with x = {x} within {WAIT:?}"));
        let seen = updates.iter().any(|u| {
            matches!(u, Update::Objects { objects, .. }
                if objects.iter().any(|o| matches!(o, Object::Head1(h) if h.id == 1 && h.location.x == x)))
        });
        if seen {
            return;
        }
    }
}

/// Makes the core count a dropped datagram, a NACK and a FIR, and returns once the
/// snapshot the FIR asks for is sent (at once, or later if the feedback budget defers it:
/// the deferred path is then exercised before the count starts, too).
async fn provoke_counts(server: &Server, publisher: &Client, subscribers: &mut [Client]) {
    let stray = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let relay = subscribers[0].relay_addr().unwrap();
    stray.send_to(b"not rtp", relay).await.unwrap();
    let media = publisher.ssrc();
    let s = &mut subscribers[0];
    s.send_nack(media, &[1]).await.unwrap();
    let before = snapshots(server).await;
    s.send_fir(media).await.unwrap();
    let asked = Instant::now();
    while snapshots(server).await <= before {
        assert!(
            asked.elapsed() < WAIT,
            "the FIR got no snapshot within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The series counting FIRs answered from the cache.
const SNAPSHOTS: &str = "gsrelay_snapshots_total";

/// The snapshots counted so far.
async fn snapshots(server: &Server) -> f64 {
    metric(server, SNAPSHOTS)
        .await
        .unwrap_or_else(|| panic!("{SNAPSHOTS} is not in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_allocates_nothing_per_packet_in_steady_state() {
    let server = start().await;
    let room = "alloc";
    let mut publisher = join(&server, room, PUBLISH, JoinOptions::default()).await;
    let mut subscribers = vec![
        join(&server, room, SUBSCRIBE, JoinOptions::default()).await,
        join(
            &server,
            room,
            SUBSCRIBE,
            JoinOptions {
                profile: Some(SrtpProfile::AeadAes128Gcm),
                ..JoinOptions::default()
            },
        )
        .await,
        join(&server, room, SUBSCRIBE, JoinOptions::aggregated(Some(0))).await,
        join(&server, room, SUBSCRIBE, JoinOptions::aggregated(Some(2))).await,
    ];

    // Warm-up: buffers, tables and per-SSRC state reach their steady size (the NACK
    // history's 512 slots among them).
    publish_rounds(&mut publisher, &mut subscribers, 0, 600).await;
    // Counters and measurements the core keeps as it goes are started too: a dropped
    // datagram, feedback and a snapshot put a reason in each count and an event through
    // the queue, so a copy of those counts per export would show below.
    provoke_counts(&server, &publisher, &mut subscribers).await;
    publish_rounds(&mut publisher, &mut subscribers, 600, 100).await;

    let rounds = 2_000;
    let before = SHARD_ALLOCATIONS.load(Ordering::Relaxed);
    publish_rounds(&mut publisher, &mut subscribers, 700, rounds).await;
    let allocations = SHARD_ALLOCATIONS.load(Ordering::Relaxed) - before;

    // 2 000 packets in, 8 000 copies out, RTCP reports beside them: a per-packet allocation anywhere on the path
    // would show as thousands.
    assert_eq!(
        allocations, 0,
        "the relay's shard threads allocated {allocations} times while forwarding {rounds} packets"
    );
}
