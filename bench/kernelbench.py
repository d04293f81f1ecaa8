#!/usr/bin/env python3
"""KernelBench level 1 in lossjit's language: each examples/kernelbench/NN_name.loss against the
problem's own PyTorch code (ScalingIntelligence/KernelBench, KernelBench/level1/NN_name.py, from a
checkout the user gives; nothing of it is copied here).

Each program's header names the problem's inputs in get_inputs() order:
    # kernelbench: inputs x                  tensors, in order
    # kernelbench: inputs A[:,None] B        A given as a column (unsqueeze(1))
    # kernelbench: inputs A; params s        a Python number of get_inputs() is the parameter s
    # kernelbench: inputs x; weights ln.weight ln.bias   the Model's parameters, as inputs weight, bias
    # kernelbench: inputs x:N,C,H,W->N,8,C//8,H,W; weights gn.weight:C->8,C//8,1,1   views: the
        tensor's extents named, then the view's in those names (integer arithmetic); the output is
        compared in the problem's own shape (the same elements)
    # kernelbench: inputs x; keepdim         torch keeps the reduced dimension (size 1); lossjit drops it

--device cpu (no GPU needed): every extent the problem's get_inputs() asks torch.rand / randn /
randint for is capped at --max-extent (and randint's upper bound with it), the Model runs in
float64, and lossjit's float64 CPU reference must agree within --tolerance. --device cuda: the
problem's own shapes; lossjit's GPU kernels on the float32 inputs against the Model in float64
(the same tolerance), then the time of lossjit and of torch.compile(Model) on the float32 inputs,
alternating, and the memory floor (bytes read and written / the GPU's measured copy rate).

Usage:
    python3 bench/kernelbench.py --kernelbench PATH [--device cpu|cuda] [--only 23 95] [--json OUT] [--time-limit S]
PATH: the KernelBench checkout (or its KernelBench/level1 folder). Exits 1 if any problem is off.
"""
import argparse
import contextlib
import importlib.util
import json
import pathlib
import re
import sys
import time

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
import lossjit  # noqa: E402

PROGRAMS = HERE.parent / "examples" / "kernelbench"


def problems(only):
    for path in sorted(PROGRAMS.glob("*.loss"), key=lambda p: int(p.name.split("_")[0])):
        number = int(path.name.split("_")[0])
        if only and number not in only:
            continue
        text = path.read_text()
        header = re.search(r"^# kernelbench: (inputs [^\n]*)$", text, re.M)
        if not header:
            raise SystemExit(f"kernelbench: {path.name} has no '# kernelbench: inputs ...' line")
        clauses = {}
        for clause in header.group(1).split(";"):
            words = clause.split()
            if not words or words[0] not in ("inputs", "params", "weights", "keepdim"):
                raise SystemExit(f"kernelbench: {path.name}: unknown clause '{clause.strip()}' in its header")
            clauses[words[0]] = words[1:]
        yield number, path, text, clauses


