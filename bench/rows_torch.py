#!/usr/bin/env python3
"""PyTorch's side of the row-wise benchmark (bench/run_rows.sh): cross-entropy, cosine and triplet
margin losses at the issue's shapes, eager and torch.compile, forward and forward + backward. Times
are medians of CUDA-event intervals, after warm-up; inputs fresh and far larger than L2.

    python3 bench/rows_torch.py --reps 10 --json out.json
"""
import argparse
import json

import torch
import torch.nn.functional as F


def median_ms(fn, reps):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    cases = []
    for n, c in [(32768, 4096), (16384, 32768), (4096, 131072)]:
        cases.append((f"cross_entropy {n}x{c}", lambda n=n, c=c: [torch.randn(n, c, device=dev),
                                                                torch.randint(0, c, (n,), device=dev)],
                      lambda x, y: F.cross_entropy(x, y)))
    cases.append(("cosine 16384x16384", lambda: [torch.randn(16384, 16384, device=dev) for _ in range(2)],
                  lambda a, b: torch.mean(1 - F.cosine_similarity(a, b, dim=1))))
    cases.append(("triplet 32768x8192", lambda: [torch.randn(32768, 8192, device=dev) for _ in range(3)],
                  lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0)))
    results = []
    for name, make, loss in cases:
        inputs = make()
        compiled = torch.compile(loss)
        row = {"problem": name}
        row["eager_ms"] = median_ms(lambda: loss(*inputs), args.reps)
        row["compile_ms"] = median_ms(lambda: compiled(*inputs), args.reps)
        grad_inputs = [t.requires_grad_() if t.is_floating_point() else t for t in inputs]
        row["eager_fwd_bwd_ms"] = median_ms(lambda: loss(*grad_inputs).backward(), args.reps)
        row["compile_fwd_bwd_ms"] = median_ms(lambda: compiled(*grad_inputs).backward(), args.reps)
        print(json.dumps(row), flush=True)
        results.append(row)
        del inputs, grad_inputs
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
