#!/usr/bin/env python3
"""Differential testing of lossjit's values and gradients on random programs (tests/differential/).

    python3 tests/differential/differential.py [--count 2000] [--seed 27] [--only K] [--cli build/lossjit]
    python3 tests/differential/differential.py --device cuda [--count 300] [--log OUT.txt]

On the CPU (the default; ctest's `differential`): each program's value and gradients from lossjit's
float64 CPU reference against the torch oracle of programs.py (torch's values; gradients chained
from torch's local derivatives with lossjit's rules), that oracle against plain torch.autograd
wherever torch's gradient is finite, and against central finite differences where the program is
smooth at the point. A gradient lossjit refuses must be a documented limit (programs.expected_refusal)
and its error must name the input. The first failure is shrunk to a small program and printed with
its inputs and a command that reruns it; the exit status is 1.

With --device cuda: the same generator with larger tensors, each program's value and gradients
from the GPU kernels (through the Python package's torch ops) against the CPU reference, counted
per kernel kind; float64 programs must agree to 1e-8 of the largest magnitude. Programs over
float32 and float16 inputs are compared too; where they differ beyond their dtype's tolerance the
same program over float64 inputs decides whether a kernel is wrong or float32 rounding is.
"""
import argparse
import math
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time
import warnings
import zlib

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import lossjit  # noqa: E402
import axes as A  # noqa: E402
import programs as P  # noqa: E402

DEFAULT_SEED = 27  # the issue that asked for this suite; any seed reproduces its own programs


class Failure(Exception):
    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


