"""The GPU's side of the compiled step: kernels and their device time per forward + backward of a
4096-element MSE inside torch.compile, lossjit's ops (C++ kernels) against torch.compile's own MSE
(torch.profiler, 200 steps each).

    python3 gpu_time.py [--steps 200]
"""
import argparse
import pathlib
import sys

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = pathlib.Path(__file__).resolve().parents[5]
sys.path[:0] = [str(ROOT / "python")]
import lossjit  # noqa: E402
from lossjit import _native  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=200)
args = ap.parse_args()
lossjit.build_native()
_native.use(_native.module())
dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev, requires_grad=True)
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
theirs = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
for name, fn in (("lossjit", ours), ("torch.compile", theirs)):
    for _ in range(50):
        torch.autograd.grad(fn(p, t), p)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            torch.autograd.grad(fn(p, t), p)
        torch.cuda.synchronize()
    total = 0.0
    print(f"== {name}: device us per step, by kernel")
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if e.device_time_total <= 0:
            continue
        per_step = e.device_time_total / args.steps
        total += per_step
        print(f"{per_step:9.2f} us  {e.count / args.steps:5.2f}x  {e.key[:100]}")
    print(f"{total:9.2f} us  total")
