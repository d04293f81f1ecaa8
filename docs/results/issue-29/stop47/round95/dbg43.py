import sys, random, pathlib
import numpy as np, torch
sys.path.insert(0, str(pathlib.Path.cwd() / "tests/differential"))
sys.path.insert(0, str(pathlib.Path.cwd() / "python"))
import k_takes as kt, lossjit
k, seed = 43, 93
rng = random.Random(seed * 100003 + k)
text, fn, is_map = kt.generate(rng)
order = kt.reads_of(text); arrays = kt.inputs(rng, order)
print(text); print(order, {n: a.shape for n, a in arrays.items()})
wrt = [n for n in order if n != "k"]
want, want_grads = kt.oracle(fn, arrays, wrt, None)
loss = lossjit.compile(text, inputs=order)
ref = loss.reference_grad(*[arrays[n] for n in order], wrt=wrt)
np.set_printoptions(precision=17, linewidth=200)
x = arrays["x"]; kk = arrays["k"]
print("x", x); print("k", kk)
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
if dev == "cuda":
    for dt in (torch.float64, torch.float32):
        ts = [torch.tensor(arrays[n], device="cuda") for n in order]
        ts = [t.to(dt) if t.is_floating_point() else t for t in ts]
        xs = ts[order.index("x")].clone().requires_grad_(True)
        ts[order.index("x")] = xs
        out = loss(*ts)
        g, = torch.autograd.grad(out, [xs])
        print(dt, "value", out.item(), "want", want)
        print("gpu grad", g.cpu().numpy())
print("ref grad", ref)
print("oracle grad", want_grads[0])
for r in range(3):
    xr = x[r]; kr = kk[r]
    h = np.exp(np.tanh(xr)) * (xr * 0.5)
    S = np.sum(-1.5 - (xr[kr] - h[kr]))
    e24 = 2 * xr + S * xr; e32 = np.exp(np.tanh(S * xr))
    print("row", r, "S", S, "max e24", e24.max(), (e24 == e24.max()).sum(), "max e32", e32.max(), (e32 == e32.max()).sum(), "top e32", np.sort(e32)[-4:], "S*x max", (S*xr).max())
