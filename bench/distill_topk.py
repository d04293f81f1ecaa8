#!/usr/bin/env python3
"""Distillation from a teacher's top-k (issue 30): `x[k]` with K indices per row, on the GPU.

examples/distill_topk.loss, mean over rows of sum_j q_j (log q_j - log_softmax(x)[k_j]), with the
teacher's classes k [N, K] and probabilities q [N, K] against the student's logits x [N, C]: lossjit's
fused value-and-gradient kernel (the row walked once for logsumexp and once for the gradient, the K
walked by the row's team, x's gradient written again at the K gathered columns) against
torch.autograd.grad of a torch.compile'd function of the same loss (what a training loop runs).
Timed in turn, round after round (alternating), medians of CUDA-event intervals; checked first against
torch in float64. The floor: the logits read once and their gradient written once at the copy rate.

    python3 bench/distill_topk.py --shape 16384x32768 --k 64 --reps 20 --json out.json
"""
import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402 (bench/, beside this script)

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "distill_topk.loss"


def torch_distill(x, k, q):
    return (q * (q.log() - torch.log_softmax(x, -1).gather(-1, k))).sum(-1).mean()


def main():
    ap = row_options()
    ap.add_argument("--k", type=int, default=64)
    args = ap.parse_args()
    n, c, x = seeded_logits(args)
    teacher = torch.randn(n, c, device="cuda")
    top = torch.topk(teacher, args.k, -1)
    k = top.indices
    q = torch.softmax(top.values, -1).to(x.dtype)
    loss = lossjit.compile(EXAMPLE.read_text(), inputs=["x", "k", "q"])
    # Correctness first, against torch in float64.
    xd, qd = x.double().requires_grad_(), q.double().requires_grad_()
    want = torch_distill(xd, k, qd)
    want_x, want_q = torch.autograd.grad(want, [xd, qd])
    value, (gx, gq) = loss.value_and_grad(x, k, q, wrt=["x", "q"])
    errors = {
        "value (relative)": abs(value.item() - want.item()) / abs(want.item()),
        "grad x (max relative to the largest)": ((gx.double() - want_x).abs().max() / want_x.abs().max()).item(),
        "grad q (max relative to the largest)": ((gq.double() - want_q).abs().max() / want_q.abs().max()).item(),
    }
    # What the K costs: the cross-entropy of the teacher's top class alone, on the same logits.
    cross_entropy = lossjit.compile("mean(logsumexp(x, -1) - x[y])", inputs=["x", "y"])
    y = k[:, 0].contiguous()
    compiled = torch.compile(torch_distill)
    xr, qr = x.clone().requires_grad_(), q.clone().requires_grad_()
    times = alternating({
        "lossjit forward": lambda: loss(x, k, q),
        "lossjit value_and_grad x": lambda: loss.value_and_grad(x, k, q, wrt=["x"]),
        "lossjit value_and_grad x, q": lambda: loss.value_and_grad(x, k, q, wrt=["x", "q"]),
        "lossjit cross-entropy value_and_grad x": lambda: cross_entropy.value_and_grad(x, y, wrt=["x"]),
        "torch.compile forward": lambda: compiled(x, k, q),
        "torch.compile fwd+bwd x": lambda: torch.autograd.grad(compiled(xr, k, q), [xr]),
        "torch.compile fwd+bwd x, q": lambda: torch.autograd.grad(compiled(xr, k, qr), [xr, qr]),
    }, args.reps)
    rate = copy_rate(x.numel() * x.element_size())
    read_ms = x.numel() * x.element_size() / rate / 1e6
    report = {
        "device": torch.cuda.get_device_name(), "shape": [n, c], "k": args.k, "dtype": args.dtype, "reps": args.reps,
        "copy_GBps": rate, "read_floor_ms": read_ms, "read_write_floor_ms": 2 * read_ms, "errors": errors,
        "ms": times,
        "ratios": {
            "forward, lossjit over torch.compile": times["lossjit forward"] / times["torch.compile forward"],
            "fwd+bwd x, lossjit over torch.compile": times["lossjit value_and_grad x"] / times["torch.compile fwd+bwd x"],
            "fwd+bwd x, q, lossjit over torch.compile":
                times["lossjit value_and_grad x, q"] / times["torch.compile fwd+bwd x, q"],
            "fwd+bwd x, lossjit over its cross-entropy alone":
                times["lossjit value_and_grad x"] / times["lossjit cross-entropy value_and_grad x"],
            "forward, % of the read floor": 100 * read_ms / times["lossjit forward"],
            "fwd+bwd x, % of the read+write floor": 100 * 2 * read_ms / times["lossjit value_and_grad x"],
        },
    }
    print(json.dumps(report, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
