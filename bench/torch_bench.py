#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the five reference problems, the size sweep and the small-call
cost, timed like bench/bench.cpp does (CUDA events, warm-up, median). Writes JSON for bench/report.py.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def median_ms(fn, reps, warmup=3, per_event=1):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(per_event):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / per_event)
    times.sort()
    return times[len(times) // 2]


def problems():
    n, k, rows, cols = 32768, 16384, 4096, 393216
    return [
        ("hinge", lambda: (torch.rand(n, n), torch.randint(0, 2, (n,)).float() * 2 - 1),
         lambda p, t: torch.mean(torch.clamp(1 - p * t, min=0))),
        ("mse", lambda: (torch.rand(n, n), torch.rand(n, n)), lambda p, t: torch.mean((p - t) ** 2)),
        ("kl", lambda: (torch.softmax(torch.randn(k, k), 1), torch.softmax(torch.randn(k, k), 1)),
         lambda p, t: F.kl_div(torch.log(p), t, reduction="batchmean")),
        ("smooth_l1", lambda: (torch.randn(n, n), torch.randn(n, n)), lambda p, t: F.smooth_l1_loss(p, t)),
        ("hardsigmoid", lambda: (torch.randn(rows, cols) * 3,), lambda x: F.hardsigmoid(x)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="the problems' inputs in this dtype (maps write it too); other than float32, only "
                         "the five problems are timed")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    torch._dynamo.config.cache_size_limit = 64
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": args.dtype, "problems": []}

    x = torch.rand(2 << 30, device="cuda")  # 8 GiB
    out["torch_sum_read_gbps"] = x.numel() * 4 / (median_ms(lambda: x.sum(), args.reps) * 1e6)
    y = torch.empty(1 << 30, device="cuda")
    out["torch_copy_gbps"] = 2 * y.numel() * 4 / (median_ms(lambda: y.copy_(x[: 1 << 30]), args.reps) * 1e6)
    del x, y

    for name, make, fn in problems():
        with torch.device("cuda"):
            inputs = tuple(t.to(dtype) for t in make())
        compiled = torch.compile(fn)
        t0 = time.perf_counter()
        result = compiled(*inputs)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        row = {"problem": name, "eager_ms": median_ms(lambda: fn(*inputs), args.reps),
               "compile_ms": median_ms(lambda: compiled(*inputs), args.reps), "compile_first_call_s": compile_s}
        reference = fn(*(t.double() for t in inputs))
        if result.dim() == 0:
            row["eager_rel_error"] = abs(fn(*inputs).item() - reference.item()) / abs(reference.item())
            row["compile_rel_error"] = abs(result.item() - reference.item()) / abs(reference.item())
        else:
            row["compile_max_abs_error"] = (result.double() - reference).abs().max().item()
        del reference, result
        out["problems"].append(row)
        print(json.dumps(row), flush=True)
        del inputs
        torch.cuda.empty_cache()

    if dtype != torch.float32:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        return

    # smooth L1 forward + backward with p requiring grad, as a training step would run it.
    with torch.device("cuda"):
        p = torch.randn(32768, 32768, requires_grad=True)
        t = torch.randn(32768, 32768)
    compiled = torch.compile(lambda a, b: F.smooth_l1_loss(a, b))

    def step():
        p.grad = None
        compiled(p, t).backward()

    step()
    out["smooth_l1_fwd_bwd_compile_ms"] = median_ms(step, args.reps)
    del p, t
    torch.cuda.empty_cache()

    # hinge forward + backward with p and t (broadcast over rows) requiring grad.
    with torch.device("cuda"):
        p = torch.rand(32768, 32768, requires_grad=True)
        t = (torch.randint(0, 2, (32768,)).float() * 2 - 1).requires_grad_(True)
    compiled = torch.compile(lambda a, b: torch.mean(torch.clamp(1 - a * b, min=0)))

    def hinge_step():
        p.grad = None
        t.grad = None
        compiled(p, t).backward()

    hinge_step()
    out["hinge_fwd_bwd_compile_ms"] = median_ms(hinge_step, args.reps)
    del p, t
    torch.cuda.empty_cache()

    mse = lambda p, t: torch.mean((p - t) ** 2)
    p, t = torch.rand(4096, device="cuda"), torch.rand(4096, device="cuda")
    small = {}
    for label, fn in (("eager", mse), ("compile", torch.compile(mse))):
        for _ in range(100):
            fn(p, t)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn(p, t)
        small[label + "_host_us_per_call"] = (time.perf_counter() - t0) / 2000 * 1e6
        torch.cuda.synchronize()
    out["small_call"] = small

    if not args.no_sweep:
        sweep = []
        for log2n in range(10, 31, 2):
            n = 1 << log2n
            p, t = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
            torch._dynamo.reset()  # a fresh static-shape compile per size, as a user with one size gets
            compiled = torch.compile(mse, dynamic=False)
            per_event = max(1, min(200, (1 << 24) // n))
            ms_c = median_ms(lambda: compiled(p, t), args.reps, 3, per_event)
            ms_e = median_ms(lambda: mse(p, t), args.reps, 3, per_event)
            sweep.append({"log2n": log2n, "bytes": 8 * n, "compile_ms": ms_c, "eager_ms": ms_e,
                          "compile_gbps": 8 * n / (ms_c * 1e6), "eager_gbps": 8 * n / (ms_e * 1e6)})
            del p, t
        out["sweep"] = sweep
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
