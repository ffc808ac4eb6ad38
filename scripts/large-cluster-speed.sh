#!/usr/bin/env bash
# The speed figure of docs/performance.md "Topology and variability on full Philly": the
# full Philly trace (82,247 jobs, `sim --all`), one policy and one thread per run, with the
# large-cluster models off and on, alternated, best of REPEATS. A run that takes longer
# than LIMIT seconds is reported as such. Prints the Markdown table: wall seconds, the
# ratio to "off", and the ratio per event (a run whose history changes does different work).
# Usage: scripts/large-cluster-speed.sh [REPEATS] [LIMIT] (COTENANT_BIN=PATH for a given binary).
set -Eeuo pipefail
source "$(dirname "$0")/common.sh"
REPEATS=${1:-2}
LIMIT=${2:-30}
build_cotenant
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
TOPO="--topology leaf=16,spines=8,oversubscription=2,nic-gbps=400"
VAR="--variability default"
COMM="--comm-profile fraction=0.3"
declare -A ARGS=([off]="" [topo]="$TOPO" [topo-var]="$TOPO $VAR" [topo-comm-var]="$TOPO $COMM $VAR")
CONFIGS=(off topo topo-var topo-comm-var)
POLICIES=(fifo sjf srtf las tiresias)
for r in $(seq "$REPEATS"); do
  for p in "${POLICIES[@]}"; do
    for c in "${CONFIGS[@]}"; do
      # shellcheck disable=SC2086
      /usr/bin/time -f "%e" -o "$RAW/$p-$c-$r.t" timeout "$LIMIT" "$BIN" sim --all --threads 1 \
        --policy "$p" ${ARGS[$c]} --json > "$RAW/$p-$c.json" 2> /dev/null || echo "$LIMIT+" > "$RAW/$p-$c-$r.t"
    done
  done
done
python3 - "$RAW" "$REPEATS" "$LIMIT" <<'PY'
import json, os, sys
raw, repeats, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
configs = ["off", "topo", "topo-var", "topo-comm-var"]
def best(p, c):
    times = [open(f"{raw}/{p}-{c}-{r}.t").read().split()[-1] for r in range(1, repeats + 1)]
    ok = [float(t) for t in times if not t.endswith("+")]
    return min(ok) if ok else None
def events(p, c):
    try:
        return json.load(open(f"{raw}/{p}-{c}.json"))["runs"][0]["events"]
    except Exception:
        return None
print("| policy | " + " | ".join(f"{c} (s)" for c in configs) + " | " + " | ".join(f"{c} / off (wall, per event)" for c in configs[1:]) + " |")
print("|---|" + "---:|" * (2 * len(configs) - 1))
for p in ["fifo", "sjf", "srtf", "las", "tiresias"]:
    t = {c: best(p, c) for c in configs}
    e = {c: events(p, c) for c in configs}
    cells = [f"{t[c]:.2f}" if t[c] is not None else f"> {limit}" for c in configs]
    ratios = []
    for c in configs[1:]:
        if t[c] is None or t["off"] is None or not e[c] or not e["off"]:
            ratios.append("-")
        else:
            ratios.append(f"{t[c] / t['off']:.2f}x, {(t[c] / e[c]) / (t['off'] / e['off']):.2f}x ({e[c]:,} events)")
    print(f"| {p} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
