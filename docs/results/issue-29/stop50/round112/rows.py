# Round 112: row maps over short rows, forward and forward + backward (torch.autograd.grad with an
# upstream), one library a process (LOSSJIT_LIBRARY), each variant a list of knobs ("" the default)
# given on the command line, and torch.compile where --reference. Set LJ_EXP_BLOCK_TEAM=1 (an
# experiment's build only) to make a block size set by hand take a block a row.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label, variants = sys.argv[1], [a for a in sys.argv[2:] if a != "--reference"]
reference = "--reference" in sys.argv
rate = copy_rate(1 << 30)
programs = {
    "layer norm": ("m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
                   lambda x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)),
    "RMS norm": ("x / sqrt(mean(x^2, -1) + 1e-5)", lambda x: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)),
    "softmax": ("exp(x - logsumexp(x, -1))", lambda x: torch.softmax(x, -1)),
}
for shape in [(32768, 4096), (16384, 8192), (65536, 1024)]:
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    xd = x.detach()
    for name, (text, ref) in programs.items():
        fns = {f"{label}{'[' + v + ']' if v != 'default' else ''}": lossjit.compile(text, knobs=None if v == "default" else v) for v in variants}
        if reference:
            fns["torch.compile"] = torch.compile(ref)
        fb = alternating({k: (lambda h: (lambda: torch.autograd.grad(h(x), x, g)[0]))(h) for k, h in fns.items()}, 5)
        fw = alternating({k: (lambda h: (lambda: h(xd)))(h) for k, h in fns.items()}, 5)
        print(shape, name, "fwd+bwd:", " ".join(f"{k} {v:.3f} ({100 * 5 * x.numel() * 4 / rate / 1e6 / v:.0f}%)" for k, v in fb.items()),
              "| forward:", " ".join(f"{k} {v:.3f} ({100 * 2 * x.numel() * 4 / rate / 1e6 / v:.0f}%)" for k, v in fw.items()), flush=True)
    del x, g, xd
    torch.cuda.empty_cache()
