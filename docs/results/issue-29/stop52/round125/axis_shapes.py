# Round 125: reductions over an outer dimension (dimension 1 of [B, R, C]: B x C rows side by side, a
# thread a row) at unroll 4, 8 and 16 (ByRowSideAloneUnroll 16 and ByRowSideAloneIndexUnroll 4 were
# chosen on an H100 at dca9106; round 124 found sum at 8 and amax at 4 faster on today's kernels), over
# several shapes, alternating in one process, with torch's own reduction beside. Shapes: SHAPES="BxRxC ...".
import os, sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
rate = copy_rate(1 << 30)
shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "128x4096x4095 64x1000x8192 16x8192x8192 256x512x4096").split()]
torch_of = {"sum": torch.sum, "amax": torch.amax, "argmax": torch.argmax}
for shape in shapes:
    x = torch.randn(*shape, device="cuda")
    floor = x.numel() * 4 / rate / 1e6
    fns = {}
    for op in ["sum", "amax", "argmax"]:
        for knobs in [None, "unroll=4", "unroll=8", "unroll=16"]:
            loss = lossjit.compile(f"{op}(x, 1)", knobs=knobs)
            fns[f"{op} [{knobs or 'default'}]"] = (lambda l: (lambda: l(x)))(loss)
        fns[f"torch.{op}"] = (lambda f: (lambda: f(x, 1)))(torch_of[op])
    t = alternating(fns, 10)
    print(shape, "  ".join(f"{name} {v:.3f} ({100 * floor / v:.0f}%)" for name, v in t.items()), flush=True)
    del x
    torch.cuda.empty_cache()
