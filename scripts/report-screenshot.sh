#!/usr/bin/env bash
# Builds two HTML reports and screenshots them in headless Chromium into docs/images/:
#   - the default week (one week of Philly under the five baseline policies), written by
#     `cotenant sim --report`;
#   - a small sweep: 3 policies x 3 arrival rates x 3 seeds of a synthetic workload,
#     run by `cotenant sweep`, then `cotenant report` on its results.json;
#   - serve-sim's report of the bundled Azure traces under fcfs, vtc and sarathi.
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

need_packages
build_cotenant
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work" docs/images
work=$(cd "$work" && pwd)

# 1. The default week, reported directly by sim.
"$BIN" sim --save "$work/week.json" --report "$work/week.html" >/dev/null

# 2. A small sweep (base rate 4 jobs/h = load 1; 64 GPUs; 200 jobs of Gavel's shapes):
#    3 policies x 3 arrival rates x 3 seeds, each seed generating its own workload.
"$BIN" sweep --synthetic "jobs=200,rate=4/h,tenants=3,weights=1:1:2" --cluster nodes=8,gpus-per-node=8 \
  --policy fifo,sjf,las --load 1,2,3 --seeds 1..4 --out "$work/sweep" >/dev/null
"$BIN" report "$work/sweep/results.json" -o "$work/sweep.html" --figures "$work/sweep-figures" >/dev/null

# 3. A serving run: the bundled Azure code + conversation traces under three schedulers.
"$BIN" serve-sim --scheduler fcfs,vtc,sarathi --report "$work/serve.html" >/dev/null

# 4. Screenshots: the top of each report (header, workload, first figures), and the
#    fairness and metric-table part of the week's report (found by its anchor).
shot "$work/week.html" docs/images/report-week-top.png 1200 1500
fairness=$(grep -o 'id="s[0-9]*-fairness"' "$work/week.html" | head -1 | cut -d'"' -f2)
sed "s|<body>|<body><style>nav { display: none; } main > section > :not(#$fairness):not(#$fairness ~ *) { display: none; }</style>|" \
  "$work/week.html" >"$work/week-fairness.html"
shot "$work/week-fairness.html" docs/images/report-week-fairness.png 1200 1500
shot "$work/sweep.html" docs/images/report-sweep.png 1200 1500
shot "$work/serve.html" docs/images/report-serve.png 1200 1500
ls -l docs/images/report-*.png
echo "reports in $work"
