//! Quick-start subscriber: joins a room over the HTTP API, asks for the latest state of
//! every stream with a FIR naming the relay's SSRC, then prints every object it receives
//! as one line of JSON until the time is up.
//!
//! ```sh
//! cargo run --release --example subscribe -- --http http://127.0.0.1:8080 --token TOKEN [--room dev] [--seconds 10]
//! ```

mod common;

use clap::Parser;
use gsrelay::client::Received;
use gsrelay::rtp::RtcpItem;
use gsrelay::wire;
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut client = args.connection.join().await?;
    eprintln!(
        "joined room {:?} as session {}; streams in the room: {:?}",
        args.connection.room,
        gsrelay::relay::format_session_id(client.session()),
        client.streams()
    );
    // A FIR naming the relay asks for every stream's latest state; as our first SRTCP
    // packet it also tells the relay where to send.
    client.send_fir(client.relay_ssrc()).await?;
    let end = tokio::time::Instant::now() + Duration::from_secs(args.seconds);
    let mut next_rr = tokio::time::Instant::now() + RR_PERIOD;
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
        match client.recv(wait).await? {
            Some(Received::Rtp {
                ssrc, seq, payload, ..
            }) => match wire::decode(&payload, client.dialect()) {
                Ok(objects) => {
                    for object in objects {
                        // Written by hand so the object keeps its field order ("type" first).
                        let object = serde_json::to_string(&object)?;
                        println!(r#"{{"ssrc":{ssrc},"seq":{seq},"object":{object}}}"#);
                    }
                }
                Err(e) => eprintln!("stream {ssrc} seq {seq}: undecodable payload: {e}"),
            },
            Some(Received::Rtcp(items)) => {
                for item in items {
                    if let RtcpItem::Bye { ssrcs } = item {
                        eprintln!("streams ended (BYE): {ssrcs:?}");
                    }
                }
            }
            None => {}
        }
    }
    client.leave().await?;
    eprintln!("left");
    Ok(())
}
