# Round 109: layer norm's gradient with its mean's adjoint split into two row sums (three walks of
# each row instead of four) against main's kernels (four walks) and torch.compile, forward +
# backward (torch.autograd.grad of the output with an upstream gradient, with respect to x). One
# library a process (LOSSJIT_LIBRARY); run.sh alternates the processes, each times its lossjit
# against torch.compile alternating (bench/gpu_timing.py). Floors: forward reads x (and the
# weights) and writes y, backward reads x, the weights and the upstream and writes x's gradient,
# at the copy rate. The gradient's error against torch float64 with the mean far from 0 (x = 20 +
# N(0, 1)): the split's two sums are then large against their difference.
import sys, pathlib, json, os
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label = sys.argv[1]
torch.manual_seed(0)
rate = copy_rate(1 << 30)
out = {}
LN = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5) * w + b"
def ln_ref(x, w, b):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + 1e-5) * w + b
LN1 = "m = mean(x, 1); (x - m) / sqrt(mean((x - m)^2, 1) + 1e-5)"
def ln1_ref(x):
    m = x.mean(1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(1, keepdim=True) + 1e-5)
cases = [
    ("layer norm last dim of 32768x4096, weight and bias", LN, ln_ref, (32768, 4096), True, 0.0),
    ("layer norm last dim of 32768x4096, mean 20", LN, ln_ref, (32768, 4096), True, 20.0),
    ("layer norm over dim 1 of 16x64x512x512", LN1, ln1_ref, (16, 64, 512, 512), False, 0.0),
]
for name, text, ref, shape, affine, offset in cases:
    f, compiled = lossjit.compile(text), torch.compile(ref)
    x = (torch.randn(*shape, device="cuda") + offset).requires_grad_()
    extra = [torch.rand(shape[-1], device="cuda") + 0.5, torch.randn(shape[-1], device="cuda")] if affine else []
    g = torch.randn_like(x)
    xs = x[:2].detach().double().requires_grad_()
    want = torch.autograd.grad(ref(xs, *[e.double() for e in extra]), xs, g[:2].double())[0]
    x2 = x[:2].detach().contiguous().requires_grad_()
    err = ((torch.autograd.grad(f(x2, *extra), x2, g[:2].contiguous())[0].double() - want).abs().max() / want.abs().max()).item()
    fb = lambda h: (lambda: torch.autograd.grad(h(x, *extra), x, g)[0])
    t = alternating({"lossjit": fb(f), "torch.compile": fb(compiled)}, 10)
    floor = (5 * x.numel() + 2 * sum(e.numel() for e in extra)) * 4 / rate / 1e6
    out[name] = {"ms": t, "floor_pct": {k: 100 * floor / v for k, v in t.items()}, "grad_err": err}
    print(label, name, {k: round(v, 3) for k, v in t.items()},
          {k: round(100 * floor / v, 1) for k, v in t.items()}, "grad err %.2e" % err, flush=True)
    del x, g
    torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), f"ln_time_{label}.json"), "w"), indent=1)
