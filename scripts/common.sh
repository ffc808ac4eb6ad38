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
