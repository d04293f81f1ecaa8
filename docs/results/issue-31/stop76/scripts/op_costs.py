"""Where a compiled step's time goes: host us a call of lossjit's ops called eagerly, of the forward alone
inside torch.compile (no backward), and of forward + backward, each with the ops' kernels in C++ (the
native path) and in Python, beside torch.compile's own MSE; alternating rounds, 4096 elements.

    python3 op_costs.py [--calls 3000] [--rounds 9] [--json out.json]
"""
import argparse
import json
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[5]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "bench")]
import lossjit  # noqa: E402
from lossjit import _native  # noqa: E402
from python_overhead import alternating_host_us  # noqa: E402 (the bench's timing loop)

ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=3000)
ap.add_argument("--rounds", type=int, default=9)
ap.add_argument("--json")
args = ap.parse_args()
lossjit.build_native()
native = _native.module()
dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev)
pg = p.clone().requires_grad_()
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
theirs = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
vg, value = torch.ops.lossjit.value_and_grad.default, torch.ops.lossjit.value.default
use_python, use_native = (lambda: _native.use(None)), (lambda: _native.use(native))


def both(name, fn):
    return [(f"{name} [C++ kernels]", fn, use_native), (f"{name} [Python kernels]", fn, use_python)]


def no_grad(fn):
    def call():
        with torch.no_grad():
            fn()
    return call


variants = (both("eager lossjit::value_and_grad", lambda: vg(loss._id, [p, t], 1))
            + both("eager lossjit::value", lambda: value(loss._id, [p, t]))
            + both("compiled, no grad (lossjit::value)", no_grad(lambda: ours(p, t)))
            + [("torch.compile's MSE, no grad", no_grad(lambda: theirs(p, t)), use_python)]
            + both("compiled forward only, p requires grad", lambda: ours(pg, t))
            + [("torch.compile's MSE forward only, p requires grad", lambda: theirs(pg, t), use_python)]
            + both("compiled forward + backward", lambda: torch.autograd.grad(ours(pg, t), pg))
            + [("torch.compile's MSE forward + backward", lambda: torch.autograd.grad(theirs(pg, t), pg), use_python)])
timed = alternating_host_us(variants, args.calls, args.rounds, warmup=300)
rows = []
for name, (median, best) in timed.items():
    rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
    print(f"{median:8.2f} us  (min {best:7.2f})  {name}", flush=True)
if args.json:
    pathlib.Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                                                   "calls": args.calls, "rounds": args.rounds, "rows": rows}, indent=2) + "\n")
