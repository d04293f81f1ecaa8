#!/usr/bin/env python3
"""Random programs with takes of K indices per row (`x[k]`, k [N, K]) against torch.gather.

Each program reads logits x [N, C] (and now and then t [N, C] and a per-row weight w [N, 1]), an index
k [N, K] whose classes repeat, and q [N, K] > 0. Its parts, nested at random: element expressions
(of x, t and values per row, taken at the K classes: `(x - lse)[k]`), row reductions of the elements
and of values of K per row (sum, logsumexp, amax along the row), values per row built from those
(each usable again inside the next part, so that walks over the K come before, between and after the
walks over the row), bindings of values per row and of K values (read several times), and a
reduction of what is one per row, of K values per row, or of several (a composite), or a map of one
value per row. Functions are smooth where the values fall (q's log and square root, exp of bounded
values, tanh, sin), so torch.autograd in float64 is the oracle for the value and the gradients of x
and q (and w).

CPU (default): lossjit's CPU reference against torch, and every Nth program's kernels NVRTC-compiled
(`lossjit compile`, value and fused gradient; --cli). GPU (--device cuda): the kernels through the
Python package against the same oracle.

    python3 tests/differential/k_takes.py [--count 300] [--seed 45] [--device cuda] [--cli build/lossjit]
"""
import argparse
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import lossjit  # noqa: E402

F64 = torch.float64


class Part:
    """An expression: its text and its torch value from a dict of the inputs; `level` is where its
    values live: 'E' per element [N, C], 'R' per row [N, 1], 'K' K per row [N, K], 'C' a constant."""

    def __init__(self, text, level, fn):
        self.text, self.level, self.fn = text, level, fn


UNARY = [  # smooth wherever the generator keeps the arguments (bounded, or q > 0)
    ("tanh({})", torch.tanh),
    ("sin({})", torch.sin),
    ("exp(tanh({}))", lambda a: torch.exp(torch.tanh(a))),
    ("({} * 0.5)", lambda a: a * 0.5),
]
BINARY = [
    ("({} + {})", lambda a, b: a + b),
    ("({} - {})", lambda a, b: a - b),
    ("({} * {})", lambda a, b: a * b),
]
ROW = [  # along the row (or over the K): lossjit's name, torch's
    ("sum", lambda a: a.sum(-1, keepdim=True)),
    ("logsumexp", lambda a: torch.logsumexp(a, -1, keepdim=True)),
    ("amax", lambda a: a.amax(-1, keepdim=True)),
]


