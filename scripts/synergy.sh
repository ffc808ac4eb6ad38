#!/usr/bin/env bash
# Regenerates docs/experiments/synergy.md: Synergy (OSDI'22) on cotenant's host-resource
# model. Synergy's setup: Poisson arrivals, Gavel/Synergy durations (80% 10^U(1.5,3) min,
# 20% 10^U(3,4) min), model mix (image, language, speech), servers of 8 V100 + 24 CPUs +
# 500 GB (its configs/*.ini), 300 s rounds, the bundled (reconstructed) throughput
# matrices. Three parts: the artifact's calibration point (FIFO+TUNE, 9 jobs/h, mix
# (20,70,10), single-GPU jobs, 128 GPUs); TUNE against GPU-proportional, Greedy and OPT
# over loads and mixes; TUNE under the four orderings. Seeds 1-3 for every cell.
# Usage: scripts/synergy.sh (about a minute on two cores).
set -Eeuo pipefail
# Shared prelude: error trap, repository root, TARGET_DIR, BIN, build_cotenant.
source "$(dirname "$0")/common.sh"
build_cotenant
OUT=docs/experiments/synergy.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CLUSTER=nodes=16,gpus-per-node=8,gpu=v100,cpus=24,mem-gib=500
MECHANISMS=synergy-proportional,synergy-greedy,synergy-tune,synergy-opt
JOBS=2000
SEEDS="1 2 3"

run() { # name synthetic-spec policies [extra args] -> $TMP/name.json
  local name=$1 spec=$2 policies=$3
  shift 3
  "$BIN" sim --synthetic "$spec" --cluster "$CLUSTER" --synergy-matrices bundled \
    --policy "$policies" --threads 2 "$@" --json 2>/dev/null >"$TMP/$name.json"
}

# name|rate per hour|gpus|mix
CASES="calibration|9|1|20:70:10
busy-1gpu|12|1|20:70:10
image-heavy-1gpu|9|1|60:30:10
gavel-gpus|4|gavel|20:70:10
image-heavy-gavel-gpus|4|gavel|60:30:10"
while IFS='|' read -r name rate gpus mix; do
  for seed in $SEEDS; do
    run "$name-$seed" "preset=synergy,jobs=$JOBS,rate=$rate/h,gpus=$gpus,job-mix=$mix,seed=$seed" "$MECHANISMS"
  done
  echo "$name|$rate|$gpus|$mix" >>"$TMP/cases"
done <<<"$CASES"
for order in fifo srtf las ftf; do
  for seed in $SEEDS; do
    run "order-$order-$seed" "preset=synergy,jobs=$JOBS,rate=9/h,gpus=1,seed=$seed" \
      synergy-proportional,synergy-tune --set "order=$order"
  done
done

python3 - "$OUT" "$TMP" "$JOBS" "$SEEDS" "$CLUSTER" <<'PY'
import json, statistics, sys
out, tmp, jobs, seeds, cluster = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5]
cases = [line.strip().split("|") for line in open(f"{tmp}/cases")]
mechanisms = ["synergy-proportional", "synergy-greedy", "synergy-tune", "synergy-opt"]

def load(name):
    data = json.load(open(f"{tmp}/{name}.json"))
    runs = {r["policy"]: r for r in data["runs"]}
    for r in runs.values():
        assert r["healthy"] and r["completed"] == r["jobs"], (name, r["policy"], r["warnings"])
    return runs

def spread(values, scale=3600.0, digits=1):
    values = [v / scale for v in values]
    mean = statistics.mean(values)
    return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

def ratio_spread(pairs):
    ratios = [a / b for a, b in pairs]
    return f"{statistics.mean(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"

def command(name, rate, gpus, mix, seed, policies=",".join(mechanisms), extra=""):
    return (f"cotenant sim --synthetic preset=synergy,jobs={jobs},rate={rate}/h,gpus={gpus},"
            f"job-mix={mix},seed={seed} --cluster {cluster} --synergy-matrices bundled "
            f"--policy {policies}{extra} --json")

READING = """
Written for the figures above (seeds 1-3, bundled matrices); rerun the script after
changing either and re-read.

- **Calibration point.** TUNE's mean JCT (20.9 h) and p99 (148.7 h) are within 5% of the
  artifact's 21.9 h and 156.9 h. This mostly checks the setup rather than the matrices: at
  9 jobs/h on 128 GPUs the mean is set by the long-job tail (20% of jobs run 17-167 h) and
  the queueing it causes, and GPU-proportional lands at 23.2 h too. It does say that
  the workload generator, the cluster and the round mechanics are in the right regime.
- **TUNE against GPU-proportional: 1.05x-1.15x here, against the paper's "up to 3.4x".**
  A disagreement, and we do not tune it away. Reasons we can name: (1) the matrices are
  reconstructed (image peaks at 2.46x, speech at 1.58x, language at 1.0); the JCT gain
  is bounded by how much of the work is CPU-sensitive and by how much faster it can run,
  and Synergy's measured profiles may be steeper; (2) on 24-CPU servers the only CPUs
  TUNE can move are those language jobs leave (best case 2 of their 3), so a full server
  gives an image job at most a few extra CPUs, and TUNE shrinks it back whenever another
  job arrives; (3) the paper's largest gains come from its Philly-derived trace at loads
  where queueing compounds every speedup; at 12 jobs/h our ratio is lower (1.05x), not
  higher, because a saturated server has no spare CPUs to give. The image-heavy mix gains
  most (1.15x, 1.12x with multi-GPU jobs), as the paper's account predicts.
- **TUNE against OPT: 1.05x-1.11x, matching "within ~10%".** OPT here places the LP's
  targets as TUNE places best cases; the LP value itself is a per-round throughput bound
  (the hand-computed case in `crates/sim/tests/synergy.rs`: 8.98 against TUNE's 8.0).
- **Greedy is worse than proportional** (1.2x-2.7x the mean JCT): it leaves GPUs idle
  while a job's best case does not fit, the failure TUNE is designed to avoid.
- **Orderings.** TUNE helps under all four (1.07x-1.11x); SRTF gives the lowest JCTs, as
  it does without host resources.
- **Spread.** Seeds move the mean JCT by a few percent at one GPU per job and by up to
  about 2x with Gavel's GPU counts (rare 8-GPU jobs dominate); the ratios move much less,
  since every policy sees the same jobs.
"""

