#!/usr/bin/env python3
"""Class weights that train (issue 30): the gradient of `w` in w[y], on the GPU.

Two programs, each differentiated with respect to the logits alone and with respect to the logits and
the class weights: the weighted sum `mean(w[y] * l)` (torch's per-sample weighting) and the weighted
mean with ignore_index as docs/language.md writes it (torch's F.cross_entropy(x, y, weight=w,
ignore_index=-100), whose weight gets no gradient in torch). lossjit's fused value-and-gradient kernel
leaves each row's derivative for w and its class, and its scatter kernels add the rows into the
classes; the ratio's gradient with respect to w also needs the numerator before that kernel (its
factor -num / den^2), a pass of its own over the logits. Against torch.autograd.grad of a
torch.compile'd function of the same program (what a training loop runs). Timed in turn, round after
round (alternating), medians of CUDA-event intervals; checked first against torch in float64.

    python3 bench/class_weights.py --shape 16384x32768 --reps 20 --json out.json
"""
import json
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402 (bench/, beside this script)

PROGRAMS = {
    "weighted sum": "mean(w[y] * (logsumexp(x, -1) - x[y]))",
    "weighted mean, ignore_index": ("l = logsumexp(x, -1) - x[y]; "
                                    "sum(where(y != -100, w[y] * l, 0)) / sum(where(y != -100, w[y], 0))"),
}


def torch_weighted_sum(x, y, w):
    return (w[y] * F.cross_entropy(x, y, reduction="none")).mean()


def torch_weighted_mean(x, y, w):
    wy = w[y.clamp(min=0)] * (y != -100)
    return (wy * F.cross_entropy(x, y, reduction="none", ignore_index=-100)).sum() / wy.sum()


TORCH = {"weighted sum": torch_weighted_sum, "weighted mean, ignore_index": torch_weighted_mean}


def main():
    args = row_options().parse_args()
    n, c, x = seeded_logits(args)
    targets = torch.randint(0, c, (n,), device="cuda")
    ignored = targets.clone()
    ignored[::10] = -100
    w = (torch.rand(c, device="cuda") + 0.5).to(x.dtype)
    errors, times, ratios = {}, {}, {}
    for name, text in PROGRAMS.items():
        y = ignored if "ignore" in name else targets
        loss = lossjit.compile(text, inputs=["x", "y", "w"])
        # Correctness first, against torch in float64.
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        want = TORCH[name](xd, y, wd)
        want_x, want_w = torch.autograd.grad(want, [xd, wd])
        value, (gx, gw) = loss.value_and_grad(x, y, w, wrt=["x", "w"])
        errors[name] = {
            "value (relative)": abs(value.item() - want.item()) / abs(want.item()),
            "grad x (max relative to the largest)": ((gx.double() - want_x).abs().max() / want_x.abs().max()).item(),
            "grad w (max relative to the largest)": ((gw.double() - want_w).abs().max() / want_w.abs().max()).item(),
        }
        compiled = torch.compile(TORCH[name])
        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
        times[name] = alternating({
            "lossjit value_and_grad x": lambda: loss.value_and_grad(x, y, w, wrt=["x"]),
            "lossjit value_and_grad x, w": lambda: loss.value_and_grad(x, y, w, wrt=["x", "w"]),
            "torch.compile fwd+bwd x": lambda: torch.autograd.grad(compiled(xr, y, w), [xr]),
            "torch.compile fwd+bwd x, w": lambda: torch.autograd.grad(compiled(xr, y, wr), [xr, wr]),
        }, args.reps)
        t = times[name]
        ratios[name] = {
            "w costs (x, w over x)": t["lossjit value_and_grad x, w"] / t["lossjit value_and_grad x"],
            "lossjit over torch.compile, x": t["lossjit value_and_grad x"] / t["torch.compile fwd+bwd x"],
            "lossjit over torch.compile, x and w": t["lossjit value_and_grad x, w"] / t["torch.compile fwd+bwd x, w"],
        }
    rate = copy_rate(x.numel() * x.element_size())
    read_ms = x.numel() * x.element_size() / rate / 1e6
    report = {
        "device": torch.cuda.get_device_name(), "shape": [n, c], "dtype": args.dtype, "reps": args.reps,
        "copy_GBps": rate, "read_write_floor_ms": 2 * read_ms, "errors": errors, "fwd_bwd_ms": times,
        "ratios": ratios,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
