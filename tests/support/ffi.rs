//! Building programs against the C ABI (`crates/ffi`): its header, its shared and static
//! libraries (built beside the test binaries, as `gsrelay-ffi` is a dev-dependency), and a
//! compiler of this machine's (gcc, g++, mcs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The folder of the C header.
pub fn include_dir() -> PathBuf {
    root().join("crates/ffi/include")
}

/// The folder of the C test programs' sources.
pub fn sources() -> PathBuf {
    root().join("tests/ffi")
}

/// Where cargo put `libgsrelay_ffi.so` and `.a`: beside this test's binary.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .expect("the test binary's folder")
        .to_path_buf();
    assert!(
        dir.join("libgsrelay_ffi.so").is_file(),
        "libgsrelay_ffi.so not built beside {}",
        dir.display()
    );
    dir
}

/// A scratch folder for one test's programs, emptied first.
pub fn out_dir(test: &str) -> PathBuf {
    let dir = root().join("target/ffi-tests").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the output folder");
    dir
}

/// How a program links the library.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// `libgsrelay_ffi.so`, found at run time through the rpath.
    Shared,
    /// `libgsrelay_ffi.a`, with what Rust's standard library needs of the system.
    Static,
}

/// Compiles `sources` (under `tests/ffi`, or absolute paths) into `out` with `compiler` (`gcc` or `g++`),
/// warnings as errors, and `extra` flags; panics with the compiler's output on failure.
pub fn compile(
    compiler: &str,
    std: &str,
    sources: &[&str],
    out: &Path,
    link: Link,
    extra: &[&str],
) {
    let lib = lib_dir();
    let mut cmd = Command::new(compiler);
    cmd.arg(format!("-std={std}"))
        .args(["-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(include_dir())
        .args(extra);
    for s in sources {
        cmd.arg(self::sources().join(s));
    }
    cmd.arg("-o").arg(out);
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(&lib).arg("-lgsrelay_ffi");
            cmd.arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Link::Static => {
            cmd.arg(lib.join("libgsrelay_ffi.a"));
            cmd.args(["-lpthread", "-ldl", "-lm"]);
        }
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(
        output.status.success(),
        "{compiler} failed on {sources:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Panics with the program's output unless it exited 0; returns its stdout.
pub fn succeeded(what: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The reference implementation's vectors: `../shared/interop/gse`, or `GSRELAY_GSE_VECTORS`.
pub fn gse_vectors() -> PathBuf {
    let dir = std::env::var_os("GSRELAY_GSE_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/interop/gse"));
    assert!(
        dir.join("objects.json").is_file(),
        "the gse vectors are not at {} (set GSRELAY_GSE_VECTORS)",
        dir.display()
    );
    dir
}
