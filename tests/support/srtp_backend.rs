//! The SRTP backends in the tests: the test binary runs on the backend the process picks
//! (accelerated where the CPU has VAES and AVX-512), and re-runs chosen tests in a child
//! process with `GSRELAY_SRTP_PORTABLE=1`, so they pass on both.

use gsrelay::rtp::srtp::{PORTABLE_ENV, SrtpBackend};
use std::process::Command;

/// Whether this process was told to stay on the portable backend (it is the re-run).
pub fn forced_portable() -> bool {
    std::env::var_os(PORTABLE_ENV).is_some_and(|v| v == "1")
}

/// The backend sessions must get in this process: portable when forced, else accelerated
/// where the CPU can run it. Checks that [`SrtpBackend::current`] agrees.
pub fn expected() -> SrtpBackend {
    let expected = if !forced_portable() && SrtpBackend::Accelerated.supported() {
        SrtpBackend::Accelerated
    } else {
        SrtpBackend::Portable
    };
    assert_eq!(
        SrtpBackend::current(),
        expected,
        "the process's SRTP backend"
    );
    expected
}

/// Runs `tests` (exact names) of this test binary again in a child process on the portable
/// backend and asserts that every one ran and passed. Does nothing in that child.
pub fn rerun_on_the_portable_backend(tests: &[&str]) {
    if forced_portable() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args(tests)
        .args(["--exact", "--test-threads=1"])
        .env(PORTABLE_ENV, "1")
        .output()
        .expect("run the test binary again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = || {
        format!(
            "re-run of {tests:?} with {PORTABLE_ENV}=1:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    };
    assert!(output.status.success(), "{}", report());
    // Not one filtered away by a renamed test: each ran.
    let passed = format!("test result: ok. {} passed", tests.len());
    assert!(stdout.contains(&passed), "{}", report());
    // Say so where the run shows it (with --nocapture), as the libsrtp skip does.
    eprintln!("{} passed again on the portable SRTP backend", tests.len());
}
