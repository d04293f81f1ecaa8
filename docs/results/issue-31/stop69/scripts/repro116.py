"""Differential program 116 of seed 222 (a misaligned address on main and on the change): which
launch faults, with the row cache asked for and not. Run with CUDA_LAUNCH_BLOCKING=1."""
import sys
import torch
sys.path.insert(0, "python")
import lossjit  # noqa: E402

text = "param k0 = 2; param k1 = 0.5; b1 = where(((a == a) > b), c, d); (b + sum(e, -1))"
which = sys.argv[1]
knobs = {"row_cache": True} if sys.argv[2] == "cache" else None
g = torch.Generator().manual_seed(1)
c = torch.randn(4099, dtype=torch.float64).cuda()
e = torch.randn(3, 4099, dtype=torch.float64).cuda()
d = torch.randint(-3, 4, (4099, 3)).cuda().t()
a = torch.randn(1, 4099, dtype=torch.float64).cuda()
b = torch.randn(4099, 3, dtype=torch.float64).cuda().t()
loss = lossjit.compile(text, inputs=["c", "e", "d", "a", "b"], knobs=knobs)
print(which, knobs, "e", e.stride(), e.data_ptr() % 16, "b", b.stride(), flush=True)
if which == "forward":
    out = loss.map(c, e, d, a, b)
    torch.cuda.synchronize()
    print("forward ok", flush=True)
else:
    leaf = e.clone().requires_grad_()
    out = loss(c, leaf, d, a, b)
    torch.cuda.synchronize()
    print("forward ok", flush=True)
    up = torch.randn(out.shape, dtype=torch.float64, device="cuda")
    (ge,) = torch.autograd.grad(out, [leaf], up)
    torch.cuda.synchronize()
    want = up.sum(-1, keepdim=True).expand_as(ge)
    print("backward ok, max diff", (ge - want).abs().max().item(), flush=True)
