import cProfile, pstats, io, sys, pathlib, time
import torch, torch.nn.functional as F
sys.path.insert(0, str(pathlib.Path.cwd() / "python"))
import lossjit
dev = torch.device("cuda", 0)
p, t = torch.rand(4096, device=dev), torch.rand(4096, device=dev)
pg = p.detach().clone().requires_grad_(True)
loss = lossjit.compile("mean((p - t)^2)")
def lj(): return torch.autograd.grad(loss(pg, t), pg)
def th(): return torch.autograd.grad(F.mse_loss(pg, t), pg)
def fwd_only(): return loss(pg, t)
def mul(): return pg.detach() * t[0]
def empty(): return torch.empty(4096, device=dev)
for name, fn in [("lossjit", lj), ("torch", th), ("lossjit fwd only (graph built)", fwd_only), ("mul", mul), ("empty", empty)]:
    for _ in range(300): fn()
    torch.cuda.synchronize()
    best = 1e9
    for r in range(5):
        s = time.perf_counter()
        for _ in range(2000): fn()
        best = min(best, (time.perf_counter() - s) / 2000 * 1e6)
        torch.cuda.synchronize()
    print(f"{best:8.2f} us  {name}")
pr = cProfile.Profile(); pr.enable()
for _ in range(3000): lj()
pr.disable(); s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25); print(s.getvalue())
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(200): lj()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(200): th()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
