#!/usr/bin/env python3
"""Several results from one pass, and gradients through several reductions (issue 30), on the GPU:

- forward: cross-entropy alone against cross-entropy + z-loss + accuracy (`loss, z, acc`), one kernel
  each (the issue's target: the three results cost at most 5% more than the loss alone);
- forward + backward: lossjit's value_and_grad of cross-entropy, and of cross-entropy + 1e-4 z-loss
  (two reductions reaching the logits: a factor kernel, then the fused gradient kernel), against
  torch.autograd.grad of a torch.compile'd function of each (what a training loop runs).

Each row times its callables in turn, round after round (alternating), medians of CUDA-event
intervals; the floor is the bytes a kernel must move over the device's copy rate measured here.

    python3 bench/several_results.py --shape 16384x32768 --reps 20 --json out.json
"""
import json
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402 (bench/, beside this script)

CE = "lse = logsumexp(x, -1); mean(lse - x[y])"
CE_Z_ACC = "lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc"
CE_PLUS_Z = "lse = logsumexp(x, -1); ce = mean(lse - x[y]); z = mean(lse^2); t = ce + 1e-4 * z; t, ce, z"


def main():
    args = row_options(dtypes=False).parse_args()
    n, c, x = seeded_logits(args)
    y = torch.randint(0, c, (n,), device="cuda")
    ce, listed, plus_z = (lossjit.compile(t, inputs=["x", "y"]) for t in (CE, CE_Z_ACC, CE_PLUS_Z))

    # Correctness first, against torch in float64.
    xd = x.double().requires_grad_()
    lse = torch.logsumexp(xd, -1)
    want = {"loss": F.cross_entropy(xd, y), "z": (lse ** 2).mean(), "acc": (xd.argmax(-1) == y).double().mean()}
    total = want["loss"] + 1e-4 * want["z"]
    (want_grad,) = torch.autograd.grad(total, xd)
    got = listed(x, y)
    errors = {k: abs(getattr(got, k).item() - want[k].item()) / max(abs(want[k].item()), 1e-30) for k in want}
    values, (g,) = plus_z.value_and_grad(x, y, wrt=["x"])
    errors["grad of ce + 1e-4 z (max relative to the largest)"] = (
        ((g.double() - want_grad).abs().max() / want_grad.abs().max()).item())
    errors["ce + 1e-4 z"] = abs(values.t.item() - total.item()) / abs(total.item())

    def torch_ce(x, y):
        return F.cross_entropy(x, y)

    def torch_ce_z(x, y):
        lse = torch.logsumexp(x, -1)
        return F.cross_entropy(x, y) + 1e-4 * (lse ** 2).mean()

    compiled_ce, compiled_ce_z = torch.compile(torch_ce), torch.compile(torch_ce_z)
    xr = x.clone().requires_grad_()

    forward = alternating({
        "lossjit cross-entropy": lambda: ce(x, y),
        "lossjit loss, z, acc": lambda: listed(x, y),
        "torch.compile cross-entropy": lambda: compiled_ce(x, y),
    }, args.reps)
    backward = alternating({
        "lossjit value_and_grad cross-entropy": lambda: ce._torch_side().value_and_grad_masked((x, y), 1),
        "lossjit value_and_grad ce + 1e-4 z": lambda: plus_z._torch_side().value_and_grad_masked((x, y), 1),
        "torch.compile fwd+bwd cross-entropy": lambda: torch.autograd.grad(compiled_ce(xr, y), xr),
        "torch.compile fwd+bwd ce + 1e-4 z": lambda: torch.autograd.grad(compiled_ce_z(xr, y), xr),
    }, args.reps)
    rate = copy_rate(x.numel() * 4)
    read_ms = x.numel() * 4 / rate / 1e6
    report = {
        "device": torch.cuda.get_device_name(), "shape": [n, c], "reps": args.reps, "copy_GBps": rate,
        "read_floor_ms": read_ms, "read_write_floor_ms": 2 * read_ms, "errors": errors,
        "forward_ms": forward, "fwd_bwd_ms": backward,
        "three_results_over_one": forward["lossjit loss, z, acc"] / forward["lossjit cross-entropy"],
    }
    print(json.dumps(report, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
