//! Network faults on loopback for the chaos run, by nftables: a table of the run's own
//! that drops (all, or a share at random of) the UDP datagrams to and from one port, and
//! is deleted when the fault ends or the run stops. Only root with `nft` can set one; the
//! rules match loopback ports the run's own nodes bound, so nothing else on the machine
//! is touched.

use anyhow::{Context, bail};
use std::io::Write;
use std::process::{Command, Stdio};

/// A fault in place; removed when dropped.
#[derive(Debug)]
pub struct PortFault {
    table: String,
}

/// Whether this process may set network faults: root, with `nft` on the PATH.
pub fn available() -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("network faults need root (nftables)");
    }
    let version = Command::new("nft")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("network faults need nft (Debian's nftables) on the PATH")?;
    if !version.success() {
        bail!("nft --version failed");
    }
    Ok(())
}

impl PortFault {
    /// Drops `percent` (1..=100) of the UDP datagrams to and from loopback port `port`,
    /// in a table named after this process and `tag`.
    pub fn drop_udp(port: u16, percent: u8, tag: &str) -> anyhow::Result<Self> {
        let table = format!("gsrelay_chaos_{}_{tag}", std::process::id());
        let share = match percent {
            100.. => String::new(),
            p => format!("numgen random mod 100 < {p} "),
        };
        let script = format!(
            "table inet {table} {{\n\
             \x20 chain out {{\n\
             \x20   type filter hook output priority 0; policy accept;\n\
             \x20   oif \"lo\" udp dport {port} {share}drop\n\
             \x20   oif \"lo\" udp sport {port} {share}drop\n\
             \x20 }}\n\
             }}\n"
        );
        nft(&["-f", "-"], Some(&script))?;
        Ok(Self { table })
    }
}

impl Drop for PortFault {
    fn drop(&mut self) {
        // A table already gone (removed by hand) is not an error worth a panic here.
        let _ = nft(&["delete", "table", "inet", &self.table], None);
    }
}

/// Runs `nft` with `args`, `stdin` fed to it.
fn nft(args: &[&str], stdin: Option<&str>) -> anyhow::Result<()> {
    let mut child = Command::new("nft")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nft")?;
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        input.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