class Generator:
    def __init__(self, rng):
        self.r = rng

    def program(self):
        r = self.r
        self.uses_t = r.random() < 0.3
        self.uses_w = r.random() < 0.3
        self.rows = []  # values per row made so far (usable by what follows)
        self.k_bound = []  # bindings of K values per row (usable as leaves of K expressions)
        self.statements = []  # `name = value;`, in order
        # A few row values first: reductions of elements or of K values, each able to use the earlier;
        # now and then bound to a name (a binding read twice is defined once per walk that reads it).
        for i in range(r.choice((1, 2, 3))):
            row = self.row_value()
            if r.random() < 0.3:
                self.statements.append(f"r{i} = {row.text};")
                row = Part(f"r{i}", "R", row.fn)
            self.rows.append(row)
        if r.random() < 0.3:
            e = self.k_expr(1)
            self.statements.append(f"s0 = {e.text};")
            self.k_bound.append(Part("s0", "K", e.fn))
        text, fn, is_map = self.body()
        return " ".join(self.statements + [text]), fn, is_map

    def body(self):
        r = self.r
        kind = r.choices(["rows", "k total", "composite", "map"], weights=[45, 15, 25, 15])[0]
        if kind == "k total":  # a whole-tensor reduction of the [N, K] values
            e = self.k_expr(2)
            how = r.choice(("mean", "sum", "batchmean"))
            return f"{how}({e.text})", lambda v: _total(how, e.fn(v), v["x"].shape[0]), False
        if kind == "composite":
            a, b = self.per_row(2), self.per_row(2)
            text = f"mean({a.text}) / (1 + sum({b.text}) ^ 2)"
            return text, lambda v: a.fn(v).mean() / (1 + b.fn(v).sum() ** 2), False
        body = self.per_row(2)
        if kind == "map":  # one value per row: [N]
            return body.text, lambda v: body.fn(v).expand(v["x"].shape[0], 1)[:, 0], True
        how = r.choice(("mean", "sum", "batchmean"))
        return f"{how}({body.text})", lambda v: _total(how, body.fn(v), v["x"].shape[0]), False

    # -- parts --
    def leaf(self, level):
        r = self.r
        if level == "E":
            if self.uses_t and r.random() < 0.3:
                return Part("t", "E", lambda v: v["t"])
            return Part("x", "E", lambda v: v["x"])
        if level == "K":
            if self.k_bound and r.random() < 0.4:
                return self.k_bound[0]
            choice = r.choices(["take", "q", "logq"], weights=[50, 30, 20])[0]
            if choice == "q":
                return Part("q", "K", lambda v: v["q"])
            if choice == "logq":
                return Part("log(q)", "K", lambda v: torch.log(v["q"]))
            e = self.e_expr(r.choice((0, 1, 1, 2)))
            text = e.text if e.text in ("x", "t") else f"({e.text})"
            return Part(f"{text}[k]", "K", lambda v, e=e: torch.gather(e.fn(v).expand(v["x"].shape), -1, v["k"]))
        # per row: an earlier row value, w, or a constant
        pool = list(self.rows)
        if self.uses_w:
            pool.append(Part("w", "R", lambda v: v["w"]))
        if pool and r.random() < 0.8:
            return r.choice(pool)
        c = r.choice((0.5, 2.0, -1.5))
        return Part(repr(c), "C", lambda v, c=c: torch.tensor(c, dtype=F64))

    def combine(self, level, depth):
        """An expression of `level` ('E' or 'K'), mixing in values per row."""
        r = self.r
        if depth == 0:
            return self.leaf(level)
        if r.random() < 0.35:
            fmt, fn = r.choice(UNARY)
            a = self.combine(level, depth - 1)
            return Part(fmt.format(a.text), level, lambda v, a=a, fn=fn: fn(a.fn(v)))
        fmt, fn = r.choice(BINARY)
        a = self.combine(level, depth - 1)
        b = self.combine(level, depth - 1) if r.random() < 0.6 else self.leaf("R")
        if r.random() < 0.5:
            a, b = b, a
        return Part(fmt.format(a.text, b.text), level, lambda v, a=a, b=b, fn=fn: fn(a.fn(v), b.fn(v)))

    def e_expr(self, depth):
        return self.combine("E", depth)

    def k_expr(self, depth):
        return self.combine("K", depth)

    def row_value(self):
        """A reduction along the row: of elements, or of K values."""
        r = self.r
        name, fn = r.choice(ROW)
        if r.random() < 0.6:
            e = self.k_expr(r.choice((1, 2)))
        else:
            e = self.e_expr(r.choice((0, 1, 2)))
        part = Part(f"{name}({e.text}, -1)", "R", lambda v, e=e, fn=fn: fn(e.fn(v).expand(_shape_of(e.level, v))))
        if r.random() < 0.3:  # bound it (the next part may exp it)
            part = Part(f"tanh({part.text})", "R", lambda v, p=part: torch.tanh(p.fn(v)))
        return part

    def per_row(self, depth):
        """A value per row: row reductions (new ones too) and the earlier values, combined."""
        r = self.r
        if depth == 0 or r.random() < 0.3:
            return self.row_value() if r.random() < 0.5 or not self.rows else r.choice(self.rows)
        fmt, fn = r.choice(BINARY)
        a, b = self.per_row(depth - 1), self.per_row(depth - 1)
        return Part(fmt.format(a.text, b.text), "R", lambda v, a=a, b=b, fn=fn: fn(a.fn(v), b.fn(v)))


def _shape_of(level, v):
    n, c = v["x"].shape
    return {"E": (n, c), "K": v["k"].shape, "R": (n, 1), "C": (n, 1)}[level]


def _total(how, value, rows):
    if how == "sum":
        return value.sum()
    if how == "mean":
        return value.mean()
    return value.sum() / rows


def inputs(rng, reads):
    n = rng.choice((1, 2, 3, 5, 17))
    c = rng.choice((2, 3, 7, 33, 260, 1030))
    k = rng.choice([v for v in (2, 3, 5, 8, 12) if v != c])
    gen = np.random.default_rng(rng.getrandbits(32))
    arrays = {"x": gen.standard_normal((n, c)), "k": gen.integers(0, c, (n, k)),
              "q": gen.uniform(0.2, 1.0, (n, k))}
    if k > 1 and rng.random() < 0.7:  # a repeated class in a row: its gradients add
        row = rng.randrange(n)
        arrays["k"][row, 1] = arrays["k"][row, 0]
    if "t" in reads:
        arrays["t"] = gen.standard_normal((n, c))
    if "w" in reads:
        arrays["w"] = gen.uniform(0.5, 1.5, (n, 1))
    return arrays


def reads_of(text):
    import re
    names = set(re.findall(r"\b[a-z]\b", text))
    return [name for name in ("x", "k", "q", "t", "w") if name in names]


def oracle(fn, arrays, wrt, upstream):
    tensors = {name: torch.tensor(a, dtype=torch.int64 if name == "k" else F64) for name, a in arrays.items()}
    for name in wrt:
        tensors[name].requires_grad_(True)
    value = fn(tensors)
    # An input a binding reads that the body never uses gets zeros, as lossjit gives it.
    up = None if upstream is None else torch.tensor(upstream)
    grads = torch.autograd.grad(value, [tensors[n] for n in wrt], up, allow_unused=True) if wrt else []
    return value.detach().numpy(), [(torch.zeros_like(tensors[n]) if g is None else g).numpy() for n, g in zip(wrt, grads)]


