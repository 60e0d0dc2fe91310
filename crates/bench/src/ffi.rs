//! `gsrelay bench ffi`: what the C ABI costs a subscriber in a dense room. A relay in
//! process, `players` publishers each sending one Head1 at `rate` Hz, and one subscriber
//! that joins through the C ABI (`gsr_client_join`, the same entry points a C program
//! calls) in aggregated delivery and polls as a game loop does. Measured: the CPU of the
//! library's network threads (`gsrelay-net`) and of the polling thread per update it
//! handed over, and the wall time of each poll.

use crate::peers::Room;
use crate::sys::threads_cpu_s;
use gsrelay_core::wire::{Head1, Loc2, Object};
use gsrelay_core::{Interest, RelayConfig};
use gsrelay_ffi::*;
use gsrelay_server::serve::{self as server, ServeConfig};
use gsrelay_server::token::{Rights, Tokens};
use std::ffi::CString;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The library's network threads (its runtime's name).
const NET_THREADS: &str = "gsrelay-net";

/// What to run.
#[derive(Debug, Clone)]
pub struct FfiBench {
    /// Publishers in the room.
    pub players: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// How often the subscriber polls (a game's frame rate).
    pub poll_hz: f64,
    /// Aggregated delivery's longest wait, ms.
    pub aggregate_ms: u32,
    /// Measured time, after the warm-up.
    pub seconds: f64,
    /// Plain RTP instead of SRTP.
    pub plain_rtp: bool,
}

impl Default for FfiBench {
    fn default() -> Self {
        Self {
            players: 200,
            rate_hz: 20.0,
            poll_hz: 60.0,
            aggregate_ms: 10,
            seconds: 20.0,
            plain_rtp: false,
        }
    }
}

/// What it measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FfiReport {
    /// The run's settings.
    pub players: usize,
    /// Updates per second per publisher.
    pub rate_hz: f64,
    /// Whether RTP was plain (else SRTP).
    pub plain_rtp: bool,
    /// Object events the subscriber polled in the measured time.
    pub updates: u64,
    /// Of those, per second.
    pub updates_per_s: f64,
    /// CPU of the library's network threads per update, µs.
    pub net_us_per_update: f64,
    /// CPU of the polling thread in its polls per update, µs (the poll crossing and typed
    /// decoding; the game loop's sleep between polls is not counted).
    pub poll_us_per_update: f64,
    /// Their sum: what the C subscriber costs per received update, µs.
    pub us_per_update: f64,
    /// Median and worst wall time of one poll, µs, and the most updates one poll handed
    /// over.
    pub poll_p50_us: f64,
    /// Worst poll, µs.
    pub poll_max_us: f64,
    /// Most events in one poll.
    pub max_events_per_poll: usize,
}

impl FfiReport {
    /// The report as lines for a terminal.
    pub fn table(&self) -> String {
        format!(
            "C ABI subscriber, {} players at {} Hz (aggregated, {})\n\
             updates received         {} ({:.0}/s)\n\
             CPU per update           {:.3} us (network threads {:.3} + polling thread {:.3})\n\
             poll wall time           p50 {:.1} us, max {:.1} us (most events in one poll: {})\n",
            self.players,
            self.rate_hz,
            if self.plain_rtp { "plain RTP" } else { "SRTP" },
            self.updates,
            self.updates_per_s,
            self.us_per_update,
            self.net_us_per_update,
            self.poll_us_per_update,
            self.poll_p50_us,
            self.poll_max_us,
            self.max_events_per_poll,
        )
    }
}

/// CPU seconds of the calling thread.
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant the kernel
    // knows, and the call writes only `t`.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
    if ok {
        t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
    } else {
        0.0
    }
}

/// Fails with the library's message unless `status` is `GSR_OK`.
fn ok(status: gsr_status, what: &str) -> anyhow::Result<()> {
    if status == GSR_OK {
        return Ok(());
    }
    // SAFETY: the library's last error is a valid NUL-terminated string it owns.
    let message = unsafe { std::ffi::CStr::from_ptr(gsr_last_error()) };
    anyhow::bail!("{what}: status {status}: {}", message.to_string_lossy())
}

