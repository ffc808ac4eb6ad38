#!/usr/bin/env bash
# Regenerates docs/experiments/serve-disagg.md: disaggregated prefill/decode pools versus
# colocated replicas, goodput per GPU at a TTFT + TPOT SLO (DistServe, OSDI'24; Splitwise,
# ISCA'24). Every number in the page comes from the commands below, which the page
# repeats. Usage: scripts/serve-disagg.sh   (about 1-3 minutes with a built binary)
set -Eeuo pipefail
# Shared prelude: error trap, repository root, TARGET_DIR, BIN, build_cotenant.
source "$(dirname "$0")/common.sh"
build_cotenant
OUT=docs/experiments/serve-disagg.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# goodput LABEL GPUS ARGS...: one goodput search (max rate scale with >= 90% of requests
# meeting both TTFT and TPOT); prints "LABEL|GPUS|req/s|req/s per GPU|attainment|capped".
goodput() {
  local label=$1 gpus=$2; shift 2
  "$BIN" serve-sim --json --goodput "$@" > "$TMP/run.json"
  jq -r --arg name "$label" --argjson gpus "$gpus" \
    '.runs[0].goodput | [$name, $gpus, (.requests_per_s*100|round/100), (.requests_per_s/$gpus*100|round/100), (.attainment*1000|round/10), .capped] | join("|")' \
    "$TMP/run.json"
}

# attainment ARGS...: SLO attainment (%) of one run.
attainment() {
  "$BIN" serve-sim --json "$@" | jq -r '.runs[0].slo_attainment*1000|round/10'
}

# --- A: DistServe's motivating example (section 2.2, Figure 1) --------------------------
# A 13B model on A100s, every request 512 prompt and 64 output tokens, Poisson arrivals,
# SLO: 90% of requests with TTFT <= 400 ms and TPOT <= 40 ms. OPT-13B's shape with its
# 2-matrix 4d MLP written as our gated 3-matrix one of equal size (d_ff = 2/3 x 20480).
OPT13B=layers=40,hidden=5120,heads=40,kv_heads=40,head_dim=128,ffn=13653,vocab=50272
A_COMMON=(--model "$OPT13B" --gpu A100-80G --trace synthetic --duration-s 600
  --slo-ttft-ms 400 --slo-tbt-ms 40)
a_rows() {
  local seed
  for seed in 1 2 3; do
    local w=(--tenant name=chat,rate=1,prompt=512,output=64,sigma=0 --seed "$seed")
    goodput "seed $seed: colocated, vLLM-style FCFS" 1 "${A_COMMON[@]}" "${w[@]}" --scheduler fcfs
    goodput "seed $seed: colocated, Sarathi chunks" 1 "${A_COMMON[@]}" "${w[@]}" --scheduler sarathi
    goodput "seed $seed: 1 prefill + 1 decode" 2 "${A_COMMON[@]}" "${w[@]}" --disagg prefill=1,decode=1
    goodput "seed $seed: 2 prefill + 1 decode" 3 "${A_COMMON[@]}" "${w[@]}" --disagg prefill=2,decode=1
  done
}

# --- B: a chat trace on today's hardware ---------------------------------------------------
# Llama-3.1-8B on H100-SXM, the Azure 2023 conversation trace (first 4,000 requests), at
# DistServe's chatbot SLO for its smallest model (TTFT 0.25 s, TPOT 0.1 s), then tighter TPOTs.
B_COMMON=(--model Llama-3.1-8B --gpu H100-SXM --trace azure-conv --limit 4000
  --slo-ttft-ms 250)
b_rows() {
  goodput "colocated x1 (FCFS)" 1 "${B_COMMON[@]}" --slo-tbt-ms 100
  goodput "colocated x2 (FCFS)" 2 "${B_COMMON[@]}" --slo-tbt-ms 100 --replicas 2
  goodput "colocated x2 (Sarathi)" 2 "${B_COMMON[@]}" --slo-tbt-ms 100 --replicas 2 --scheduler sarathi
  goodput "colocated x3 (FCFS)" 3 "${B_COMMON[@]}" --slo-tbt-ms 100 --replicas 3
  goodput "1 prefill + 1 decode" 2 "${B_COMMON[@]}" --slo-tbt-ms 100 --disagg prefill=1,decode=1
  goodput "1 prefill + 2 decode" 3 "${B_COMMON[@]}" --slo-tbt-ms 100 --disagg prefill=1,decode=2
  goodput "2 prefill + 1 decode" 3 "${B_COMMON[@]}" --slo-tbt-ms 100 --disagg prefill=2,decode=1
}

