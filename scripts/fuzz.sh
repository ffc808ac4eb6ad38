#!/usr/bin/env bash
# Builds the cotenant-fuzz harness (the `fuzz` profile: release without LTO) and runs
# every target (every trace reader, the request readers, the cluster and tenant config
# parsers) for $FUZZ_SECONDS seconds each (default 30) under a virtual-memory limit of
# $FUZZ_MEMORY_MIB MiB (default 4096), so a reader that allocates without bound fails
# here instead of taking the machine down. Deterministic: $FUZZ_SEED (default 0) fixes
# every input. Findings (reproducer inputs) go to $FUZZ_FINDINGS (default
# $CARGO_TARGET_DIR/fuzz-findings, or target/fuzz-findings). A target that crashes the
# process (allocation failure under the limit, stack overflow) is replayed with the
# same seed, saving each input first, so its reproducer is kept too. Exits non-zero on
# any finding or crash. Extra arguments go to the fuzzer (e.g. --max-execs 100000).
# Usage: scripts/fuzz.sh [cotenant-fuzz args...]; FUZZ_TARGETS="philly azure" limits
# the targets. See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
SEED="${FUZZ_SEED:-0}"
MEMORY_MIB="${FUZZ_MEMORY_MIB:-4096}"
FINDINGS="${FUZZ_FINDINGS:-$TARGET_DIR/fuzz-findings}"
# The `fuzz` profile: release optimization without LTO (Cargo.toml), a shorter build.
cargo build --profile fuzz -q -p cotenant-fuzz
BIN="$TARGET_DIR/fuzz/cotenant-fuzz"
TARGETS="${FUZZ_TARGETS:-$("$BIN" --list | tr '\n' ' ')}"
mkdir -p "$FINDINGS"
echo "cotenant-fuzz: seed $SEED, $SECONDS_PER_TARGET s per target, memory limit $MEMORY_MIB MiB, findings in $FINDINGS"
printf '%-15s %10s %9s %9s %7s %9s %11s %10s %8s\n' \
    target execs ok errors panics timeouts violations bad-error seconds
status=0
passed=0
failed=0
for target in $TARGETS; do
    # The limit applies to the fuzzer only (a subshell), not to cargo above.
    set +e
    (
        ulimit -v $((MEMORY_MIB * 1024))
        exec "$BIN" --no-header --target "$target" --seconds-per-target "$SECONDS_PER_TARGET" \
            --seed "$SEED" --findings "$FINDINGS" "$@"
    )
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
    if [ "$rc" -eq 1 ]; then
        status=1
    elif [ "$rc" -eq 2 ]; then
        echo "cotenant-fuzz: bad arguments (exit 2)" >&2
        exit 2
    elif [ "$rc" -ne 0 ]; then
        status=1
        echo "$target: the fuzzer crashed (exit $rc); replaying with seed $SEED to keep the input"
        current="$FINDINGS/$target-crash.bin"
        set +e
        (
            ulimit -v $((MEMORY_MIB * 1024))
            exec "$BIN" --no-header --target "$target" --seconds-per-target "$SECONDS_PER_TARGET" \
                --seed "$SEED" --save-current "$current" "$@"
        ) >/dev/null 2>&1
        set -e
        echo "$target: crash reproducer (the last input run) in $current"
    fi
done
echo "fuzz: $passed passed, $failed failed"
exit "$status"
