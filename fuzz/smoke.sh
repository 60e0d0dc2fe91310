#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 20), one after the other in
# one process each, from its seed corpus. Exits non-zero if any target crashed; the
# crashing input is in fuzz/artifacts/<target>/.
# Usage: fuzz/smoke.sh [SECONDS]. Needs the nightly toolchain and cargo-fuzz
# (docs/security.md, "Fuzzing").
set -euo pipefail
secs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
targets=(wire rtp rtcp srtp interest core roq link_wire)
"$root/fuzz/seed.sh"
cargo +nightly fuzz build
logs=$(mktemp -d)
failed=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    echo "== $t: ${secs}s"
    if ! cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 2>"$logs/$t.log"; then
        tail -40 "$logs/$t.log"
        failed+=("$t")
    fi
    grep -E '^stat::number_of_executed_units' "$logs/$t.log" || true
done
rm -rf "$logs"
if ((${#failed[@]})); then
    echo "fuzz smoke: crashed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz smoke: ${#targets[@]} targets, ${secs}s each, no crash"
