import sys, pathlib, cProfile, pstats, io, time
import torch
sys.path.insert(0, str(pathlib.Path(sys.argv[1]).resolve()))
import lossjit
loss = lossjit.compile("mean((p - t)^2)")
p = torch.rand(4096, device="cuda", requires_grad=True); t = torch.rand(4096, device="cuda")
for _ in range(200): torch.autograd.grad(loss(p, t), p)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(2000): torch.autograd.grad(loss(p, t), p)
torch.cuda.synchronize()
print(sys.argv[1], "us per call", (time.perf_counter() - t0) / 2000 * 1e6)
pr = cProfile.Profile(); pr.enable()
for _ in range(2000): torch.autograd.grad(loss(p, t), p)
torch.cuda.synchronize(); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14); print(s.getvalue()[:3500])
