"""Stop 75 probe: what an autograd function costs from C++ (torch::autograd::Function through a
pybind11 call) against a Python torch.autograd.Function doing the same tensor work, and torch eager's
F.mse_loss, forward + backward as torch.autograd.grad of the value (4096 elements, host us a call)."""
import os, sys, time, statistics
import torch
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

t0 = time.time()
src = r'''
#include <torch/extension.h>
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
struct Fused : torch::autograd::Function<Fused> {
    static torch::Tensor forward(AutogradContext* ctx, torch::Tensor p, torch::Tensor t) {
        auto g = torch::empty_like(p);   // where a fused kernel would write the gradient
        auto v = torch::empty({}, p.options());
        ctx->save_for_backward({g});
        return v;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list go) {
        auto g = ctx->get_saved_variables()[0];
        return {g * go[0], torch::Tensor()};
    }
};
torch::Tensor fused(torch::Tensor p, torch::Tensor t) { return Fused::apply(p, t); }
'''
ext = load_inline("ljx_floor", cpp_sources=[src], functions=["fused"], verbose=False,
                  build_directory=os.environ.get("OUTDIR", "/tmp"), extra_cflags=["-O2"])
print(f"compiled in {time.time() - t0:.1f} s", flush=True)


class PyFused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, p, t):
        g = torch.empty_like(p)
        v = torch.empty((), device=p.device)
        ctx.save_for_backward(g)
        return v

    @staticmethod
    def backward(ctx, up):
        (g,) = ctx.saved_tensors
        return g * up, None


apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, PyFused)
p = torch.randn(4096, device="cuda", requires_grad=True)
t = torch.randn(4096, device="cuda")
ways = {
    "F.mse_loss": lambda: torch.autograd.grad(F.mse_loss(p, t), p),
    "python Function (no kernel)": lambda: torch.autograd.grad(apply(p, t), p),
    "C++ Function (no kernel)": lambda: torch.autograd.grad(ext.fused(p, t), p),
}
calls = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
res = {k: [] for k in ways}
for f in ways.values():
    for _ in range(200): f()
torch.cuda.synchronize()
for r in range(5):
    for k, f in ways.items():
        torch.cuda.synchronize()
        a = time.perf_counter()
        for _ in range(calls): f()
        torch.cuda.synchronize()
        res[k].append((time.perf_counter() - a) / calls * 1e6)
for k, v in res.items():
    print(f"{k:32s} median {statistics.median(v):7.2f} us  min {min(v):7.2f}")
