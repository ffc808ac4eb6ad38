#!/usr/bin/env bash
# Regenerates docs/experiments/training-model.md: `cotenant plan train` (the Megatron PTD-P,
# AxoNN 4D and memory model of crates/perf/src/train, docs/training.md) against published
# large training runs: Megatron-LM's weak-scaling table (Narayanan et al., SC'21), its
# GPT-3 175B estimate and interleaving gain, AxoNN's 80B GPT on Perlmutter (SC'24),
# MegaScale's 175B on 12,288 GPUs (NSDI'24) and Llama 3 405B on 8,192 and 16,384 H100
# (Dubey et al. 2024, Table 4). Deterministic (no seeds: the model is a pure function).
# Usage: scripts/training-model.sh (a few seconds once built).
set -Eeuo pipefail
# Shared prelude: error trap, repository root, TARGET_DIR, BIN, build_cotenant.
source "$(dirname "$0")/common.sh"
build_cotenant
OUT=docs/experiments/training-model.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# row LABEL PUBLISHED UNIT SOURCE -- ARGS...: one comparison. UNIT is `tf` (TFLOP/s per
# GPU counting recomputed FLOPs, Megatron's convention), `mfu` (model FLOPs utilization,
# %), or `peak` (TFLOP/s per GPU as % of peak, AxoNN's convention).
ROWS=$TMP/rows.md
row() {
  local label=$1 published=$2 unit=$3 source=$4
  shift 5
  local json
  json=$("$BIN" plan train "$@" --top 1 --json)
  local key predicted layout
  if [[ " $* " == *" --axonn "* ]]; then
    layout=$(jq -r '.axonn[0] | "x=\(.x) y=\(.y) z=\(.z) d=\(.data)"' <<<"$json")
    key='.axonn[0]'
  else
    layout=$(jq -r '.plans[0] | "t=\(.tensor) p=\(.pipeline) d=\(.data) b=\(.micro_batch) v=\(.interleave) \(.recompute) ZeRO-\(.zero)\(if .fits then "" else " (over memory)" end)"' <<<"$json")
    key='.plans[0]'
  fi
  case $unit in
    tf) predicted=$(jq -r "$key.tflops_per_gpu" <<<"$json") ;;
    mfu) predicted=$(jq -r "$key.mfu * 100" <<<"$json") ;;
    peak) predicted=$(jq -r "$key.tflops_per_gpu / 312 * 100" <<<"$json") ;;
  esac
  local unit_text=${unit/tf/TF\/s per GPU}
  unit_text=${unit_text/mfu/% MFU}
  unit_text=${unit_text/peak/% of peak}
  printf '| %s | %s %s | %s | %.1f | %+.1f%% | %s | `cotenant plan train %s` |\n' \
    "$label" "$published" "$unit_text" "$source" "$predicted" \
    "$(awk -v p="$predicted" -v q="$published" 'BEGIN { print (p / q - 1) * 100 }')" "$layout" "$*" >>"$ROWS"
  echo "$json" >"$TMP/last.json"
}

row "1T GPT, 3,072 A100 (calibration row)" 163 tf "Narayanan et al. Table 1" -- \
  --model gpt-1t --gpus 3072 --global-batch 3072 --layout 8,64,6,1,1,full,0
row "530B GPT, 2,520 A100" 163 tf "Narayanan et al. Table 1" -- \
  --model gpt-530b --gpus 2520 --global-batch 2520 --layout 8,35,9,1,1,full,0
row "145.6B GPT, 1,536 A100" 148 tf "Narayanan et al. Table 1" -- \
  --model gpt-145b --gpus 1536 --global-batch 2304 --layout 8,8,24,1,1,full,0
row "1.7B GPT, 32 A100" 137 tf "Narayanan et al. Table 1" -- \
  --model gpt-1.7b --gpus 32 --global-batch 512 --layout 1,1,32,1,1,full,0
row "GPT-3 175B, 1,024 A100, Megatron's layout" 140 tf "Narayanan et al. Sec. 5.1 estimate" -- \
  --model gpt3-175b --gpus 1024 --global-batch 1536 --layout 8,8,16,1,1,full,0
