//! The layering rules of `docs/architecture.md`, checked on the source tree.

use std::fs;
use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).expect("read source");
                out.push((path.display().to_string(), text));
            }
        }
    }
    out
}

#[test]
fn the_core_counts_into_plain_data_and_imports_no_metrics_crate() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay");
    let files = sources(&core);
    assert!(files.len() > 10, "found the core's sources");
    for (path, text) in files {
        // Unit tests may take a real `Instant` as the origin of simulated time.
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for forbidden in [
            "prometheus",
            "crate::metrics",
            "tokio",
            "std::net",
            "Instant::now",
        ] {
            assert!(
                !text.contains(forbidden),
                "{path} mentions `{forbidden}`: the core owns no I/O, clock or metrics"
            );
        }
    }
}

#[test]
fn forwarding_is_a_leaf_that_does_not_call_back_into_the_core() {
    let forward = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay/forward.rs");
    let text = fs::read_to_string(forward).expect("read forward.rs");
    assert!(!text.contains("super::core"), "forward.rs uses the core");
}
