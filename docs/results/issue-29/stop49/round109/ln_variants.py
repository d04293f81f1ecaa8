# Round 109: forward + backward of row maps over short rows at block sizes with the row cache: the
# gradient kernels' blocks of 512 threads a row (the cache's default) hold one block an SM when
# their registers pass 64 a thread (layer norm's gradient: 86), one row under way an SM.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
rate = copy_rate(1 << 30)
programs = {
    "layer norm": "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
    "RMS norm": "x / sqrt(mean(x^2, -1) + 1e-5)",
    "log_softmax": "x - logsumexp(x, -1)",
    "softmax": "exp(x - logsumexp(x, -1))",
}
variants = ["", "row_cache=off", "block=128,row_cache=on", "block=256,row_cache=on", "block=1024,row_cache=on"]
for shape in [(32768, 4096), (16384, 8192), (65536, 1024)]:
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    floor = 5 * x.numel() * 4 / rate / 1e6
    for name, text in programs.items():
        fns = {v or "default": lossjit.compile(text, knobs=v or None) for v in variants}
        t = alternating({k: (lambda h: (lambda: torch.autograd.grad(h(x), x, g)[0]))(h) for k, h in fns.items()}, 5)
        print(shape, name, " ".join(f"{k} {v:.3f} ({100 * floor / v:.0f}%)" for k, v in t.items()), flush=True)
    del x, g
    torch.cuda.empty_cache()
