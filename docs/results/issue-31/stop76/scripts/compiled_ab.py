"""Forward and backward of a 4096-element MSE inside torch.compile: lossjit with the ops' kernels in C++
(the native path) and in Python, torch.compile's own MSE, and the eager paths, in alternating rounds
(host us a call: `calls` calls back to back, one synchronize; median and fastest over the rounds).

    python3 compiled_ab.py [--calls 2000] [--rounds 15] [--json out.json]
"""
import argparse
import json
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[5]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "bench")]
import lossjit  # noqa: E402
from lossjit import _native  # noqa: E402
from python_overhead import alternating_host_us  # noqa: E402 (the bench's timing loop)

ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=15)
ap.add_argument("--json")
args = ap.parse_args()
lossjit.build_native()
native = _native.module()
dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev, requires_grad=True)
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
theirs = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
use_python, use_native = (lambda: _native.use(None)), (lambda: _native.use(native))
variants = [
    ("lossjit inside torch.compile, ops' kernels in C++", ours, use_native),
    ("lossjit inside torch.compile, ops' kernels in Python", ours, use_python),
    ("torch.compile's own MSE", theirs, use_python),
    ("lossjit eager, the native autograd node", loss, use_native),
    ("torch eager F.mse_loss", F.mse_loss, use_python),
]
_, times = alternating_host_us([(name, lambda fn=fn: torch.autograd.grad(fn(p, t), p), select)
                                for name, fn, select in variants], args.calls, args.rounds, warmup=300, each_round=True)
rows = []
for name, v in times.items():
    rows.append({"variant": name, "host_us_median": round(statistics.median(v), 2), "host_us_min": round(min(v), 2),
                 "rounds": [round(x, 2) for x in v]})
    print(f"{statistics.median(v):8.2f} us  (min {min(v):7.2f})  {name}", flush=True)
base = statistics.median(times["torch.compile's own MSE"])
for name in list(times)[:2]:
    print(f"{name} / torch.compile's own: {statistics.median(times[name]) / base:.3f}", flush=True)
# Per round (each round's variants ran back to back, so a ratio within a round cancels drift).
ratios = [a / b for a, b in zip(times[variants[0][0]], times["torch.compile's own MSE"])]
print(f"per-round ratio, C++ kernels / torch.compile's own: median {statistics.median(ratios):.3f}, "
      f"min {min(ratios):.3f}, max {max(ratios):.3f}", flush=True)
if args.json:
    pathlib.Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                                                   "calls": args.calls, "rounds": args.rounds, "rows": rows,
                                                   "round_ratios": ratios}, indent=2) + "\n")
