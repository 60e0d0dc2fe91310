//! `gsrelay recording`: a recording's directory on this machine (`docs/recording.md`):
//! what it holds, its torn tail cut after a crash, one pcapng file of it. No relay is
//! needed: these read and write the files.

use anyhow::Context;
use clap::{Args, Subcommand};
use gsrelay_record::{Key, Recording};
use std::path::PathBuf;

/// Arguments of `gsrelay recording`.
#[derive(Debug, Args)]
pub struct RecordingArgs {
    /// The recordings' key (the relay's `recording_key_file`): encrypted segments
    /// (`.enc`) open with it.
    #[arg(long, value_name = "FILE", global = true)]
    key_file: Option<PathBuf>,
    #[command(subcommand)]
    command: RecordingCommand,
}

#[derive(Debug, Subcommand)]
enum RecordingCommand {
    /// What a recording holds: its room, times, segments, checkpoints and torn tails.
    Info { dir: PathBuf },
    /// Cuts each segment's torn tail (what a relay killed while writing left), then
    /// prints what the recording holds.
    Repair { dir: PathBuf },
    /// Writes the recording as one pcapng file (its segments' sections one after
    /// another), torn tails left out.
    Export {
        dir: PathBuf,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// Runs `gsrelay recording`.
pub fn recording(a: RecordingArgs) -> anyhow::Result<()> {
    let key = match &a.key_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--key-file {}", path.display()))?;
            Some(Key::from_hex(&text).with_context(|| format!("--key-file {}", path.display()))?)
        }
    };
    let key = key.as_ref();
    match a.command {
        RecordingCommand::Info { dir } => print!("{}", info(&open(&dir, key)?)),
        RecordingCommand::Repair { dir } => {
            let r = Recording::repair_with(&dir, key)
                .with_context(|| format!("repairing {}", dir.display()))?;
            print!("{}", info(&r));
        }
        RecordingCommand::Export { dir, output } => {
            let r = open(&dir, key)?;
            let file = std::fs::File::create(&output)
                .with_context(|| format!("creating {}", output.display()))?;
            let mut out = std::io::BufWriter::new(file);
            let bytes = r
                .export_pcapng(&mut out)
                .with_context(|| format!("exporting {}", dir.display()))?;
            std::io::Write::flush(&mut out)
                .with_context(|| format!("writing {}", output.display()))?;
            println!("wrote {} ({bytes} bytes)", output.display());
        }
    }
    Ok(())
}

fn open(dir: &std::path::Path, key: Option<&Key>) -> anyhow::Result<Recording> {
    Recording::open_with(dir, key).with_context(|| format!("opening {}", dir.display()))
}

/// A recording, for people.
fn info(r: &Recording) -> String {
    let m = &r.meta;
    let stopped = match (&m.stopped_ns, &m.stop_reason) {
        (Some(_), Some(reason)) => format!("stopped ({reason})"),
        _ => "not stopped (recording, or its relay died)".into(),
    };
    let mut s = format!(
        "recording {} of room {} on {}\n{stopped}; {:.3} s, {} bytes, checkpoint every {} s\n",
        m.id,
        m.room,
        m.node,
        r.duration_ns() as f64 / 1e9,
        r.bytes(),
        m.checkpoint_secs
    );
    for seg in &r.segments {
        s += &format!(
            "  segment {:06}: {} bytes, {} checkpoints, {}{}\n",
            seg.index,
            seg.bytes,
            seg.checkpoints.len(),
            if seg.finished {
                "checksum good"
            } else {
                "unfinished"
            },
            if seg.torn_bytes > 0 {
                format!(", torn tail of {} bytes", seg.torn_bytes)
            } else {
                String::new()
            }
        );
    }
    s
}
