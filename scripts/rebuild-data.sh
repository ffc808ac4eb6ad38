#!/usr/bin/env bash
# Rebuilds data/ (the traces bundled with the repository) from the shared trace
# collection. Checks the originals against the collection's SHA256SUMS first,
# compresses data files deterministically (gzip -n -9), copies attribution and
# license files as they are, and writes data/SHA256SUMS for the originals used
# (plus data/fonts/, which is the repository's own and left as it is).
#
#   scripts/rebuild-data.sh            # reads ${COTENANT_TRACES:-../shared/traces}
#   COTENANT_TRACES=/path/to/traces scripts/rebuild-data.sh
set -Eeuo pipefail
# Fail loudly: name the line and command that failed (also inside $(...) and functions).
trap 'status=$?; echo "error: ${BASH_SOURCE[0]} line $LINENO: \`$BASH_COMMAND\` failed (exit $status)" >&2' ERR

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=${COTENANT_TRACES:-$repo/../shared/traces}
out=$repo/data

# Data files: stored gzip-compressed as <name>.gz.
data_files=(
  philly-2017/philly.csv
  philly-2017/philly_vc.csv
  azure-llm-inference-2023/AzureLLMInferenceTrace_code.csv
  azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv
  gavel/simulation_throughputs.json
)
# Gavel's physical-cluster traces: all of them.
if [[ ! -d $src/gavel/physical_cluster ]]; then
  echo "error: $src/gavel/physical_cluster not found; set COTENANT_TRACES to the trace collection" >&2
  exit 1
fi
while IFS= read -r f; do data_files+=("gavel/physical_cluster/$f"); done \
  < <(cd "$src/gavel/physical_cluster" && ls -1 -- *.trace | LC_ALL=C sort)

# Attribution and license files: stored as they are.
text_files=()
for dir in philly-2017 azure-llm-inference-2023 gavel; do
  while IFS= read -r f; do text_files+=("$dir/$f"); done \
    < <(cd "$src/$dir" && ls -1 -- ATTRIBUTION.md LICENSE* | LC_ALL=C sort)
done

# 1. Verify every original against the collection's checksums.
sums=$(mktemp)
trap 'rm -f "$sums"' EXIT
for f in "${data_files[@]}" "${text_files[@]}"; do
  line=$(grep -F "  $f" "$src/SHA256SUMS" | awk -v f="$f" '$2 == f') || true
  if [[ -z $line ]]; then
    echo "error: $f is not listed in $src/SHA256SUMS" >&2
    exit 1
  fi
  echo "$line" >>"$sums"
done
(cd "$src" && sha256sum --check --strict --quiet "$sums")

# 2. Rebuild the bundled folders.
for dir in philly-2017 azure-llm-inference-2023 gavel; do rm -rf "${out:?}/$dir"; done
for f in "${data_files[@]}"; do
  mkdir -p "$out/$(dirname "$f")"
  gzip -n -9 -c "$src/$f" >"$out/$f.gz"
done
for f in "${text_files[@]}"; do
  mkdir -p "$out/$(dirname "$f")"
  cp "$src/$f" "$out/$f"
  chmod 644 "$out/$f"
done
# Files of the repository's own (not from the collection: the report's font) keep their rows.
if [[ -d $out/fonts ]]; then
  (cd "$out" && find fonts -type f | LC_ALL=C sort | xargs sha256sum) >>"$sums"
fi
LC_ALL=C sort -k2 "$sums" >"$out/SHA256SUMS"

# 3. Check the result: every compressed file decompresses to its original.
while read -r sum f; do
  if [[ -f $out/$f.gz ]]; then got=$(gzip -dc "$out/$f.gz" | sha256sum | cut -d' ' -f1); else got=$(sha256sum <"$out/$f" | cut -d' ' -f1); fi
  if [[ $got != "$sum" ]]; then
    echo "error: $f in data/ does not match its original" >&2
    exit 1
  fi
done <"$out/SHA256SUMS"

echo "data/ rebuilt from $src: $(wc -l <"$out/SHA256SUMS") files, $(du -sh "$out" | cut -f1)"