row "GPT-3 175B, 1,024 A100, best layout found" 140 tf "Narayanan et al. Sec. 5.1 estimate" -- \
  --model gpt3-175b --gpus 1024 --global-batch 1536
row "AxoNN 4D, 80B GPT, 1,024 A100-40G (4 per node)" 57 peak "Singh et al. SC'24 (182 PF/s)" -- \
  --model axonn-80b --gpu a100-40g --node-gpus 4 --gpus 1024 --global-batch 2048 --axonn
row "MegaScale 175B, 12,288 A100, t=8 p=8" 55.2 mfu "Jiang et al. NSDI'24 Table 2" -- \
  --model gpt3-175b --gpus 12288 --global-batch 6144 --layout 8,8,192
row "Llama 3 405B, 8,192 H100, t=8 p=16 d=64" 43 mfu "Dubey et al. Table 4 (430 TF/s)" -- \
  --model llama3-405b --gpu h100 --gpus 8192 --global-batch 2048 --layout 8,16,64
row "Llama 3 405B, 16,384 H100, t=8 p=16 d=128" 41 mfu "Dubey et al. Table 4 (400 TF/s)" -- \
  --model llama3-405b --gpu h100 --gpus 16384 --global-batch 2048 --layout 8,16,128
row "Llama 3 405B, 8,192 H100, no recomputation" 43 mfu "Dubey et al. Table 4 (430 TF/s)" -- \
  --model llama3-405b --gpu h100 --gpus 8192 --global-batch 2048 --layout 8,16,64,1,4,none --ignore-memory
row "Llama 3 405B, 16,384 H100, no recomputation" 41 mfu "Dubey et al. Table 4 (400 TF/s)" -- \
  --model llama3-405b --gpu h100 --gpus 16384 --global-batch 2048 --layout 8,16,128,1,4,none --ignore-memory

# Interleaving: the same layout with v = 1 and v = 2 (Megatron's Figure 12 setting: GPT-3
# 175B on 96 A100, t=8, p=12, b=1) at several batch sizes, and the 1T row.
GAIN=$TMP/gain.md
gain() {
  local label=$1 base=$2 inter=$3
  shift 3
  local plain interleaved
  plain=$("$BIN" plan train "$@" --layout "$base" --json | jq -r '.plans[0].tflops_per_gpu')
  interleaved=$("$BIN" plan train "$@" --layout "$inter" --json | jq -r '.plans[0].tflops_per_gpu')
  printf '| %s | %.1f | %.1f | %+.1f%% | `cotenant plan train %s --layout %s` vs `--layout %s` |\n' "$label" "$plain" "$interleaved" \
    "$(awk -v a="$plain" -v b="$interleaved" 'BEGIN { print (b / a - 1) * 100 }')" "$*" "$base" "$inter" >>"$GAIN"
}
for batch in 12 24 48 96; do
  gain "GPT-3 175B, 96 A100, batch $batch" 8,12,1,1,1,full,0 8,12,1,1,2,full,0 \
    --model gpt3-175b --gpus 96 --global-batch "$batch"
done
gain "1T GPT, 3,072 A100, batch 3072" 8,64,6,1,1,full,0 8,64,6,1,2,full,0 \
  --model gpt-1t --gpus 3072 --global-batch 3072

# Megatron on AxoNN's setting, for AxoNN's +26% claim.
MEGATRON_80B=$("$BIN" plan train --model axonn-80b --gpu a100-40g --node-gpus 4 --gpus 1024 --global-batch 2048 --top 1 --json)
AXONN_80B=$("$BIN" plan train --model axonn-80b --gpu a100-40g --node-gpus 4 --gpus 1024 --global-batch 2048 --axonn --top 1 --json)
MEG_TF=$(jq -r '.plans[0].tflops_per_gpu' <<<"$MEGATRON_80B")
AX_TF=$(jq -r '.axonn[0].tflops_per_gpu' <<<"$AXONN_80B")
MEG_LAYOUT=$(jq -r '.plans[0] | "t=\(.tensor) p=\(.pipeline) d=\(.data) b=\(.micro_batch) v=\(.interleave) \(.recompute) ZeRO-\(.zero)"' <<<"$MEGATRON_80B")