# ---- comparing -------------------------------------------------------------------------------------
def compare(actual, expected, rtol, what, noise=None, floor=0.0):
    """Non-finite values must match exactly (nan with nan, +inf with +inf); finite ones within
    rtol of the largest finite magnitude of `expected` (or 1e-9 of their own), or within 1000 times
    `noise`: how much the expected value moves when the inputs move by a few ulps (an ill-conditioned
    value, such as a sum that cancels to 1e-16, is only known that well)."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        raise Failure(f"{what} shape", f"lossjit gives shape {a.shape}, expected {e.shape}")
    for name, test in (("nan", np.isnan), ("+inf", lambda x: x == math.inf), ("-inf", lambda x: x == -math.inf)):
        bad = test(a) != test(e)
        if bad.any():
            i = np.argwhere(bad)[0] if a.ndim else ()
            raise Failure(what, f"{name} where expected is not (or the reverse) at {tuple(i)}: lossjit {a[tuple(i)]!r}, "
                                f"expected {e[tuple(i)]!r}")
    finite = np.isfinite(e)
    if not finite.any():
        return 0.0
    scale = max(float(np.max(np.abs(e[finite]))), floor)
    diff = np.where(finite, np.abs(a - e), 0.0)
    bad = (diff > rtol * scale) & (diff > 1e-9 * np.abs(np.where(finite, e, 0.0)))
    if noise is not None:
        with np.errstate(invalid="ignore"):
            bad &= ~(diff <= 1000 * np.nan_to_num(np.asarray(noise, dtype=np.float64), nan=0.0, posinf=0.0))
    if bad.any():
        i = tuple(np.argwhere(bad)[0]) if a.ndim else ()
        raise Failure(what, f"largest difference {float(np.max(diff)):.3g} relative to the largest magnitude {scale:.3g} "
                            f"({float(np.max(diff)) / max(scale, 1e-300):.3g} > {rtol:g}); at {i}: lossjit {a[i]!r}, "
                            f"expected {e[i]!r}")
    return float(np.max(diff)) / scale if scale > 0 else 0.0


def names_an_input(message, names):
    return any(f"'{n}'" in message for n in names)


# ---- one program on the CPU --------------------------------------------------------------------------
class Stats:
    def __init__(self):
        self.programs = self.values = self.gradients = self.torch_checked = self.fd_checked = 0
        self.results = 0  # programs of several results (each checked)
        self.fragile = 0  # programs that differ only where rounding can flip a jump (not failures)
        self.compiled = 0  # programs whose kernels NVRTC compiled
        self.moved = {}    # programs shown along other dimensions (axes.py), by how
        self.refused = {}
        self.kinds = {}
        self.float32_differences = []

    def refusal(self, reasons):
        for r in reasons:
            self.refused[r] = self.refused.get(r, 0) + 1


def params_for(p):
    """What the caller passes: every parameter the program does not declare, and now and then an
    override of one it does; only those the program reads (lossjit refuses others as misspellings)."""
    reads = re.sub(r"param \w+ = [^;]*;", "", p.text())
    return {k: v for k, v in p.params.items()
            if (k not in p.declared or p.declared[k] != v) and re.search(rf"\b{k}\b", reads)}


def shown(p, arrays):
    """The inputs as lossjit gets them: moved where the program reduces along other dimensions."""
    return arrays if p.axes is None else [p.axes.present(s, a) for s, a in zip(p.inputs, arrays)]


def upstream_for(p, oracle, rng):
    if p.form == "map":
        shape = oracle.map_shape()
        return np.array([rng.choice((1.0, 0.5, -2.0, 3.0)) for _ in range(int(np.prod(shape)) if shape else 1)]).reshape(shape)
    return rng.choice((1.0, 1.0, 0.5, -2.0))


def check_cpu(p, arrays, upstream, stats, fd_rng=None, cli=None):
    """Raises Failure if lossjit's CPU reference and the oracle disagree on this program, unless they
    differ where a computed value lies within rounding of a jump (Oracle.fragile: a comparison of two
    values equal but for an ulp, floor at an integer): there an ulp between two float64
    implementations decides, and the program counts as fragile, not failed."""
    oracle = P.Oracle(p, arrays)
    try:
        refused = compare_cpu(p, arrays, upstream, stats, fd_rng, oracle)
        if cli:
            compile_kernels(p, shown(p, arrays), cli, refused, stats)
    except Failure as f:
        if oracle.fragile and f.kind.startswith(("value", "gradient", "oracle", "finite")):
            stats.fragile += 1
            return
        raise


def compare_cpu(p, arrays, upstream, stats, fd_rng, oracle):
    try:
        loss = lossjit.compile(p.text(), inputs=[i.name for i in p.inputs], params=params_for(p))
    except lossjit.LossjitError as e:
        raise Failure("compile", f"{type(e).__name__}: {e}")
    given = shown(p, arrays)
    try:
        value = loss.reference(*given)
    except lossjit.LossjitError as e:
        raise Failure("value error", f"{type(e).__name__}: {e}")
    nudged = P.Oracle(p, arrays, nudge=True)
    if p.extra:  # several results: each against the oracle
        expected_all = [e.numpy() for e in oracle.evaluate_results()]
        floor = 1e-3 * oracle.value_scale
        for k, (v, e) in enumerate(zip(value, expected_all)):
            try:
                compare(v, e, 1e-6, f"value of result {k}", floor=floor)
            except Failure:
                noise = np.abs(nudged.evaluate_results()[k].numpy() - e)
                compare(v, e, 1e-6, f"value of result {k}", noise=noise, floor=floor)
        if len(value) != len(expected_all):
            raise Failure("value", f"{len(value)} results, the oracle {len(expected_all)}")
        stats.results += 1
        value, expected = value[0], expected_all[0]
        oracle.evaluate()  # its state as for the first result (the gradients are of it)
    else:
        expected = oracle.evaluate().numpy()
        if p.axes is not None and p.form == "map":
            value = p.axes.canonical(np.asarray(value), expected.shape)
        floor = 1e-3 * oracle.value_scale * (float(np.max(np.abs(upstream))) if p.form == "map" else 1.0)
        try:
            compare(value, expected, 1e-6, "value", floor=floor)
        except Failure:
            compare(value, expected, 1e-6, "value", noise=np.abs(nudged.evaluate().numpy() - expected), floor=floor)
    stats.values += 1
    if not p.wrt:
        return
    refusal = P.expected_refusal(p)
    try:
        given_upstream = upstream
        if p.axes is not None and p.form == "map":
            given_upstream = p.axes.present_like_output(np.shape(upstream), upstream)
        grads = loss.reference_grad(*given, wrt=p.wrt, upstream=given_upstream)
        if p.axes is not None:
            grads = [p.axes.canonical(np.asarray(g), p.input(n).shape) for n, g in zip(p.wrt, grads)]
    except (lossjit.UnsupportedError, lossjit.SourceError, lossjit.UsageError) as e:
        message = str(e)
        if not refusal:
            raise Failure("refused", f"{type(e).__name__} for a gradient lossjit documents: {message}")
        if isinstance(e, lossjit.SourceError):
            if "trigamma" not in refusal or "no derivative" not in message:
                raise Failure("refused", f"SourceError: {message}")
        elif not isinstance(e, lossjit.UnsupportedError) or not names_an_input(message, p.wrt):
            raise Failure("refusal message", f"{type(e).__name__} that does not name the input: {message}")
        stats.refusal(refusal)
        return True
    try:
        oracle_grads = oracle.gradients(upstream)
    except P.Refused:
        raise Failure("not refused", "a gradient through trigamma, which has no derivative, was computed")
    nudged_grads = None
    floor = 1e-3 * oracle.term_scale
    for name, g in zip(p.wrt, grads):
        try:
            compare(g, oracle_grads[name].numpy(), 1e-6, f"gradient of '{name}'", floor=floor)
        except Failure:
            nudged_grads = nudged_grads or nudged.gradients(upstream)
            noise = np.abs(nudged_grads[name].numpy() - oracle_grads[name].numpy())
            compare(g, oracle_grads[name].numpy(), 1e-6, f"gradient of '{name}'", noise=noise, floor=floor)
        stats.gradients += 1
    # The oracle against torch itself: where torch's gradient is finite they agree; where it is not,
    # only a `where` may have made the oracle's finite (the side it did not select).
    plain = oracle.torch_gradients(upstream)
    # lossjit passes no gradient at all through where's unselected side and through piecewise-constant
    # functions, where torch multiplies a zero into the local derivatives behind them (0 * inf: nan).
    has_where = any(n.kind == "apply" and (n.fn in ("where", "?:") or P.gradient_kind(n) == "none")
                    for n in P.walk(p.body))
    for name in p.wrt:
        o, t = oracle_grads[name].numpy(), plain[name].numpy()
        both = np.isfinite(o) & np.isfinite(t)
        try:
            compare(np.where(both, o, 0.0), np.where(both, t, 0.0), 1e-6, f"oracle against torch.autograd for '{name}'",
                    floor=floor)
        except Failure:
            nudged_grads = nudged_grads or nudged.gradients(upstream)
            noise = np.where(both, np.abs(nudged_grads[name].numpy() - o), 0.0)
            compare(np.where(both, o, 0.0), np.where(both, t, 0.0), 1e-6, f"oracle against torch.autograd for '{name}'",
                    noise=noise, floor=floor)
        if (np.isfinite(t) & ~np.isfinite(o)).any():
            raise Failure("oracle", f"the oracle's gradient of '{name}' is not finite where torch's is")
        if (~np.isfinite(t) & np.isfinite(o)).any() and not has_where:
            raise Failure("oracle", f"the oracle's gradient of '{name}' is finite where torch's is not, without a where "
                                    f"or a piecewise-constant function")
    stats.torch_checked += 1
    detached = any(n.kind == "apply" and n.fn == "detach" for n in P.walk(p.body))  # 0 by definition, not by slope
    if fd_rng is not None and not oracle.ties and not oracle.fragile and not detached:
        finite_differences(p, oracle, oracle_grads, upstream, fd_rng, stats)


def compile_kernels(p, arrays, cli, refused, stats):
    """NVRTC compiles the program's kernel and, where the reference gave the gradients, its fused
    value-and-gradient kernel, for these inputs' shapes and dtypes (`lossjit compile`, PTX; no GPU).
    An UnsupportedError of the GPU's (a broadcast it does not sum) is fine; a kernel NVRTC refuses,
    or an internal error, is a failure."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [cli, "compile", "--arch", "compute_90", p.text()]
        for spec, a in zip(p.inputs, arrays):
            path = os.path.join(tmp, f"{spec.name}.npy")
            np.save(path, np.array(a, order="C"))
            args += ["-i", f"{spec.name}={path}"]
        for k, v in params_for(p).items():
            args += ["-p", f"{k}={v!r}"]
        # Every other program (by its text) with the row cache asked for: a program that walks its
        # rows twice then keeps what fits of them in shared memory (the launch size does not exist
        # here, but the source is the one any row length gets); the others compile as chosen.
        if zlib.crc32(p.text().encode()) % 2:
            args += ["-k", "row_cache=on"]
        # A cache of its own (`compile` stores what it builds; with the cache off it would refuse, and
        # nothing would be compiled at all).
        env = dict(os.environ, LOSSJIT_CACHE_DIR=os.path.join(tmp, "cache"))
        env.pop("LOSSJIT_CACHE", None)
        runs = [args] + ([args + sum((["--grad", n] for n in p.wrt), [])] if p.wrt and not refused else [])
        for run in runs:
            r = subprocess.run(run, capture_output=True, text=True, env=env)
            text = r.stdout + r.stderr
            # Only the fused gradient kernel may be refused, and only for what the GPU does not do yet
            # (its messages say "the GPU"); the program's own kernel always compiles.
            gpu_refusal = run is not args and r.returncode == 2 and "GPU" in text and "internal error" not in text
            if r.returncode != 0 and not gpu_refusal:
                raise Failure("NVRTC", f"`lossjit compile{' --grad' if run is not args else ''}` failed "
                                       f"(exit {r.returncode}): {text.strip()[-1500:]}")
    stats.compiled += 1


