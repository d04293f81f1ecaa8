import sys, pathlib, time
import torch
sys.path.insert(0, str(pathlib.Path(sys.argv[1]).resolve()))
import lossjit
loss = lossjit.compile("mean((p - t)^2)")
p = torch.rand(4096, device="cuda", requires_grad=True); t = torch.rand(4096, device="cuda")
side = loss._torch_side() if hasattr(loss, "_torch_side") else None
def timed(name, fn, n=2000):
    for _ in range(100): fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter(); a.record()
    for _ in range(n): fn()
    b.record(); t1 = time.perf_counter(); torch.cuda.synchronize()
    print(f"{sys.argv[1]} {name}: host {(t1 - t0) / n * 1e6:.1f} us/call (before the sync), gpu {a.elapsed_time(b) / n * 1e3:.1f} us/call", flush=True)
timed("fwd+bwd", lambda: torch.autograd.grad(loss(p, t), p))
timed("forward with grad", lambda: loss(p, t))
with torch.no_grad():
    timed("forward no grad", lambda: loss(p, t))
import lossjit._torch as T
s = [v() for v in T._sides.values() if v() is not None][0] if hasattr(T, "_sides") else None
if s is not None:
    up = torch.ones((), device="cuda")
    timed("fused, upstream None", lambda: s.value_and_grad_masked((p.detach(), t), 1))
    try:
        timed("fused, upstream device", lambda: s.value_and_grad_masked((p.detach(), t), 1, up))
    except TypeError as e:
        print("no upstream argument here:", e)
