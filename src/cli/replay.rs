//! `gsrelay replay`: play a recording into a room of its own through a relay's server
//! API (`docs/recording.md`, "Replay"), then seek, change speed, pause, resume, stop.
//! Exit statuses as `gsrelay room`'s.

use super::room::{Api, field, print_json, required_token, runtime};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

/// Arguments of `gsrelay replay`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: 0 done; 1 a local error (no token); 2 a usage error; \
    3 the relay refused (prints `error: <code>: <message>`); 4 the relay could not be reached."
)]
pub struct ReplayArgs {
    /// The relay's HTTP API.
    #[arg(
        long,
        env = "GSRELAY_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// An admin token of the room played into (and, to start, of the recorded room), or
    /// a relay-wide one. Required.
    #[arg(long, env = "GSRELAY_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: ReplayCommand,
}

#[derive(Debug, Subcommand)]
enum ReplayCommand {
    /// Play recording ID into ROOM, a room no session is in.
    Start {
        recording: String,
        room: String,
        /// Speed, 0.25 to 8.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Where to start, milliseconds from the recording's start.
        #[arg(long, default_value_t = 0)]
        from_ms: u64,
        /// Start paused.
        #[arg(long)]
        paused: bool,
    },
    /// Where the replay of ROOM is.
    Status { room: String },
    /// Every replay of the relay (relay-wide admin token), as JSON.
    List,
    /// Go to MS milliseconds from the recording's start.
    Seek { room: String, ms: u64 },
    /// Play at SPEED (0.25 to 8).
    Speed { room: String, speed: f64 },
    /// Pause.
    Pause { room: String },
    /// Resume.
    Resume { room: String },
    /// Stop: the room's streams end.
    Stop { room: String },
}

/// Runs `gsrelay replay`.
pub fn replay(a: ReplayArgs) -> anyhow::Result<()> {
    let api = Api::new(&a.url, required_token(a.token)?)?;
    runtime()?.block_on(run(&api, a.command))
}

async fn run(api: &Api, command: ReplayCommand) -> anyhow::Result<()> {
    let control = |room: String, body: Value| async move {
        let path = ["v1", "replays", room.as_str()];
        api.call(Method::PATCH, &path, Some(&body)).await
    };
    let status = match command {
        ReplayCommand::Start {
            recording,
            room,
            speed,
            from_ms,
            paused,
        } => {
            let body = json!({"recording": recording, "room": room, "speed": speed,
                "from_ms": from_ms, "paused": paused});
            api.call(Method::POST, &["v1", "replays"], Some(&body))
                .await?
        }
        ReplayCommand::Status { room } => {
            api.call(Method::GET, &["v1", "replays", &room], None)
                .await?
        }
        ReplayCommand::List => {
            print_json(&api.call(Method::GET, &["v1", "replays"], None).await?);
            return Ok(());
        }
        ReplayCommand::Seek { room, ms } => control(room, json!({"seek_ms": ms})).await?,
        ReplayCommand::Speed { room, speed } => control(room, json!({"speed": speed})).await?,
        ReplayCommand::Pause { room } => control(room, json!({"paused": true})).await?,
        ReplayCommand::Resume { room } => control(room, json!({"paused": false})).await?,
        ReplayCommand::Stop { room } => {
            api.call(Method::DELETE, &["v1", "replays", &room], None)
                .await?;
            println!("stopped the replay of {room}");
            return Ok(());
        }
    };
    println!("{}", line(&status));
    Ok(())
}

/// `ROOM: RECORDING at POSITION / DURATION ms, SPEEDx, STATE`.
fn line(s: &Value) -> String {
    let state = match (s["ended"].as_bool(), s["paused"].as_bool()) {
        (Some(true), _) => "ended",
        (_, Some(true)) => "paused",
        _ => "playing",
    };
    format!(
        "{}: {} at {} / {} ms, {}x, {state}",
        field(&s["room"]),
        field(&s["recording"]),
        field(&s["position_ms"]),
        field(&s["duration_ms"]),
        field(&s["speed"])
    )
}
