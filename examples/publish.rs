//! Quick-start publisher: joins a room over the HTTP API and publishes a moving head and
//! two hands (one Head1, two Hand1) at 20 Hz over SRTP, then leaves.
//!
//! ```sh
//! cargo run --release --example publish -- --http http://127.0.0.1:8080 --token TOKEN [--room dev] [--seconds 30]
//! ```

mod common;

use clap::Parser;
use gsrelay::client::JoinOptions;
use gsrelay::wire::{Hand1, Head1, Loc2, Object, Rot2};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often a packet is sent.
const PERIOD: Duration = Duration::from_millis(50);
/// Print what was sent every this many packets (once a second).
const PRINT_EVERY: u64 = 20;

/// Publishes a moving Head1 and two Hand1 at 20 Hz.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    connection: common::Connection,
    /// How long to publish, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
}

/// Time1: the low 16 bits of milliseconds since the Unix epoch (draft §5).
fn time1() -> u16 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    (ms & 0xffff) as u16
}

/// The scene at `t` seconds: a head walking round a circle of 1 m, hands swinging.
fn scene(t: f32) -> Vec<Object> {
    let (s, c) = t.sin_cos();
    let time = time1();
    let head = Loc2 {
        x: c,
        y: 1.7,
        z: s,
        vx: -s,
        vy: 0.0,
        vz: c,
    };
    let hand = |id, left: bool| {
        let side = if left { -0.25 } else { 0.25 };
        let swing = 0.2 * (2.0 * t).sin() * if left { 1.0 } else { -1.0 };
        Object::Hand1(Hand1 {
            id,
            time,
            left,
            location: Loc2 {
                x: head.x + side * s,
                y: 1.1 + swing,
                z: head.z - side * c,
                ..head
            },
            rotation: Rot2::default(),
            extra: Default::default(),
        })
    };
    vec![
        Object::Head1(Head1 {
            id: 1,
            time,
            location: head,
            rotation: Rot2 {
                sj: (t / 2.0).sin(),
                ..Rot2::default()
            },
            ipd: Some(0.063),
            extra: Default::default(),
        }),
        hand(2, true),
        hand(3, false),
    ]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut client = args.connection.join(JoinOptions::default()).await?;
    eprintln!(
        "joined room {:?} as session {}, publishing as SSRC {} for {} s",
        args.connection.room,
        gsrelay::format_session_id(client.session()),
        client.ssrc(),
        args.seconds
    );
    let start = tokio::time::Instant::now();
    let end = start + Duration::from_secs(args.seconds);
    let mut tick = tokio::time::interval(PERIOD);
    let mut sent = 0u64;
    while tokio::time::Instant::now() < end {
        tick.tick().await;
        let objects = scene(start.elapsed().as_secs_f32());
        client.send_objects(&objects).await?;
        if sent.is_multiple_of(PRINT_EVERY) {
            println!("sent #{sent}: {}", serde_json::to_string(&objects)?);
        }
        sent += 1;
    }
    client.leave().await?;
    eprintln!("sent {sent} packets; left");
    Ok(())
}
