#!/usr/bin/env bash
# Writes the outputs of a fixed set of runs (38 files) into OUTDIR, to show that a speed change
# changes no output: run it with the binary before the change and with the one after, then
# `diff -r BEFORE_DIR AFTER_DIR` (or give BEFORE_DIR as the third argument: the script diffs and
# exits 1 on any difference). The set: the full Philly trace under fifo, sjf, srtf, las and
# tiresias (--json and --jobs-csv), the default run, Gavel's reference trace cut to 1,000 jobs
# under nine Gavel policies, topology + variability and synthetic + failures runs under four
# policies, and Tiresias with its simulator's demotion timer. About 2 minutes.
#
# Usage: scripts/output-check.sh BIN OUTDIR [BEFORE_DIR]
# The JSON names the data files with the path of the checkout that built the binary: build
# both binaries in the same checkout (or in /work/main-like paths) to compare them byte for byte.
set -Eeuo pipefail
BIN=$(realpath "${1:?usage: scripts/output-check.sh BIN OUTDIR [BEFORE_DIR]}")
OUT=$(realpath -m "${2:?usage: scripts/output-check.sh BIN OUTDIR [BEFORE_DIR]}")
BEFORE=${3:-}
source "$(dirname "$0")/common.sh"
# The runs' own messages are silenced below; a run that fails says where.
trap 'echo "output-check: the run at line $LINENO failed (rerun it without 2>/dev/null to see why)" >&2' ERR
need_traces gavel-reference/synth3000_lam600.trace
mkdir -p "$OUT"
G=(--throughputs data/gavel/simulation_throughputs.json.gz --cluster v100=8,p100=8,k80=8 --round 360s
   --checkpoint-interval 0s --restore-overhead 0s --seed 0 --threads 1)
for p in fifo sjf srtf las tiresias; do
  "$BIN" sim --all --policy $p --threads 1 --json --jobs-csv "$OUT/philly-$p.csv" > "$OUT/philly-$p.json" 2>/dev/null
done
"$BIN" sim --json > "$OUT/default.json" 2>/dev/null
for p in gavel-fifo fifo-perf fifo-packed max-min-fairness max-min-fairness-perf max-min-fairness-packed \
         finish-time-fairness-perf min-total-duration-perf max-sum-throughput-perf; do
  "$BIN" sim --trace "gavel:$TRACES/gavel-reference/synth3000_lam600.trace" --max-jobs 1000 "${G[@]}" \
    --policy $p --json --jobs-csv "$OUT/g1000-$p.csv" > "$OUT/g1000-$p.json" 2>/dev/null
done
for p in srtf las tiresias fifo; do
  "$BIN" sim --policy $p --threads 1 --topology leaf=16,spines=8,oversubscription=2,nic-gbps=400 \
    --comm-profile fraction=0.3 --variability default --json > "$OUT/topo-$p.json" 2>/dev/null
  "$BIN" sim --policy $p --threads 1 \
    --synthetic jobs=2000,rate=30/h,seed=3,tenants=4,weights=1:1:2:4,durations=gavel,gpus=gavel \
    --failures mtbf=200h,repair=2h --json > "$OUT/synth-$p.json" 2>/dev/null
done
"$BIN" sim --policy tiresias --threads 1 --all --set tiresias.timer=tiresias \
  --set tiresias.thresholds=600s:3600s --json > "$OUT/philly-tiresias-timer.json" 2>/dev/null
echo "$(ls "$OUT" | wc -l) outputs in $OUT"
if [[ -n $BEFORE ]]; then
  diff -r "$BEFORE" "$OUT" > /dev/null && echo "identical to $BEFORE" || { echo "DIFFERENT from $BEFORE"; exit 1; }
fi
