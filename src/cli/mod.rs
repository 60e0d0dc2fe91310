//! The `gsrelay` command line: one subcommand per module.

pub mod codec;

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
    /// Decode one game-state payload and print its objects as a JSON array, in wire order.
    Decode(codec::DecodeArgs),
    /// Encode a JSON array of objects (as printed by `decode`) into a payload, as hex.
    Encode(codec::EncodeArgs),
}

impl Cli {
    /// Runs the chosen subcommand.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Decode(a) => codec::decode(a),
            Command::Encode(a) => codec::encode(a),
        }
    }
}
