#!/usr/bin/env bash
# Measures the simulator's speed figures of docs/performance.md for two binaries in one
# session, alternating them so that the machine's load falls on both alike, and prints
# Markdown tables of the figures and their ratios (before / after).
#
# Usage: scripts/perf-compare.sh OLD_BIN [REPEATS]
#   OLD_BIN  a cotenant binary built from an earlier commit (e.g. in a git worktree:
#            git worktree add /tmp/old COMMIT && cargo build --release --manifest-path /tmp/old/Cargo.toml)
#   REPEATS  alternations per measurement (default 2); the best of them is reported.
# The new binary is this checkout's release build. Needs ../shared/traces for the
# 3,000-job Gavel reference trace (skipped with a note if absent). Takes ~10 minutes.
set -Eeuo pipefail
source "$(dirname "$0")/common.sh"
OLD=$(realpath "${1:?usage: scripts/perf-compare.sh OLD_BIN [REPEATS]}")
REPEATS=${2:-2}
build_cotenant
NEW=$(realpath "$BIN")
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
echo "raw outputs in $RAW (removed at exit); old=$OLD new=$NEW" >&2

# 1. The full Philly trace, one policy at a time (bench), and the default run.
for r in $(seq "$REPEATS"); do
  for side in old new; do
    bin=$OLD; [[ $side == new ]] && bin=$NEW
    "$bin" bench > "$RAW/bench-$side-$r.md"
    /usr/bin/time -f "%e %M" -o "$RAW/default-$side-$r.time" "$bin" sim > /dev/null
    /usr/bin/time -f "%e %M" -o "$RAW/default1-$side-$r.time" "$bin" sim --threads 1 > /dev/null
  done
done
# 2. Decision latency at 40,000 GPUs. LAS is left out: on this shape every completion makes
#    it preempt and restart thousands of jobs (minutes per run, docs/performance.md).
"$OLD" bench --decision-latency --policy fifo,sjf,srtf,tiresias > "$RAW/latency-old.md" 2> /dev/null
"$NEW" bench --decision-latency --policy fifo,sjf,srtf,tiresias > "$RAW/latency-new.md" 2> /dev/null
# 3. Gavel's 3,000-job reference trace: wall time per policy.
GAVEL=$TRACES/gavel-reference/synth3000_lam600.trace
if [[ -f $GAVEL ]]; then
  for policy in gavel-fifo max-min-fairness-perf finish-time-fairness-perf; do
    for side in old new; do
      bin=$OLD; [[ $side == new ]] && bin=$NEW
      /usr/bin/time -f "%e %M" -o "$RAW/gavel-$policy-$side.time" "$bin" sim --trace "gavel:$GAVEL" \
        --throughputs data/gavel/simulation_throughputs.json.gz --cluster v100=8,p100=8,k80=8 --round 360s \
        --checkpoint-interval 0s --restore-overhead 0s --seed 0 --policy "$policy" --threads 1 > /dev/null
    done
  done
else
  echo "note: $GAVEL absent: Gavel rows skipped" >&2
fi
python3 - "$RAW" "$REPEATS" <<'PY'
import glob, os, re, sys
raw, repeats = sys.argv[1], int(sys.argv[2])

def table(path):
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 3 and cells[0] not in ("policy", "") and not cells[0].startswith("-"):
            rows[cells[0]] = cells
    return rows

def best_time(pattern):
    values = [open(p).read().split() for p in glob.glob(os.path.join(raw, pattern))]
    return min(float(v[0]) for v in values), max(int(v[1]) for v in values) / 1024

print("### Full Philly trace, one policy at a time (`cotenant bench`), best of", repeats)
print()
print("| policy | before (s) | after (s) | before / after | after / event-loop floor |")
print("|---|---:|---:|---:|---:|")
old = [table(p) for p in glob.glob(os.path.join(raw, "bench-old-*.md"))]
new = [table(p) for p in glob.glob(os.path.join(raw, "bench-new-*.md"))]
for policy in new[0]:
    before = min(float(t[policy][1]) for t in old)
    after_rows = [t[policy] for t in new]
    after = min(float(r[1]) for r in after_rows)
    best_row = min(after_rows, key=lambda r: float(r[1]))
    print(f"| {policy} | {before:.2f} | {after:.2f} | {before / after:.1f}x | {best_row[3]} |")
print()
for name, label in [("default", "default `cotenant sim` (5 policies, all cores)"), ("default1", "default `cotenant sim --threads 1`")]:
    b, bm = best_time(f"{name}-old-*.time")
    a, am = best_time(f"{name}-new-*.time")
    print(f"- {label}: {b:.2f} s -> {a:.2f} s wall ({b / a:.1f}x), peak {bm:.0f} -> {am:.0f} MiB")
print()
print("### Decision latency, 5,000 nodes / 40,000 GPUs (`cotenant bench --decision-latency`)")
print()
print("| policy | p99 before (µs) | p99 after (µs) | p50 after (µs) | first pass before / after (ms) |")
print("|---|---:|---:|---:|---:|")
lo, ln = table(os.path.join(raw, "latency-old.md")), table(os.path.join(raw, "latency-new.md"))
for policy, row in ln.items():
    o = lo.get(policy)
    print(f"| {policy} | {o[4] if o else 'not run'} | {row[4]} | {row[3]} | {o[1] if o else '-'} / {row[1]} |")
gavel = sorted(glob.glob(os.path.join(raw, "gavel-*-new.time")))
if gavel:
    print()
    print("### Gavel's 3,000-job reference trace (8 V100 + 8 P100 + 8 K80, 360 s rounds), one thread")
    print()
    print("| policy | before (s) | after (s) | before / after | after per 1,000 jobs (ms) |")
    print("|---|---:|---:|---:|---:|")
    for path in gavel:
        policy = re.match(r"gavel-(.*)-new\.time", os.path.basename(path)).group(1)
        b, _ = best_time(f"gavel-{policy}-old.time")
        a, _ = best_time(f"gavel-{policy}-new.time")
        print(f"| {policy} | {b:.2f} | {a:.2f} | {b / a:.1f}x | {a / 3 * 1000:.0f} |")
PY
