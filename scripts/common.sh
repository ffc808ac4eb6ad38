# Sourced by the scripts in this folder, after their `set -Eeuo pipefail`: an ERR trap
# that names the failing line and command, a move to the repository root, and
# `build_cotenant`, which builds the release binary and checks it is at $BIN.
# TARGET_DIR and BIN honour CARGO_TARGET_DIR (relative paths are relative to the
# repository root, as for cargo).
trap 'status=$?; echo "error: ${BASH_SOURCE[0]} line $LINENO: \`$BASH_COMMAND\` failed (exit $status)" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BIN=$TARGET_DIR/release/cotenant

build_cotenant() {
  cargo build --release -q -p cotenant-cli
  if [[ ! -x $BIN ]]; then
    echo "error: $BIN missing after cargo build (CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-unset})" >&2
    exit 1
  fi
}
