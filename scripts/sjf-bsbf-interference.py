#!/usr/bin/env python3
"""Writes data/sjf-bsbf/interference.txt, the reconstructed interference table.

The SJF-BSBF paper measures xi(a|b) per model pair but does not publish the table,
so we reconstruct it from one number per model: u, the fraction of an iteration
the model keeps the GPU busy when alone (small CIFAR/LSTM models are input- and
launch-bound; large ImageNet/NLP models keep the GPU busy).

- time-slice: a's GPU phases wait for b's while b is busy, its CPU phases do not:
  xi(a|b) = (1 - u_a) + u_a (1 + u_b) + c = 1 + u_a u_b + c, with c = 0.05 for
  context switches (two compute-bound jobs: about 2.05, the fair-share worst case).
- MPS: kernels of both run concurrently; we assume overlap recovers 40% of the
  contended time: xi(a|b) = 1 + 0.6 u_a u_b.
- accumulation overhead 0.05: each extra micro-batch of b/k adds 5% to the
  iteration (smaller kernels use the GPU less well).
"""
import sys

U = [
    ("resnet18-b128", 0.45),
    ("lstm-b20", 0.35),
    ("transformer-b4096", 0.70),
    ("resnet50-b64", 0.85),
    ("inception3-b64", 0.80),
    ("vgg16-b64", 0.90),
    ("bert-base-b32", 0.85),
    ("gpt2-medium-b8", 0.90),
]

out = [
    "# Interference factors xi(job | partner) >= 1 for GPU sharing (cotenant format:",
    "# crates/sim/src/sharing.rs). RECONSTRUCTED, not measured: written by",
    "# scripts/sjf-bsbf-interference.py from per-model GPU busy fractions u",
    "# (" + ", ".join(f"{m} {u}" for m, u in U) + ").",
    "# time-slice: 1 + u_job u_partner + 0.05;  mps: 1 + 0.6 u_job u_partner.",
    "models " + " ".join(m for m, _ in U),
    "accumulation-overhead 0.05",
]
for mode, f in [("time-slice", lambda a, b: 1 + a * b + 0.05), ("mps", lambda a, b: 1 + 0.6 * a * b)]:
    for m_a, u_a in U:
        for m_b, u_b in U:
            out.append(f"{mode} {m_a} {m_b} {f(u_a, u_b):.3f}")
sys.stdout.write("\n".join(out) + "\n")
