"""Timing on the GPU for the Python benchmarks (bench/several_results.py, bench/few_rows.py, ...):
callables timed in turn round after round, the device's copy rate (the floor they are measured
against), and the row benchmarks' common options and logits."""
import argparse

import torch


def alternating(fns, reps):
    """Median ms of each callable (a dict name -> callable), timed in turn each round after three
    untimed calls each: CUDA-event intervals."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def copy_rate(nbytes):
    """GB/s of a device-to-device copy of nbytes (read + write counted)."""
    a = torch.empty(nbytes // 4, device="cuda")
    b = torch.empty_like(a)
    ms = alternating({"copy": lambda: b.copy_(a)}, 10)["copy"]
    return 2 * nbytes / ms / 1e6


def row_options(dtypes=True):
    """The row benchmarks' options: --shape NxC, --dtype (where the script takes bfloat16 too),
    --reps, --json; the script adds its own before parse_args()."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="16384x32768")
    if dtypes:
        ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None)
    return ap


def seeded_logits(args, device="cuda"):
    """N, C and the logits x [N, C] (standard normal, in --dtype where given) after seeding torch with
    0: every script's later draws follow from the same seed."""
    n, c = (int(v) for v in args.shape.split("x"))
    torch.manual_seed(0)
    x = torch.randn(n, c, device=device)
    return n, c, x.to(getattr(torch, getattr(args, "dtype", "float32")))
