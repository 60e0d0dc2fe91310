//! The demo's script and the guide's quick start are GDScript 4 that parses, lints clean
//! and is formatted, judged by gdtoolkit (an independent GDScript 4 parser, from PyPI):
//! no Godot 4 binary exists here to load them. `scripts/test.sh` installs gdtoolkit into
//! the tools venv (`.venv`, or `GSRELAY_TOOLS_VENV`).

mod guide;

use std::path::{Path, PathBuf};
use std::process::Command;

fn tool(name: &str) -> PathBuf {
    let venv = std::env::var_os("GSRELAY_TOOLS_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"),
        PathBuf::from,
    );
    let path = venv.join("bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: scripts/test.sh installs gdtoolkit into the tools venv",
        path.display()
    );
    path
}

/// Runs gdtoolkit's `name` with `args` on `script`; panics with its output on failure.
fn check(name: &str, args: &[&str], script: &Path) {
    let out = Command::new(tool(name))
        .args(args)
        .arg(script)
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?} {}:\n{}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn judge(script: &Path) {
    check("gdparse", &[], script);
    check("gdlint", &[], script);
    check("gdformat", &["--check"], script);
}

#[test]
fn the_demo_script_is_gdscript_that_lints_clean() {
    judge(&Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/main.gd"));
}

#[test]
fn the_guide_quick_start_is_gdscript_that_lints_clean() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("godot-quick-start.gd");
    std::fs::write(&path, guide::quick_start_script()).expect("write the script");
    judge(&path);
}
