import pathlib, sys
import torch, torch.nn.functional as F
ROOT = pathlib.Path(__file__).resolve().parents[4]  # the repository
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
import lossjit
from lossjit import _torch as lt
from python_overhead import alternating_host_us
dev = torch.device("cuda", 0)
p, t = torch.rand(4096, device=dev, requires_grad=True), torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
side = loss._torch

lib = torch.library.Library("ljproto", "DEF")
lib.define("fused(int loss_id, Tensor[] inputs, int wrt_mask) -> Tensor[]", tags=(torch.Tag.pt2_compliant_tag,))
lib.impl("fused", lambda loss_id, inputs, mask: lt._side(loss_id).value_and_grad_masked(inputs, mask), "CompositeExplicitAutograd")
@torch.library.register_fake("ljproto::fused", lib=lib)
def _(loss_id, inputs, mask):
    return [inputs[0].new_empty(())] + [inputs[i].new_empty(inputs[i].shape) for i in lt._set_bits(inputs, mask)]

class Traced(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_id, mask, a, b):
        out = torch.ops.ljproto.fused(loss_id, [a, b], mask)
        ctx.save_for_backward(out[1])
        return out[0]
    @staticmethod
    def backward(ctx, up):
        (g,) = ctx.saved_tensors
        return None, None, g * up, None

now = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
traced = torch.compile(lambda a, b: Traced.apply(loss._id, 1, a, b), fullgraph=True)
mse = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
(g_ref,) = torch.autograd.grad(F.mse_loss(p, t), p)
for name, fn in [("now", now), ("traced", traced), ("mse", mse)]:
    (g,) = torch.autograd.grad(fn(p, t), p)
    assert torch.allclose(g, g_ref, rtol=1e-5, atol=1e-9), name
variants = [(f"fwd+bwd {n}", (lambda fn=fn: torch.autograd.grad(fn(p, t), p))) for n, fn in [("torch eager", F.mse_loss), ("compiled now", now), ("compiled Function-traced", traced), ("compiled MSE", mse)]]
variants += [(f"fwd {n}", (lambda fn=fn: fn(p, t))) for n, fn in [("compiled now", now), ("compiled Function-traced", traced), ("compiled MSE", mse)]]
for name, (m, b) in alternating_host_us(variants, 2000, 7).items():
    print(f"{m:8.2f} us (min {b:6.2f})  {name}", flush=True)
from torch.profiler import ProfilerActivity, profile
for name, fn in [("now", now), ("traced", traced), ("mse", mse)]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(300):
            torch.autograd.grad(fn(p, t), p)
        torch.cuda.synchronize()
    print(f"==== {name}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
