# Round 109: layer norm's forward + backward over the last dim of 32768x4096 at kernel variants
# (knobs apply to both kernels), against RMS norm's and torch.compile's, alternating.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating
LN = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)"
RMS = "x / sqrt(mean(x^2, -1) + 1e-5)"
def ln_ref(x):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + 1e-5)
for shape in [(32768, 4096), (4096, 32768)]:
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    fns = {}
    for knobs in ["", "row_cache=off", "block=128", "block=256", "block=1024", "unroll=1", "unroll=4", "acc=float"]:
        try:
            fns["LN " + (knobs or "default")] = lossjit.compile(LN, knobs=knobs or None)
        except Exception as e:
            print("LN", knobs, "refused:", str(e)[:120])
    fns["RMS default"] = lossjit.compile(RMS)
    fns["torch.compile LN"] = torch.compile(ln_ref)
    t = alternating({k: (lambda h: (lambda: torch.autograd.grad(h(x), x, g)[0]))(h) for k, h in fns.items()}, 5)
    print(shape, "fwd+bwd", {k: round(v, 3) for k, v in t.items()}, flush=True)
    xd = x.detach()
    t = alternating({k: (lambda h: (lambda: h(xd)))(h) for k, h in fns.items() if k.startswith("LN")}, 5)
    print(shape, "forward", {k: round(v, 3) for k, v in t.items()}, flush=True)
    del x, g
