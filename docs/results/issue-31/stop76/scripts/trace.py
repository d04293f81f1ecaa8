"""torch.profiler over forward + backward inside torch.compile (4096 elements): lossjit with the ops'
kernels in C++, and torch.compile's own MSE; writes each one's table of host events (by self CPU time)
and a Chrome trace into OUT.

    python3 trace.py OUT [--calls 300]
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
ap.add_argument("out")
ap.add_argument("--calls", type=int, default=300)
args = ap.parse_args()
out = pathlib.Path(args.out)
out.mkdir(parents=True, exist_ok=True)
lossjit.build_native()
_native.use(_native.module())
dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev, requires_grad=True)
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
variants = {"lossjit": torch.compile(lambda a, b: loss(a, b), fullgraph=True),
            "torch": torch.compile(lambda a, b: torch.mean((a - b) ** 2))}
for name, fn in variants.items():
    for _ in range(300):
        torch.autograd.grad(fn(p, t), p)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            torch.autograd.grad(fn(p, t), p)
        torch.cuda.synchronize()
    (out / f"{name}.txt").write_text(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    prof.export_chrome_trace(str(out / f"{name}.json"))
    print(name, "done", flush=True)
