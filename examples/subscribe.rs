//! Quick-start subscriber: joins a room over the HTTP API, asks for the latest state of
//! every stream with a FIR naming the relay's SSRC, then prints every object it receives
//! as one line of JSON until the time is up, and a summary of the state it holds.
//!
//! With `--aggregated` it asks for aggregated delivery: one stream from the relay carrying
//! every sender's objects (each sender's in a container), sent at most `--max-delay-ms`
//! after an update. The lines look the same: `ssrc` is always the sender.
//!
//! ```sh
//! cargo run --release --example subscribe -- --http http://127.0.0.1:8080 --token TOKEN [--room dev] [--seconds 10] [--aggregated [--max-delay-ms 10]]
//! ```

mod common;

use clap::Parser;
use gsrelay::client::{JoinOptions, Received, RoomState, Update, updates};
use std::time::Duration;

/// How often a receiver report keeps the session alive.
const RR_PERIOD: Duration = Duration::from_secs(5);

/// Prints the room's game state as JSON lines: the snapshot first, then live updates.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    connection: common::Connection,
    /// How long to listen, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Ask for aggregated delivery (one stream from the relay for every sender).
    #[arg(long)]
    aggregated: bool,
    /// With --aggregated: the longest an update waits for its packet, in milliseconds
    /// (0 to 1000; the relay's default, 10, when absent).
    #[arg(long, requires = "aggregated")]
    max_delay_ms: Option<u32>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let opts = if args.aggregated {
        JoinOptions::aggregated(args.max_delay_ms)
    } else {
        JoinOptions::default()
    };
    let mut client = args.connection.join(opts).await?;
    eprintln!(
        "joined room {:?} as session {} ({} delivery); streams in the room: {:?}",
        args.connection.room,
        gsrelay::format_session_id(client.session()),
        if args.aggregated {
            "aggregated"
        } else {
            "per-stream"
        },
        client.streams()
    );
    // A FIR naming the relay asks for every stream's latest state; as our first SRTCP
    // packet it also tells the relay where to send.
    client.send_fir(client.relay_ssrc()).await?;
    let end = tokio::time::Instant::now() + Duration::from_secs(args.seconds);
    let mut next_rr = tokio::time::Instant::now() + RR_PERIOD;
    let mut state = RoomState::default();
    loop {
        let now = tokio::time::Instant::now();
        if now >= end {
            break;
        }
        if now >= next_rr {
            client.send_rr().await?;
            next_rr = now + RR_PERIOD;
        }
        let wait = end.min(next_rr) - now;
        let Some(received) = client.recv(wait).await? else {
            continue;
        };
        let seq = match &received {
            Received::Rtp { seq, .. } => Some(*seq),
            Received::Rtcp(_) => None,
        };
        let got = match updates(&received, client.dialect()) {
            Ok(got) => got,
            Err(e) => {
                eprintln!("seq {seq:?}: undecodable payload: {e}");
                continue;
            }
        };
        for update in &got {
            print(update, seq)?;
            state.apply(update);
        }
    }
    eprintln!(
        "state: {} objects from {} senders",
        state.objects(),
        state.senders().count()
    );
    client.leave().await?;
    eprintln!("left");
    Ok(())
}

/// Prints an update: one JSON line per object, or the senders that left.
fn print(update: &Update, seq: Option<u16>) -> anyhow::Result<()> {
    match update {
        Update::Objects { ssrc, objects } => {
            let seq = seq.unwrap_or_default();
            for object in objects {
                // Written by hand so the object keeps its field order ("type" first).
                let object = serde_json::to_string(object)?;
                println!(r#"{{"ssrc":{ssrc},"seq":{seq},"object":{object}}}"#);
            }
        }
        Update::Left(ssrcs) => eprintln!("streams ended (BYE): {ssrcs:?}"),
    }
    Ok(())
}
