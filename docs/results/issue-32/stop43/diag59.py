import sys, time, torch, torch.nn.functional as F
sys.path.insert(0, "bench"); sys.path.insert(0, "python")
from gpu_timing import alternating
import lossjit
dev = torch.device("cuda")
torch.manual_seed(0)
h = (torch.randn(16384, 4096, device=dev) * 0.5).to(torch.bfloat16).requires_grad_()
W = (torch.randn(128256, 4096, device=dev) * 4096 ** -0.5).to(torch.bfloat16).requires_grad_()
y = torch.randint(0, 128256, (16384,), device=dev)
head = lossjit.LinearLoss("mean(logsumexp(logits, -1) - logits[y])")
def ours():
    return torch.autograd.grad(head(h, W, y=y), [h, W])
compiled = torch.compile(lambda h, W, y: F.cross_entropy(F.linear(h, W).float(), y))
def tc():
    return torch.autograd.grad(compiled(h, W, y), [h, W])
for fn in (ours, tc):
    for _ in range(3): fn()
torch.cuda.synchronize()
# host time of the forward call and of the whole step, with the GPU busy before (queue full) and idle
for name, fn in (("lossjit", ours), ("torch.compile", tc)):
    torch.cuda.synchronize()
    t0 = time.perf_counter(); out = head(h, W, y=y) if name == "lossjit" else compiled(h, W, y); t1 = time.perf_counter()
    g = torch.autograd.grad(out, [h, W]); t2 = time.perf_counter(); torch.cuda.synchronize(); t3 = time.perf_counter()
    print(f"{name}: host forward {1e3*(t1-t0):.3f} ms, host backward {1e3*(t2-t1):.3f} ms, until done {1e3*(t3-t0):.3f} ms")
print("alone, 10 each:", {k: round(v, 3) for k, v in alternating({"lossjit": ours}, 10).items()},
      {k: round(v, 3) for k, v in alternating({"torch.compile": tc}, 10).items()})
print("alternating 10:", {k: round(v, 3) for k, v in alternating({"lossjit": ours, "torch.compile": tc}, 10).items()})
print("alternating 10, other order:", {k: round(v, 3) for k, v in alternating({"torch.compile": tc, "lossjit": ours}, 10).items()})
