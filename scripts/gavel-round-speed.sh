#!/usr/bin/env bash
# Times the Gavel policies on Gavel's 3,000-job reference trace (8 V100 + 8 P100 + 8 K80,
# 360 s rounds, one thread) for two binaries, alternating them REPEATS times so that the
# machine's load falls on both alike, and checks that both write the same bytes (the
# --json output and the --jobs-csv rows). Also times the start-up alone (the trace's
# first 4 jobs). Prints a Markdown table: best and median wall time of each, their ratios.
# With SIZES=1 it then times gavel-fifo at 1,000, 3,000 and 10,000 jobs at constant load
# (the trace's first 1,000 jobs; all 3,000; the trace three and a third times over, each
# copy's arrivals shifted by its last arrival plus one mean gap, 600 s), per 1,000 jobs,
# and checks those outputs too.
#
# Usage: scripts/gavel-round-speed.sh OLD_BIN [REPEATS] [POLICY...]
#   OLD_BIN  a cotenant binary built from an earlier commit; the new one is this
#            checkout's release build (or COTENANT_BIN).
#   REPEATS  alternations (default 5).
#   POLICY   default: gavel-fifo fifo-perf max-min-fairness-perf fifo-packed.
# Exits 1 if any policy's outputs differ between the binaries. About a minute.
set -Eeuo pipefail
source "$(dirname "$0")/common.sh"
OLD=$(realpath "${1:?usage: scripts/gavel-round-speed.sh OLD_BIN [REPEATS] [POLICY...]}")
REPEATS=${2:-5}
shift $(( $# >= 2 ? 2 : 1 ))
POLICIES=("$@")
[[ ${#POLICIES[@]} -gt 0 ]] || POLICIES=(gavel-fifo fifo-perf max-min-fairness-perf fifo-packed)
need_traces gavel-reference/synth3000_lam600.trace
build_cotenant
NEW=$(realpath "$BIN")
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
GAVEL=$TRACES/gavel-reference/synth3000_lam600.trace
head -n 4 "$GAVEL" > "$RAW/start.trace"

run() { # run SIDE BIN TRACE POLICY TAG REPEAT
  local start end
  start=$(date +%s.%N)
  "$2" sim --trace "gavel:$3" --throughputs data/gavel/simulation_throughputs.json.gz \
    --cluster v100=8,p100=8,k80=8 --round 360s --checkpoint-interval 0s --restore-overhead 0s \
    --seed 0 --policy "$4" --threads 1 --json --jobs-csv "$RAW/$5-$1.csv" > "$RAW/$5-$1.json"
  end=$(date +%s.%N)
  awk "BEGIN { print $end - $start }" >> "$RAW/$5-$1.times"
}

status=0
if [[ ${SIZES:-0} == 1 ]]; then
  gavel_sized_traces "$RAW"
fi
for policy in start-up "${POLICIES[@]}"; do
  trace=$GAVEL; p=$policy
  [[ $policy == start-up ]] && { trace=$RAW/start.trace; p=gavel-fifo; }
  for r in $(seq "$REPEATS"); do
    run old "$OLD" "$trace" "$p" "$policy" "$r"
    run new "$NEW" "$trace" "$p" "$policy" "$r"
  done
  if ! cmp -s "$RAW/$policy-old.json" "$RAW/$policy-new.json" || ! cmp -s "$RAW/$policy-old.csv" "$RAW/$policy-new.csv"; then
    echo "error: $policy: the two binaries' outputs differ" >&2
    status=1
  fi
done
if [[ ${SIZES:-0} == 1 ]]; then
  for n in 1000 3000 10000; do
    for r in $(seq "$REPEATS"); do
      run old "$OLD" "$RAW/g$n.trace" gavel-fifo "size-$n" "$r"
      run new "$NEW" "$RAW/g$n.trace" gavel-fifo "size-$n" "$r"
    done
    if ! cmp -s "$RAW/size-$n-old.json" "$RAW/size-$n-new.json" || ! cmp -s "$RAW/size-$n-old.csv" "$RAW/size-$n-new.csv"; then
      echo "error: gavel-fifo at $n jobs: the two binaries' outputs differ" >&2
      status=1
    fi
  done
fi
echo "| run | before best / median (ms) | after best / median (ms) | ratio (best) | ratio (median) | outputs |"
echo "|---|---:|---:|---:|---:|---|"
SIZE_ROWS=()
[[ ${SIZES:-0} == 1 ]] && SIZE_ROWS=(size-1000 size-3000 size-10000)
for policy in start-up "${POLICIES[@]}" "${SIZE_ROWS[@]}"; do
  python3 - "$RAW" "$policy" <<'PY'
import statistics, sys
raw, policy = sys.argv[1], sys.argv[2]
old = [float(x) * 1000 for x in open(f"{raw}/{policy}-old.times")]
new = [float(x) * 1000 for x in open(f"{raw}/{policy}-new.times")]
import filecmp
same = all(filecmp.cmp(f"{raw}/{policy}-old.{e}", f"{raw}/{policy}-new.{e}", shallow=False) for e in ("json", "csv"))
label = "start-up (4 jobs, gavel-fifo)" if policy == "start-up" else policy
if policy.startswith("size-"):
    n = int(policy[5:])
    label = f"gavel-fifo, {n:,} jobs (per 1,000: {min(old) * 1000 / n:.1f} / {min(new) * 1000 / n:.1f} ms best)"
print(f"| {label} | {min(old):.0f} / {statistics.median(old):.0f} | {min(new):.0f} / {statistics.median(new):.0f} "
      f"| {min(old) / min(new):.2f}x | {statistics.median(old) / statistics.median(new):.2f}x "
      f"| {'identical' if same else 'DIFFER'} |")
PY
done
exit $status
