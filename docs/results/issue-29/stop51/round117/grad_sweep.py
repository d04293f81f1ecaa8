# Round 118: the gradient kernel of a map that reduces along rows alone (torch.ops.lossjit.map_grad,
# the upstream given), over knob variants, alternating in one process; and the forward alone. Floors at
# the copy rate: the gradient reads x and the upstream and writes dx (3 passes), the forward reads x
# and writes y (2). ncu (round 117) saw layer norm's gradient kernel over 32768 x 4096 at 124
# registers, 128 threads, 4 blocks an SM (25% occupancy), 59% of DRAM bandwidth.
import os, sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
rate = copy_rate(1 << 30)
programs = {
    "layer norm": "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
    "RMS norm": "x / sqrt(mean(x^2, -1) + 1e-5)",
    "softmax": "exp(x - logsumexp(x, -1))",
    "log_softmax": "x - logsumexp(x, -1)",
}
variants = sys.argv[1:]
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "32768x4096 16384x8192 8192x16384").split()]
for shape in shapes:
    x = torch.randn(*shape, device="cuda")
    g = torch.randn_like(x)
    for name, text in programs.items():
        losses = {v: lossjit.compile(text, knobs=None if v == "default" else v) for v in variants}
        bwd = alternating({v: (lambda l: (lambda: torch.ops.lossjit.map_grad(l._id, [x], g, 1)))(l) for v, l in losses.items()}, 9)
        fwd = alternating({v: (lambda l: (lambda: l(x)))(l) for v, l in losses.items()}, 9)
        floor_b, floor_f = 3 * x.numel() * 4 / rate / 1e6, 2 * x.numel() * 4 / rate / 1e6
        print(shape, name, "gradient:", "  ".join(f"[{v}] {t:.3f} ({100 * floor_b / t:.0f}%)" for v, t in bwd.items()), flush=True)
        print(shape, name, "forward: ", "  ".join(f"[{v}] {t:.3f} ({100 * floor_f / t:.0f}%)" for v, t in fwd.items()), flush=True)
    del x, g
    torch.cuda.empty_cache()
