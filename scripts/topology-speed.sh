#!/usr/bin/env bash
# The speed figure of docs/performance.md "Topology model speed": the full Philly trace
# (the default `cotenant sim` workload, five policies, one thread) with the topology model
# off and on, best of REPEATS runs each, alternated. Prints the Markdown table.
# Usage: scripts/topology-speed.sh [REPEATS] (COTENANT_BIN=PATH to use a given binary).
set -Eeuo pipefail
source "$(dirname "$0")/common.sh"
REPEATS=${1:-3}
build_cotenant
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
TOPO=(--topology leaf=16,spines=8,oversubscription=2,nic-gbps=400)
ON=("${TOPO[@]}" --comm-profile fraction=0.3)
for r in $(seq "$REPEATS"); do
  /usr/bin/time -f "%e %M" -o "$RAW/off-$r" "$BIN" sim --threads 1 > "$RAW/off.out"
  /usr/bin/time -f "%e %M" -o "$RAW/topo-$r" "$BIN" sim --threads 1 "${TOPO[@]}" > "$RAW/topo.out"
  /usr/bin/time -f "%e %M" -o "$RAW/on-$r" "$BIN" sim --threads 1 "${ON[@]}" > "$RAW/on.out"
done
best() { cat "$RAW/$1"-* | sort -n | head -1; }
read -r off_s off_kb <<< "$(best off)"
read -r on_s on_kb <<< "$(best on)"
read -r topo_s topo_kb <<< "$(best topo)"
echo "| run | wall (s), best of $REPEATS | peak memory (MiB) |"
echo "|---|---:|---:|"
echo "| \`cotenant sim --threads 1\` | $off_s | $((off_kb / 1024)) |"
echo "| \`cotenant sim --threads 1 ${TOPO[*]}\` | $topo_s | $((topo_kb / 1024)) |"
echo "| \`cotenant sim --threads 1 ${ON[*]}\` | $on_s | $((on_kb / 1024)) |"
echo
echo "Topology alone / off: $(python3 -c "print(f'{$topo_s / $off_s:.2f}x')"); with the communication profile / off: $(python3 -c "print(f'{$on_s / $off_s:.2f}x')") wall time."
grep -h "^topology:" "$RAW/on.out" | sed 's/^/    /'
