#!/usr/bin/env python3
"""Host time per call of lossjit's PyTorch entry points beside eager torch and torch.compile, on a
4096-element MSE (--n), forward only, the result left on the device (issue 14's target: <= 10 us on
H100); then forward and backward (torch.autograd.grad of the value) through each path (issue 31),
these in alternating rounds (each round times every path once, in turn).

Each variant is called `--calls` times back to back, timed on the host (time.perf_counter), then the
device is synchronised once; a kernel of 4096 elements takes less time on the GPU than a call takes
on the host, so the loop measures the host. Median (and fastest) of `--repeats` loops.

Beside lossjit's entry points and torch's own MSE: torch's floor for a custom op, ops that do
nothing (a list of two tensors in, a tensor made beforehand out) defined through
torch.library.custom_op and through torch.library.Library as lossjit::value is, called eagerly and
inside torch.compile; and the parts of the direct path, each alone. Where the native path is built
(`--build-native`), its rows beside the Python paths' (the eager autograd node in C++; the ops'
kernels in C++, which torch.compile's code calls). `--profile FILE` also writes cProfile's tables
(by own time) of the direct path, the value op and the compiled call (FILE.forward), and of forward
and backward inside torch.compile (FILE.backward).

    python3 bench/python_overhead.py [--calls 20000] [--repeats 7] [--json out.json] [--profile out.txt]
"""
import argparse
import cProfile
import io
import json
import pathlib
import platform
import pstats
import statistics
import sys
import time
from typing import List

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402


def host_us(fn, calls, repeats):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times), min(times)


def _nothing():
    pass


def alternating_host_us(variants, calls, rounds, warmup=200, each_round=False):
    """host_us of each (name, fn) or (name, fn, select), in `rounds` rounds that each time every variant
    once, in turn (drift on the host reaches all alike): {name: (median, fastest)} over the rounds, and
    with `each_round` also {name: [us of each round]}. select(), where given, runs before each variant's
    calls, untimed (it picks lossjit's paths)."""
    variants = [(v[0], v[1], v[2] if len(v) > 2 else _nothing) for v in variants]
    times = {name: [] for name, _, _ in variants}
    for _, fn, select in variants:
        select()
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for name, fn, select in variants:
            select()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls * 1e6)
            torch.cuda.synchronize()
    summary = {name: (statistics.median(v), min(v)) for name, v in times.items()}
    return (summary, times) if each_round else summary

def floor_ops(dev):
    """Ops that do nothing: a list of tensors in, a tensor made beforehand out."""
    out = torch.empty((), device=dev)

    @torch.library.custom_op("lossjit_bench::noop_custom_op", mutates_args=())
    def noop_custom_op(inputs: List[torch.Tensor]) -> torch.Tensor:
        return out

    noop_custom_op.register_fake(lambda inputs: inputs[0].new_empty(()))
    lib = torch.library.Library("lossjit_bench", "FRAGMENT")
    lib.define("noop(Tensor[] inputs) -> Tensor", tags=(torch.Tag.pt2_compliant_tag,))
    lib.impl("noop", lambda inputs: out, "CompositeExplicitAutograd")
    torch.library.register_fake("lossjit_bench::noop", lambda inputs: inputs[0].new_empty(()), lib=lib)
    return torch.ops.lossjit_bench.noop_custom_op.default, torch.ops.lossjit_bench.noop.default, lib