def finite_differences(p, oracle, grads, upstream, rng, stats):
    """Central differences of the oracle's value at a few elements of each input differentiated,
    where the program is smooth there (both one-sided differences and two step sizes agree)."""
    def f(name, index, delta):
        leaves = dict(oracle.leaves)
        x = leaves[name].contiguous().clone()
        x.view(-1)[index] += delta
        leaves[name] = x
        out = oracle.evaluate(leaves)
        if p.form == "map":
            return float((out * torch.as_tensor(upstream, dtype=torch.float64).reshape(out.shape)).sum())
        return float(out) * (float(upstream) if p.form != "map" else 1.0)

    checked = False
    for name in p.wrt:
        g = grads[name].reshape(-1).numpy()
        x = oracle.leaves[name].reshape(-1)
        if not np.isfinite(g).all():
            continue
        for index in rng.sample(range(g.size), min(3, g.size)):
            h = 1e-6 * max(1.0, abs(float(x[index])))
            f0 = f(name, index, 0.0)
            fp, fm, fp2, fm2 = f(name, index, h), f(name, index, -h), f(name, index, h / 2), f(name, index, -h / 2)
            if not all(map(math.isfinite, (f0, fp, fm, fp2, fm2))):
                continue
            central, central2 = (fp - fm) / (2 * h), (fp2 - fm2) / h
            forward, backward = (fp - f0) / h, (f0 - fm) / h
            scale = max(1.0, abs(central), abs(float(g[index])))
            smooth = abs(forward - backward) <= 1e-3 * scale and abs(central - central2) <= 1e-5 * scale
            if not smooth:
                continue
            noise = 1e-15 * max(abs(fp), abs(fm), 1.0) / h  # rounding of the two values
            if abs(central - float(g[index])) > 1e-4 * scale + 10 * noise:
                raise Failure(f"finite differences of '{name}'",
                              f"at element {index}: central difference {central!r}, gradient {float(g[index])!r}")
            checked = True
    if checked:
        stats.fd_checked += 1


