#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets to fuzz/corpus/<target>/, from the interop
# vectors (../shared/interop/gse from the project root, or $GSE_VECTORS) and payloads built
# like the tests build them. The seeds are generated, never committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vectors=${GSE_VECTORS:-$root/../shared/interop/gse}
cargo run --quiet --manifest-path "$root/fuzz/Cargo.toml" -p gsrelay-fuzz-seed -- \
    "$vectors" "$root/fuzz/corpus"