lines = []
w = lines.append
w("# Synergy: CPU- and memory-aware allocation (OSDI'22)")
w("")
w("Generated by `scripts/synergy.sh`; do not edit by hand. Each cell runs the release binary")
w(f"as the command under its table shows, for seeds {', '.join(seeds)}; a figure is the mean over")
w("the seeds with the smallest and largest seed's value in brackets.")
w("")
w("## Setup")
w("")
w("- Cluster: 16 servers of 8 V100, 24 CPUs and 500 GiB (128 GPUs; Synergy's")
w("  `configs/default_cluster.ini` shape, its artifact's 128-GPU calibration size).")
w(f"- Workload: `--synthetic preset=synergy`: {jobs} jobs, Poisson arrivals, durations 80%")
w("  10^U(1.5,3) min and 20% 10^U(3,4) min (a job's duration is its run time at the")
w("  GPU-proportional point), model classes (image, language, speech) drawn with the given")
w("  mix, each job requesting the proportional 3 CPUs and 62 GiB per GPU.")
w("- World model: `--synergy-matrices bundled` (`crates/perf/data/synergy_matrices.txt`):")
w("  **reconstructed** throughput matrices, since Synergy's artifact ships no profiles. Image")
w("  peaks at 2.46x (12 CPUs, 125 GB per GPU), speech at 1.58x (9 CPUs, 125 GB), language at")
w("  1.0 (best case 2 CPUs, 62.5 GB). The results below measure these matrices, not")
w("  Synergy's measured ones.")
w("- Policies: `synergy-proportional` (the GPU-proportional baseline), `synergy-greedy`,")
w("  `synergy-tune`, `synergy-opt` (LP targets, placed as TUNE), FIFO order unless stated,")
w("  300 s rounds. No checkpoint loss; 30 s restore after a preemption (cotenant's default).")
w("")

calibration = {s: load(f"calibration-{s}") for s in seeds}
w("## The artifact's calibration point")
w("")
w("FIFO+TUNE, 9 jobs/h, mix (20,70,10), single-GPU jobs, 128 GPUs. Hours; mean (min-max) over seeds.")
w("")
w("| policy | mean JCT (h) | p99 JCT (h) | Synergy's artifact |")
w("| --- | --- | --- | --- |")
for m in mechanisms:
    mean = spread([calibration[s][m]["jct_secs"]["mean"] for s in seeds])
    p99 = spread([calibration[s][m]["jct_secs"]["p99"] for s in seeds])
    ref = "mean 21.9, p99 156.9" if m == "synergy-tune" else ""
    w(f"| {m} | {mean} | {p99} | {ref} |")
w("")
w(f"Command (seed 1): `{command('calibration', 9, 1, '20:70:10', 1)}`")
w("")

w("## TUNE against GPU-proportional, Greedy and OPT")
w("")
w("Mean JCT in hours (mean and range over seeds), and the ratios per seed averaged:")
w("proportional / TUNE (the paper: up to 3.4x) and TUNE / OPT (the paper: within ~10%).")
w("")
w("| case | rate | GPUs per job | mix | proportional | greedy | TUNE | OPT | proportional / TUNE | TUNE / OPT |")
w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name, rate, gpus, mix in cases:
    runs = {s: load(f"{name}-{s}") for s in seeds}
    jct = lambda m: [runs[s][m]["jct_secs"]["mean"] for s in seeds]
    cells = [spread(jct(m)) for m in mechanisms]
    prop_tune = ratio_spread(zip(jct("synergy-proportional"), jct("synergy-tune")))
    tune_opt = ratio_spread(zip(jct("synergy-tune"), jct("synergy-opt")))
    w(f"| {name} | {rate}/h | {gpus} | ({mix.replace(':', ',')}) | " + " | ".join(cells) + f" | {prop_tune} | {tune_opt} |")
w("")
w(f"Commands: as `{command('NAME', 'RATE', 'GPUS', 'MIX', 'SEED')}` with each row's values.")
w("")

w("## Orderings")
w("")
w("TUNE and GPU-proportional under each base ordering at the calibration point: mean JCT in")
w("hours.")
w("")
w("| order | proportional | TUNE | proportional / TUNE |")
w("| --- | --- | --- | --- |")
for order in ["fifo", "srtf", "las", "ftf"]:
    runs = {s: load(f"order-{order}-{s}") for s in seeds}
    p = [runs[s]["synergy-proportional"]["jct_secs"]["mean"] for s in seeds]
    t = [runs[s]["synergy-tune"]["jct_secs"]["mean"] for s in seeds]
    w(f"| {order} | {spread(p)} | {spread(t)} | {ratio_spread(zip(p, t))} |")
w("")
w(f"Command (seed 1): `{command('order', 9, 1, '20:70:10', 1, 'synergy-proportional,synergy-tune', ' --set order=ORDER')}`")
w("")
w("## Reading")
w("")
w(READING.strip())
w("")
open(out, "w").write("\n".join(lines))
PY
echo "wrote $OUT"
