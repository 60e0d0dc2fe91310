//! The Python client (`bindings/python`) against a real relay: the extension is built and
//! installed into the tools venv with maturin (`maturin develop`, as a developer does),
//! then its pytest suite runs with this build's `gsrelay` binary, which its fixtures start
//! on loopback ports (`bindings/python/tests/conftest.py`). `scripts/test.sh` installs
//! maturin, pytest and mypy into the venv.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The tools venv's folder (`GSRELAY_TOOLS_VENV`, `.venv` by default).
fn venv() -> PathBuf {
    let venv = std::env::var_os("GSRELAY_TOOLS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv"));
    assert!(
        venv.join("bin/maturin").is_file() && venv.join("bin/pytest").is_file(),
        "no maturin and pytest in {}: run scripts/test.sh, which installs them",
        venv.display()
    );
    venv
}

/// This build's target folder (the test binary is in `<target>/<profile>/deps/`): maturin
/// builds there, so that the dependencies the workspace already built are reused.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.ancestors()
        .nth(3)
        .expect("the target folder above the test binary")
        .to_path_buf()
}

fn run(what: &str, cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
}

#[test]
fn the_python_client_passes_its_suite_against_a_real_relay() {
    let venv = venv();
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        "maturin develop",
        Command::new(venv.join("bin/maturin"))
            .args(["develop", "--quiet"])
            .current_dir(root().join("bindings/python"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", target_dir()),
    );
    run(
        "pytest",
        Command::new(venv.join("bin/python3"))
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "bindings/python/tests",
            ])
            .current_dir(root())
            .env("GSRELAY_BIN", env!("CARGO_BIN_EXE_gsrelay"))
            .env("PATH", &path)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
    );
}
