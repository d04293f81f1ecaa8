#!/usr/bin/env python3
"""Focal loss and label smoothing, forward + backward, on the GPU: lossjit's fused value and gradient
(examples/focal.loss, examples/cross_entropy_smoothing.loss; the kernel alone, and through autograd as
a training loop calls it) against torch.autograd.grad of a torch.compile'd function of each (what a
training loop runs), and against torch eager; cross-entropy beside them as the reference point.

Values and gradients are first checked against torch in float64. Each row times its callables in
turn, round after round (alternating), medians of CUDA-event intervals; the floor is one read and one
write of the logits at the device's copy rate measured here.

    python3 bench/class_losses.py --shape 16384x32768 --reps 20 [--dtype bfloat16] [--json out.json]
"""
import json
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402 (bench/, beside this script)

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def wide(x):
    """16-bit logits in float32, as the kernels compute; float64 (the reference) as it is."""
    return x if x.dtype == torch.float64 else x.float()


def torch_focal(x, y, gamma=2.0):
    lp = F.log_softmax(wide(x), -1).gather(1, y[:, None]).squeeze(1)
    return (-(1 - lp.exp()) ** gamma * lp).mean()


def torch_smoothing(x, y):
    return F.cross_entropy(wide(x), y, label_smoothing=0.1)


def torch_ce(x, y):
    return F.cross_entropy(wide(x), y)


LOSSES = {  # name -> (example file, torch's function)
    "cross-entropy": ("cross_entropy.loss", torch_ce),
    "focal": ("focal.loss", torch_focal),
    "label smoothing": ("cross_entropy_smoothing.loss", torch_smoothing),
}


def main():
    args = row_options().parse_args()
    n, c, x = seeded_logits(args)
    y = torch.randint(0, c, (n,), device="cuda")
    xr = x.clone().requires_grad_()
    report = {"device": torch.cuda.get_device_name(), "shape": [n, c], "dtype": str(x.dtype), "reps": args.reps,
              "errors": {}, "fwd_bwd_ms": {}}
    for name, (example, reference) in LOSSES.items():
        loss = lossjit.compile((EXAMPLES / example).read_text(), inputs=["x", "y"])
        # Against torch in float64: the value, and the gradient's largest error over its largest element.
        xd = x.double().requires_grad_()
        want = reference(xd, y)
        (want_grad,) = torch.autograd.grad(want, xd)
        value, (grad,) = loss.value_and_grad(x, y, wrt=["x"])
        report["errors"][name] = {
            "value (relative)": abs(float(value) - want.item()) / abs(want.item()),
            "gradient (max over the largest)": ((grad.double() - want_grad).abs().max() / want_grad.abs().max()).item(),
        }
        compiled = torch.compile(reference)
        side = loss._torch_side()
        report["fwd_bwd_ms"][name] = alternating({
            "lossjit value_and_grad": lambda: side.value_and_grad_masked((x, y), 1),
            "lossjit through autograd": lambda: torch.autograd.grad(loss(xr, y), xr),
            "torch.compile fwd+bwd": lambda: torch.autograd.grad(compiled(xr, y), xr),
            "torch eager fwd+bwd": lambda: torch.autograd.grad(reference(xr, y), xr),
        }, args.reps)
    rate = copy_rate(x.numel() * 4)
    floor_ms = 2 * x.numel() * x.element_size() / rate / 1e6
    report["copy_GBps"], report["read_write_floor_ms"] = rate, floor_ms
    for name, times in report["fwd_bwd_ms"].items():
        ours = times["lossjit value_and_grad"]
        report[f"{name}: % of the floor, / torch.compile"] = [100 * floor_ms / ours, ours / times["torch.compile fwd+bwd"]]
    print(json.dumps(report, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
