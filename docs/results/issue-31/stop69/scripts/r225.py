#!/usr/bin/env python3
"""Round 225 (stop 69, H200): would focal and label smoothing gain as cross-entropy did if their take
were of x itself? Each program as written (`(x - lse)[y]`: its owner reads it at the row's start,
the copies) against the same loss with the take distributed by hand (`x[y] - lse`: walked ahead at
1024 threads, x[y] picked; 8 bytes of local memory a thread, ptxas). One library, in-process, in
turn (bench/gpu_timing.alternating), % of the one-read-one-write floor. Run from the repository root
with LOSSJIT_LIBRARY set: python3 docs/results/issue-31/stop69/scripts/r225.py --shape 16384x32768"""
import pathlib
import sys

import torch

root = pathlib.Path(__file__).resolve().parents[5]
sys.path.insert(0, str(root / "python"))
sys.path.insert(0, str(root / "bench"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402

PROGRAMS = {
    "focal, as written": "lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)",
    "focal, x[y] - lse": "lp = x[y] - logsumexp(x, -1); mean(-(1 - exp(lp))^2 * lp)",
    "smoothing, as written": "lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))",
    "smoothing, x[y] - lse": "lse = logsumexp(x, -1); mean(-0.9 * (x[y] - lse) - 0.1 * (mean(x, -1) - lse))",
    "cross-entropy": "mean(logsumexp(x, -1) - x[y])",
}
ap = row_options(dtypes=False)
args = ap.parse_args()
n, c, x = seeded_logits(args)
y = torch.randint(0, c, (n,), device="cuda")
rate = copy_rate(n * c * 4)
floor_ms = 2 * n * c * 4 / rate / 1e6
losses = {k: lossjit.compile(t, inputs=["x", "y"]) for k, t in PROGRAMS.items()}
values = {k: loss.value_and_grad(x, y, wrt=["x"]) for k, loss in losses.items()}
for k, (v, (g,)) in values.items():
    print(f"{k:24s} value {float(v):.9g}  |grad| max {g.abs().max().item():.6g}")
fns = {k: (lambda loss=loss: loss.value_and_grad(x, y, wrt=["x"])) for k, loss in losses.items()}
for rnd in range(2):
    ms = alternating(fns, args.reps)
    for k in PROGRAMS:
        print(f"round {rnd + 1} {k:24s} {args.shape:12s} {ms[k]:8.3f} ms  {100 * floor_ms / ms[k]:5.1f}% of floor", flush=True)