def close(got, want, tolerance):
    """Within `tolerance` of the largest magnitude, or of 1 where everything is smaller (a gradient
    that cancels to 0 in exact arithmetic, `x[k] - x[k]`, is rounding noise relative to itself)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False, f"shape {got.shape} against {want.shape}"
    largest = float(np.max(np.abs(want))) if want.size else 0.0
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    worst = float(np.max(np.where(same, 0.0, np.abs(got - want)))) if want.size else 0.0
    return worst <= tolerance * max(largest, 1.0), f"largest difference {worst:.3g} of the largest {largest:.3g}"


def compile_kernels(cli, text, arrays, order, wrt):
    with tempfile.TemporaryDirectory() as tmp:
        args = [cli, "compile", "--arch", "compute_90", text]
        for name in order:
            path = os.path.join(tmp, f"{name}.npy")
            np.save(path, arrays[name])
            args += ["-i", f"{name}={path}"]
        env = dict(os.environ, LOSSJIT_CACHE_DIR=os.path.join(tmp, "cache"))
        env.pop("LOSSJIT_CACHE", None)
        for run in [args] + ([args + sum((["--grad", n] for n in wrt), [])] if wrt else []):
            r = subprocess.run(run, capture_output=True, text=True, env=env)
            text_out = r.stdout + r.stderr
            refused = run is not args and r.returncode == 2 and "GPU" in text_out and "internal error" not in text_out
            if r.returncode != 0 and not refused:
                return f"`lossjit compile` failed (exit {r.returncode}): {text_out.strip()[-1200:]}"
    return None


def generate(rng):
    """A program that takes by K indices somewhere (else q would be an input of another shape)."""
    while True:
        text, fn, is_map = Generator(rng).program()
        if "[k]" in text:
            return text, fn, is_map


def check(k, rng, device, cli, program):
    text, fn, is_map = program
    order = reads_of(text)
    arrays = inputs(rng, order)
    wrt = [n for n in order if n != "k"]
    loss = lossjit.compile(text, inputs=order)
    upstream = None
    if is_map:
        upstream = np.random.default_rng(k).standard_normal(arrays["x"].shape[:1])  # one value per row: [N]
    want, want_grads = oracle(fn, arrays, wrt, upstream)
    if is_map:
        want = want.reshape(-1)
    problems = []
    if device == "cpu":
        args = [arrays[n] for n in order]
        got = loss.reference(*args)
        got_grads = loss.reference_grad(*args, wrt=wrt, **({"upstream": upstream} if is_map else {}))
        tolerance = 1e-9
        if cli:
            failure = compile_kernels(cli, text, arrays, order, wrt)
            if failure:
                problems.append(("NVRTC", failure))
    else:
        tensors = [torch.tensor(arrays[n], device=device) for n in order]
        theirs = {n: t for n, t in zip(order, tensors)}
        for n in wrt:
            theirs[n] = theirs[n].clone().requires_grad_(True)
        out = loss(*[theirs[n] for n in order])
        grads = torch.autograd.grad(out, [theirs[n] for n in wrt],
                                    torch.tensor(upstream, device=device) if is_map else None)
        got, got_grads = out.detach().cpu().numpy(), [g.cpu().numpy() for g in grads]
        tolerance = 1e-8
    ok, how = close(np.asarray(got).reshape(-1) if is_map else got, want, tolerance)
    if not ok:
        problems.append(("value", how))
    for name, g, w in zip(wrt, got_grads, want_grads):
        ok, how = close(g, w, tolerance)
        if not ok:
            problems.append((f"grad {name}", how))
    return text, arrays, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", type=int, default=None, help="run program K alone")
    ap.add_argument("--cli", default=None, help="the lossjit CLI: NVRTC-compile every --compile-every'th program's kernels")
    ap.add_argument("--compile-every", type=int, default=5)
    ap.add_argument("--log", default=None, help="append the summary here")
    args = ap.parse_args()
    start, failures = time.time(), 0
    for k in [args.only] if args.only is not None else range(args.count):
        rng = random.Random(args.seed * 100003 + k)
        cli = args.cli if args.device == "cpu" and args.cli and k % args.compile_every == 0 else None
        program = generate(rng)
        try:
            text, arrays, problems = check(k, rng, args.device, cli, program)
        except Exception as e:  # noqa: BLE001 (a crash is a failure of this program)
            text, arrays, problems = program[0], {}, [("exception", f"{type(e).__name__}: {e}")]
        if problems:
            failures += 1
            shapes = ", ".join(f"{n} {list(a.shape)}" for n, a in arrays.items())
            print(f"k_takes: program {k} (seed {args.seed}) fails: {'; '.join(f'{w}: {h}' for w, h in problems)}\n"
                  f"  program: {text}\n  inputs:  {shapes}\n"
                  f"  rerun:   python3 tests/differential/k_takes.py --seed {args.seed} --only {k} --device {args.device}")
    ran = 1 if args.only is not None else args.count
    summary = (f"k_takes ({args.device}): {ran} programs, seed {args.seed}, {time.time() - start:.1f} s; "
               f"failures: {failures}; torch {torch.__version__}")
    print(summary)
    if args.log:
        with open(args.log, "a") as f:
            f.write(summary + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
