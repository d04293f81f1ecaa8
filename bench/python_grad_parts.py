#!/usr/bin/env python3
"""Where a forward and backward from Python spends its host time: torch.autograd.grad of a 4096-element
MSE's value with respect to p, lossjit's paths beside torch's, and the parts each is made of, each
alone (bench/python_overhead.py's method: `--calls` calls back to back, one synchronize, median of
`--repeats` loops; the forward-and-backward rows in alternating rounds). With `--tables FILE`, torch.profiler's tables (by self CPU time, the autograd
engine's thread included) of the eager and compiled paths.

    python3 bench/python_grad_parts.py [--calls 5000] [--repeats 5] [--tables tables.txt] [--json out.json]
"""
import argparse
import json
import pathlib
import platform
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from python_overhead import alternating_host_us, host_us  # noqa: E402


def floor_functions(grad):
    """Python autograd.Functions that do no work: forward makes a 0-dim tensor, backward gives `grad`
    times the upstream gradient (as lossjit's eager Function does) or `grad` itself."""

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return torch.empty((), device=a.device)

        @staticmethod
        def backward(ctx, upstream):
            return grad * upstream, None

    class Given(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return torch.empty((), device=a.device)

        @staticmethod
        def backward(ctx, upstream):
            return grad, None

    return Scaled.apply, Given.apply


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--tables", help="write torch.profiler's tables of the forward-and-backward paths here")
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    p, t = torch.rand(args.n, device=dev, requires_grad=True), torch.rand(args.n, device=dev)
    loss = lossjit.compile("mean((p - t)^2)")
    (g_ref,) = torch.autograd.grad(F.mse_loss(p, t), p)
    value, (g,) = loss.value_and_grad(p, t, wrt=("p",))
    assert torch.allclose(g, g_ref, rtol=1e-5, atol=1e-9)
    mse_compiled = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
    lossjit_compiled = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
    scaled, given = floor_functions(g.detach().clone())
    weights = g.detach().clone()
    upstream = torch.ones((), device=dev)
    side = loss._torch

    from lossjit import _torch as lt
    lay = side.layout((p, t), side.state())
    plan = lay.grad_plans.get(1) or lay.grad_plans.setdefault(1, lt._GradPlan(loss, (p, t), 1, lay.out_code, 1))
    lay.set_data((p, t))
    g_out, v_out = torch.empty_like(p), torch.empty((), device=dev)
    plan.words[0], plan.words[plan.value_slot] = g_out.data_ptr(), v_out.data_ptr()
    ex = lt._exec_address(side.handle, 0, lt._raw_stream(0))

    def c_call():
        lt._value_and_grad(side.handle, lay.address, lay.count, plan.names_address, 1, plan.address,
                           plan.value_address, 1.0, None, ex)

    def fwd_bwd(fn):
        return lambda: torch.autograd.grad(fn(p, t), p)

    variants = [
        ("fwd+bwd lossjit eager: loss(p, t)", fwd_bwd(loss)),
        ("fwd+bwd lossjit inside torch.compile(fullgraph=True)", fwd_bwd(lossjit_compiled)),
        ("fwd+bwd torch eager: F.mse_loss(p, t)", fwd_bwd(F.mse_loss)),
        ("fwd+bwd torch.compile: torch.mean((p - t) ** 2)", fwd_bwd(mse_compiled)),
        ("floor fwd+bwd: a Python autograd.Function doing nothing, backward grad * upstream", fwd_bwd(scaled)),
        ("floor fwd+bwd: the same, backward returning a gradient made beforehand", fwd_bwd(given)),
        ("floor fwd+bwd: C++ autograd alone, (p * w).sum()", fwd_bwd(lambda a, b: (a * weights).sum())),
        ("fwd lossjit eager, grad mode on (graph built, no backward)", lambda: loss(p, t)),
        ("fwd lossjit inside torch.compile, grad mode on", lambda: lossjit_compiled(p, t)),
        ("fwd torch eager F.mse_loss, grad mode on", lambda: F.mse_loss(p, t)),
        ("fwd torch.compile's MSE, grad mode on", lambda: mse_compiled(p, t)),
        ("part: value_and_grad_masked (the fused kernel, its tensors; no autograd)",
         lambda: side.value_and_grad_masked((p, t), 1)),
        ("part: the gradient times the upstream gradient (g * upstream)", lambda: g * upstream),
        ("part: the floor Function's forward alone, grad mode on", lambda: scaled(p, t)),
        ("part: the layout of tensors that require grad (TorchLoss.layout)", lambda: side.layout((p, t), side.state())),
        ("part: the C call alone (lossjit_value_and_grad)", c_call),
        ("part: torch.empty((), device=cuda)", lambda: torch.empty((), device=dev)),
        ("part: torch.empty(4096, device=cuda)", lambda: torch.empty(args.n, device=dev)),
    ]
    # Forward and backward (the first seven) in alternating rounds, the parts one after another.
    timed = alternating_host_us(variants[:7], args.calls, args.repeats)
    timed.update({name: host_us(fn, args.calls, args.repeats) for name, fn in variants[7:]})
    rows = []
    for name, (median, best) in timed.items():
        rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
        print(f"{median:8.2f} us  (min {best:6.2f})  {name}", flush=True)
    if args.tables:
        from torch.profiler import ProfilerActivity, profile
        text = []
        for name, fn in variants[:4]:
            for _ in range(100):
                fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(300):
                    fn()
                torch.cuda.synchronize()
            text.append(f"==== {name}: 300 calls\n")
            text.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
        import cProfile
        import io
        import pstats
        for name, fn in (variants[0], variants[7]):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(3000):
                fn()
            prof.disable()
            torch.cuda.synchronize()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
            text.append(f"==== cProfile, {name}: 3000 calls (this thread only)\n" + out.getvalue())
        pathlib.Path(args.tables).write_text("\n".join(text) + "\n")
    if args.json:
        report = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                  "python": platform.python_version(), "n": args.n, "calls": args.calls, "repeats": args.repeats,
                  "rows": rows}
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
