#!/usr/bin/env python3
"""Gradients from lossjit's GPU kernels against torch.autograd on the same data.

For the five reference losses and a handful of other common ones: inputs drawn with torch (seeded),
written as .npy, differentiated by `lossjit run --grad NAME --output-grad NAME=FILE` on the GPU and by
torch.autograd (float32 on the GPU, as a user would run it, and float64 as the truth). A map's
gradient is that of sum(map): upstream ones, as y.backward(torch.ones_like(y)). The error of a
gradient is its largest elementwise difference divided by the largest magnitude of torch's gradient;
the bound is 1e-5.

    python3 scripts/grad_torch.py --lossjit build/lossjit --scratch /dev/shm --json out.json [--scale 4]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F


def problems(scale):
    n = 32768 // scale  # the reference shapes at scale 1
    k = 16384 // scale
    rows, cols = 4096 // scale, 393216 // scale
    m = 4096 // max(1, scale // 4)
    return [
        ("hinge", "examples/hinge.loss", ["p", "t"],
         lambda: {"p": torch.rand(n, n), "t": torch.randint(0, 2, (n,)).float() * 2 - 1},
         lambda p, t: torch.mean(torch.clamp(1 - p * t, min=0))),
        ("mse", "examples/mse.loss", ["p", "t"],
         lambda: {"p": torch.rand(n, n), "t": torch.rand(n, n)},
         lambda p, t: torch.mean((p - t) ** 2)),
        ("kl", "examples/kl.loss", ["p", "t"],
         lambda: {"p": torch.softmax(torch.randn(k, k), dim=1), "t": torch.softmax(torch.randn(k, k), dim=1)},
         lambda p, t: F.kl_div(torch.log(p), t, reduction="batchmean")),
        ("smooth_l1", "examples/smooth_l1.loss", ["p", "t"],
         lambda: {"p": torch.randn(n, n), "t": torch.randn(n, n)},
         lambda p, t: F.smooth_l1_loss(p, t)),
        ("hardsigmoid", "examples/hardsigmoid.loss", ["x"],
         lambda: {"x": torch.randn(rows, cols) * 3},
         # The program's own expression: F.hardsigmoid's backward is 0 at exactly x = +-3 (an open
         # interval), while clamp's, which the program uses, passes the gradient on the closed one.
         lambda x: torch.clamp(x + 3, 0, 6) / 6),
        ("bce_with_logits", "mean(softplus(z) - y * z)", ["z"],
         lambda: {"z": torch.randn(m, m) * 4, "y": torch.randint(0, 2, (m, m)).float()},
         lambda z, y: F.binary_cross_entropy_with_logits(z, y)),
        ("l1", "mean(abs(p - t))", ["p", "t"],
         lambda: {"p": torch.randn(m, m), "t": torch.randn(m, m)},
         lambda p, t: F.l1_loss(p, t)),
        ("pseudo_huber", "mean(sqrt((p - t)^2 + 1) - 1)", ["p"],
         lambda: {"p": torch.randn(m, m), "t": torch.randn(m, m)},
         lambda p, t: torch.mean(torch.sqrt((p - t) ** 2 + 1) - 1)),
        ("weighted_mse", "sum(w * (p - t)^2)", ["w", "p"],
         lambda: {"w": torch.rand(m), "p": torch.randn(m, m), "t": torch.randn(m, m)},
         lambda w, p, t: torch.sum(w * (p - t) ** 2)),
        # Gradients of broadcast inputs other than a row: one label per row ([N, 1]), a scalar weight,
        # one weight row per batch ([B, 1, C] against [B, M, C]), and a scalar in a map's backward.
        ("squared_hinge_rows", "examples/squared_hinge.loss", ["p", "t"],
         lambda: {"p": torch.rand(m, m), "t": torch.randint(0, 2, (m, 1)).float() * 2 - 1},
         lambda p, t: torch.mean(torch.clamp(1 - p * t, min=0) ** 2)),
        ("scalar_weighted_mse", "examples/weighted_mse.loss", ["w", "p"],
         lambda: {"w": torch.rand(1) + 0.5, "p": torch.randn(m, m), "t": torch.randn(m, m)},
         lambda w, p, t: torch.mean(w * (p - t) ** 2)),
        ("batch_weighted_mse", "examples/weighted_mse.loss", ["w", "p"],
         lambda: {"w": torch.rand(16, 1, m), "p": torch.randn(16, m // 16, m), "t": torch.randn(16, m // 16, m)},
         lambda w, p, t: torch.mean(w * (p - t) ** 2)),
        ("scaled_map", "x * s", ["x", "s"],
         lambda: {"x": torch.randn(m, m), "s": torch.rand(1)},
         lambda x, s: x * s),
        ("focal_like", "mean(-t * (1 - sigmoid(z))^2 * log(sigmoid(z)))", ["z"],
         lambda: {"z": torch.randn(m, m) * 2, "t": torch.rand(m, m)},
         lambda z, t: torch.mean(-t * (1 - torch.sigmoid(z)) ** 2 * torch.log(torch.sigmoid(z)))),
        ("swish_map", "x * sigmoid(x)", ["x"],
         lambda: {"x": torch.randn(m, m) * 3},
         lambda x: x * torch.sigmoid(x)),
    ]


def torch_grads(fn, inputs, wrt, dtype):
    tensors = {name: t.detach().to(dtype).requires_grad_(name in wrt) for name, t in inputs.items()}
    y = fn(*tensors.values())
    y.backward(torch.ones_like(y))
    return {name: tensors[name].grad for name in wrt}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lossjit", default="build/lossjit")
    ap.add_argument("--scratch", default="/tmp")
    ap.add_argument("--json", default=None)
    ap.add_argument("--scale", type=int, default=1, help="divide the reference extents by this")
    ap.add_argument("--bound", type=float, default=1e-5)
    args = ap.parse_args()

    torch.manual_seed(0)
    results, failed = [], False
    for name, program, wrt, make, fn in problems(args.scale):
        with torch.device("cuda"):
            inputs = make()
        files, command = [], [args.lossjit, "run", program, "--json"]
        for key, tensor in inputs.items():
            path = os.path.join(args.scratch, f"lossjit_grad_{name}_{key}.npy")
            np.save(path, tensor.cpu().numpy())
            files.append(path)
            command += ["-i", f"{key}={path}"]
        outputs = {}
        for key in wrt:
            outputs[key] = os.path.join(args.scratch, f"lossjit_grad_{name}_d{key}.npy")
            command += ["--output-grad", f"{key}={outputs[key]}"]
        out = subprocess.run(command, capture_output=True, text=True)
        row = {"problem": name, "program": program, "shapes": {k: list(t.shape) for k, t in inputs.items()}}
        if out.returncode != 0:
            print(out.stdout, out.stderr, file=sys.stderr)
            row["ok"], failed = False, True
            results.append(row)
            continue
        report = json.loads(out.stdout)
        ours = torch_grads(fn, inputs, wrt, torch.float32)
        truth = torch_grads(fn, inputs, wrt, torch.float64)
        ok = True
        for key in wrt:
            got = torch.from_numpy(np.load(outputs[key])).cuda()
            scale = ours[key].abs().max().item()
            err = (got - ours[key]).abs().max().item() / scale
            err64 = (got.double() - truth[key]).abs().max().item() / truth[key].abs().max().item()
            torch_err64 = (ours[key].double() - truth[key]).abs().max().item() / truth[key].abs().max().item()
            row[f"d{key}"] = {"device": report["gradients"][key]["device"], "rel_vs_torch": err,
                              "rel_vs_fp64": err64, "torch_rel_vs_fp64": torch_err64}
            ok = ok and err <= args.bound and report["gradients"][key]["device"] == "gpu"
            os.remove(outputs[key])
        for path in files:
            os.remove(path)
        row["ok"] = ok
        failed = failed or not ok
        results.append(row)
        print(json.dumps(row), flush=True)
        del inputs, ours, truth
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
