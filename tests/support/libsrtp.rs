//! Whether libsrtp (the Python package `pylibsrtp`) is there for the interop tests.

use std::process::{Command, Stdio};

/// Whether to run `test` (named in the messages); panics with the fix when libsrtp is
/// missing and skipping was not asked for with `GSRELAY_SKIP_LIBSRTP=1`.
pub fn available(test: &str) -> bool {
    let importable = Command::new("python3")
        .args(["-c", "import pylibsrtp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if importable {
        return true;
    }
    if std::env::var("GSRELAY_SKIP_LIBSRTP").as_deref() == Ok("1") {
        eprintln!(
            "\n!!!!!!!! SKIPPED: {test} (GSRELAY_SKIP_LIBSRTP=1 and \
             `python3 -c 'import pylibsrtp'` fails) !!!!!!!!\n"
        );
        return false;
    }
    panic!(
        "the {test} needs the Python package pylibsrtp: run \
         `python3 -m pip install pylibsrtp`, or set GSRELAY_SKIP_LIBSRTP=1 to skip it"
    );
}
