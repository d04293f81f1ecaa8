# Round 108: gradients of RMS norm and L2 normalization with the per-row factors taken out of the
# gradient's row sums (branch row-factors: two walks of each row) against main's kernels (three
# walks) and torch.compile, forward + backward (torch.autograd.grad of the output with an upstream
# gradient). One library a process (LOSSJIT_LIBRARY); run.sh alternates the processes, each times
# its lossjit against torch.compile alternating (bench/gpu_timing.py). Floors: forward reads x and
# writes y, backward reads x and the upstream gradient and writes the input's, at the copy rate.
import sys, pathlib, json, os
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label = sys.argv[1]
torch.manual_seed(0)
rate = copy_rate(1 << 30)
out = {}
cases = [
    ("RMS norm dim 1 of 32x64x512x512", "x / sqrt(mean(x^2, 1) + 1e-5)",
     lambda x: x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5), (32, 64, 512, 512)),
    ("RMS norm last dim of 32768x4096", "x / sqrt(mean(x^2, -1) + 1e-5)",
     lambda x: x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-5), (32768, 4096)),
    ("L2 normalize last dim of 32768x4096", "x / sqrt(sum(x * x, -1))",
     lambda x: x / torch.sqrt(torch.sum(x * x, dim=-1, keepdim=True)), (32768, 4096)),
]
for name, text, ref, shape in cases:
    f, compiled = lossjit.compile(text, inputs=["x"]), torch.compile(ref)
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    xs = x[:2].detach().double().requires_grad_()
    want = torch.autograd.grad(ref(xs), xs, g[:2].double())[0]
    x2 = x[:2].detach().contiguous().requires_grad_()
    err = ((torch.autograd.grad(f(x2), x2, g[:2].contiguous())[0].double() - want).abs().max() / want.abs().max()).item()
    fb = lambda h: (lambda: torch.autograd.grad(h(x), x, g)[0])
    t = alternating({"lossjit": fb(f), "torch.compile": fb(compiled)}, 10)
    floor = 5 * x.numel() * 4 / rate / 1e6
    out[name] = {"ms": t, "floor_pct": {k: 100 * floor / v for k, v in t.items()}, "err": err}
    print(label, name, {k: round(v, 3) for k, v in t.items()},
          {k: round(100 * floor / v, 1) for k, v in t.items()}, "err %.2e" % err, flush=True)
    del x, g
    torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), f"rf_time_{label}.json"), "w"), indent=1)
