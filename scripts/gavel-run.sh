# Sourced by the Gavel experiment scripts (gavel-packed.sh, gandiva.sh) after common.sh:
# `run NAME TRACE CLUSTER POLICIES [ARGS...]` runs `cotenant sim` on a Gavel-format trace with
# Gavel's simulator settings (the bundled simulation_throughputs.json, 360 s rounds, seed 0,
# no checkpoint loss or restore time) and writes the JSON summary to $TMP/NAME.json. Reads
# BIN (common.sh), DATA and TMP (the caller's).
run() { # name trace-path cluster policies [extra args] -> $TMP/name.json
  local name=$1 trace=$2 cluster=$3 policies=$4
  shift 4
  "$BIN" sim --trace "gavel:$trace" --throughputs "$DATA/simulation_throughputs.json.gz" \
    --cluster "$cluster" --round 360s --checkpoint-interval 0s --restore-overhead 0s --seed 0 \
    --policy "$policies" "$@" --json 2>/dev/null >"$TMP/$name.json"
}
