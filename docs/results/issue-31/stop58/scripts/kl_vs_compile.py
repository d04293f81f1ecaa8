#!/usr/bin/env python3
"""KL batchmean (examples/kl.loss) against torch.compile of F.kl_div(log(p), t, reduction='batchmean'),
alternating (bench/gpu_timing.py), on softmax rows of three seeds; % of the read roofline from the
copy rate's read half is not used here: both are printed in ms and as each other's ratio.

    python3 docs/results/issue-31/stop58/scripts/kl_vs_compile.py --shape 16384x16384 --seeds 0 1 2
"""
import argparse
import pathlib
import sys

import torch
import torch.nn.functional as F

root = pathlib.Path(__file__).resolve().parents[5]
sys.path.insert(0, str(root / "python"))
sys.path.insert(0, str(root / "bench"))
import lossjit  # noqa: E402
from gpu_timing import alternating  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shape", default="16384x16384")
ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
ap.add_argument("--reps", type=int, default=20)
args = ap.parse_args()
n, c = (int(v) for v in args.shape.split("x"))
kl = lossjit.compile((root / "examples" / "kl.loss").read_text(), inputs=["p", "t"])
compiled = torch.compile(lambda p, t: F.kl_div(torch.log(p), t, reduction="batchmean"))
for seed in args.seeds:
    torch.manual_seed(seed)
    p = torch.softmax(torch.randn(n, c, device="cuda"), 1)
    t = torch.softmax(torch.randn(n, c, device="cuda"), 1)
    ms = alternating({"lossjit": lambda: kl(p, t), "torch.compile": lambda: compiled(p, t)}, args.reps)
    ref = F.kl_div(torch.log(p.double()), t.double(), reduction="batchmean").item()
    got = float(kl(p, t))
    print(f"seed {seed} {args.shape}: lossjit {ms['lossjit']:.4f} ms, torch.compile {ms['torch.compile']:.4f} ms "
          f"({ms['lossjit'] / ms['torch.compile']:.3f}x); value {got:.9g}, float64 {ref:.9g}, "
          f"relative error {abs(got - ref) / abs(ref):.2e}", flush=True)
