#!/usr/bin/env python3
"""Where an eager reduction's fused value-and-gradient kernel should run: in forward (the gradients
saved, times the upstream gradient in backward) or in backward (the value alone in forward, the
fused kernel with the upstream gradient multiplied in). lossjit._torch.FUSED_IN_BACKWARD_MIN_BYTES
chooses by the inputs' bytes; this script sets it to 0 or past every size, so both ways run in one
process, in turn, round after round (one process: the host's speed moves between processes as much
as the difference measured).

Each case is torch.autograd.grad of the value with respect to its first input (upstream 1), called
back to back and timed on the host with one synchronize a loop: the time a training step spends on
the call, host or GPU, whichever is longer. Median of --rounds loops a way; torch eager's own loss
beside (and torch.compile's with --compile).

    python3 bench/eager_backward.py [--rounds 7] [--compile] [--json out.json]
"""
import argparse
import json
import pathlib
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
import lossjit._torch as lossjit_torch  # noqa: E402

WAYS = {"in forward": 1 << 62, "in backward": 0}  # FUSED_IN_BACKWARD_MIN_BYTES for each way

MSE = ("mean((p - t)^2)", F.mse_loss)
CE = ("mean(logsumexp(x, -1) - x[y])", F.cross_entropy)


def mse(n):
    return lambda: (torch.randn(n, device="cuda", requires_grad=True), torch.randn(n, device="cuda"))


def ce(n, c):
    return lambda: (torch.randn(n, c, device="cuda", requires_grad=True), torch.randint(0, c, (n,), device="cuda"))


CASES = [  # name, (program, torch's loss), inputs
    ("mse 2^12", MSE, mse(1 << 12)),
    ("mse 2^16", MSE, mse(1 << 16)),
    ("mse 2^20", MSE, mse(1 << 20)),
    ("mse 2^22", MSE, mse(1 << 22)),
    ("mse 2^24", MSE, mse(1 << 24)),
    ("mse 2^26", MSE, mse(1 << 26)),
    ("cross-entropy 64x1024", CE, ce(64, 1024)),
    ("cross-entropy 1024x4096", CE, ce(1024, 4096)),
    ("cross-entropy 4096x8192", CE, ce(4096, 8192)),
    ("cross-entropy 16384x32768", CE, ce(16384, 32768)),
]


def per_call_us(fn, nbytes):
    """µs per call of a loop of calls sized to take ~20 ms, then one synchronize."""
    calls = max(5, min(2000, int(2e10 / max(nbytes, 1))))
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--compile", action="store_true", help="torch.compile's loss beside")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "python", platform.python_version(), flush=True)
    rows, threshold_before = [], lossjit_torch.FUSED_IN_BACKWARD_MIN_BYTES
    for name, (text, torch_loss), make in CASES:
        first, other = make()
        nbytes = lossjit_torch._input_bytes((first, other))  # what the threshold compares
        loss = lossjit.compile(text)
        fns = {}
        for way, threshold in WAYS.items():
            def call(threshold=threshold):
                lossjit_torch.FUSED_IN_BACKWARD_MIN_BYTES = threshold
                return torch.autograd.grad(loss(first, other), first)
            fns[f"lossjit, fused kernel {way}"] = call
        fns["torch eager"] = lambda: torch.autograd.grad(torch_loss(first, other), first)
        if args.compile:
            compiled = torch.compile(torch_loss)
            fns["torch.compile"] = lambda: torch.autograd.grad(compiled(first, other), first)
        for fn in fns.values():  # compiles, warms the caches and the allocator
            for _ in range(20):
                fn()
        torch.cuda.synchronize()
        times = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                times[k].append(per_call_us(fn, nbytes))
        medians = {k: statistics.median(v) for k, v in times.items()}
        print(f"{name} ({nbytes / 2**20:.3g} MiB of inputs):", "  ".join(f"{k} {v:.1f} us" for k, v in medians.items()), flush=True)
        rows.append({"case": name, "input_bytes": nbytes, "us": medians, "all_us": times})
        del first, other
        torch.cuda.empty_cache()
    lossjit_torch.FUSED_IN_BACKWARD_MIN_BYTES = threshold_before
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
