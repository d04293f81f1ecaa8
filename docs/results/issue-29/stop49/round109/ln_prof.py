# Round 109: where layer norm over the last dim of 32768x4096 with a weight and bias ([4096]) spends
# its forward + backward (4x torch.compile's in ln_time.py): the kernels torch.profiler sees.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating
LN = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5) * w + b"
f = lossjit.compile(LN)
nw = lossjit.compile("m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)")
x = torch.randn(32768, 4096, device="cuda", requires_grad=True)
w, b = torch.rand(4096, device="cuda") + 0.5, torch.randn(4096, device="cuda")
g = torch.randn_like(x)
xd = x.detach()
t = alternating({"forward (no grad)": lambda: f(xd, w, b), "forward (x requires grad)": lambda: f(x, w, b),
                 "fwd+bwd": lambda: torch.autograd.grad(f(x, w, b), x, g)[0],
                 "no weights fwd+bwd": lambda: torch.autograd.grad(nw(x), x, g)[0]}, 10)
print({k: round(v, 3) for k, v in t.items()})
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        torch.autograd.grad(f(x, w, b), x, g)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))
