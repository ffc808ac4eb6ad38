#!/usr/bin/env bash
# Peak memory and wall time of a synthetic trace of 100,000, 300,000 and 1,000,000 jobs
# under every baseline policy, one policy and one thread at a time (docs/performance.md):
# memory must grow linearly in jobs and stay under 1 GiB at a million.
# Usage: scripts/million-jobs.sh [SIZES]   (default "100000 300000 1000000")
set -Eeuo pipefail
source "$(dirname "$0")/common.sh"
SIZES=${1:-100000 300000 1000000}
build_cotenant
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "| jobs | policy | wall (s) | peak RSS (MiB) | bytes per job | completed |"
echo "|---:|---|---:|---:|---:|---:|"
for jobs in $SIZES; do
  for policy in fifo sjf srtf las tiresias; do
    /usr/bin/time -f "%e %M" -o "$OUT.time" "$BIN" sim --policy "$policy" --threads 1 --json \
      --synthetic "jobs=$jobs,rate=20/h,seed=1,durations=gavel,gpus=gavel" > "$OUT"
    read -r wall kib < "$OUT.time"
    done_jobs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runs'][0]['completed'])" "$OUT")
    echo "| $jobs | $policy | $wall | $((kib / 1024)) | $((kib * 1024 / jobs)) | $done_jobs |"
  done
done
rm -f "$OUT.time"
