//! The `gsrelay` command line: one subcommand per module.

pub mod codec;
pub mod recording;
pub mod replay;
pub mod room;
pub mod serve;

use clap::{Parser, Subcommand};

/// gsrelay: a selective forwarding relay for game state over RTP.
#[derive(Debug, Parser)]
#[command(name = "gsrelay", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Bench a relay (in process, remote, or the baseline UDP reflector) with publishers
    /// and subscribers over the real API and transport: throughput, loss, latency
    /// percentiles, late-join snapshot time. With no flags: the default scenario.
    Bench(Box<gsrelay_bench::cli::BenchArgs>),
    /// Decode one game-state payload and print its objects as a JSON array, in wire order.
    Decode(codec::DecodeArgs),
    /// Encode a JSON array of objects (as printed by `decode`) into a payload, as hex.
    Encode(codec::EncodeArgs),
    /// Run the relay: HTTP API on TCP 8080, RTP/UDP with SRTP on 5004 (one port per shard
    /// from there), RTP over QUIC and WebTransport on UDP 4433, WebRTC data channels on UDP
    /// 8445. With no file and no flags it runs on embedded defaults and prints a dev
    /// secret with a ready-to-use example token.
    Serve(Box<gsrelay::serve::ServeArgs>),
    /// Administer rooms through a relay's server API: list rooms, show one, close it,
    /// remove, mute or unmute a participant, set metadata, record.
    Room(room::RoomArgs),
    /// Print a signed access token (JWT, HS256) for one room, or relay-wide (`--room '*'`).
    Token(serve::TokenArgs),
    /// Play a recording into a room through a relay's server API; seek, speed, pause,
    /// resume, stop.
    Replay(replay::ReplayArgs),
    /// A recording's files on this machine: what it holds, its torn tail cut, one pcapng.
    Recording(recording::RecordingArgs),
}

impl Cli {
    /// Runs the chosen subcommand.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Bench(a) => gsrelay_bench::cli::bench(*a),
            Command::Decode(a) => codec::decode(a),
            Command::Encode(a) => codec::encode(a),
            Command::Room(a) => room::room(a),
            Command::Serve(a) => serve::serve(*a),
            Command::Token(a) => serve::token(a),
            Command::Replay(a) => replay::replay(a),
            Command::Recording(a) => recording::recording(a),
        }
    }
}
