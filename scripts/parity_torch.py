#!/usr/bin/env python3
"""Semantics parity on the GPU: every function and operator of the language, through `lossjit run`
(a map kernel), against PyTorch on the same float32 data, including ±0, ±inf, nan, denormals, huge
and tiny values. Prints one line per function (mismatching elements, worst distance in ulps, nan
disagreements, examples) and writes JSON.

    python3 scripts/parity_torch.py --lossjit build/lossjit --json parity.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, 0.1, 1e-7, -1e-7,
                    1e-45, -1e-45, 1e-40, 1.17549435e-38, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan,
                    10.0, 20.0, 20.5, 88.0, 89.0, -88.0, -104.0, 100.0, 1e20, -1e20, 3.14159265],
                   dtype=np.float32)
SMALL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, np.inf, -np.inf, np.nan, 1e-40, 1e20], dtype=np.float32)

t = torch
UNARY = {
    "abs": t.abs, "sign": t.sign, "sqrt": t.sqrt, "rsqrt": t.rsqrt, "exp": t.exp, "exp2": t.exp2,
    "expm1": t.expm1, "log": t.log, "log2": t.log2, "log10": t.log10, "log1p": t.log1p, "sin": t.sin,
    "cos": t.cos, "tan": t.tan, "tanh": t.tanh, "sigmoid": t.sigmoid, "softplus": F.softplus, "relu": t.relu,
    "erf": t.erf, "erfc": t.erfc, "floor": t.floor, "ceil": t.ceil, "round": t.round, "trunc": t.trunc,
    "isnan": lambda x: t.isnan(x).float(), "isinf": lambda x: t.isinf(x).float(),
}
PROGRAMS = [(f"{name}(x)", ["x"], fn) for name, fn in UNARY.items()] + [
    ("(-x)", ["x"], lambda x: -x),
    ("!x", ["x"], lambda x: t.logical_not(x).float()),
    ("x + y", ["x", "y"], lambda x, y: x + y),
    ("x - y", ["x", "y"], lambda x, y: x - y),
    ("x * y", ["x", "y"], lambda x, y: x * y),
    ("x / y", ["x", "y"], lambda x, y: x / y),
    ("x % y", ["x", "y"], t.remainder),
    ("x ^ y", ["x", "y"], t.pow),
    ("pow(x, y)", ["x", "y"], t.pow),
    ("x ^ 2", ["x"], lambda x: t.pow(x, 2)),
    ("x ^ 3", ["x"], lambda x: t.pow(x, 3)),
    ("x ^ 0.5", ["x"], lambda x: t.pow(x, 0.5)),
    ("x ^ -1", ["x"], lambda x: t.pow(x, -1)),
    ("x ^ -2", ["x"], lambda x: t.pow(x, -2)),
    ("x ^ -0.5", ["x"], lambda x: t.pow(x, -0.5)),
    ("x < y", ["x", "y"], lambda x, y: (x < y).float()),
    ("x <= y", ["x", "y"], lambda x, y: (x <= y).float()),
    ("x > y", ["x", "y"], lambda x, y: (x > y).float()),
    ("x >= y", ["x", "y"], lambda x, y: (x >= y).float()),
    ("x == y", ["x", "y"], lambda x, y: (x == y).float()),
    ("x != y", ["x", "y"], lambda x, y: (x != y).float()),
    ("x && y", ["x", "y"], lambda x, y: t.logical_and(x, y).float()),
    ("x || y", ["x", "y"], lambda x, y: t.logical_or(x, y).float()),
    ("min(x, y)", ["x", "y"], t.minimum),
    ("max(x, y)", ["x", "y"], t.maximum),
    ("xlogy(x, y)", ["x", "y"], t.xlogy),
    ("clamp(x, y, z)", ["x", "y", "z"], lambda x, y, z: t.clamp(x, y, z)),
    ("where(x, y, z)", ["x", "y", "z"], lambda x, y, z: t.where(x != 0, y, z)),
    ("x ? y : z", ["x", "y", "z"], lambda x, y, z: t.where(x != 0, y, z)),
]


def grid(arity):
    values = SPECIAL if arity < 3 else SMALL
    mesh = np.meshgrid(*([values] * arity), indexing="ij")
    return [m.reshape(-1).astype(np.float32) for m in mesh]


def ulps(a, b):
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)  # order floats as integers
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lossjit", default="build/lossjit")
    ap.add_argument("--json")
    args = ap.parse_args()
    results, worst = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for program, names, fn in PROGRAMS:
            arrays = grid(len(names))
            cmd = [args.lossjit, "run", program, "-o", os.path.join(tmp, "out.npy")]
            for name, a in zip(names, arrays):
                path = os.path.join(tmp, name + ".npy")
                np.save(path, a)
                cmd += ["-i", f"{name}={path}"]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{program}: lossjit failed: {run.stderr.strip()}")
                results.append({"program": program, "error": run.stderr.strip()})
                worst = max(worst, 1 << 30)
                continue
            got = np.load(os.path.join(tmp, "out.npy"))
            want = fn(*(torch.from_numpy(a).cuda() for a in arrays)).float().cpu().numpy()
            nan_got, nan_want = np.isnan(got), np.isnan(want)
            both = ~nan_got & ~nan_want
            distance = np.zeros(got.shape, dtype=np.int64)
            distance[both] = ulps(got[both], want[both])
            # Bits must agree (so -0 and +0 differ); nan payloads may differ.
            bad = (nan_got != nan_want) | (both & (got.view(np.int32) != want.view(np.int32)))
            examples = []
            for i in np.flatnonzero(bad)[:4]:
                examples.append({"inputs": [repr(float(a[i])) for a in arrays], "lossjit": repr(float(got[i])),
                                 "torch": repr(float(want[i]))})
            row = {"program": program, "elements": int(got.size), "mismatches": int(bad.sum()),
                   "max_ulps": int(distance.max()), "nan_disagreements": int((nan_got != nan_want).sum()),
                   "examples": examples}
            results.append(row)
            worst = max(worst, row["max_ulps"] + 1000 * row["nan_disagreements"])
            print(f"{program:18} {row['mismatches']:5d}/{row['elements']:<5d} mismatching, max {row['max_ulps']} ulp, "
                  f"{row['nan_disagreements']} nan disagreements {examples[:2] if examples else ''}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    sys.exit(0 if worst <= 2 else 1)


if __name__ == "__main__":
    main()
