import cProfile, io, pathlib, pstats, sys
import torch
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import lossjit
dev = torch.device("cuda", 0)
p, t = torch.rand(4096, device=dev, requires_grad=True), torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
ours = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
mse = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
for name, fn in [("ours", ours), ("mse", mse)]:
    for _ in range(200):
        torch.autograd.grad(fn(p, t), p)
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3000):
        torch.autograd.grad(fn(p, t), p)
    torch.cuda.synchronize()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(45)
    print(f"==== {name}\n" + out.getvalue())
print(torch._dynamo.utils.guard_failures if hasattr(torch._dynamo.utils, "guard_failures") else "")
import torch._dynamo
print(torch._dynamo.utils.counters)
