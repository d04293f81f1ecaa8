# Round 124 (H100): KernelBench 47-53's outer-axis reductions (x [128, 4096, 4095], dimension 1) in one
# process, alternating: do sum and mean (the same kernel variant) differ as round 123's kernelbench.py
# run had them (4.055 / 3.523 ms), and does the unroll (16 by default; argmax 4) matter?
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
rate = copy_rate(1 << 30)
x = torch.randn(128, 4096, 4095, device="cuda")
floor = x.numel() * 4 / rate / 1e6
fns = {}
for text in ["sum(x, 1)", "mean(x, 1)", "amax(x, 1)", "argmax(x, 1)"]:
    for knobs in [None, "unroll=4", "unroll=8"]:
        loss = lossjit.compile(text, knobs=knobs)
        fns[f"{text} [{knobs or 'default'}]"] = (lambda l: (lambda: l(x)))(loss)
fns["torch.sum(x, 1)"] = lambda: torch.sum(x, 1)
fns["torch.amax(x, 1)"] = lambda: torch.amax(x, 1)
for k in range(2):
    t = alternating(fns, 10)
    for name, v in t.items():
        print(k, f"{name:24s} {v:.3f} ms {100 * floor / v:.1f}%", flush=True)