def problem_module(level1, path):
    source = level1 / path.with_suffix(".py").name
    if not source.exists():
        raise SystemExit(f"kernelbench: {source} does not exist (is --kernelbench the KernelBench checkout?)")
    spec = importlib.util.spec_from_file_location(f"kernelbench_{path.stem}", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def capped_extents(cap):
    """torch.rand / randn / randint with every extent (and randint's bound) at most `cap`."""
    saved = torch.rand, torch.randn, torch.randint

    def shape_of(size):
        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        return tuple(min(int(s), cap) for s in size)

    def rand(*size, **kw):
        return saved[0](shape_of(size), **kw)

    def randn(*size, **kw):
        return saved[1](shape_of(size), **kw)

    def randint(low, high=None, size=None, **kw):
        if high is None or isinstance(high, (tuple, list, torch.Size)):  # randint(high, size)
            low, high, size = 0, low, high
        return saved[2](low, min(int(high), low + cap), shape_of((size,)), **kw)

    torch.rand, torch.randn, torch.randint = rand, randn, randint
    try:
        yield
    finally:
        torch.rand, torch.randn, torch.randint = saved


def capped_sizes(value, cap):
    """Integers above `cap` in get_init_inputs()'s values (and tuples of them) brought down to it."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return min(value, cap)
    if isinstance(value, (tuple, list)):
        return type(value)(capped_sizes(v, cap) for v in value)
    return value


def split_inputs(values, names, params):
    """get_inputs()'s values as lossjit's tensors (with the header's reshapes) and parameters."""
    tensors = [v for v in values if torch.is_tensor(v)]
    numbers = [v for v in values if not torch.is_tensor(v)]
    if len(tensors) != len(names) or len(numbers) != len(params):
        raise SystemExit(f"kernelbench: get_inputs() gave {len(tensors)} tensors and {len(numbers)} numbers; the "
                         f"header names {len(names)} inputs and {len(params)} parameters")
    out = [viewed(t.unsqueeze(1) if name.endswith("[:,None]") else t, name) for name, t in zip(names, tensors)]
    return [bare(n) for n in names], out, dict(zip(params, (float(v) for v in numbers)))


def viewed(t, name):
    """`t` as the header's `name:A,B->A,B//2,2` asks (a view of the same elements: its extents named,
    then the view's extents in those names), else unchanged."""
    name = name.removesuffix("[:,None]")
    if ":" not in name:
        return t
    spec = name.split(":", 1)[1]
    if "->" not in spec:
        raise SystemExit(f"kernelbench: '{name}': a view is written EXTENTS->EXTENTS, e.g. x:N,C->N,8,C//8")
    before, after = spec.split("->", 1)
    names = before.split(",")
    if len(names) != t.dim() or not all(n.isidentifier() for n in names):
        raise SystemExit(f"kernelbench: '{name}' names {len(names)} extents of a tensor of {t.dim()} dimensions")
    extents = dict(zip(names, t.shape))
    shape = tuple(int(eval(e, {"__builtins__": {}}, extents)) for e in after.split(","))  # noqa: S307 (the header's own arithmetic)
    return t.reshape(shape)


def bare(name):
    """A header's input or weight name without its reshape or column suffix."""
    return name.removesuffix("[:,None]").split(":", 1)[0]


def relative_error(got, want):
    """Largest difference over the largest magnitude, on the device the result is on, a chunk at a
    time (the largest problems' float64 temporaries would not fit beside them)."""
    want = torch.as_tensor(want)
    got = torch.as_tensor(got).to(want.device)
    if got.shape != want.shape:
        return float("inf")
    if not want.numel():
        return 0.0
    got, want = got.reshape(-1), want.reshape(-1)
    chunk = 1 << 26
    largest = difference = 0.0
    for start in range(0, want.numel(), chunk):
        w = want[start:start + chunk].double()
        g = got[start:start + chunk].double()
        largest = max(largest, float(w.abs().max()))
        difference = max(difference, float((g - w).abs().max()))
    return difference / max(largest, 1e-30)


def keepdim(got, want, clauses):
    """A result without the reduced dimensions as torch's keepdim=True has them (the header says
    `keepdim`), or of an input's view (`x:...->...`): the same elements, reshaped."""
    views = any(":" in n for n in clauses.get("inputs", []))
    if ("keepdim" not in clauses and not views) or got.numel() != want.numel():
        return got
    return got.reshape(want.shape)


def as_float64(values):
    return [v.double() if torch.is_tensor(v) and v.is_floating_point() else v for v in values]


def cuda_ms(fn, reps):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def copy_rate(device):
    """Bytes moved per second by a device-to-device copy of 2 GiB (read + write), the floor's rate."""
    a = torch.empty(1 << 31, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    ms = cuda_ms(lambda: b.copy_(a), 10)
    return 2 * a.numel() / (ms * 1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", required=True, type=pathlib.Path)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--only", type=int, nargs="*", default=None, help="problem numbers")
    ap.add_argument("--max-extent", type=int, default=48, help="--device cpu: the largest extent")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="relative error, of the largest element")
    ap.add_argument("--rounds", type=int, default=3, help="--device cuda: alternating timing rounds")
    ap.add_argument("--reps", type=int, default=10, help="--device cuda: timed calls per round")
    ap.add_argument("--json", type=pathlib.Path, default=None)
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds: start no new problem after this (the summary says how many ran)")
    args = ap.parse_args()

    level1 = args.kernelbench
    if (level1 / "KernelBench" / "level1").is_dir():
        level1 = level1 / "KernelBench" / "level1"
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("kernelbench: --device cuda needs torch with a CUDA device")
    rate = copy_rate("cuda") if cuda else None
    device_name = torch.cuda.get_device_name(0) if cuda else "cpu (lossjit's float64 reference)"
    rows, failures = [], 0
    started = time.monotonic()
    for number, path, text, clauses in problems(args.only):
        if args.time_limit is not None and time.monotonic() - started > args.time_limit:
            print(f"kernelbench: the time limit ({args.time_limit:g} s) stops the run before {path.stem}")
            break
        names, params = clauses["inputs"], clauses.get("params", [])
        module = problem_module(level1, path)
        torch.manual_seed(number)
        init = module.get_init_inputs()
        if not cuda:  # sizes the Model is built for (LayerNorm's normalized_shape) capped as the inputs are
            init = capped_sizes(init, args.max_extent)
        model = module.Model(*init)
        # On the GPU the inputs are made there (at these sizes, making them on the CPU and copying
        # took most of a problem's minute).
        with torch.device("cuda") if cuda else capped_extents(args.max_extent):
            values = module.get_inputs()
        names, tensors, numbers = split_inputs(values, names, params)
        # The Model's own parameters the program reads as inputs (LayerNorm's weight and bias), named
        # by their last component.
        for weight in clauses.get("weights", []):
            tensor = viewed(model.get_parameter(bare(weight)).detach(), weight)
            names.append(bare(weight).rsplit(".", 1)[-1])
            tensors.append(tensor.cuda() if cuda else tensor)
        loss = lossjit.compile(text, inputs=names, params=numbers or None, source_name=path.name)
        row = {"problem": path.stem, "shapes": [list(t.shape) for t in tensors],
               "kind": "map" if loss.kind == "map" else loss.reduction}
        if cuda:
            device_tensors = tensors
            got = loss(*device_tensors)
            with torch.no_grad():  # the Model in float64 on the GPU (the CPU would take minutes at these sizes)
                want = model.double().cuda()(*as_float64(values))
            torch.cuda.empty_cache()  # the float64 inputs are gone
            row["relative_error"] = relative_error(keepdim(got, want, clauses), want)
            written = got.numel() * got.element_size() if torch.is_tensor(got) and got.dim() > 0 else 0
            del want, got
            torch.cuda.empty_cache()
            compiled = torch.compile(model.float().cuda())
            device_values = values
            compiled(*device_values)  # compile outside the timing
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(cuda_ms(lambda: loss(*device_tensors), args.reps))
                theirs.append(cuda_ms(lambda: compiled(*device_values), args.reps))
            moved = written + sum(t.numel() * t.element_size() for t in device_tensors)
            floor_ms = moved / rate * 1e3
            row.update(lossjit_ms=float(np.median(ours)), torch_compile_ms=float(np.median(theirs)),
                       floor_ms=floor_ms, floor_fraction=floor_ms / float(np.median(ours)),
                       vs_torch_compile=float(np.median(theirs)) / float(np.median(ours)))
        else:
            with torch.no_grad():
                want = model.double()(*as_float64(values))
            got = loss(*[t.numpy() for t in tensors])  # NumPy arrays: the float64 CPU reference
            row["relative_error"] = relative_error(keepdim(torch.as_tensor(np.asarray(got)), want, clauses), want)
        row["ok"] = row["relative_error"] <= args.tolerance
        failures += not row["ok"]
        rows.append(row)
        timing = (f"  lossjit {row['lossjit_ms']:.3f} ms, {100 * row['floor_fraction']:.1f}% of the floor, "
                  f"torch.compile {row['torch_compile_ms']:.3f} ms ({row['vs_torch_compile']:.2f}x)") if cuda else ""
        if args.json:  # after every problem, so that a run cut short still leaves its rows
            args.json.write_text(json.dumps({"device": device_name, "rows": rows}, indent=1) + "\n")
        print(f"{path.stem:40s} {row['kind']:9s} {'x'.join(map(str, row['shapes'][0])):>14s}  rel. error "
              f"{row['relative_error']:.2e} {'ok' if row['ok'] else 'OFF'}{timing}", flush=True)
    print(f"kernelbench: {len(rows)} problems on {device_name}, {failures} off by more than {args.tolerance:g}; "
          f"{time.strftime('%Y-%m-%d')}")
    if args.json:
        args.json.write_text(json.dumps({"device": device_name, "rows": rows}, indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
