# Round 105: rows side by side with the row cache against without it and against torch.compile, in
# one process, alternating (bench/gpu_timing.py): KernelBench 36 (RMS norm over the 64 features of
# [112, 64, 512, 512]) forward; RMS norm forward + backward; K-dimensional cross-entropy over 21
# classes of [16, 21, 512, 512] (segmentation), value + gradient. Floors: every tensor read or
# written once at the copy rate.
import sys, pathlib, json, os
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
# Parts to run (default all): rms, rms_fb, ce (21 classes), ce100 (100 classes of [16, 100, 256, 256]).
parts = sys.argv[1].split(",") if len(sys.argv) > 1 else ["rms", "rms_fb", "ce"]
torch.manual_seed(0)
out = {}
rate = copy_rate(1 << 30)
def report(name, t, nbytes, err):
    floor = nbytes / rate / 1e6
    out[name] = {"ms": t, "floor_pct": {k: 100 * floor / v for k, v in t.items()}, "err": err}
    print(name, {k: round(v, 3) for k, v in t.items()}, {k: round(v, 1) for k, v in out[name]["floor_pct"].items()},
          "err", err, flush=True)

rms_text = "x / sqrt(mean(x^2, 1) + 1e-5)"
rms_ref = lambda x: x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)
cached, uncached = lossjit.compile(rms_text, inputs=["x"]), lossjit.compile(rms_text, inputs=["x"], knobs="row_cache=off")
compiled = torch.compile(rms_ref)
if "rms" in parts:
    x = torch.randn(112, 64, 512, 512, device="cuda")
    want = rms_ref(x[:2].double())
    err = max(((f(x[:2].contiguous()).double() - want).abs().max() / want.abs().max()).item() for f in (cached, uncached))
    t = alternating({"lossjit": lambda: cached(x), "row_cache=off": lambda: uncached(x), "torch.compile": lambda: compiled(x)}, 10)
    report("36 RMSNorm 112x64x512x512 forward", t, 2 * x.numel() * 4, err)
    del x
    torch.cuda.empty_cache()

if "rms_fb" in parts:
    x = torch.randn(32, 64, 512, 512, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    def fb(f):
        return lambda: torch.autograd.grad(f(x), x, g)[0]
    xs = x[:2].detach().double().requires_grad_()
    want = torch.autograd.grad(rms_ref(xs), xs, g[:2].double())[0]
    x2 = x[:2].detach().contiguous().requires_grad_()
    err = ((torch.autograd.grad(cached(x2), x2, g[:2].contiguous())[0].double() - want).abs().max() / want.abs().max()).item()
    t = alternating({"lossjit": fb(cached), "row_cache=off": fb(uncached), "torch.compile": fb(compiled)}, 10)
    report("RMSNorm 32x64x512x512 forward+backward", t, 4 * x.numel() * 4 + x.numel() * 4, err)  # fwd: r+w; bwd: x, g, out-grad
    del x, g
    torch.cuda.empty_cache()

def cross_entropy(shape, classes):
    ce_text = "mean(logsumexp(x, 1) - x[y])"
    ce_ref = lambda x, y: torch.nn.functional.cross_entropy(x, y)
    ce, ce_off = lossjit.compile(ce_text, inputs=["x", "y"]), lossjit.compile(ce_text, inputs=["x", "y"], knobs="row_cache=off")
    ce_compiled = torch.compile(ce_ref)
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    y = torch.randint(0, classes, (shape[0],) + tuple(shape[2:]), device="cuda")
    xs = x.detach().double().requires_grad_()
    want = torch.autograd.grad(ce_ref(xs, y), xs)[0]
    err = ((torch.autograd.grad(ce(x, y), x)[0].double() - want).abs().max() / want.abs().max()).item()
    vg = lambda f: (lambda: torch.autograd.grad(f(x, y), x)[0])
    t = alternating({"lossjit": vg(ce), "row_cache=off": vg(ce_off), "torch.compile": vg(ce_compiled)}, 10)
    report(f"K-dim cross-entropy {shape} value+grad", t, 2 * x.numel() * 4 + y.numel() * 8, err)
    t = alternating({"lossjit": lambda: ce(x, y), "torch.compile": lambda: ce_compiled(x, y)}, 10)
    report(f"K-dim cross-entropy {shape} forward", t, x.numel() * 4 + y.numel() * 8, 0.0)
if "ce" in parts:
    cross_entropy((16, 21, 512, 512), 21)
if "ce100" in parts:
    cross_entropy((16, 100, 256, 256), 100)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "side_cache.json"), "w"), indent=1)
