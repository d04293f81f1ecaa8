# Diagnostic (not part of the repository): the direct path of one package, whole and with
# lossjit_evaluate replaced by a no-op, and cProfile's table of it.
import cProfile, io, pstats, statistics, sys, time
import torch
sys.path.insert(0, sys.argv[1])
label = sys.argv[2]
import lossjit
from lossjit import _torch as lt
dev = torch.device("cuda", 0)
p, t = torch.rand(4096, device=dev), torch.rand(4096, device=dev)
loss = lossjit.compile("mean((p - t)^2)")
loss(p, t); torch.cuda.synchronize()


def host_us(fn, calls=10000, repeats=5):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times), min(times)


with torch.no_grad():
    m, b = host_us(lambda: loss(p, t))
    print(f"{label}: direct path {m:.2f} us (min {b:.2f})", flush=True)
    real, lt._evaluate = lt._evaluate, (lambda *a: 0)
    m, b = host_us(lambda: loss(p, t))
    lt._evaluate = real
    print(f"{label}: direct path, lossjit_evaluate a no-op {m:.2f} us (min {b:.2f})", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3000):
        loss(p, t)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
    print(s.getvalue())
