#!/usr/bin/env python3
"""Rows whose length is not a multiple of 4 (GPT-2's vocabulary of 50257) against their aligned
neighbour, on the GPU: cross-entropy forward, and its value and gradient in one kernel, with the
defaults (vectors from each row's first aligned column: KernelSpec::row_shift), with `vector=1` (an
element at a time, what such rows got before), and torch.compile's forward and forward + backward
(torch.autograd.grad of a compiled function), timed in turn round after round (bench/gpu_timing.py).
Floors from the device's copy rate measured here: the forward reads the logits once, the value and
gradient reads them once and writes the gradient once. Errors against torch in float64.

    python3 bench/odd_rows.py --shape 16384x50257 --reps 20 [--dtype bfloat16] [--json out.json]
"""
import json
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402

CE = "lse = logsumexp(x, -1); mean(lse - x[y])"


def main():
    args = row_options().parse_args()
    n, c, x = seeded_logits(args)
    y = torch.randint(0, c, (n,), device="cuda")
    shifted = lossjit.compile(CE, inputs=["x", "y"])
    scalar = lossjit.compile(CE, inputs=["x", "y"], knobs={"vector": 1})

    xd = x.double().requires_grad_()
    want = F.cross_entropy(xd, y)
    (want_grad,) = torch.autograd.grad(want, xd)
    errors = {}
    for name, loss in (("defaults", shifted), ("vector=1", scalar)):
        values, (g,) = loss.value_and_grad(x, y, wrt=["x"])
        errors[name] = {
            "value": abs(values.item() - want.item()) / abs(want.item()),
            "grad (max relative to the largest)": ((g.double() - want_grad).abs().max() / want_grad.abs().max()).item(),
        }

    compiled = torch.compile(lambda x, y: F.cross_entropy(x.float(), y))
    xr = x.clone().requires_grad_()
    forward = alternating({
        "lossjit": lambda: shifted(x, y),
        "lossjit vector=1": lambda: scalar(x, y),
        "torch.compile": lambda: compiled(x, y),
    }, args.reps)
    fwd_bwd = alternating({
        "lossjit value_and_grad": lambda: shifted._torch_side().value_and_grad_masked((x, y), 1),
        "lossjit vector=1 value_and_grad": lambda: scalar._torch_side().value_and_grad_masked((x, y), 1),
        "torch.compile fwd+bwd": lambda: torch.autograd.grad(compiled(xr, y), xr),
    }, args.reps)
    rate = copy_rate(x.numel() * 4)
    read_ms = x.numel() * x.element_size() / rate / 1e6
    report = {
        "device": torch.cuda.get_device_name(), "shape": [n, c], "dtype": args.dtype, "reps": args.reps,
        "copy_GBps": rate, "read_floor_ms": read_ms, "read_write_floor_ms": 2 * read_ms, "errors": errors,
        "forward_ms": forward, "fwd_bwd_ms": fwd_bwd,
        "forward_pct_of_floor": {k: 100 * read_ms / v for k, v in forward.items()},
        "fwd_bwd_pct_of_floor": {k: 100 * 2 * read_ms / v for k, v in fwd_bwd.items()},
    }
    print(json.dumps(report, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