/// Runs the bench.
pub fn run(b: &FfiBench) -> anyhow::Result<FfiReport> {
    let relay_rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name(crate::run::RELAY_THREADS)
        .enable_all()
        .build()?;
    let clients_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("gsr-bench-pub")
        .enable_all()
        .build()?;
    let secret = gsrelay_server::token::dev_secret()?;
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let cfg = ServeConfig {
        http_addr: loopback,
        rtp_addr: loopback,
        quic_addr: loopback,
        webrtc_addr: loopback,
        token_secret: Some(secret.clone()),
        insecure_plain_rtp: b.plain_rtp,
        drain_grace_secs: 0,
        relay: RelayConfig {
            max_packets_per_sec: 1_000_000,
            max_sessions_per_room: b.players + 8,
            ..RelayConfig::default()
        },
        ..ServeConfig::default()
    };
    let srv = relay_rt.block_on(server::start(cfg))?;
    let room = Arc::new(Room {
        http: format!("http://{}", srv.http_addr),
        tokens: Tokens::new(secret.as_bytes())?,
        name: "ffi".into(),
        plain_rtp: b.plain_rtp,
        ttl_s: 3600,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let publishers: Vec<_> = (0..b.players)
        .map(|k| {
            let (room, stop) = (Arc::clone(&room), Arc::clone(&stop));
            let period = Duration::from_secs_f64(1.0 / b.rate_hz);
            clients_rt.spawn(async move { publish(&room, k, period, &stop).await })
        })
        .collect();

    let token = room.tokens.issue(
        &room.name,
        "ffi-subscriber",
        Rights {
            publish: false,
            subscribe: true,
            admin: false,
        },
        3600,
        now_s(),
    )?;
    let (http, token, name) = (
        CString::new(room.http.clone())?,
        CString::new(token)?,
        CString::new(room.name.clone())?,
    );
    let interest = CString::new(serde_json::to_string(&Interest::default())?)?;
    // SAFETY (the C ABI calls below): every pointer is to a live local value or array
    // of the size given, and the strings are NUL-terminated CStrings that outlive the
    // calls; this is how a C caller uses the library.
    let mut options = std::mem::MaybeUninit::<gsr_join_options>::uninit();
    ok(
        unsafe { gsr_join_options_init(options.as_mut_ptr()) },
        "options",
    )?;
    // SAFETY: initialised by the call above.
    let mut options = unsafe { options.assume_init() };
    options.http_base = http.as_ptr();
    options.token = token.as_ptr();
    options.room = name.as_ptr();
    options.interest_json = interest.as_ptr();
    options.delivery = GSR_DELIVERY_AGGREGATED;
    options.aggregate_max_delay_ms = b.aggregate_ms;
    options.plain_rtp = u8::from(b.plain_rtp);
    let mut client: gsr_client = 0;
    ok(unsafe { gsr_client_join(&options, &mut client) }, "join")?;

    // SAFETY: gsr_event is plain data; all zeroes is a valid value, and the poll
    // overwrites every slot it counts.
    let mut events: Vec<gsr_event> = vec![unsafe { std::mem::zeroed() }; 4096];
    let frame = Duration::from_secs_f64(1.0 / b.poll_hz);
    // The polling thread's CPU is counted around the poll calls only: the loop's sleep is
    // the game's, not the library's.
    let mut poll_cpu = 0.0;
    let mut poll = |counted: &mut u64, walls: &mut Vec<f64>, most: &mut usize, cpu: &mut f64| {
        let mut n = 0usize;
        let cpu0 = thread_cpu_s();
        let start = Instant::now();
        let status = unsafe {
            gsr_client_poll(
                client,
                events.as_mut_ptr(),
                events.len(),
                size_of::<gsr_event>(),
                &mut n,
            )
        };
        walls.push(start.elapsed().as_secs_f64() * 1e6);
        *cpu += thread_cpu_s() - cpu0;
        ok(status, "poll")?;
        *most = (*most).max(n);
        *counted += events[..n]
            .iter()
            .filter(|e| e.kind == GSR_EVENT_OBJECT)
            .count() as u64;
        if let Some(e) = events[..n].iter().find(|e| e.kind == GSR_EVENT_ENDED) {
            anyhow::bail!("the subscriber ended (code {})", e.code);
        }
        Ok::<(), anyhow::Error>(())
    };
    // Warm-up: joined, every publisher heard, buffers grown to the load.
    let (mut warm, mut walls, mut most, mut warm_cpu) = (0, Vec::new(), 0, 0.0);
    let warm_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < warm_until {
        poll(&mut warm, &mut walls, &mut most, &mut warm_cpu)?;
        std::thread::sleep(frame);
    }
    anyhow::ensure!(warm > 0, "the subscriber received nothing while warming up");
    let (net0, start) = (threads_cpu_s(NET_THREADS), Instant::now());
    let (mut updates, mut walls, mut most) = (0u64, Vec::new(), 0usize);
    while start.elapsed().as_secs_f64() < b.seconds {
        poll(&mut updates, &mut walls, &mut most, &mut poll_cpu)?;
        std::thread::sleep(frame);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (net, polling) = (threads_cpu_s(NET_THREADS) - net0, poll_cpu);
    ok(gsr_client_free(client), "free")?;
    stop.store(true, Ordering::Relaxed);
    clients_rt.block_on(async {
        for p in publishers {
            let _ = p.await;
        }
    });
    relay_rt.block_on(srv.shutdown())?;
    anyhow::ensure!(updates > 0, "the subscriber received nothing");
    walls.sort_by(f64::total_cmp);
    let per = |cpu: f64| cpu / updates as f64 * 1e6;
    Ok(FfiReport {
        players: b.players,
        rate_hz: b.rate_hz,
        plain_rtp: b.plain_rtp,
        updates,
        updates_per_s: updates as f64 / elapsed,
        net_us_per_update: per(net),
        poll_us_per_update: per(polling),
        us_per_update: per(net + polling),
        poll_p50_us: walls[walls.len() / 2],
        poll_max_us: walls.last().copied().unwrap_or_default(),
        max_events_per_poll: most,
    })
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One publisher: a moving Head1 every `period` until `stop`.
async fn publish(room: &Room, k: usize, period: Duration, stop: &AtomicBool) {
    let rights = Rights {
        publish: true,
        subscribe: false,
        admin: false,
    };
    let Ok(mut c) = room.join(&format!("p{k}"), rights).await else {
        return;
    };
    let mut tick = tokio::time::interval(period);
    let mut t = 0u16;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        t = t.wrapping_add(1);
        let head = Object::Head1(Head1 {
            id: 1,
            time: t,
            location: Loc2 {
                x: k as f32,
                y: f32::from(t % 100),
                ..Loc2::default()
            },
            ..Head1::default()
        });
        let _ = c.send_objects(&[head]).await;
    }
}
