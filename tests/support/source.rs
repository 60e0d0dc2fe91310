//! Reading the workspace's own source as text, for the tests that check what the code says
//! (its layering, its label values): every `.rs` file under a folder, and a file's code
//! with its comments and unit-test module left out.

use std::fs;
use std::path::Path;

/// Every `.rs` file under `dir`, with its path relative to `dir` and its text.
pub fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).expect("read source");
                let rel = path.strip_prefix(dir).expect("under dir");
                out.push((rel.display().to_string(), text));
            }
        }
    }
    out
}

/// The code of a file: no comments, no unit-test module.
pub fn code(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}
