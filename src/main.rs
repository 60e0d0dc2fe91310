//! The `gsrelay` binary.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // `gsrelay room` tells a refusal from an unreachable relay.
            match e.downcast_ref::<cli::room::Failure>() {
                Some(f) => ExitCode::from(f.exit),
                None => ExitCode::FAILURE,
            }
        }
    }
}
