"""Is the compiled step's gap lossjit's launch? Forward + backward of a 4096-element MSE inside
torch.compile with the ops' C++ kernels as they are, and with the library's entry points replaced by a
function that returns 0 at once (libc's getuid: 0 for root, the GPU machine's user), so that the op
allocates and returns without launching; beside torch.compile's own MSE, in alternating rounds.

    python3 noop_launch.py [--calls 2000] [--rounds 9] [--json out.json]
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
ap.add_argument("--calls", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=9)
ap.add_argument("--json")
args = ap.parse_args()
if os.getuid() != 0:
    sys.exit("getuid() is not 0 here: it cannot stand in for a call that succeeds")
lossjit.build_native()
native = _native.module()
_native.use(native)
libc = ctypes.CDLL(None)
returns_zero = ctypes.cast(libc.getuid, ctypes.c_void_p).value


def configure(launch):
    """The ops' kernels with the library's launch entry points as they are, or replaced (launch=False)."""
    _torch._configure_native(native)
    if not launch:
        native.configure_ops(returns_zero, returns_zero, ctypes.cast(_torch.lib.lossjit_output_dtype, ctypes.c_void_p).value,
                             _torch._native_describe, _torch._native_exec, _torch._value_kernel,
                             _torch._value_and_grad_kernel)


dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev, requires_grad=True)
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
theirs = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
ours(p, t)  # compiled and the layout's output dtype known before the stand-in
variants = [
    ("lossjit, C++ kernels, fwd+bwd", lambda: torch.autograd.grad(ours(p, t), p), lambda: configure(True)),
    ("lossjit, C++ kernels, no launch, fwd+bwd", lambda: torch.autograd.grad(ours(p, t), p), lambda: configure(False)),
    ("torch.compile's MSE, fwd+bwd", lambda: torch.autograd.grad(theirs(p, t), p), lambda: configure(True)),
    ("lossjit, C++ kernels, forward only", lambda: ours(p, t), lambda: configure(True)),
    ("lossjit, C++ kernels, no launch, forward only", lambda: ours(p, t), lambda: configure(False)),
    ("torch.compile's MSE, forward only", lambda: theirs(p, t), lambda: configure(True)),
]
timed = alternating_host_us(variants, args.calls, args.rounds, warmup=300)
configure(True)
rows = []
for name, (median, best) in timed.items():
    rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
    print(f"{median:8.2f} us  (min {best:7.2f})  {name}", flush=True)
if args.json:
    pathlib.Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                                                   "calls": args.calls, "rounds": args.rounds, "rows": rows}, indent=2) + "\n")