# Goodput per GPU as the TPOT objective tightens (TTFT stays 0.25 s).
per_gpu() { "$BIN" serve-sim --json --goodput "$@" | jq -r '.runs[0].goodput.requests_per_s'; }
b_tpot() {
  local tbt
  for tbt in 10 15 20 30 100; do
    local x2 p1d1 x3 p2d1
    x2=$(per_gpu "${B_COMMON[@]}" --slo-tbt-ms "$tbt" --replicas 2)
    p1d1=$(per_gpu "${B_COMMON[@]}" --slo-tbt-ms "$tbt" --disagg prefill=1,decode=1)
    x3=$(per_gpu "${B_COMMON[@]}" --slo-tbt-ms "$tbt" --replicas 3)
    p2d1=$(per_gpu "${B_COMMON[@]}" --slo-tbt-ms "$tbt" --disagg prefill=2,decode=1)
    awk -v t="$tbt" -v a="$x2" -v b="$p1d1" -v c="$x3" -v d="$p2d1" \
      'BEGIN { printf "| %s | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx |\n", t, a/2, b/2, b/a, c/3, d/3, d/c }'
  done
}

# Attainment versus load on two GPUs (TPOT 15 ms): 2 colocated replicas and 1P1D, same arrivals.
b_loads() {
  local scale
  for scale in 2 3 4 5 6 8; do
    local colo disagg
    colo=$(attainment "${B_COMMON[@]}" --slo-tbt-ms 15 --replicas 2 --rate-scale "$scale")
    disagg=$(attainment "${B_COMMON[@]}" --slo-tbt-ms 15 --disagg prefill=1,decode=1 --rate-scale "$scale")
    echo "$scale|$colo|$disagg"
  done
}

table() { awk -F'|' '{printf "| %s | %s | %s | %s | %s%% | %s |\n", $1, $2, $3, $4, $5, $6}'; }

A_TABLE=$(a_rows | table)
B_TABLE=$(b_rows | table)
B_TPOT=$(b_tpot)
B_LOADS=$(b_loads | awk -F'|' '{printf "| %s | %s%% | %s%% |\n", $1, $2, $3}')
PLAN=$("$BIN" plan serve --model Llama-3.1-8B --trace azure-conv --limit 4000 --rate 20 \
  --slo-ttft-ms 250 --slo-tbt-ms 100 --gpus H100-SXM --tp-options 1 --max-replicas 8 --disagg-search)

cat > "$OUT" <<MD
# Disaggregated prefill and decode versus colocated serving

