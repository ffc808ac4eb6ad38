# Sourced by the scripts in this folder, after their `set -Eeuo pipefail`: an ERR trap
# that names the failing line and command, a move to the repository root, and
# `build_cotenant`, which builds the release binary and checks it is at $BIN (or, with
# COTENANT_BIN set, uses that binary instead), and `need_traces`, which checks that the
# trace collection ($TRACES: COTENANT_TRACES or ../shared/traces) holds what a script reads.
# TARGET_DIR and BIN honour CARGO_TARGET_DIR (relative paths are relative to the
# repository root, as for cargo).
trap 'status=$?; echo "error: ${BASH_SOURCE[0]} line $LINENO: \`$BASH_COMMAND\` failed (exit $status)" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BIN=$TARGET_DIR/release/cotenant
TRACES=${COTENANT_TRACES:-../shared/traces}

build_cotenant() {
  if [[ -n ${COTENANT_BIN:-} ]]; then
    BIN=$COTENANT_BIN
    [[ -x $BIN ]] || { echo "error: COTENANT_BIN=$BIN is not an executable" >&2; exit 1; }
    return
  fi
  cargo build --release -q -p cotenant-cli
  if [[ ! -x $BIN ]]; then
    echo "error: $BIN missing after cargo build (CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-unset})" >&2
    exit 1
  fi
}

# gavel_sized_traces DIR: Gavel's 3,000-job reference trace at constant load as
# DIR/g1000.trace (its first 1,000 jobs), DIR/g3000.trace (all of it) and
# DIR/g10000.trace (the trace three and a third times over, each copy's arrivals shifted
# by its last arrival plus one mean gap, 600 s).
gavel_sized_traces() {
  local gavel=$TRACES/gavel-reference/synth3000_lam600.trace
  head -n 1000 "$gavel" > "$1/g1000.trace"
  cp "$gavel" "$1/g3000.trace"
  # Arrivals are the 10th column (whole seconds); copy k starts k x (last + 600) s later.
  awk -F'\t' -v OFS='\t' 'NR == FNR { last = $10; rows[NR] = $0; n = NR; next } END {
      shift = last + 600; out = 0
      for (k = 0; out < 10000; k++) for (i = 1; i <= n && out < 10000; i++) {
        split(rows[i], f, "\t"); f[10] += k * shift; line = f[1]
        for (c = 2; c <= 10; c++) line = line OFS f[c]
        print line; out++ } }' "$gavel" /dev/null > "$1/g10000.trace"
}

# need_traces PATH...: each PATH (relative to $TRACES) must exist, or the script stops.
need_traces() {
  local path
  for path in "$@"; do
    if [[ ! -e $TRACES/$path ]]; then
      echo "error: needs $TRACES/$path (set COTENANT_TRACES to the trace collection)" >&2
      exit 1
    fi
  done
}
