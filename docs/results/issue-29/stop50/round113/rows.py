# Round 112-113: row maps over short rows, forward and forward + backward (torch.autograd.grad with an
# upstream), one library a process (LOSSJIT_LIBRARY), each variant a list of knobs ("" the default)
# given on the command line, and torch.compile where --reference; SHAPES="RxC ..." (default
# 32768x4096 16384x8192 65536x1024). Cross-entropy's floor: x read once and its gradient written
# (the fused value + gradient kernel), its forward one read.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label, variants = sys.argv[1], [a for a in sys.argv[2:] if a != "--reference"]
reference = "--reference" in sys.argv
rate = copy_rate(1 << 30)
# name: (program, torch's, whether it takes class indices y, the floor's passes over x forward + backward
# and forward alone: a map reads x and writes its output, then reads x and the upstream and writes the
# gradient; cross-entropy reads x, then reads x and writes the gradient in its fused kernel).
programs = {
    "layer norm": ("m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
                   lambda x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5),
                   False, 5, 2),
    "RMS norm": ("x / sqrt(mean(x^2, -1) + 1e-5)", lambda x: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5), False, 5, 2),
    "softmax": ("exp(x - logsumexp(x, -1))", lambda x: torch.softmax(x, -1), False, 5, 2),
    "cross-entropy": ("mean(logsumexp(x, -1) - x[y])", lambda x, y: torch.nn.functional.cross_entropy(x, y), True, 2, 1),
}
import os
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "32768x4096 16384x8192 65536x1024").split()]
for shape in shapes:
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    y = torch.randint(0, shape[1], (shape[0],), device="cuda")
    xd = x.detach()
    for name, (text, ref, indexed, passes, forward_passes) in programs.items():
        fns = {f"{label}{'[' + v + ']' if v != 'default' else ''}": lossjit.compile(text, knobs=None if v == "default" else v) for v in variants}
        if reference:
            fns["torch.compile"] = torch.compile(ref)
        args = (lambda t: (t, y)) if indexed else (lambda t: (t,))
        up = None if indexed else g
        fb = alternating({k: (lambda h: (lambda: torch.autograd.grad(h(*args(x)), x, up)[0]))(h) for k, h in fns.items()}, 5)
        fw = alternating({k: (lambda h: (lambda: h(*args(xd))))(h) for k, h in fns.items()}, 5)
        print(shape, name, "fwd+bwd:", " ".join(f"{k} {v:.3f} ({100 * passes * x.numel() * 4 / rate / 1e6 / v:.0f}%)" for k, v in fb.items()),
              "| forward:", " ".join(f"{k} {v:.3f} ({100 * forward_passes * x.numel() * 4 / rate / 1e6 / v:.0f}%)" for k, v in fw.items()), flush=True)
    del x, g, xd, y
    torch.cuda.empty_cache()
