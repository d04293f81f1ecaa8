#!/usr/bin/env python3
"""Runs the five reference problems through the lossjit CLI and through PyTorch on the same data.

Needs a CUDA GPU, torch and numpy. Inputs are drawn with torch, written as .npy files into a scratch
directory, read by `lossjit run`; the script prints one line per problem and writes JSON.

    python3 scripts/compare_torch.py --lossjit build/lossjit --scratch /dev/shm --json out.json
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def problems(scale):
    n = 32768 // scale
    k = 16384 // scale
    rows, cols = 4096 // scale, 393216 // scale
    return [
        ("hinge", "examples/hinge.loss",
         lambda: {"p": torch.rand(n, n), "t": torch.randint(0, 2, (n,)).float() * 2 - 1},
         lambda p, t: torch.mean(torch.clamp(1 - p * t, min=0))),
        ("mse", "examples/mse.loss",
         lambda: {"p": torch.rand(n, n), "t": torch.rand(n, n)},
         lambda p, t: torch.mean((p - t) ** 2)),
        ("kl", "examples/kl.loss",
         lambda: {"p": torch.softmax(torch.randn(k, k), dim=1), "t": torch.softmax(torch.randn(k, k), dim=1)},
         lambda p, t: F.kl_div(torch.log(p), t, reduction="batchmean")),
        ("smooth_l1", "examples/smooth_l1.loss",
         lambda: {"p": torch.randn(n, n), "t": torch.randn(n, n)},
         lambda p, t: F.smooth_l1_loss(p, t)),
        ("hardsigmoid", "examples/hardsigmoid.loss",
         lambda: {"x": torch.randn(rows, cols) * 3},
         lambda x: F.hardsigmoid(x)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lossjit", default="build/lossjit")
    ap.add_argument("--scratch", default="/tmp")
    ap.add_argument("--json", default=None)
    ap.add_argument("--scale", type=int, default=1, help="divide every extent by this (1 = the reference shapes)")
    args = ap.parse_args()

    torch.manual_seed(0)
    results, failed = [], False
    for name, program, make, reference in problems(args.scale):
        with torch.device("cuda"):
            inputs = make()
        files = []
        for key, tensor in inputs.items():
            path = os.path.join(args.scratch, f"lossjit_{name}_{key}.npy")
            np.save(path, tensor.cpu().numpy())
            files.append((key, path))
        torch_value = reference(*inputs.values())
        command = [args.lossjit, "run", program, "--json"] + sum((["-i", f"{k}={p}"] for k, p in files), [])
        row = {"problem": name, "shape": list(next(iter(inputs.values())).shape)}
        if torch_value.dim() == 0:
            out = subprocess.run(command, capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stdout, out.stderr, file=sys.stderr)
                failed = True
                continue
            report = json.loads(out.stdout)
            fp64 = reference(*(t.double() for t in inputs.values())).item()
            row.update(lossjit=report["value"], torch=torch_value.item(), torch_fp64=fp64,
                       rel_vs_torch=abs(report["value"] - torch_value.item()) / abs(torch_value.item()),
                       rel_vs_fp64=abs(report["value"] - fp64) / abs(fp64),
                       torch_rel_vs_fp64=abs(torch_value.item() - fp64) / abs(fp64))
            ok = row["rel_vs_torch"] <= 1e-5
        else:
            y = os.path.join(args.scratch, f"lossjit_{name}_y.npy")
            out = subprocess.run(command + ["-o", y], capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stdout, out.stderr, file=sys.stderr)
                failed = True
                continue
            got = torch.from_numpy(np.load(y, mmap_mode="r")[:]).cuda()
            diff = (got - torch_value).abs()
            row.update(max_abs_diff=diff.max().item(), all_finite=bool(torch.isfinite(got).all().item()))
            ok = row["max_abs_diff"] <= 1e-6 and row["all_finite"]
            os.remove(y)
        for _, path in files:
            os.remove(path)
        row["ok"] = ok
        failed = failed or not ok
        results.append(row)
        print(json.dumps(row), flush=True)
        del inputs, torch_value
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
