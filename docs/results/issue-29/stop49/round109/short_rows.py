# Round 109: registers for two blocks an SM (at least 64 a thread) where a cached block of 512
# threads walks its row in one tile, against the same library without the rule (one library a
# process, LOSSJIT_LIBRARY; short_rows.sh alternates them): forward, and forward + backward
# (torch.autograd.grad with an upstream), of row maps over short rows. `--reference` adds the cache
# at 256 threads a block and torch.compile.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label, reference = sys.argv[1], "--reference" in sys.argv
rate = copy_rate(1 << 30)
programs = {
    "layer norm": ("m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
                   lambda x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)),
    "RMS norm": ("x / sqrt(mean(x^2, -1) + 1e-5)", lambda x: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)),
    "log_softmax": ("x - logsumexp(x, -1)", lambda x: torch.log_softmax(x, -1)),
    "softmax": ("exp(x - logsumexp(x, -1))", lambda x: torch.softmax(x, -1)),
}
for shape in [(32768, 4096), (16384, 8192), (65536, 1024)]:
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    xd = x.detach()
    for name, (text, ref) in programs.items():
        fns = {label: lossjit.compile(text)}
        if reference:
            fns["block=256,row_cache=on"] = lossjit.compile(text, knobs="block=256,row_cache=on")
            fns["torch.compile"] = torch.compile(ref)
        fb = alternating({k: (lambda h: (lambda: torch.autograd.grad(h(x), x, g)[0]))(h) for k, h in fns.items()}, 5)
        fw = alternating({k: (lambda h: (lambda: h(xd)))(h) for k, h in fns.items()}, 5)
        print(shape, name, "fwd+bwd:", " ".join(f"{k} {v:.3f} ({100 * 5 * x.numel() * 4 / rate / 1e6 / v:.0f}%)" for k, v in fb.items()),
              "| forward:", " ".join(f"{k} {v:.3f} ({100 * 2 * x.numel() * 4 / rate / 1e6 / v:.0f}%)" for k, v in fw.items()), flush=True)
    del x, g, xd
    torch.cuda.empty_cache()