# ---- shrinking and reporting --------------------------------------------------------------------------
def shrink(p, arrays, upstream_rng_state, kind, check):
    """Greedily replaces nodes by their arguments or a constant while the program fails the same way."""
    by_name = {i.name: a for i, a in zip(p.inputs, arrays)}
    current, tries = p, 0
    improved = True
    while improved and tries < 600:
        improved = False
        for target, replacement in list(P.replacements(current)):
            tries += 1
            q = P.rebuilt(current, target, replacement)
            if q is None or len(q.text()) >= len(current.text()):
                continue
            q_arrays = [by_name[i.name] for i in q.inputs]
            try:
                check(q, q_arrays, random.Random(upstream_rng_state))
            except Failure as f:
                if f.kind == kind:
                    current, improved = q, True
                    break
            except Exception:  # noqa: BLE001 - a candidate that breaks the harness is not smaller
                continue
    return current, [by_name[i.name] for i in current.inputs]


def report(k, seed, p, arrays, failure, original, device):
    lines = [f"differential: program {k} (seed {seed}) fails: {failure.kind}: {failure.detail}",
             f"  program: {p.text()}",
             f"  inputs:  " + "; ".join(i.describe() for i in p.inputs),
             f"  params:  {params_for(p)}" if p.params else "  params:  none",
             f"  wrt:     {', '.join(p.wrt) or 'none'}"]
    if p.axes is not None:
        lines.append(f"  axes:    {p.axes.describe()} (inputs below as generated, before moving)")
    for spec, a in zip(p.inputs, arrays):
        text = np.array2string(np.asarray(a, dtype=np.float64).reshape(-1)[:24], precision=6, separator=", ")
        lines.append(f"  {spec.name} = {text}{' ...' if np.size(a) > 24 else ''}")
    if original != p.text():
        lines.append(f"  (shrunk from: {original})")
    flag = " --device cuda" if device == "cuda" else ""
    lines.append(f"  rerun:   python3 tests/differential/differential.py --seed {seed} --only {k}{flag}")
    return "\n".join(lines)


