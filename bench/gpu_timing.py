"""Timing on the GPU for the Python benchmarks (bench/several_results.py, bench/few_rows.py): callables
timed in turn round after round, and the device's copy rate, the floor they are measured against."""
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
