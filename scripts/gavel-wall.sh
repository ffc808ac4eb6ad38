#!/usr/bin/env bash
# Wall time of gavel-fifo (or POLICY) for two binaries on Gavel-format traces of 4 (start-up alone),
# 1,000, 3,000 and 10,000 jobs at constant load (`gavel_sized_traces` in common.sh; the
# flags of scripts/gavel-round-speed.sh), alternating the binaries so that the machine's
# load falls on both alike. Each measurement is the mean of `perf stat -r REPS` (wall time
# and task-clock); the table gives the best and median of ALTERNATIONS such wall means per
# binary (ms), their ratio, the new binary's best per 1,000 jobs, and the best task-clock
# means and their ratio. scripts/gavel-round-speed.sh checks outputs; this one only times
# (and needs `perf`).
#
# Usage: [POLICY=P] [REPS=R] scripts/gavel-wall.sh OLD_BIN NEW_BIN [ALTERNATIONS] [SIZE...]
#   ALTERNATIONS  default 7.   SIZE  4, 1000, 3000 or 10000 (default: all four).
#   POLICY        default gavel-fifo (e.g. finish-time-fairness-perf).
#   REPS          runs per perf stat mean, default 10.
set -Eeuo pipefail
source "$(dirname "$0")/common.sh"
OLD=$(realpath "${1:?usage: scripts/gavel-wall.sh OLD_BIN NEW_BIN [ALTERNATIONS] [SIZE...]}")
NEW=$(realpath "${2:?usage: scripts/gavel-wall.sh OLD_BIN NEW_BIN [ALTERNATIONS] [SIZE...]}")
N=${3:-7}
POLICY=${POLICY:-gavel-fifo}
REPS=${REPS:-10}
shift $(( $# >= 3 ? 3 : 2 ))
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(4 1000 3000 10000)
command -v perf > /dev/null || { echo "error: needs perf (linux-perf)" >&2; exit 1; }
need_traces gavel-reference/synth3000_lam600.trace
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
gavel_sized_traces "$RAW"
head -n 4 "$RAW/g3000.trace" > "$RAW/g4.trace"

mean_ms() { # mean_ms BIN TRACE: "WALL TASK_CLOCK", the means of REPS runs, in ms
  perf stat -r "$REPS" -e task-clock "$1" sim --trace "gavel:$2" \
    --throughputs data/gavel/simulation_throughputs.json.gz \
    --cluster v100=8,p100=8,k80=8 --round 360s --checkpoint-interval 0s --restore-overhead 0s \
    --seed 0 --threads 1 --json --policy "$POLICY" 2>&1 > /dev/null |
    awk '/task-clock/ { tc = $1 } /seconds time elapsed/ { printf "%.1f %.1f\n", $1 * 1000, tc }'
}
# best_median FILE COLUMN: the least and the median of a column, "BEST MEDIAN"
best_median() {
  awk -v c="$2" '{ print $c }' "$1" | sort -n |
    awk '{ a[NR] = $1 } END { printf "%.1f %.1f", a[1], a[int((NR + 1) / 2)] }'
}

# Wall time, then task-clock (CPU time of the process: less moved than the wall by what
# else the machine runs, as long as it leaves this run a core).
echo "| jobs | before best / median (ms) | after best / median (ms) | ratio (best) | after per 1,000 jobs (best) | task-clock before / after, best (ms) | ratio |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for n in "${SIZES[@]}"; do
  [[ -f $RAW/g$n.trace ]] || { echo "error: no $n-job trace (sizes: 4 1000 3000 10000)" >&2; exit 1; }
  for _ in $(seq "$N"); do
    mean_ms "$OLD" "$RAW/g$n.trace" >> "$RAW/old-$n"
    mean_ms "$NEW" "$RAW/g$n.trace" >> "$RAW/new-$n"
  done
  read -r ob om <<< "$(best_median "$RAW/old-$n" 1)"
  read -r nb nm <<< "$(best_median "$RAW/new-$n" 1)"
  read -r ot _ <<< "$(best_median "$RAW/old-$n" 2)"
  read -r nt _ <<< "$(best_median "$RAW/new-$n" 2)"
  awk -v n="$n" -v ob="$ob" -v om="$om" -v nb="$nb" -v nm="$nm" -v ot="$ot" -v nt="$nt" 'BEGIN {
    per = n >= 1000 ? sprintf("%.1f ms", nb * 1000 / n) : "(start-up)"
    printf "| %d | %s / %s | %s / %s | %.2f | %s | %s / %s | %.2f |\n", n, ob, om, nb, nm, nb / ob, per, ot, nt, nt / ot }'
done