Generated by \`scripts/serve-disagg.sh\` (the model: docs/serving.md, "Disaggregated
prefill and decode"). Goodput is the largest arrival rate at which at least 90% of
requests meet both the TTFT and the TPOT objective (\`serve-sim --goodput\`: doubling,
then 10 bisection steps on the rate scale); goodput per GPU divides it by the GPUs of
the deployment, DistServe's figure of merit.

## What the papers report

- DistServe (Zhong et al., OSDI'24), abstract: up to 7.4x more requests (goodput) or
  12.6x tighter SLOs than vLLM and DeepSpeed-MII across OPT-13B/66B/175B on chat, code
  and summarization, with > 90% of requests within their SLOs. Its motivating example
  (section 2, Figure 1): a 13B model on A100s, 512-token prompts and 64-token outputs,
  TTFT <= 0.4 s and TPOT <= 0.04 s at the 90th percentile; colocated vLLM serves about
  1.6 req/s per GPU, while 2 prefill GPUs feeding 1 decode GPU serve about 10 req/s,
  3.3 req/s per GPU, about 2.1x. (We quote Figure 1's figures from the paper's text as
  we read it; the bars are approximate.)
- Splitwise (Patel et al., ISCA'24) reports, at iso-cost, 1.4x more throughput at 20%
  lower cost, or 2.35x more throughput at the same cost and power, for Llama-2-70B and
  BLOOM-176B on DGX-A100/H100 pools driven by these same Azure traces.

## A: DistServe's example (13B on A100, 512 in / 64 out), three seeds

Command per row (seed S; the colocated rows add \`--scheduler fcfs\` or \`sarathi\`, the
pools \`--disagg prefill=P,decode=D\`, which puts both pools on one node's NVLink):

\`\`\`sh
cotenant serve-sim --json --goodput ${A_COMMON[*]} \\
  --tenant name=chat,rate=1,prompt=512,output=64,sigma=0 --seed S ...
\`\`\`

| deployment | GPUs | goodput (req/s) | per GPU | attainment at goodput | capped |
|---|---:|---:|---:|---:|---|
$A_TABLE

## B: Llama-3.1-8B on H100, Azure conversation trace, TTFT 0.25 s

At DistServe's chatbot SLO for OPT-13B (TPOT 0.1 s):

\`\`\`sh
cotenant serve-sim --json --goodput ${B_COMMON[*]} --slo-tbt-ms 100 [--replicas R | --disagg prefill=P,decode=D] [--scheduler sarathi]
\`\`\`

| deployment | GPUs | goodput (req/s) | per GPU | attainment at goodput | capped |
|---|---:|---:|---:|---:|---|
$B_TABLE

Goodput per GPU as the TPOT objective tightens (same command, \`--slo-tbt-ms T\`; the
ratio columns are disaggregated over colocated on the same number of GPUs):

| TPOT (ms) | colocated x2 | 1P + 1D | ratio | colocated x3 | 2P + 1D | ratio |
|---:|---:|---:|---:|---:|---:|---:|
$B_TPOT

SLO attainment versus load on two GPUs at TPOT 15 ms, the same arrivals scaled
(\`--rate-scale X\`: the trace's own rate, about 4.9 req/s over its first 4,000
requests, times X), two colocated replicas against one prefill and one decode replica:

| rate scale | colocated x2 | 1 prefill + 1 decode |
|---:|---:|---:|
$B_LOADS

Pool sizing at 20 req/s (\`plan serve --disagg-search\`, every split of each total tried):

\`\`\`console
\$ cotenant plan serve --model Llama-3.1-8B --trace azure-conv --limit 4000 --rate 20 --slo-ttft-ms 250 --slo-tbt-ms 100 --gpus H100-SXM --tp-options 1 --max-replicas 8 --disagg-search
$PLAN
\`\`\`

## Reading

(Written from the tables above as generated on 2026-12-01; the figures quoted here are
the ones in the tables.)

**Direction: reproduced where DistServe's argument applies.** In DistServe's own
motivating setting (A: a 13B model, 512/64 tokens, a TPOT objective of 40 ms, about
twice a 13B decode step on an A100), two prefill GPUs feeding one decode GPU serve more
per GPU than a colocated replica on every seed: 7.61 / 5.66 = 1.34x, 8.00 / 5.33 =
1.50x, 8.72 / 6.12 = 1.42x over vLLM-style FCFS (1.24-1.38x over Sarathi's chunked
prefill, the stronger colocated baseline DistServe also compares against as
DeepSpeed-MII). One prefill and one decode GPU gain nothing per GPU (5.43-6.27 against
5.33-6.12): the single prefill GPU caps the rate at which TTFT holds near the colocated
rate, and the 2:1 ratio is what balances the pools, as in DistServe's example.

**Magnitude: about 1.4x here against about 2.1x in DistServe's Figure 1.** The gap is
in the colocated baseline: we serve 5.3-6.1 req/s on one A100 where DistServe measured
about 1.6 for vLLM, and 23-26 req/s on 2P1D where it reports about 10. Our replica is a
roofline (linear layers at the fitted A100 efficiencies, 1 ms of fixed cost per step)
running today's vLLM scheduler (chunked prefill inside an 8,192-token budget, so a
512-token prompt lengthens one decode step by about its own prefill time, 60 ms on this
model); the 2023 vLLM that DistServe measured had far larger per-step CPU overheads on
OPT at small batches and ran prefills as separate iterations. A faster step leaves
more room under the 40 ms TPOT for the interference, so colocation loses less. We read
this as a disagreement in the baseline's speed, not in the mechanism; we did not tune
anything to close it.

**Where disaggregation loses (B).** With Llama-3.1-8B on H100 and the Azure
conversation trace (prompts of about 1,000 tokens, TTFT 0.25 s), a decode step takes
about 7 ms and a 1,000-token prefill adds about 25 ms to the step it joins, so at
DistServe's loose 100 ms chatbot TPOT colocation meets the TPOT easily and
disaggregation only removes GPUs from prefill work: 11.83 against 18.86 req/s per GPU on
two GPUs (0.63x), 15.16 against 19.28 on three (0.79x). As the TPOT objective tightens
the colocated goodput falls (18.86 -> 5.95 req/s per GPU from 100 to 10 ms) while one
prefill + one decode stays at the prefill GPU's TTFT limit (11.83) until the decode
replica itself cannot keep 10 ms: it overtakes colocation at 15 ms (1.07x) and 10 ms
(1.32x). The attainment curve at 15 ms shows the same from the load side: colocated
keeps >= 97% up to 4x the trace's rate and then collapses faster (62.5% and 17.3% at 5x
and 6x, against 87% and 52.5%). This is DistServe's own qualitative claim (the gain
grows with SLO tightness, its "12.6x tighter SLO" axis), and fits a later large-scale
study ("Beyond the Buzz: A Pragmatic Take on Inference Disaggregation", arXiv 2506.05508) that finds disaggregation
most effective for prefill-heavy traffic and larger models, not for a small model at a
loose decode objective. Two caveats: the 2P1D column fixes the split, whose single decode GPU limits it
at tight TPOTs (\`plan serve --disagg-search\` tries every split); and the simulator
keeps one GPU type and TP degree for both pools, whereas DistServe also picks each
pool's parallelism (e.g. TP for prefill), which our pools cannot.

**KV transfer.** With both pools on one node's NVLink (450 GB/s, 5 µs) a 1,000-token
Llama-3.1-8B prompt moves 134 MB in about 0.3 ms (0.35 ms mean over the trace:
\`serve-sim ... --disagg prefill=1,decode=1\` prints it on its \`structure:\` line),
negligible beside a 25 ms prefill, as DistServe reports for NVLink placement. Over a
50 GB/s NIC it would be about 2.7 ms, still small against the 250 ms TTFT objective.

**Not compared.** Splitwise's throughput per cost and per watt (1.4x at 20% lower cost,
or 2.35x at equal cost and power) needs a price and power model and mixed GPU types per
pool, which this experiment does not have.
MD
echo "wrote $OUT"
