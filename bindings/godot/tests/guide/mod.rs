//! The GDScript of the guide's quick start (`docs/godot-client.md`).

use std::path::Path;

/// The script in the ```gdscript block after the guide's `<!-- quick start` marker.
pub fn quick_start_script() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/godot-client.md");
    let guide =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    guide
        .split("<!-- quick start")
        .nth(1)
        .and_then(|rest| rest.split("```gdscript\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the guide's quick-start script")
        .to_owned()
}
