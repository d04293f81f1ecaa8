#!/usr/bin/env python3
"""Knob variants of fused value-and-gradient row kernels beyond lossjit_bench --rows' five problems:
label smoothing, class weights, z-loss, focal, distillation, soft-target cross-entropy, at one
vocabulary size; and the row maps' forward and backward through autograd (softmax, log_softmax,
layer and RMS norm). Each variant (KNOB=VALUE,...; "default" for none) is timed in turn with the
others round after round (medians of CUDA-event intervals, bench/gpu_timing.py) and reported
against the one-read-one-write floor: the bytes of the inputs read along the rows once and of the
gradients written once, at this GPU's copy rate (the maps: milliseconds of torch.autograd.grad of
the output, forward and backward kernels).

    python3 bench/row_variants.py --shape 16384x32768 --variant default --variant block=1024,row_prefetch=on
    python3 bench/row_variants.py --dtype bfloat16 --only cross-entropy --variant default --variant block=1024,unroll=4,row_cache=on

--dtype bfloat16 makes the logits x bfloat16 (their gradient too); the other inputs stay float32.
"""
import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate, row_options, seeded_logits  # noqa: E402 (bench/, beside this script)

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"

# name -> (program file or text, its inputs, the inputs differentiated)
PROGRAMS = {
    "cross-entropy": ("cross_entropy.loss", ["x", "y"], ["x"]),
    "label smoothing": ("cross_entropy_smoothing.loss", ["x", "y"], ["x"]),
    "class weights": ("cross_entropy_weighted.loss", ["x", "y", "w"], ["x"]),
    "loss, z and accuracy": ("cross_entropy_z_acc.loss", ["x", "y"], ["x"]),
    "focal": ("focal.loss", ["x", "y"], ["x"]),
    "distillation KL": ("distill_kl.loss", ["s", "t"], ["s"]),
    "soft-target CE": ("mean(sum(-t * (x - logsumexp(x, -1)), -1))", ["x", "t"], ["x"]),
}

# Maps along the rows, forward and backward through autograd.
MAPS = {
    "softmax": "exp(x - logsumexp(x, -1))",
    "log_softmax": "x - logsumexp(x, -1)",
    "layer norm": "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
    "RMS norm": "x / sqrt(mean(x^2, -1) + 1e-6)",
}


def program_text(source):
    path = EXAMPLES / source
    return path.read_text() if path.exists() else source


def main():
    ap = row_options()
    ap.add_argument("--variant", action="append", default=None, help="KNOB=VALUE,...; 'default' for none (repeatable)")
    ap.add_argument("--only", action="append", default=None, help="program names (repeatable)")
    args = ap.parse_args()
    variants = args.variant or ["default"]
    n, c, x = seeded_logits(args)
    y = torch.randint(0, c, (n,), device="cuda")
    # t: the teacher's logits (distillation) or soft targets (soft-target CE; their values do not
    # change the work)
    extra = {"w": torch.rand(c, device="cuda") + 0.5, "s": x, "t": torch.randn(n, c, device="cuda")}
    rate = copy_rate(n * c * 4)
    results = {}
    for name, (source, inputs, wrt) in PROGRAMS.items():
        if args.only and name not in args.only:
            continue
        text = program_text(source)
        tensors = [extra[k] if k in extra else {"x": x, "y": y}[k] for k in inputs]
        losses = {v: lossjit.compile(text, inputs=inputs, knobs=None if v == "default" else v) for v in variants}
        fns = {v: (lambda loss=loss: loss.value_and_grad(*tensors, wrt=wrt)) for v, loss in losses.items()}
        ms = alternating(fns, args.reps)
        along = sum(t.numel() * t.element_size() for t in tensors if t.dim() == 2)
        written = sum(tensors[inputs.index(k)].numel() * tensors[inputs.index(k)].element_size() for k in wrt)
        floor_ms = (along + written) / rate / 1e6
        results[name] = {v: {"ms": ms[v], "floor_fraction": floor_ms / ms[v]} for v in variants}
        for v in variants:
            print(f"{name:22s} {args.shape:12s} {v:36s} {ms[v]:8.3f} ms  {100 * floor_ms / ms[v]:5.1f}% of floor", flush=True)
    upstream = torch.randn_like(x)
    xr = x.clone().requires_grad_()
    for name, text in MAPS.items():
        if args.only and name not in args.only:
            continue
        losses = {v: lossjit.compile(text, inputs=["x"], knobs=None if v == "default" else v) for v in variants}
        fns = {v: (lambda loss=loss: torch.autograd.grad(loss(xr), xr, upstream)) for v, loss in losses.items()}
        ms = alternating(fns, args.reps)
        results[name] = {v: {"ms": ms[v]} for v in variants}
        for v in variants:
            print(f"{name:22s} {args.shape:12s} {v:36s} {ms[v]:8.3f} ms  forward + backward", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "shape": args.shape, "copy_gbps": rate, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
