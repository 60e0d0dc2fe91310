//! The checked-in C header is what cbindgen makes of the crate today: a change to the ABI
//! that did not regenerate the header fails here. `GSRELAY_BLESS=1` writes it instead.

use std::path::Path;

#[test]
fn the_checked_in_header_is_the_generated_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = dir.join("include/gsrelay.h");
    if std::env::var("GSRELAY_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/gsrelay.h differs from what cbindgen generates from the crate: run \
         `GSRELAY_BLESS=1 cargo test -p gsrelay-ffi --test header` and commit it"
    );
}
