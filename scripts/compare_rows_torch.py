#!/usr/bin/env python3
"""The row-wise losses of examples/ against PyTorch: cross-entropy (plain, ignore_index, label
smoothing, class weights), NLL, cosine, triplet margin, focal and distillation KL.

Each loss runs through `lossjit run` on the GPU and on the CPU reference (--cpu), with float64 inputs
(compared to torch in float64: relative error <= 1e-10) and float32 inputs (compared to torch in
float64 on the same float32 data: <= 1e-6), with bfloat16 and float16 logits where the loss takes
logits, with int32 class indices beside int64, and a masked mean with bool and uint8 masks.
Needs torch and numpy; without a GPU, --cpu-only compares the reference alone.

    python3 scripts/compare_rows_torch.py --lossjit build/lossjit --scratch /tmp --json out.json
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F


def problems(n, c):
    def logits():
        return {"x": torch.randn(n, c, dtype=torch.float64) * 2,
                "y": torch.randint(0, c, (n,), dtype=torch.int64)}

    def ignored():
        d = logits()
        d["y"][::7] = -100
        return d

    def weighted():
        d = logits()
        d["w"] = torch.rand(c, dtype=torch.float64) + 0.5
        return d

    def pair(a, b):
        return lambda: {a: torch.randn(n, c, dtype=torch.float64), b: torch.randn(n, c, dtype=torch.float64)}

    def log_probs():
        return {"lp": torch.log_softmax(torch.randn(n, c, dtype=torch.float64), -1),
                "y": torch.randint(0, c, (n,), dtype=torch.int64)}

    def triplet():
        return {k: torch.randn(n, c, dtype=torch.float64) for k in ("a", "p", "n")}

    def focal(x, y, gamma=2.0):
        lp = torch.log_softmax(x, -1).gather(1, y[:, None])[:, 0]
        return torch.mean(-(1 - lp.exp()) ** gamma * lp)

    def masked():
        return {"p": torch.randn(n, c, dtype=torch.float64), "t": torch.randn(n, c, dtype=torch.float64),
                "m": torch.rand(n, c) < 0.7}

    def distill(s, t, T=2.0):
        return F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1), reduction="batchmean") * T * T

    def top_k():  # a teacher's 8 most likely classes and their renormalised probabilities
        return {"x": torch.randn(n, c, dtype=torch.float64) * 2,
                "k": torch.topk(torch.randn(n, c), 8, -1).indices,
                "q": torch.softmax(torch.randn(n, 8, dtype=torch.float64), -1)}

    def distill_topk(x, k, q):
        return (q * (q.log() - torch.log_softmax(x, -1).gather(-1, k))).sum(-1).mean()

    return [
        ("cross_entropy", logits, lambda x, y: F.cross_entropy(x, y), True),
        ("cross_entropy_ignore", ignored, lambda x, y: F.cross_entropy(x, y, ignore_index=-100), True),
        ("cross_entropy_smoothing", logits, lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1), True),
        ("cross_entropy_weighted", weighted, lambda x, y, w: F.cross_entropy(x, y, weight=w), True),
        ("nll", log_probs, lambda lp, y: F.nll_loss(lp, y), False),
        ("cosine", pair("a", "b"), lambda a, b: torch.mean(1 - F.cosine_similarity(a, b, dim=1)), False),
        ("triplet", triplet, lambda a, p, n: torch.nn.TripletMarginLoss(margin=1.0)(a, p, n), False),
        ("focal", logits, focal, True),
        ("distill_kl", pair("s", "t"), distill, False),
        ("distill_topk", top_k, distill_topk, False),  # the CPU reference, also where a GPU is
        ("masked_mse", masked, lambda p, t, m: torch.sum(m * (p - t) ** 2) / torch.sum(m), False),
    ]


# Inputs that keep their own dtype whatever the floating inputs are given in: indices and masks.
KEPT = (torch.int64, torch.int32, torch.bool, torch.uint8)


def run_lossjit(args, name, inputs, dtype, cpu):
    files = []
    for key, tensor in inputs.items():
        t = tensor if tensor.dtype in KEPT else tensor.to(dtype)
        path = os.path.join(args.scratch, f"lossjit_rows_{name}_{key}.npy")
        if t.dtype == torch.bfloat16:  # ml_dtypes' convention: 2-byte void records
            np.save(path, t.view(torch.int16).numpy().view(np.dtype("V2")))
        else:
            np.save(path, t.numpy())
        files += ["-i", f"{key}={path}"]
    command = [args.lossjit, "run", f"examples/{name}.loss", "--json"] + files + (["--cpu"] if cpu else [])
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout)["value"], json.loads(out.stdout)["device"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lossjit", default="build/lossjit")
    ap.add_argument("--scratch", default="/tmp")
    ap.add_argument("--json", default=None)
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--cpu-only", action="store_true", help="compare the CPU reference only (no GPU here)")
    args = ap.parse_args()

    torch.manual_seed(0)
    results, failed = [], False
    for name, make, reference, takes_logits in problems(args.rows, args.classes):
        inputs = make()
        dtypes = [("float64", torch.float64, 1e-10), ("float32", torch.float32, 1e-6)]
        if takes_logits:
            dtypes += [("bfloat16", torch.bfloat16, 1e-6), ("float16", torch.float16, 1e-6)]
        for label, dtype, tolerance in dtypes:
            # torch in float64 on exactly the data lossjit reads (rounded to `dtype` first).
            rounded = {k: (v if v.dtype == torch.int64 else v.to(dtype).double()) for k, v in inputs.items()}
            expected = reference(*rounded.values()).item()
            # Class indices as int64, and as int32 for the float32 logits; masks as bool, and as uint8
            # for the float32 data.
            variants = [("", {})]
            if label == "float32" and "y" in inputs:
                variants.append(("/i32", {torch.int64: torch.int32}))
            if label == "float32" and "m" in inputs:
                variants.append(("/u8", {torch.bool: torch.uint8}))
            for (suffix, cast), cpu in [(v, c) for v in variants for c in ([True] if args.cpu_only else [False, True])]:
                given = {k: (v.to(cast[v.dtype]) if v.dtype in cast else v) for k, v in inputs.items()}
                value, device = run_lossjit(args, name, given, dtype, cpu)
                label_here = label + suffix
                error = abs(value - expected) / max(abs(expected), 1e-300)
                ok = error <= tolerance
                failed = failed or not ok
                results.append({"loss": name, "dtype": label_here, "device": device, "lossjit": value,
                                "torch_fp64": expected, "rel_error": error, "ok": ok})
                print(f"{name:24s} {label_here:12s} {device:14s} lossjit {value:.12g}  torch(fp64) {expected:.12g}  "
                      f"rel {error:.2e} {'ok' if ok else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
