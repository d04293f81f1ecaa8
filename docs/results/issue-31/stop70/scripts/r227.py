#!/usr/bin/env python3
"""Round 227 (stop 70, H200): long rows in clusters that take rows in turn and copy the next row in
(the row prefetch), the grid the clusters the GPU holds at once (cuOccupancyMaxActiveClusters).
Cross-entropy's value and gradient; each variant (a block-per-SM count for a cluster's cache shares,
through the experiment build's LOSSJIT_EXP_CLUSTER_BPS, read when a call first plans; knobs) timed
in turn with the others, % of the one-read-one-write floor. Each variant's value and gradient are
compared with the default's. Run from the repository root with LOSSJIT_LIBRARY set:
python3 docs/results/issue-31/stop70/scripts/r227.py --shape 4096x131072"""
import os
import pathlib
import sys

import torch

root = pathlib.Path(__file__).resolve().parents[5]
sys.path.insert(0, str(root / "python"))
sys.path.insert(0, str(root / "bench"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402

VARIANTS = [  # label, blocks an SM a cluster's shares leave room for (None: the default, 2), knobs
    ("default", None, None),
    ("2/SM prefetch", None, "row_prefetch=on"),
    ("2/SM c8 prefetch", None, "row_cluster=8,row_prefetch=on"),
    ("1/SM c2", "1", "row_cluster=2"),
    ("1/SM c2 prefetch", "1", "row_cluster=2,row_prefetch=on"),
    ("1/SM c4", "1", "row_cluster=4"),
    ("1/SM c4 prefetch", "1", "row_cluster=4,row_prefetch=on"),
    ("1/SM c4 512 prefetch", "1", "row_cluster=4,block=512,row_prefetch=on"),
]
ap = row_options(dtypes=False)
ap.add_argument("--only", action="append", default=None)
args = ap.parse_args()
n, c, x = seeded_logits(args)
y = torch.randint(0, c, (n,), device="cuda")
rate = copy_rate(n * c * 4)
floor_ms = 2 * n * c * 4 / rate / 1e6
text = (root / "examples" / "cross_entropy.loss").read_text()
fns, reference = {}, None
for label, bps, knobs in VARIANTS:
    if args.only and label not in args.only and label != "default":
        continue
    if bps is None:
        os.environ.pop("LOSSJIT_EXP_CLUSTER_BPS", None)
    else:
        os.environ["LOSSJIT_EXP_CLUSTER_BPS"] = bps
    loss = lossjit.compile(text, inputs=["x", "y"], knobs=knobs)
    v, (g,) = loss.value_and_grad(x, y, wrt=["x"])  # plans now, under this variant's setting
    info = loss.kernel_info() if hasattr(loss, "kernel_info") else None
    if reference is None:
        reference = (float(v), g.clone())
        diff = 0.0
    else:
        diff = (g - reference[1]).abs().max().item()
    print(f"{label:22s} value {float(v):.9g} (default {reference[0]:.9g})  grad max |diff| {diff:.3g}"
          + (f"  {info}" if info else ""), flush=True)
    fns[label] = (lambda loss=loss: loss.value_and_grad(x, y, wrt=["x"]))
os.environ.pop("LOSSJIT_EXP_CLUSTER_BPS", None)
for rnd in range(2):
    ms = alternating(fns, args.reps)
    for k in fns:
        print(f"round {rnd + 1} {k:22s} {args.shape:12s} {ms[k]:8.3f} ms  {100 * floor_ms / ms[k]:5.1f}% of floor", flush=True)