def case(seed, k, profile):
    """The k-th program of a seed: its own generator, so that --only K makes it again."""
    rng = random.Random(f"{seed}:{k}")
    p = P.Generator(rng, profile).program()
    if p is None:
        return None
    specials = rng.choices([None, "kinks", "nonfinite"], weights=[45, 45, 10])[0]
    arrays = P.make_inputs(p, rng, specials)
    p.axes = A.choose(p, random.Random(f"{seed}:{k}:axes"))  # its own stream: the programs stay the same
    if p.extra and p.form == "map":
        p.axes = None  # results per row, shown as they are (axes.py moves one output's dimensions)
    if p.axes is not None:
        p.row_dims = p.axes.text()
    return p, arrays, rng


# ---- the language's coverage ----------------------------------------------------------------------
def check_coverage(cli):
    """Every function and operator `lossjit functions` lists is one the generator makes."""
    text = subprocess.run([cli, "functions"], check=True, capture_output=True, text=True).stdout
    names = set()
    section = None
    for line in text.splitlines():
        if not line.startswith("  "):
            section = line
            continue
        words = line.split()
        if section.startswith("operators"):
            spelling = " ".join(words[1:4])
            op = words[2] if words[1] == "x" else words[1].rstrip("x")
            if spelling.startswith("x ? y"):
                op = "?:"
            if words[1] == "-x":
                op = "neg"
            if words[1] == "!x":
                op = "!"
            names.add(op)
        elif section.startswith(("functions", "whole tensor")):
            names.add(words[0].split("(")[0])
        elif section.startswith(("constants", "statements")):
            continue  # the generator writes constants and parameters, not through a table
        else:
            head = words[0]
            names.add(head.split("(")[0] if "(" in head else "take")
    missing = names - P.language_table() - {"take"}
    if missing:
        raise SystemExit(f"differential: the generator does not make {sorted(missing)}, which `lossjit functions` "
                         f"lists: add them to tests/differential/programs.py")
    return len(names)


# ---- the GPU ----------------------------------------------------------------------------------------
def to_device(spec, a):
    """The input on the GPU in the same layout (np.array(order="C") keeps a 0-dim array 0-dim)."""
    if spec.layout == "transposed":
        return torch.from_numpy(np.array(np.swapaxes(a, -1, -2), order="C")).cuda().transpose(-1, -2)
    if spec.layout == "expanded":
        return torch.from_numpy(np.array(a[..., :1], order="C")).cuda().expand(a.shape)
    return torch.from_numpy(np.array(a, order="C")).cuda()


def kernel_kinds(p):
    """Which kernels a program's launches exercise (docs/architecture.md's kinds)."""
    kinds = set()
    rows = p.is_by_rows()
    if rows:
        kinds.add("rows: map" if p.form == "map" else "rows: reduction")
        if p.form == "composite":
            kinds.add("rows: several totals")
        if p.axes is not None:
            kinds.add("rows: along other dimensions")
        if p.wrt and p.form != "map":
            kinds.add("rows: fused value+gradient")
            if p.form == "composite":
                kinds.add("rows: gradient factor program")
        return kinds
    kinds.add("elementwise map" if p.form == "map" else "elementwise reduction")
    if p.wrt:
        kinds.add("map backward" if p.form == "map" else "value+gradient")
        count = int(np.prod(p.broadcast)) if p.broadcast else 1
        for name in p.wrt:
            shape = p.input(name).shape
            if int(np.prod(shape)) == count:
                continue
            if not shape or int(np.prod(shape)) == 1:
                kinds.add("gradient summed over everything")
            elif shape[-1] == 1:
                kinds.add("gradient summed along rows")
            else:
                kinds.add("gradient summed over rows (columns loop)")
    return kinds


