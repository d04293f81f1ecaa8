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
orig_fused = lt.TorchLoss.fused
orig_apply = lt._eager_reduce_apply
def unpooled(self, tensors, mask, upstream=None, pooled=False):
    return orig_fused(self, tensors, mask, upstream, False)
def with_cfg(pool, capply, fn):
    def run():
        lt.TorchLoss.fused = orig_fused if pool else unpooled
        lt._eager_reduce_apply = orig_apply if capply else None
        return fn()
    return run
fb = lambda: torch.autograd.grad(loss(p, t), p)
fw = lambda: loss(p, t)
variants = [
    ("fwd+bwd torch eager", lambda: torch.autograd.grad(F.mse_loss(p, t), p)),
    ("fwd+bwd pooled, C apply", with_cfg(True, True, fb)),
    ("fwd+bwd fresh, C apply", with_cfg(False, True, fb)),
    ("fwd+bwd pooled, wrapper apply", with_cfg(True, False, fb)),
    ("fwd+bwd fresh, wrapper apply", with_cfg(False, False, fb)),
    ("fwd torch eager", lambda: F.mse_loss(p, t)),
    ("fwd pooled, C apply", with_cfg(True, True, fw)),
    ("fwd fresh, C apply", with_cfg(False, True, fw)),
    ("fwd fresh, wrapper apply", with_cfg(False, False, fw)),
]
for name, (m, b) in alternating_host_us(variants, 2000, 9).items():
    print(f"{m:8.2f} us (min {b:6.2f})  {name}", flush=True)
