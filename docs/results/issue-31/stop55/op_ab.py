import pathlib, sys
from typing import List
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

@torch.library.custom_op("ljproto::reduce_custom", mutates_args=())
def reduce_custom(loss_id: int, inputs: List[torch.Tensor], wrt_mask: int) -> List[torch.Tensor]:
    return lt._reduce_kernel(loss_id, inputs, wrt_mask)
@reduce_custom.register_fake
def _(loss_id, inputs, wrt_mask):
    return [inputs[0].new_empty(())] + [inputs[i].new_empty(inputs[i].shape) for i in lt._set_bits(inputs, wrt_mask)]
reduce_custom.register_autograd(lt._reduce_backward, setup_context=lt._reduce_setup)

lib_op = torch.ops.lossjit.reduce
cus_op = torch.ops.ljproto.reduce_custom
lib_c = torch.compile(lambda a, b: lib_op(loss._id, [a, b], 1)[0], fullgraph=True)
cus_c = torch.compile(lambda a, b: cus_op(loss._id, [a, b], 1)[0], fullgraph=True)
mse = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
(g_ref,) = torch.autograd.grad(F.mse_loss(p, t), p)
fns = [("torch eager F.mse_loss", F.mse_loss), ("lossjit eager loss(p, t)", loss),
       ("op eager, Library", lambda a, b: lib_op(loss._id, [a, b], 1)[0]),
       ("op eager, custom_op", lambda a, b: cus_op(loss._id, [a, b], 1)[0]),
       ("compiled, Library op", lib_c), ("compiled, custom_op", cus_c), ("compiled MSE", mse)]
for name, fn in fns:
    (g,) = torch.autograd.grad(fn(p, t), p)
    assert torch.allclose(g, g_ref, rtol=1e-5, atol=1e-9), name
variants = [(f"fwd+bwd {n}", (lambda fn=fn: torch.autograd.grad(fn(p, t), p))) for n, fn in fns]
variants += [(f"fwd {n}", (lambda fn=fn: fn(p, t))) for n, fn in fns]
for name, (m, b) in alternating_host_us(variants, 1500, 9).items():
    print(f"{m:8.2f} us (min {b:6.2f})  {name}", flush=True)