def refusal_category(message):
    """A short name for a GPU refusal's message (for the summary's counts)."""
    for words, name in (("for programs that reduce along rows", "broadcast input in a row program"),
                        ("a whole-tensor statistic", "a gradient through a statistic"),
                        ("different sets of rows", "GPU: sums over different rows in one kernel"),
                        ("summed over rows (an input of one row", "GPU: column and row sums in one kernel"),
                        ("and not contiguous", "GPU: the gradient of an expanded view"),
                        ("needs every input contiguous", "GPU: a sum with a strided input")):
        if words in message:
            return name
    return message[:60]


def gpu_tolerance(p, dtype):
    """How far a GPU result may be from the float64 reference: the program's compute type (float64
    where any input is) and the result's own dtype decide."""
    compute64 = any(s.dtype == "float64" for s in p.inputs if s.floating)
    if dtype in (torch.float16, torch.bfloat16):
        return 4e-3
    if compute64:
        return 1e-8 if dtype == torch.float64 else 1e-6
    return 2e-4


def nudged(p, arrays):
    """The inputs with every floating element moved by a few ulps of float64."""
    out = []
    for spec, a in zip(p.inputs, arrays):
        if spec.floating:
            signs = np.random.default_rng(7).choice([-1.0, 1.0], size=np.shape(a))
            a = (np.asarray(a, dtype=np.float64) * (1 + 2.0 ** -50 * signs)).astype(a.dtype)
        out.append(a)
    return out


def check_gpu(p, arrays, stats, rng):
    """The GPU's value and gradients against the CPU reference's. A difference in a float64
    program is excused only where the reference itself moves that much when the inputs move by a few
    ulps, or where a computed value lies within rounding of a jump (the oracle says which)."""
    # Every other program (as compile_kernels picks them) with the row cache asked for: the automatic
    # rules leave the small rows here uncached, so random programs reach it only this way.
    knobs = {"row_cache": True} if zlib.crc32(p.text().encode()) % 2 else None
    loss = lossjit.compile(p.text(), inputs=[i.name for i in p.inputs], params=params_for(p), knobs=knobs)
    tensors = [to_device(spec, a) for spec, a in zip(p.inputs, arrays)]
    if p.axes is not None:
        tensors = [p.axes.present(spec, t) for spec, t in zip(p.inputs, tensors)]
    canonical, arrays = arrays, shown(p, arrays)  # the oracle's inputs, and lossjit's
    seen = {"upstream": None}

    def check(actual, expected, what, again, gradient=False):
        actual = actual.detach()
        rtol = gpu_tolerance(p, actual.dtype)
        a = actual.double().cpu().numpy()
        try:
            compare(a, expected, rtol, what)
        except Failure:
            # As on the CPU: rounding decides near a jump; a result that cancels (to 1e-17 from terms
            # of 1) is known relative to its terms (the oracle's term and value scales); and an
            # ill-conditioned one moves when the inputs move by ulps.
            oracle = P.Oracle(p, canonical)
            if oracle.fragile_after_evaluate():
                stats.fragile += 1
                raise Excused()
            scale = oracle.value_scale
            if gradient:  # (not the text: "the fused value+gradient kernel"'s value is a value)
                try:
                    upstream = seen["upstream"]
                    if p.form == "map" and p.axes is not None:
                        upstream = p.axes.canonical(upstream, oracle.map_shape())
                    oracle.gradients(1.0 if p.form != "map" else upstream)
                    scale = oracle.term_scale
                except P.Refused:
                    pass
            compare(a, expected, rtol, what, noise=np.abs(np.asarray(again(), dtype=np.float64) - expected),
                    floor=1e-3 * scale)

    value = loss.map(*tensors) if p.form == "map" else loss(*tensors)
    torch.cuda.synchronize()
    reference = loss.reference(*arrays)
    if p.extra:  # several results: each against the reference's
        for k in range(len(reference)):
            check(value[k], reference[k], f"GPU value of result {k}", lambda k=k: loss.reference(*nudged(p, arrays))[k])
        stats.results += 1
    else:
        check(value, reference, "GPU value", lambda: loss.reference(*nudged(p, arrays)))
    stats.values += 1
    if not p.wrt:
        return
    try:
        if p.form == "map":
            leaves = [t.detach().clone().requires_grad_() if s.name in p.wrt else t for s, t in zip(p.inputs, tensors)]
            out = loss(*leaves)
            up_host = np.array([rng.choice((1.0, -0.5, 2.0)) for _ in range(out.numel())]).reshape(tuple(out.shape))
            seen["upstream"] = up_host
            grads = torch.autograd.grad(out, [t for s, t in zip(p.inputs, leaves) if s.name in p.wrt],
                                        torch.from_numpy(up_host).to(out))
            by_name = dict(zip([s.name for s in p.inputs if s.name in p.wrt], grads))
            grads = [by_name[n] for n in p.wrt]
            upstream = up_host.astype(np.float32) if out.dtype != torch.float64 else up_host
            expected = loss.reference_grad(*arrays, wrt=p.wrt, upstream=upstream)
            again = lambda: loss.reference_grad(*nudged(p, arrays), wrt=p.wrt, upstream=upstream)  # noqa: E731
        else:
            fused_value, grads = loss.value_and_grad(*tensors, wrt=p.wrt)
            torch.cuda.synchronize()
            for k, (v, want) in enumerate(zip(fused_value, reference) if p.extra else [(fused_value, reference)]):
                check(v, want, f"GPU value {k} of the fused value+gradient kernel",
                      lambda k=k: (lambda r: r[k] if p.extra else r)(loss.reference(*nudged(p, arrays))))
            expected = loss.reference_grad(*arrays, wrt=p.wrt)
            again = lambda: loss.reference_grad(*nudged(p, arrays), wrt=p.wrt)  # noqa: E731
        torch.cuda.synchronize()
    except (lossjit.UnsupportedError, lossjit.SourceError, lossjit.UsageError) as e:
        message = str(e)
        if isinstance(e, lossjit.SourceError) and "no derivative" in message:
            stats.refusal(["trigamma"])
            return
        if not isinstance(e, lossjit.UnsupportedError) or not names_an_input(message, p.wrt):
            raise Failure("refusal message", f"{type(e).__name__} that does not name the input: {message}")
        stats.refusal([refusal_category(message)])
        return
    again_values = None
    for k, (name, g, e) in enumerate(zip(p.wrt, grads, expected)):
        def nudged_k(k=k):
            nonlocal again_values
            again_values = again_values or again()
            return again_values[k]
        check(g, e, f"GPU gradient of '{name}'", nudged_k, gradient=True)
        stats.gradients += 1


