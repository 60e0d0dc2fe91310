//! `gsrelay decode` and `gsrelay encode`.

use anyhow::{Context, bail};
use clap::Args;
use gsrelay::wire::{self, Dialect, Object};
use std::path::PathBuf;

/// Arguments of `gsrelay decode`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("input").required(true))]
pub struct DecodeArgs {
    /// Wire dialect: draft01 (the draft as written) or gse (the reference implementation).
    #[arg(long, default_value = "draft01")]
    dialect: Dialect,
    /// The payload as hex (whitespace allowed).
    #[arg(long, group = "input")]
    hex: Option<String>,
    /// A file holding the raw payload bytes.
    #[arg(long, group = "input")]
    file: Option<PathBuf>,
}

/// Arguments of `gsrelay encode`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("input").required(true))]
pub struct EncodeArgs {
    /// Wire dialect: draft01 or gse.
    #[arg(long, default_value = "draft01")]
    dialect: Dialect,
    /// A JSON array of objects (or a single object).
    #[arg(long, group = "input")]
    json: Option<String>,
    /// A file holding that JSON.
    #[arg(long, group = "input")]
    file: Option<PathBuf>,
}

/// Prints the decoded objects of one payload as JSON.
pub fn decode(a: DecodeArgs) -> anyhow::Result<()> {
    let bytes = match (a.hex, a.file) {
        (Some(h), _) => {
            let h: String = h.chars().filter(|c| !c.is_whitespace()).collect();
            hex::decode(&h).context("--hex is not valid hex")?
        }
        (None, Some(f)) => std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) => bail!("give --hex or --file"),
    };
    let objects = wire::decode(&bytes, a.dialect)
        .with_context(|| format!("payload is not valid {}", a.dialect))?;
    print(&serde_json::to_string_pretty(&objects)?)
}

/// Prints the payload for a JSON array of objects, as hex.
pub fn encode(a: EncodeArgs) -> anyhow::Result<()> {
    let text = match (a.json, a.file) {
        (Some(j), _) => j,
        (None, Some(f)) => {
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => bail!("give --json or --file"),
    };
    let value: serde_json::Value = serde_json::from_str(&text).context("input is not JSON")?;
    let objects: Vec<Object> = match value {
        serde_json::Value::Array(_) => serde_json::from_value(value),
        _ => serde_json::from_value(value).map(|o| vec![o]),
    }
    .context("input is not a game-state object or array of objects")?;
    let bytes = wire::encode(&objects, a.dialect)?;
    print(&hex::encode(bytes))
}

/// Writes a line to stdout, reporting (not panicking on) a closed pipe.
fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "{text}").context("writing to stdout")
}