def profile(rows, calls, path):
    """cProfile's table, by own time, of `calls` calls of each (name, fn, select)."""
    text = io.StringIO()
    for name, fn, select in rows:
        select()
        for _ in range(200):
            fn()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        text.write(f"==== {name}: {calls} calls\n")
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    pathlib.Path(path).write_text(text.getvalue())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--json")
    ap.add_argument("--profile", help="write cProfile tables of the lossjit paths to FILE.forward and FILE.backward")
    ap.add_argument("--build-native", action="store_true",
                    help="build the native path first (lossjit.build_native()); without it, the native "
                         "path's rows are timed where a build for this torch is found")
    args = ap.parse_args()
    if args.build_native:
        print(f"native path: {lossjit.build_native()}", flush=True)
    dev = torch.device("cuda", 0)
    p, t = torch.rand(args.n, device=dev), torch.rand(args.n, device=dev)
    loss = lossjit.compile("mean((p - t)^2)")
    assert abs(loss(p, t).item() - F.mse_loss(p, t).item()) <= 1e-6 * F.mse_loss(p, t).item()
    value = torch.ops.lossjit.value.default
    assert abs(value(loss._id, [p, t]).item() - F.mse_loss(p, t).item()) <= 1e-6 * F.mse_loss(p, t).item()

    torch_eager = lambda: torch.mean((p - t) ** 2)  # noqa: E731
    mse_compiled = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
    lossjit_compiled = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
    op = torch.ops.lossjit.reduce
    noop_custom_op, noop, _keep = floor_ops(dev)
    noop_compiled = torch.compile(lambda a, b: noop([a, b]), fullgraph=True)
    variants = [
        ("lossjit: loss(p, t) (eager, no grad: the direct path)", lambda: loss(p, t)),
        ("lossjit: torch.ops.lossjit.value (the forward-only op, eager)", lambda: value(loss._id, [p, t])),
        ("lossjit: torch.ops.lossjit.reduce (the op with autograd, eager)", lambda: op(loss._id, [p, t], 0)),
        ("lossjit: loss(p, t) inside torch.compile(fullgraph=True)", lambda: lossjit_compiled(p, t)),
        ("torch eager: torch.mean((p - t) ** 2)", torch_eager),
        ("torch eager: F.mse_loss(p, t)", lambda: F.mse_loss(p, t)),
        ("torch.compile: torch.mean((p - t) ** 2)", lambda: mse_compiled(p, t)),
        ("floor: an empty torch.library.custom_op (two tensors in, a tensor made beforehand out)",
         lambda: noop_custom_op([p, t])),
        ("floor: an empty torch.library.Library op, no autograd kernel (as lossjit::value)", lambda: noop([p, t])),
        ("floor: the empty Library op inside torch.compile(fullgraph=True)", lambda: noop_compiled(p, t)),
    ]
    # Where the direct path's time goes: its parts, each alone.
    from lossjit import _lib, _torch as lt
    side = loss._torch
    st = side.state()
    lay = side.layout((p, t), st)
    lay.set_data((p, t))
    stream = lt._raw_stream(0)
    ex = lt._exec_address(side.handle, 0, stream)
    out = torch.empty((), device=dev)
    lay.words[lay.result_slot] = out.data_ptr()
    results = lt._Results(torch.float32, dev)
    parts = [
        ("part: the C call alone (lossjit_evaluate: checks, plan lookup, cuLaunchKernel)",
         lambda: lt._evaluate(side.handle, lay.address, lay.count, lay.result_address, ex)),
        ("part: a ctypes call that does nothing (lossjit_c_api_version)", _lib.gil_lib.lossjit_c_api_version),
        ("part: torch.empty((), device=cuda)", lambda: torch.empty((), dtype=torch.float32, device=dev)),
        ("part: the next 0-dim result view (_Results.next)", results.next),
        ("part: the layout check of two tensors (TensorGuards.check)", lambda: lay.check(p, t)),
        ("part: the layout key of two tensors (built when the check fails)", lambda: lt._key((p, t))),
        ("part: the current raw stream", lambda: lt._raw_stream(0)),
        ("part: two data_ptr() into the views", lambda: lay.set_data((p, t))),
        ("part: torch.compiler.is_compiling()", torch.compiler.is_compiling),
    ]
    from lossjit import _native
    native = _native.module()
    python_paths = lambda: _native.use(None)  # noqa: E731
    native_paths = lambda: _native.use(native)  # noqa: E731
    variants = [(name, fn, python_paths) for name, fn in variants]
    if native is not None:
        variants += [
            ("lossjit: torch.ops.lossjit.value (eager, the native path: the op's kernel in C++)",
             lambda: value(loss._id, [p, t]), native_paths),
            ("lossjit: loss(p, t) inside torch.compile(fullgraph=True) (the native path)", lambda: lossjit_compiled(p, t),
             native_paths),
        ]
    else:
        print("note: the native path is not built for this torch (--build-native builds it)", flush=True)
    rows = []
    with torch.no_grad():
        python_paths()
        if lay.check(p, t) is not True:
            print("note: no TensorGuards layout check here; every call builds the layout key", flush=True)
        timed = alternating_host_us(variants, args.calls, args.repeats)
        for name, fn in parts:
            timed[name] = host_us(fn, args.calls, args.repeats)
        for name, (median, best) in timed.items():
            rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
            print(f"{median:8.2f} us  (min {best:6.2f})  {name}", flush=True)
        python_paths()
        # The direct path's Python side alone: lossjit_evaluate replaced by a Python function that
        # returns 0 (about what a ctypes call that does nothing costs).
        evaluate, lt._evaluate = lt._evaluate, lambda *a: 0
        try:
            name = "part: the direct path with lossjit_evaluate replaced by a no-op (its Python side)"
            median, best = host_us(lambda: loss(p, t), args.calls, args.repeats)
        finally:
            lt._evaluate = evaluate
        rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
        print(f"{median:8.2f} us  (min {best:6.2f})  {name}", flush=True)
        if args.profile:
            profile([("direct path", lambda: loss(p, t), python_paths),
                     ("lossjit::value", lambda: value(loss._id, [p, t]), python_paths),
                     ("compiled", lambda: lossjit_compiled(p, t), python_paths)], 3000, args.profile + ".forward")
    # Forward and backward, as a training step calls a loss: torch.autograd.grad of the value with
    # respect to p (p requires grad), host time per call, each path beside torch's own.
    pg = p.detach().clone().requires_grad_(True)
    grad_calls = max(args.calls // 4, 1000)
    op_value = lambda a, b: op(loss._id, [a, b], 1)[0]  # noqa: E731
    grad_variants = [
        ("fwd+bwd lossjit: loss(p, t) eager (the autograd.Function around the fused kernel)", loss, python_paths)]
    if native is not None:
        grad_variants.append(("fwd+bwd lossjit: loss(p, t) eager (the native path: the autograd node in C++)",
                              loss, native_paths))
    grad_variants += [
        ("fwd+bwd lossjit: torch.ops.lossjit.reduce (the op with autograd, eager)", op_value, python_paths),
        ("fwd+bwd lossjit: loss(p, t) inside torch.compile(fullgraph=True)", lossjit_compiled, python_paths),
    ]
    if native is not None:
        grad_variants.append(("fwd+bwd lossjit: loss(p, t) inside torch.compile(fullgraph=True) (the native path: "
                              "lossjit::value_and_grad's kernel in C++)", lossjit_compiled, native_paths))
    grad_variants += [
        ("fwd+bwd lossjit: torch.ops.lossjit.reduce inside torch.compile(fullgraph=True)",
         torch.compile(op_value, fullgraph=True), python_paths),
        ("fwd+bwd torch eager: F.mse_loss(p, t)", F.mse_loss, python_paths),
        ("fwd+bwd torch.compile: torch.mean((p - t) ** 2)", mse_compiled, python_paths),
    ]
    timed = alternating_host_us([(name, lambda fn=fn: torch.autograd.grad(fn(pg, t), pg), select)
                                 for name, fn, select in grad_variants], grad_calls, args.repeats)
    if args.profile:  # forward and backward inside torch.compile: lossjit's paths and torch's own MSE
        profile([(name, lambda fn=fn: torch.autograd.grad(fn(pg, t), pg), select)
                 for name, fn, select in grad_variants if "inside torch.compile" in name or "torch.compile:" in name],
                1000, args.profile + ".backward")
    _native.use(native)
    for name, (median, best) in timed.items():
        rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
        print(f"{median:8.2f} us  (min {best:6.2f})  {name}", flush=True)
    report = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
              "python": platform.python_version(), "n": args.n, "calls": args.calls, "repeats": args.repeats,
              "rows": rows}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