# Days to train: the paper's own estimates (175B: 300B tokens on 1,024 GPUs, 34 days;
# 1T: 450B tokens on 3,072 GPUs, 84 days).
DAYS_175=$("$BIN" plan train --model gpt3-175b --gpus 1024 --global-batch 1536 --layout 8,8,16,1,1,full,0 --tokens 300B --json | jq -r '.plans[0].days')
DAYS_1T=$("$BIN" plan train --model gpt-1t --gpus 3072 --global-batch 3072 --layout 8,64,6,1,1,full,0 --tokens 450B --json | jq -r '.plans[0].days')

{
  cat <<'MD'
# The training performance model against published runs

Generated by `scripts/training-model.sh`; every number below comes from the command
in its row (the release `cotenant plan train`, docs/training.md). The model is a pure
function, so there are no seeds: a rerun gives the same bytes.

## Setup

`cotenant plan train` predicts one iteration of a dense transformer for a parallel
layout (Megatron PTD-P: tensor t, pipeline p, data d, micro-batch b, interleave v,
recomputation, ZeRO stage; or AxoNN's 4D grid) from the model's FLOPs at a fraction of
the GPU's dense bf16 peak, the elementwise traffic at HBM bandwidth, the tensor,
pipeline and data-parallel collectives on the links the placement gives each group
(NVLink inside an 8-GPU node, the per-GPU NIC across), the pipeline bubble and the
optimizer step; memory per GPU after Korthikanti et al. One constant is calibrated:
the fraction of peak the matrix multiplies reach, 0.68, set on the first row below
(Megatron's 1T GPT); every other row is out of sample, including the H100 rows, which
reuse the same constant on purpose. "TF/s per GPU" counts recomputed FLOPs, as Megatron
and AxoNN report; "MFU" does not, as MegaScale and Llama 3 report.

Rows with `--layout` fix the published t, p, d; the fields left out are searched, and the
others let the search choose. For the Megatron rows we also fix b = 1, the plain 1F1B
schedule (v = 1) and full recomputation: the paper's FLOP count assumes recomputation,
but its Table 1 lists neither b nor v, so those two are our assumption (with v = 2 the
calibration row would come out 5% higher and the constant 5% lower; see "Interleaved
schedule").

## Predicted against published

| run | published | source | predicted | difference | layout evaluated | command |
|---|---:|---|---:|---:|---|---|
MD
  cat "$ROWS"
  cat <<MD

## Interleaved schedule

Narayanan et al. report that the interleaved schedule (v = 2 model chunks per stage)
beats the plain 1F1B schedule by about 10% at small batches, the gain shrinking as the
batch grows (their Figure 12: GPT-3 175B, 96 A100, t = 8, p = 12).

| setting | v = 1 TF/s | v = 2 TF/s | gain | command |
|---|---:|---:|---:|---|
MD
  cat "$GAIN"
  cat <<MD

## AxoNN against Megatron on the same machine

AxoNN reports +26% over Megatron-LM for the 80B GPT on 1,024 Perlmutter A100. Our model,
both on 4-GPU NVLink nodes with a 25 GB/s NIC per GPU and global batch 2048: AxoNN's best
grid $(printf '%.1f' "$AX_TF") TF/s per GPU, Megatron's best layout ($MEG_LAYOUT)
$(printf '%.1f' "$MEG_TF") TF/s per GPU: $(awk -v a="$AX_TF" -v m="$MEG_TF" 'BEGIN { printf "%+.1f%%", (a / m - 1) * 100 }').
Commands: \`cotenant plan train --model axonn-80b --gpu a100-40g --node-gpus 4 --gpus 1024 --global-batch 2048 [--axonn]\`.

## Days to train

Megatron's own estimates: GPT-3 175B on 300B tokens with 1,024 A100 at 140 TF/s, 34 days;
the 1T model on 450B tokens with 3,072 A100 at 163 TF/s, 84 days. Ours:
$(printf '%.1f' "$DAYS_175") days (\`cotenant plan train --model gpt3-175b --gpus 1024 --global-batch 1536 --layout 8,8,16,1,1,full,0 --tokens 300B\`)
and $(printf '%.1f' "$DAYS_1T") days (\`cotenant plan train --model gpt-1t --gpus 3072 --global-batch 3072 --layout 8,64,6,1,1,full,0 --tokens 450B\`).
The paper's estimates use 8 T P / (n X) (8 FLOPs per parameter per token, recomputation
included), ours the full iteration model, so the 175B difference is the TF/s difference
above.
MD
  cat <<'MD'

## Reading

- **Megatron's weak-scaling table, out of sample, is within 8%** (530B -1%, 145.6B +7%,
  1.7B +8%), with one constant calibrated on the 1T row. The model's ordering agrees
  with the paper's: the small models lose to elementwise (memory-bound) work, which
  grows as s h against the matrix multiplies' s h^2, and to tensor-parallel all-reduces;
  the big ones to the pipeline bubble. We overpredict the mid-size models a little: the
  constant is the large-matrix fraction of the 1T model's h = 25,600 layers, and smaller
  matrices reach less of it (a second, shape-dependent constant would absorb that; we
  kept one).
- **GPT-3 175B on 1,024 A100: +13% with Megatron's layout** (t=8, p=8, d=16, plain
  1F1B, full recomputation). The 140 TF/s is the paper's own estimate, not a measured
  run; its measured neighbour (145.6B on 1,536 GPUs, same t and p) came in at 148, and we
  are +7% on that one. The best layout our search finds (t=4, v=4, selective
  recomputation, ZeRO-1: techniques published after the paper) is +22%, and should be
  read as what newer Megatron versions allow, not as a prediction of the 2021 number.
- **Interleaving: +9.9% at batch 48, the paper's ~10%**, and like the paper's figure
  the gain shrinks as the batch grows (+5% at 96) and grows at small batches, where the
  (p-1)/m bubble dominates (+31% at batch 12). We compare the headline and the trend
  only: we did not digitize the figure point by point. Interleaving costs v times the
  pipeline messages, which we charge at their bandwidth and latency; any scheduling
  overhead beyond that is not modelled, so small-batch gains are likely overstated.
- **AxoNN 80B: 61% of peak against the published 57% (+8%).** The 4D model overlaps the
  weight all-gathers, the backward all-reduces and the data-parallel all-reduce with
  computation, as AxoNN does, and the best grid puts all tensor parallelism on z (an
  FSDP-like weight sharding), where everything but the forward all-reduces overlaps. Our
  AxoNN-over-Megatron margin (+20%) is near the paper's +26%. The 80B shape (64 layers,
  h = 10,240) and the batch (2,048 sequences) are reconstructed, not the paper's stated
  configuration.
- **MegaScale 175B on 12,288 A100: -15%.** MegaScale's 55.2% MFU comes with
  optimizations our model does not know: the parallel transformer block (attention and
  MLP side by side), sliding-window attention, the LAMB optimizer, and data-parallel
  communication overlapped with computation (we charge the DP all-reduce after the
  pipeline flush, as PTD-P does). We are at the edge of the 15% band and the direction
  (underprediction) is the expected one.
- **Llama 3 405B on H100: -20% and -26% as the memory model forces, +5% and -4%
  without recomputation.** Our memory model says t=8, p=16 does not fit 80 GB without
  full recomputation (the first stage holds 16 micro-batches of 8 layers' activations,
  about 113 GiB), so the search recomputes and pays 4/3 of the FLOPs. Llama 3 reports
  MFU, so if it recomputed, it would not get 43%; evaluated without recomputation
  (`--ignore-memory`), our model gives 45.3% and 39.5% against 43% and 41%, with the
  Ampere constant unchanged. Both facts together say the constant transfers from A100 to
  H100 and that Llama 3 saved activation memory in ways our Korthikanti-based model does
  not capture (the paper describes giving the first and last stages fewer layers, among
  other memory balancing). The 8K-to-16K drop (fewer micro-batches per pipeline, a
  larger bubble) is 12.8% in our no-recomputation rows against 4.7% published: Llama 3's tuned schedule hides more of
  the bubble than the interleaved formula (1/v)(p-1)/m allows.
- **Not modelled:** context parallelism, mixture-of-experts layers, FP8 training, DP
  communication overlap in Megatron layouts, stragglers and failures (docs/faults.md and
  docs/variability.md handle those in the simulator), network contention between jobs.
MD
} >"$OUT"
echo "wrote $OUT"
