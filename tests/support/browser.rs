//! Headless Chromium driven by Playwright under node, for the browser tests: where both
//! are, the `node` command that runs a page script of `web/test/` in them, and its tally.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn env_path(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map_or(default, PathBuf::from)
}

/// `node web/test/<script>`, told where Chromium and `playwright-core` are; panics saying
/// how to install either if it is missing.
pub fn node(script: &str) -> Command {
    let chromium = env_path("GSRELAY_CHROMIUM", PathBuf::from("/usr/bin/chromium"));
    let tools = env_path("GSRELAY_NODE_TOOLS", root().join(".tools"));
    assert!(
        chromium.is_file(),
        "no Chromium at {} (scripts/test.sh installs Debian's chromium; or set GSRELAY_CHROMIUM)",
        chromium.display()
    );
    assert!(
        tools.join("node_modules/playwright-core").is_dir(),
        "no playwright-core in {} (scripts/test.sh installs it; or set GSRELAY_NODE_TOOLS)",
        tools.display()
    );
    let mut cmd = Command::new("node");
    cmd.arg(root().join("web/test").join(script))
        .env("GSRELAY_CHROMIUM", &chromium)
        .env("GSRELAY_NODE_TOOLS", &tools);
    cmd
}

/// Runs `cmd` (from [`node`]) to its end; panics saying how to install node if it cannot.
pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run node ({e}): scripts/test.sh installs it"))
}

/// Prints the output of `script`'s run and asserts its tally ("N passed, 0 failed") and
/// exit status; returns its standard output.
pub fn assert_passed(script: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let closing = stdout
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .unwrap_or_else(|| panic!("{script} prints its tally"));
    assert!(closing.ends_with(" 0 failed"), "{closing}");
    assert!(out.status.success());
    stdout
}
