# Round 117: one forward + backward of layer norm and softmax over 32768 x 4096 (lossjit, then
# torch.compile), between cudaProfilerStart/Stop for ncu (--profile-from-start off), after warm-up;
# the CUDA-event times of both beside (alternating, outside the profiled range).
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating
programs = {
    "layer norm": ("m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
                   lambda x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)),
    "softmax": ("exp(x - logsumexp(x, -1))", lambda x: torch.softmax(x, -1)),
}
x = torch.randn(32768, 4096, device="cuda", requires_grad=True)
g = torch.randn_like(x)
timing = "--time" in sys.argv
for name, (text, ref) in programs.items():
    fns = {"lossjit": lossjit.compile(text), "torch.compile": torch.compile(ref)}
    step = {k: (lambda h: (lambda: torch.autograd.grad(h(x), x, g)[0]))(h) for k, h in fns.items()}
    for f in step.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    if timing:
        print(name, alternating(step, 7), flush=True)
        continue
    for k, f in step.items():
        torch.cuda.profiler.start()
        f()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