class Excused(Exception):
    """A GPU difference where rounding decides (Oracle.fragile): counted, not failed."""


def as_float64_case(p, arrays):
    """The same program over float64 inputs (the float32 twin's arbiter)."""
    q = P.rebuilt(p, None, None)
    q.inputs = [P.InputSpec(s.name, s.shape, "float64" if s.floating else s.dtype, s.role, s.layout) for s in q.inputs]
    # By name: rebuilding drops inputs the program no longer reads (an unused binding's).
    by_name = {s.name: a for s, a in zip(p.inputs, arrays)}
    return q, [np.asarray(by_name[s.name], dtype=np.float64) if s.floating else by_name[s.name] for s in q.inputs]


# ---- main ------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=None, help="programs (CPU default 2000, GPU 600)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--only", type=int, default=None, help="run program K of the seed alone, verbosely")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--cli", default=None, help="the lossjit CLI: checks the generator covers `lossjit functions`")
    ap.add_argument("--log", default=None, help="also write the report here")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds: start no new program after this (the summary says how many ran)")
    ap.add_argument("--compile-every", type=int, default=5,
                    help="CPU: NVRTC-compile the kernels of every Nth program (needs --cli)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # torch's own (var of one element, ...): the comparisons say what matters
    count = args.count if args.count is not None else (2000 if args.device == "cpu" else 600)
    covered = check_coverage(args.cli) if args.cli else None
    profile = P.Profile("cpu" if args.device == "cpu" else "gpu")
    stats = Stats()
    start = time.monotonic()
    failures = []
    indices = [args.only] if args.only is not None else None
    k = -1
    while (indices is None and stats.programs < count) or (indices is not None and indices):
        if args.time_limit is not None and time.monotonic() - start > args.time_limit:
            print(f"differential: the time limit ({args.time_limit:g} s) stops the run after {stats.programs} programs")
            break
        k = indices.pop() if indices is not None else k + 1
        made = case(args.seed, k, profile)
        if made is None:
            continue
        p, arrays, rng = made
        stats.programs += 1
        if p.axes is not None:
            apart = p.axes.split and p.axes.dims[1] > p.axes.dims[0] + 1
            how = ("two dimensions" + (" apart" if apart else "") if p.axes.split else "one dimension") + \
                (", copied" if p.axes.copy else ", a view")
            stats.moved[how] = stats.moved.get(how, 0) + 1
        if args.only is not None:
            print(f"program {k}: {p.text()}\n  inputs: " + "; ".join(i.describe() for i in p.inputs) + f"\n  wrt: {p.wrt}")
        try:
            if args.device == "cpu":
                up = upstream_for(p, P.Oracle(p, arrays), random.Random(f"{args.seed}:{k}:upstream"))
                check_cpu(p, arrays, up, stats, fd_rng=random.Random(k) if k % 3 == 0 else None,
                          cli=args.cli if args.cli and k % args.compile_every == 0 else None)
            else:
                for kind in kernel_kinds(p):
                    stats.kinds[kind] = stats.kinds.get(kind, 0) + 1
                try:
                    check_gpu(p, arrays, stats, rng)
                except Excused:
                    pass
                except Failure as f:
                    float64 = all(s.dtype == "float64" for s in p.inputs if s.floating)
                    if float64:
                        raise
                    q, q_arrays = as_float64_case(p, arrays)
                    try:
                        check_gpu(q, q_arrays, Stats(), random.Random(k))  # raises if a kernel is wrong
                    except Excused:
                        pass
                    stats.float32_differences.append(f"program {k}: {f.kind}: {f.detail} (its float64 twin agrees)")
        except Exception as e:  # noqa: BLE001 - any error is this program's failure, reported with it
            f = e if isinstance(e, Failure) else Failure("harness", f"{type(e).__name__}: {e}")
            original = p.text()
            if args.device == "cpu":
                def again(q, qa, r):
                    check_cpu(q, qa, upstream_for(q, P.Oracle(q, qa), r), Stats(),
                              fd_rng=random.Random(1) if f.kind.startswith("finite") else None,
                              cli=args.cli if f.kind == "NVRTC" else None)
                seed_text = f"{args.seed}:{k}:upstream"
                p, arrays = shrink(p, arrays, seed_text, f.kind, again)
                try:  # the shrunk program's own failure (its numbers, not the original's)
                    again(p, arrays, random.Random(seed_text))
                except Exception as shrunk:  # noqa: BLE001
                    f = shrunk if isinstance(shrunk, Failure) else Failure("harness", f"{type(shrunk).__name__}: {shrunk}")
            failures.append(report(k, args.seed, p, arrays, f, original, args.device))
            print(failures[-1], flush=True)
            if len(failures) >= 5:
                break
    elapsed = time.monotonic() - start
    refused = ", ".join(f"{n} {r}" for r, n in sorted(stats.refused.items(), key=lambda kv: -kv[1])) or "none"
    what = "the torch oracle (float64)" if args.device == "cpu" else "the CPU reference"
    summary = [f"differential ({args.device}): {stats.programs} programs, seed {args.seed}, {elapsed:.1f} s; torch {torch.__version__}",
               f"  checked against {what}: {stats.values} values ({stats.results} of them lists of results), "
               f"{stats.gradients} gradients"
               + (f"; oracle against torch.autograd on {stats.torch_checked} programs, finite differences on "
                  f"{stats.fd_checked}; kernels NVRTC-compiled for {stats.compiled}" if args.device == "cpu" else ""),
               f"  refused as documented: {refused}"]
    if stats.moved:
        summary.append("  reducing along other dimensions (axes.py): "
                       + ", ".join(f"{n} along {how}" for how, n in sorted(stats.moved.items())))
    if stats.fragile:
        summary.append(f"  within rounding of a jump (a comparison of values an ulp apart, floor at an integer), "
                       f"so not counted: {stats.fragile}")
    if covered:
        summary.append(f"  the generator covers all {covered} operators, functions and reductions of `lossjit functions`")
    if stats.kinds:
        summary.append("  kernel kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(stats.kinds.items())))
    if stats.float32_differences:
        summary.append(f"  float32/float16 programs beyond their tolerance whose float64 twin agrees: {len(stats.float32_differences)}")
        summary += ["    " + line for line in stats.float32_differences[:20]]
    summary.append(f"  failures: {len(failures)}")
    text = "\n".join(summary)
    print(text)
    if args.log:
        pathlib.Path(args.log).write_text("\n\n".join(failures + [text]) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
