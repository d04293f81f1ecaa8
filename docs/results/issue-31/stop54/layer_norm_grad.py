#!/usr/bin/env python3
"""Layer norm forward + backward through lossjit's torch op with the row prefetch off and on, in
turn in one process (the map's kernel and its backward's), beside F.layer_norm (no affine) eager:
CUDA-event time of torch.autograd.grad(y, x, up), median of 7 loops of 20 calls.

    python3 docs/results/issue-31/stop54/layer_norm_grad.py [--shape 16384x8192 ...]
"""
import argparse
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "python"))
import lossjit  # noqa: E402

PROGRAM = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)"


def timed_ms(fn, calls=20, loops=7):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(loops):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / calls)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", action="append", default=None)
    args = ap.parse_args()
    shapes = args.shape or ["32768x4096", "16384x8192", "8192x16384"]
    for shape in shapes:
        n, c = (int(v) for v in shape.split("x"))
        x = torch.randn(n, c, device="cuda", requires_grad=True)
        up = torch.randn(n, c, device="cuda")
        losses = {k: lossjit.compile(PROGRAM, knobs=f"row_prefetch={k}") for k in ("off", "on")}
        ref = torch.autograd.grad(F.layer_norm(x, (c,), eps=1e-5), x, up)[0]
        row = {}
        for _ in range(2):  # two rounds, in turn
            for k, loss in losses.items():
                g = torch.autograd.grad(loss(x), x, up)[0]
                err = ((g - ref).abs().max() / ref.abs().max()).item()
                row.setdefault(k, []).append((timed_ms(lambda: torch.autograd.grad(loss(x), x, up)), err))
            row.setdefault("torch", []).append((timed_ms(lambda: torch.autograd.grad(F.layer_norm(x, (c,), eps=1e-5), x, up)), 0.0))
        floor_bytes = 5 * n * c * 4  # x read twice (forward, backward), y written, up read, grad written
        for k, runs in row.items():
            ms = [r[0] for r in runs]
            print(f"{shape:>12} {k:>6}: " + " ".join(f"{m:.3f}" for m in ms) + f" ms  (5 passes at {floor_bytes / min(ms) / 1e6:.0f} GB/s)"
                  + (f"  max error {runs[-1][1]:.1e} of the largest" if k != "torch" else ""))


if __name__ == "__main__":
    main()
