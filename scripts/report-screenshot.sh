#!/usr/bin/env bash
# Builds two HTML reports and screenshots them in headless Chromium into docs/images/:
#   - the default week (one week of Philly under the five baseline policies), written by
#     `cotenant sim --report`;
#   - a small sweep: 3 policies x 3 arrival rates x 3 seeds of a synthetic workload,
#     run here with `cotenant sim --json` and gathered into a results.json of the sweep
#     format (kind cotenant-sweep, one row per cell), then `cotenant report`.
# Installs Debian's chromium (and pngquant, to keep the PNGs small) if absent.
#
#   scripts/report-screenshot.sh            # writes docs/images/report-*.png
#   KEEP=DIR scripts/report-screenshot.sh   # also keeps the reports and inputs in DIR
set -Eeuo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

need_packages() {
  local missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v pngquant >/dev/null || missing+=(pngquant)
  command -v jq >/dev/null || missing+=(jq)
  if ((${#missing[@]})); then
    echo "installing ${missing[*]} (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# shot HTML PNG WIDTH HEIGHT: a screenshot of the top WIDTH x HEIGHT CSS pixels of HTML.
shot() {
  local profile
  profile=$(mktemp -d)
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$profile" --window-size="$3,$4" \
    --screenshot="$2" "file://$1" 2>/dev/null
  rm -rf "$profile"
  [[ -s $2 ]] || { echo "error: chromium wrote no screenshot $2" >&2; exit 1; }
  # Lossy palette quantization: a screenshot of flat colours loses nothing visible.
  pngquant --force --skip-if-larger --strip --quality=60-90 --output "$2" -- "$2" || true
}

# One sweep row (the sweep format's key columns, then every sim metric) per run of a
# `sim --json` summary; $1 = first cell number, $2 = load, $3 = seed.
rows_of() {
  jq -c --argjson cell "$1" --argjson load "$2" --argjson seed "$3" '
    .runs | to_entries[] | .key as $i | .value as $r | {
      cell: ($cell + $i), kind: "sim", policy: $r.policy, load: $load, load_mode: "rate",
      seed: $seed, options: "", jobs: $r.jobs, completed: $r.completed,
      unfinished: $r.unfinished, cluster_gpus: $r.cluster_gpus,
      jct_mean_s: $r.jct_secs.mean, jct_p50_s: $r.jct_secs.p50, jct_p90_s: $r.jct_secs.p90,
      jct_p99_s: $r.jct_secs.p99, jct_max_s: $r.jct_secs.max,
      queueing_mean_s: $r.queueing_secs.mean, queueing_p50_s: $r.queueing_secs.p50,
      queueing_p90_s: $r.queueing_secs.p90, queueing_p99_s: $r.queueing_secs.p99,
      makespan_s: $r.makespan_secs, gpu_utilization: $r.gpu_utilization,
      goodput_utilization: $r.goodput_utilization, idle_while_waiting: $r.idle_while_waiting,
      preemptions: $r.preemptions, lost_gpu_hours: $r.lost_gpu_hours,
      jain_backlogged: $r.jain_backlogged, healthy: $r.healthy, events: $r.events,
      scheduling_passes: $r.scheduling_passes }'
}

need_packages
build_cotenant
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work" docs/images
work=$(cd "$work" && pwd)

# 1. The default week, reported directly by sim.
"$BIN" sim --save "$work/week.json" --report "$work/week.html" >/dev/null

# 2. A small sweep (base rate 4 jobs/h = load 1; 64 GPUs; 200 jobs of Gavel's shapes).
policies=fifo,sjf,las
cell=0
: >"$work/rows.jsonl"
for load in 1 2 3; do
  for seed in 1 2 3; do
    "$BIN" sim --synthetic "jobs=200,rate=$((4 * load))/h,seed=$seed,tenants=3,weights=1:1:2" \
      --cluster nodes=8,gpus-per-node=8 --policy "$policies" --json >"$work/run.json"
    rows_of "$cell" "$load" "$seed" <"$work/run.json" >>"$work/rows.jsonl"
    cell=$((cell + 3))
  done
done
mkdir -p "$work/sweep"
jq -s '{kind: "cotenant-sweep", mode: "sim", rows: .}' "$work/rows.jsonl" >"$work/sweep/results.json"
"$BIN" report "$work/sweep/results.json" -o "$work/sweep.html" --figures "$work/sweep-figures" >/dev/null

# 3. Screenshots: the top of each report (header, workload, first figures), and the
#    fairness and metric-table part of the week's report (found by its anchor).
shot "$work/week.html" docs/images/report-week-top.png 1200 1500
fairness=$(grep -o 'id="s[0-9]*-fairness"' "$work/week.html" | head -1 | cut -d'"' -f2)
sed "s|<body>|<body><style>nav { display: none; } main > section > :not(#$fairness):not(#$fairness ~ *) { display: none; }</style>|" \
  "$work/week.html" >"$work/week-fairness.html"
shot "$work/week-fairness.html" docs/images/report-week-fairness.png 1200 1500
shot "$work/sweep.html" docs/images/report-sweep.png 1200 1500
ls -l docs/images/report-*.png
echo "reports in $work"
