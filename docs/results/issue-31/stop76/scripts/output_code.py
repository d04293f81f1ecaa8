"""What torch.compile runs for lossjit's MSE and for torch's own, forward and backward (TORCH_LOGS=output_code
prints inductor's code): run as TORCH_LOGS=output_code python3 output_code.py [--native]."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[5] / "python"))
import lossjit  # noqa: E402
from lossjit import _native  # noqa: E402

if "--native" in sys.argv:
    lossjit.build_native()
_native.use(_native.module() if "--native" in sys.argv else None)
dev = torch.device("cuda", 0)
p = torch.rand(4096, device=dev, requires_grad=True)
t = torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
theirs = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
for name, fn in (("lossjit", ours), ("torch", theirs)):
    print(f"==== {name}", flush=True)
    (g,) = torch.autograd.grad(fn(p, t), p)
    torch.cuda.synchronize()
