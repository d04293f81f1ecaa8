"""Where does the compiled step's launch cost go? Forward + backward of a 4096-element MSE inside
torch.compile with the ops' C++ kernels: the library's entry points as they are, replaced by a function
that returns at once (getuid), by one that spins 5 us touching no memory, and by one that walks 256 KB
(stand_ins.c); beside torch.compile's own MSE, in alternating rounds. If the real launch costs the step
far more than its own 5 us while the spin costs about 5, the launch's cost is what it leaves behind
(caches, the GPU), not its time.

    python3 probe_launch.py --stand-ins stand_ins.so [--calls 2000] [--rounds 9] [--only NAMES] [--json out.json]
"""
import argparse
import ctypes
import json
import os
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[5]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "bench")]
import lossjit  # noqa: E402
from lossjit import _native, _torch  # noqa: E402
from python_overhead import alternating_host_us  # noqa: E402 (the bench's timing loop)

ap = argparse.ArgumentParser()
ap.add_argument("--stand-ins", required=True)
ap.add_argument("--calls", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=9)
ap.add_argument("--only", help="the variants to time, comma-separated names (default: all)")
ap.add_argument("--json")
args = ap.parse_args()
if os.getuid() != 0:
    sys.exit("getuid() is not 0 here: it cannot stand in for a call that succeeds")
lossjit.build_native()
native = _native.module()
_native.use(native)
libc = ctypes.CDLL(None)
stand_ins = ctypes.CDLL(args.stand_ins)


def address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def configure(entry=None):
    """The ops' kernels with the library's launch entry points as they are (None), or `entry`."""
    _torch._configure_native(native)
    if entry is not None:
        native.configure_ops(entry, entry, address(_torch.lib.lossjit_output_dtype), _torch._native_describe,
                             _torch._native_exec, _torch._value_kernel, _torch._value_and_grad_kernel)


dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev, requires_grad=True)
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
theirs = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
ours(p, t)  # compiled and the layout's output dtype known before the stand-ins
step = lambda: torch.autograd.grad(ours(p, t), p)  # noqa: E731
variants = [
    ("launch", step, lambda: configure()),
    ("returns 0", step, lambda: configure(address(libc.getuid))),
    ("spins 5 us", step, lambda: configure(address(stand_ins.spin_5us))),
    ("walks 256 KB", step, lambda: configure(address(stand_ins.touch_256k))),
    ("torch.compile's MSE", lambda: torch.autograd.grad(theirs(p, t), p), lambda: configure()),
]
if args.only:
    variants = [v for v in variants if v[0] in args.only.split(",")]
timed = alternating_host_us(variants, args.calls, args.rounds, warmup=300)
configure()
rows = []
for name, (median, best) in timed.items():
    rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
    print(f"{median:8.2f} us  (min {best:7.2f})  fwd+bwd, {name}", flush=True)
if args.json:
    pathlib.Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                                                   "calls": args.calls, "rounds": args.rounds, "rows": rows}, indent=2) + "\n")
