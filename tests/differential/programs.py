"""Random lossjit programs, their inputs, and what they should give, for differential testing.

- generate(rng, profile): a random well-typed program over the whole language (every operator and
  function, row reductions, takes with class indices in and out of range, where and masks,
  comparisons, parameters, bindings, several whole-tensor reductions) with inputs of the full
  shape, per row ([N, 1]), per column ([C]), scalars and any other broadcast, strided and
  expanded views, and mixed dtypes.
- Oracle(case): the program translated to torch, in float64. Its values are torch's; its gradients
  are made node by node from torch's own local derivatives (torch.autograd.grad of each operation
  alone), chained by the rules lossjit documents, one of which torch does not have: `where` gives
  the side it did not select no gradient at all (a nan factor of that side stays out). Plain
  torch.autograd over the whole expression is computed too, and must agree wherever it is finite,
  so the oracle is itself checked against torch.
- shrink(case, fails): a smaller program that still fails the same way.

The semantics mirrored (docs/language.md): every input broadcasts to the shape of all inputs S
(indices with a trailing 1); a value computed from inputs of extent 1 along the last dimension,
indices, row reductions and constants alone is one per row; a whole-tensor reduction of a per-row
value runs over the rows of S, of any other value over every element of S.
"""
import math
import random

import numpy as np
import torch
import torch.nn.functional as F

F64 = torch.float64

# ---- the language, one row per operator or function -------------------------------------------------
# name: (arity, torch function over float64 tensors, result type 'f'/'b', domain of the first argument,
# gradient kind). Gradient kinds: 'formula' (torch's local derivative), 'none' (piecewise constant),
# 'where' (the guarded selection), 'refused' (lossjit has no derivative). The domain says how to keep
# a random argument mostly where the function is defined: 'pos' > 0, 'unit' in (-1, 1), 'ge1' >= 1.


def _b(x):
    return x.to(F64)


def _truth(x):
    return x != 0


def _clamp(x, lo, hi):
    # torch.clamp's two conventions, as lossjit's clamp has them: scalar bounds (clamp_backward) and
    # tensor bounds (clamp_backward_min_max); a constant bound is a Python float here.
    if isinstance(lo, float) and isinstance(hi, float):
        return torch.clamp(x, min=lo, max=hi)
    lo = lo if torch.is_tensor(lo) else torch.tensor(lo, dtype=F64)
    hi = hi if torch.is_tensor(hi) else torch.tensor(hi, dtype=F64)
    return torch.clamp(x, min=lo, max=hi)


def _pow(a, b):
    if not torch.is_tensor(a):
        a = torch.tensor(a, dtype=F64)
    return torch.pow(a, b)  # a float exponent is torch's pow(Tensor, Scalar), as a constant is in lossjit


def _trigamma(x):
    # torch.polygamma(1, x) is finite (1e32) at the negative integers; lossjit's is inf at every pole
    # (-inf is none: nan, as torch's).
    pole = (x <= 0) & (x == torch.trunc(x)) & torch.isfinite(x)
    return torch.where(pole, torch.tensor(math.inf, dtype=F64), torch.polygamma(1, x))


class _Digamma(torch.autograd.Function):
    """torch.digamma, whose backward is the trigamma above (torch's own uses polygamma(1, x))."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.digamma(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _trigamma(x)


OPERATORS = {
    "neg": (1, lambda a: -a, "f", None, "formula"),
    "!": (1, lambda a: _b(a == 0), "b", None, "none"),
    "+": (2, torch.add, "f", None, "formula"),
    "-": (2, torch.sub, "f", None, "formula"),
    "*": (2, torch.mul, "f", None, "formula"),
    "/": (2, torch.div, "f", None, "formula"),
    "%": (2, torch.remainder, "f", None, "formula"),
    "^": (2, _pow, "f", "pos", "formula"),
    "<": (2, lambda a, b: _b(a < b), "b", None, "none"),
    "<=": (2, lambda a, b: _b(a <= b), "b", None, "none"),
    ">": (2, lambda a, b: _b(a > b), "b", None, "none"),
    ">=": (2, lambda a, b: _b(a >= b), "b", None, "none"),
    "==": (2, lambda a, b: _b(a == b), "b", None, "none"),
    "!=": (2, lambda a, b: _b(a != b), "b", None, "none"),
    "&&": (2, lambda a, b: _b(_truth(a) & _truth(b)), "b", None, "none"),
    "||": (2, lambda a, b: _b(_truth(a) | _truth(b)), "b", None, "none"),
    "?:": (3, lambda c, a, b: torch.where(_truth(c), a, b), "f", None, "where"),
}

FUNCTIONS = {
    "pow": (2, _pow, "f", "pos", "formula"),
    "where": (3, lambda c, a, b: torch.where(_truth(c), a, b), "f", None, "where"),
    "abs": (1, torch.abs, "f", None, "formula"),
    "sign": (1, torch.sign, "f", None, "none"),
    "sqrt": (1, torch.sqrt, "f", "pos", "formula"),
    "rsqrt": (1, torch.rsqrt, "f", "pos", "formula"),
    "exp": (1, torch.exp, "f", None, "formula"),
    "exp2": (1, torch.exp2, "f", None, "formula"),
    "expm1": (1, torch.expm1, "f", None, "formula"),
    "log": (1, torch.log, "f", "pos", "formula"),
    "log2": (1, torch.log2, "f", "pos", "formula"),
    "log10": (1, torch.log10, "f", "pos", "formula"),
    "log1p": (1, torch.log1p, "f", "pos", "formula"),
    "sin": (1, torch.sin, "f", None, "formula"),
    "cos": (1, torch.cos, "f", None, "formula"),
    "tan": (1, torch.tan, "f", None, "formula"),
    "tanh": (1, torch.tanh, "f", None, "formula"),
    "sigmoid": (1, torch.sigmoid, "f", None, "formula"),
    "softplus": (1, F.softplus, "f", None, "formula"),
    "relu": (1, torch.relu, "f", None, "formula"),
    "erf": (1, torch.erf, "f", None, "formula"),
    "erfc": (1, torch.erfc, "f", None, "formula"),
    "floor": (1, torch.floor, "f", None, "none"),
    "ceil": (1, torch.ceil, "f", None, "none"),
    "round": (1, torch.round, "f", None, "none"),
    "trunc": (1, torch.trunc, "f", None, "none"),
    "min": (2, torch.minimum, "f", None, "formula"),
    "max": (2, torch.maximum, "f", None, "formula"),
    "clamp": (3, _clamp, "f", None, "formula"),
    "isnan": (1, lambda x: _b(torch.isnan(x)), "b", None, "none"),
    "isinf": (1, lambda x: _b(torch.isinf(x)), "b", None, "none"),
    "xlogy": (2, torch.xlogy, "f", None, "formula"),
    "cosh": (1, torch.cosh, "f", None, "formula"),
    "sinh": (1, torch.sinh, "f", None, "formula"),
    "asinh": (1, torch.asinh, "f", None, "formula"),
    "acosh": (1, torch.acosh, "f", "ge1", "formula"),
    "atanh": (1, torch.atanh, "f", "unit", "formula"),
    "asin": (1, torch.asin, "f", "unit", "formula"),
    "acos": (1, torch.acos, "f", "unit", "formula"),
    "atan": (1, torch.atan, "f", None, "formula"),
    "atan2": (2, torch.atan2, "f", None, "formula"),
    "hypot": (2, torch.hypot, "f", None, "formula"),
    "lgamma": (1, torch.lgamma, "f", None, "formula"),
    "digamma": (1, _Digamma.apply, "f", "pos", "formula"),
    "trigamma": (1, _trigamma, "f", "pos", "refused"),
    # torch 1.13 has no derivative for floor_divide at all; it is piecewise constant (0).
    "detach": (1, lambda x: x.detach(), "f", None, "none"),
    "floordiv": (2, lambda a, b: torch.floor_divide(a.detach(), b.detach() if torch.is_tensor(b) else b), "f", None, "none"),
}

ROW_REDUCTIONS = {
    "sum": lambda e: e.sum(-1, keepdim=True),
    "mean": lambda e: e.mean(-1, keepdim=True),
    "amax": lambda e: torch.amax(e, dim=-1, keepdim=True),
    "amin": lambda e: torch.amin(e, dim=-1, keepdim=True),
    "logsumexp": lambda e: torch.logsumexp(e, dim=-1, keepdim=True),
    "var": lambda e: torch.var(e, dim=-1, unbiased=True, keepdim=True),
    "std": lambda e: torch.std(e, dim=-1, unbiased=True, keepdim=True),
    # An index: no gradient (a float tensor without grad_fn).
    "argmax": lambda e: torch.argmax(e, dim=-1, keepdim=True).to(F64),
    "argmin": lambda e: torch.argmin(e, dim=-1, keepdim=True).to(F64),
}
ROW_WITHOUT_GRADIENT = ("argmax", "argmin")
TOTALS = ("sum", "mean", "batchmean")

LITERALS = (0.0, 1.0, 2.0, 0.5, -1.0, 3.0, 0.25, 1.5, -2.0, -0.5, 20.0, 100.0)  # exact in float32
PARAM_VALUES = (0.5, 1.0, 2.0, -1.0, 0.25, 3.0)
CONST_EXPONENTS = (2.0, 3.0, 0.5, -1.0, -2.0, 1.5, 0.0, -0.5, 1.0)


def gradient_kind(node):
    """'none' also for a power by the constant 0: its value is 1 whatever the base, and lossjit passes
    the base no gradient at all (torch passes a zero, which an inf local derivative behind makes nan)."""
    if node.fn in ("^", "pow") and node.args[1].kind == "const" and node.args[1].value == 0.0:
        return "none"
    row = OPERATORS.get(node.fn) or FUNCTIONS.get(node.fn)
    return row[4]


def language_table():
    """Every name and operator the generator covers (checked against `lossjit functions`)."""
    return set(FUNCTIONS) | set(OPERATORS) | set(ROW_REDUCTIONS) | set(TOTALS)


# ---- programs -----------------------------------------------------------------------------------
# Where each function's value or derivative is infinite (of its first argument; a division's and
# xlogy's second).
SINGULAR = {"asin": (1.0, -1.0), "acos": (1.0, -1.0), "atanh": (1.0, -1.0), "acosh": (1.0,), "sqrt": (0.0,),
            "rsqrt": (0.0,), "log": (0.0,), "log2": (0.0,), "log10": (0.0,), "log1p": (-1.0,), "digamma": (0.0,),
            "lgamma": (0.0,), "/": (0.0,), "xlogy": (0.0,), "^": (0.0,), "pow": (0.0,), "tan": (math.pi / 2, -math.pi / 2)}


class Node:
    """One node of a program. kind: input, const, param, apply, row, take, total. `cls` is where its
    values live: 'S' one per element, 'R' one per row, 'K' a constant or parameter, 'T' a
    whole-tensor reduction (a scalar of a composite program)."""
    __slots__ = ("kind", "fn", "args", "value", "name", "binding", "cls", "type", "spelling")

    def __init__(self, kind, fn=None, args=(), value=None, name=None, cls="S", type_="f", spelling=None):
        self.kind, self.fn, self.args, self.value, self.name = kind, fn, list(args), value, name
        self.cls, self.type, self.spelling, self.binding = cls, type_, spelling, None


class InputSpec:
    """An input: its shape, dtype, role ('data', 'index', 'mask', 'int') and memory layout
    ('contiguous', 'transposed', 'expanded': a stride-0 view along the last dimension)."""

    def __init__(self, name, shape, dtype, role, layout="contiguous"):
        self.name, self.shape, self.dtype, self.role, self.layout = name, tuple(shape), dtype, role, layout

    @property
    def floating(self):
        return self.dtype in ("float64", "float32", "float16", "bfloat16")

    def describe(self):
        extra = "" if self.layout == "contiguous" else f", {self.layout}"
        return f"{self.name}: [{', '.join(map(str, self.shape))}] {self.dtype} ({self.role}{extra})"


class Program:
    def __init__(self):
        self.form = None         # 'map', 'reduce' or 'composite'
        self.reduction = None    # 'reduce': sum, mean or batchmean
        self.body = None
        self.bindings = []       # nodes, in order of definition
        self.params = {}         # name -> value used
        self.declared = {}       # name -> the default written in the program (`param k = v;`)
        self.inputs = []         # InputSpec, in call order
        self.shape = ()          # S: the broadcast shape of the inputs (before any index's trailing 1)
        self.wrt = []            # input names to differentiate with respect to
        self.extra = []          # 'composite': further results (`res0, res1, ...`), the body the first
        self.row_dims = "-1"     # how the row reductions' dimensions are written (axes.py moves them)
        self.axes = None         # axes.Axes: how lossjit is shown the inputs (None: as they are)

    # -- printing --
    def text(self):
        lines = [f"param {k} = {_num(v)};" for k, v in self.declared.items()]
        for b in self.bindings:
            lines.append(f"{b.binding} = {_print(b, top=True, dims=self.row_dims)};")
        if self.extra:  # a list of results: each a binding, the body first
            for k, root in enumerate([self.body] + self.extra):
                lines.append(f"res{k} = {_print(root, dims=self.row_dims)};")
            lines.append(", ".join(f"res{k}" for k in range(len(self.extra) + 1)))
        elif self.form == "reduce":
            lines.append(f"{self.reduction}({_print(self.body, dims=self.row_dims)})")
        else:
            lines.append(_print(self.body, dims=self.row_dims))
        return " ".join(lines)

    def input(self, name):
        return next(i for i in self.inputs if i.name == name)

    def nodes(self):
        """Every node of the body and the bindings (an unused binding still counts: lossjit
        evaluates every binding)."""
        out, seen = [], set()
        for root in self.bindings + [self.body] + self.extra:
            for n in walk(root):
                if id(n) not in seen:
                    seen.add(id(n))
                    out.append(n)
        return out

    def is_by_rows(self):
        """Whether lossjit walks the program (not its statistics) by rows: a composite program; one
        with a row reduction or take outside its statistics; one with an index anywhere (a statistic's
        index keeps the rows' shape in the program too); one with a binding of a whole-tensor number
        that no value uses (its reduction stays in the program)."""
        if self.form == "composite" or any(n.kind == "take" for n in self.nodes()):
            return True
        roots = self.statistic_roots()
        if any(b.cls == "T" and b not in roots for b in self.bindings):
            return True
        return any(n.kind == "row" for n in self.outside_statistics())

    def outside_statistics(self):
        """The nodes of the body and of the bindings lossjit keeps, not those only statistics read
        (a value of class T, a whole-tensor statistic, is computed apart: ir/statistics.cpp)."""
        out, seen = [], set()

        def visit(n):
            if id(n) in seen or n.cls == "T":
                return
            seen.add(id(n))
            for a in n.args:
                visit(a)
            out.append(n)

        for root in self.bindings + [self.body] + self.extra:
            visit(root)
        return out

    def statistics(self):
        """The whole-tensor reductions used per element, per row or reduced again: lossjit's
        statistics (each a pass of its own, no gradient through it)."""
        found = []
        for root in self.statistic_roots():
            found.extend(t for t in walk(root) if t.kind == "total" and t not in found)
        return found

    def statistic_roots(self):
        """The values of class T used where data is (ir/statistics.cpp: each one number computed
        first, which a kernel reads in its own type)."""
        found, seen = [], set()

        def visit(n, inside_data):
            if (id(n), inside_data) in seen:
                return
            seen.add((id(n), inside_data))
            if n.cls == "T" and inside_data:  # a number used where data is
                if n not in found:
                    found.append(n)
                for t in walk(n):  # its reductions' arguments are data again
                    if t.kind == "total":
                        visit(t.args[0], True)
                return
            # A number of class T among numbers stays in its user's value (a composite body); a
            # reduction's argument is data.
            data = n.kind != "apply" or n.cls != "T"
            for a in n.args:
                visit(a, data)

        for root in self.bindings + [self.body] + self.extra:
            visit(root, self.form == "reduce" and root is self.body)
        return found


def _num(v):
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return repr(float(v))


def _print(n, top=False, dims="-1"):
    if n.binding is not None and not top:
        return n.binding
    if n.kind == "input":
        return n.name
    if n.kind == "const":
        return _num(n.value) if n.value >= 0 else f"({_num(n.value)})"
    if n.kind == "param":
        return n.name
    if n.kind == "row":
        return f"{n.fn}({_print(n.args[0], dims=dims)}, {dims})"
    if n.kind == "take":
        inner = n.args[0]
        text = _print(inner, dims=dims)
        if not (inner.kind == "input" or inner.binding is not None):
            text = f"({text})"
        return f"{text}[{n.name}]"
    if n.kind == "total":
        return f"{n.fn}({_print(n.args[0], dims=dims)})"
    args = [_print(a, dims=dims) for a in n.args]
    if n.fn in OPERATORS:
        if n.fn == "neg":
            return f"(-{args[0]})"
        if n.fn == "!":
            return f"(!{args[0]})"
        if n.fn == "?:":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        return f"({args[0]} {n.fn} {args[1]})"
    if n.spelling == "variadic":  # min(a, b, c): lossjit folds it as min(min(a, b), c)
        inner = n.args[0]
        return f"{n.fn}({_print(inner.args[0], dims=dims)}, {_print(inner.args[1], dims=dims)}, {args[1]})"
    return f"{n.fn}({', '.join(args)})"


def walk(root, program=None):
    """Every node reachable from root, arguments before users, each once."""
    seen, order = set(), []

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for a in n.args:
            visit(a)
        order.append(n)

    visit(root)
    return order


# ---- generation ---------------------------------------------------------------------------------
class Profile:
    """Sizes: 'cpu' keeps tensors small (thousands of programs a minute); 'gpu' makes them large
    enough for several blocks, tiles and column strips."""

    def __init__(self, name):
        self.name = name
        # The GPU's kernels differ more between elementwise programs (the loops and the sums of
        # broadcast gradients) than the CPU reference does: it gets more of them.
        self.forms = (22, 50, 28) if name == "cpu" else (25, 55, 20)
        self.rows = 0.55 if name == "cpu" else 0.35
        self.statistics = 3  # the weight of a whole-tensor statistic among an expression's kinds
        self.input_classes = (50, 15, 12, 8, 15) if name == "cpu" else (38, 22, 22, 8, 10)
        if name == "cpu":
            self.extents = (1, 2, 3, 4, 5)
            self.row_lengths = (1, 2, 3, 5, 7, 8)
            self.large = 0.04  # now and then a tensor of thousands of elements (the reference's chunks)
        else:
            self.extents = (1, 2, 3, 7, 33, 130)
            self.row_lengths = (1, 3, 8, 33, 260, 1024, 4099)
            self.large = 0.25


class Generator:
    def __init__(self, rng, profile):
        self.rng, self.profile = rng, profile

    def program(self):
        r = self.rng
        p = Program()
        self.p = p
        form = r.choices(["map", "reduce", "composite"], weights=self.profile.forms)[0]
        self.rows = form == "composite" or r.random() < self.profile.rows   # row reductions and takes allowed
        p.form = form
        p.shape = self.shape()
        self.index_names, self.data = [], []
        self.names = iter([c for c in "abcdefghjkmnopqrsuvz"] + [f"x{k}" for k in range(100)])
        if self.rows and p.shape and r.random() < 0.6:
            for _ in range(r.choice((1, 1, 2))):
                self.new_index()
        self.param_names = []
        for k in range(r.choice((0, 0, 1, 2))):
            name = f"k{k}"
            value = r.choice(PARAM_VALUES)
            self.param_names.append(name)
            p.params[name] = value
            if r.random() < 0.7:
                p.declared[name] = value if r.random() < 0.7 else r.choice(PARAM_VALUES)
        self.budget = r.choice((4, 6, 8, 12, 16))
        for b in range(r.choice((0, 0, 1, 2))):
            node = self.expr(r.choice((1, 2, 3)))
            if node.kind in ("input", "const", "param") or node.binding is not None:
                continue
            node.binding = f"b{b}"
            p.bindings.append(node)
        if form == "composite":
            p.body = self.composite()
            if r.random() < 0.3:  # several results, from one pass: gradients of the first
                p.extra = [self.composite() for _ in range(r.choice((1, 1, 2)))]
                # At most 8 whole-tensor reductions in a kernel (one printed twice counts twice there).
                def printed_totals(n):
                    return (n.kind == "total") + sum(printed_totals(a) for a in n.args if a.binding is None)
                while p.extra and sum(printed_totals(root) for root in [p.body] + p.extra) > 8:
                    p.extra.pop()
        else:
            body = self.expr(r.choice((2, 3, 4)))
            if self.rows and not any(n.kind in ("row", "take") for n in walk(body)):
                body = self.combine(body, self.row_value(2))
            if body.cls == "T":  # one number: the program would be a reduction (or composite)
                body = self.combine(body, self.input_leaf())
            p.body = body
            if form == "map" and self.per_row_by_rule(body) and r.random() < 0.4:
                # Several results of one value per row (an output [R, rows...]); no gradient yet.
                p.extra = [self.row_value(2) for _ in range(r.choice((1, 2)))]
            if form == "reduce":
                p.reduction = r.choice(TOTALS) if p.shape else r.choice(("sum", "mean"))
        self.ensure_takes()
        # Only the inputs the program reads are declared (one never read would still broadcast).
        used = {n.name for n in p.nodes() if n.kind in ("input", "take")}
        p.inputs = [i for i in self.data if i.name in used]
        r.shuffle(p.inputs)
        if not p.inputs:
            return None
        p.broadcast = broadcast_shape(p)
        settle(p)
        floating = [i.name for i in p.inputs if i.floating and i.role == "data"]
        # Mostly gradients the GPU computes too, now and then one only the CPU reference computes
        # (a broadcast input of a program that reduces along rows: the GPU refuses it): the refusal
        # is checked too. A Composite program's inputs mostly reach one of its reductions, now and
        # then several (a factor each, from one kernel).
        if p.is_by_rows() and r.random() < 0.8:
            count = int(np.prod(p.broadcast)) if p.broadcast else 1
            full = [n for n in floating if int(np.prod(p.input(n).shape)) == count]
            floating = full or floating
        if p.form == "composite" and r.random() < 0.7:
            reached = {}
            for t in totals_reached(p.body):
                for n in walk(t):
                    if n.kind == "input":
                        reached.setdefault(n.name, set()).add(_print(t))
            alone = [n for n in floating if len(reached.get(n, ())) == 1]
            if alone:
                text = next(iter(reached[r.choice(alone)]))
                floating = [n for n in alone if reached[n] == {text}]
        if floating and not (p.form == "map" and p.extra):
            k = r.choice(range(1, len(floating) + 1))
            p.wrt = r.sample(floating, k)
        return p

    def shape(self):
        r = self.rng
        rank = r.choices([0, 1, 2, 3], weights=[6, 14, 60, 20])[0]
        if rank == 0:
            return ()
        large = r.random() < self.profile.large
        extents = self.profile.extents
        c = r.choice(self.profile.row_lengths)
        outer = [r.choice(extents) for _ in range(rank - 1)]
        if large and self.profile.name == "cpu":
            c = r.choice((700, 2100, 64))
            outer = [r.choice((3, 40)) for _ in range(rank - 1)]
        return tuple(outer) + (c,)

    # -- inputs --
    def new_index(self):
        r = self.rng
        name = f"y{len(self.index_names)}"
        rows = self.p.shape[:-1]
        dtype = r.choice(("int64", "int64", "int32", "uint8"))
        spec = InputSpec(name, rows, dtype, "index")
        self.index_names.append(name)
        self.data.append(spec)
        return spec

    def new_input(self, cls=None):
        r = self.rng
        S = self.p.shape
        role = r.choices(["data", "int", "mask"], weights=[88, 6, 6])[0]
        shape = list(S)
        if cls is None:
            cls = r.choices(["full", "row", "col", "scalar", "any"], weights=self.profile.input_classes)[0]
        if not S:
            cls = "full"
        if cls == "row":
            shape = shape[:-1] + [1]
            if len(shape) > 1 and r.random() < 0.3:
                shape = shape[1:]
        elif cls == "col":
            shape = [S[-1]] if r.random() < 0.7 else [1, S[-1]]
        elif cls == "scalar":
            shape = [] if r.random() < 0.6 else [1]
        elif cls == "any":
            shape = [d if r.random() < 0.6 else 1 for d in shape]
            drop = r.choice(range(len(shape) + 1))
            shape = shape[drop:] if r.random() < 0.3 else shape
        if role == "data":
            dtype = r.choices(["float64", "float32", "float16"], weights=[70, 22, 8])[0]
        elif role == "int":
            dtype = r.choice(("int32", "int64"))
        else:
            dtype = r.choice(("bool", "uint8"))
        layout = "contiguous"
        if len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1 and r.random() < 0.15:
            layout = "transposed"
        elif len(shape) >= 1 and shape[-1] > 1 and r.random() < 0.08:
            layout = "expanded"
        spec = InputSpec(next(self.names), shape, dtype, role, layout)
        self.data.append(spec)
        return spec

    def input_leaf(self):
        r = self.rng
        pool = [i for i in self.data if i.role != "index"]
        if not pool or r.random() < 0.3:
            spec = self.new_input()
        else:
            spec = r.choice(pool)
        return Node("input", name=spec.name, cls=input_class(spec), type_="b" if spec.role == "mask" else "f")

    def leaf(self):
        r = self.rng
        choice = r.choices(["input", "const", "param", "binding", "index"], weights=[60, 16, 8, 10, 6])[0]
        if choice == "const":
            return Node("const", value=r.choice(LITERALS), cls="K")
        if choice == "param" and self.param_names:
            return Node("param", name=r.choice(self.param_names), cls="K")
        if choice == "binding" and self.p.bindings:
            return r.choice(self.p.bindings)
        if choice == "index" and self.index_names:
            return Node("input", name=r.choice(self.index_names), cls="R")
        return self.input_leaf()

    # -- expressions --
    def expr(self, depth):
        r = self.rng
        self.budget -= 1
        if depth <= 0 or self.budget <= 0 or r.random() < 0.15:
            return self.leaf()
        kinds = ["unary", "binary", "where", "minmax", "clamp", "statistic"]
        weights = [34, 34, 10, 6, 4, self.profile.statistics]
        if self.rows:
            kinds += ["row", "take"]
            weights += [10, 6 if self.index_names else 0]
        kind = r.choices(kinds, weights=weights)[0]
        if kind == "statistic":  # a whole-tensor reduction inside an expression (ir/statistics.cpp)
            return self.total()
        if kind == "row":
            return self.row_value(depth)
        if kind == "take":
            return self.take(depth)
        if kind == "where":
            c = self.condition(depth - 1)
            return self.apply("where" if r.random() < 0.5 else "?:", [c, self.expr(depth - 1), self.expr(depth - 1)])
        if kind == "minmax":
            fn = r.choice(("min", "max"))
            node = self.apply(fn, [self.expr(depth - 1), self.expr(depth - 1)])
            if r.random() < 0.3:  # three arguments: folded as fn(fn(a, b), c)
                node = self.apply(fn, [node, self.expr(depth - 1)])
                node.spelling = "variadic"
            return node
        if kind == "clamp":
            lo, hi = sorted((r.choice(LITERALS), r.choice(LITERALS)))
            if r.random() < 0.15:
                lo, hi = hi, lo  # hi wins
            bound = lambda v: self.expr(depth - 2) if r.random() < 0.3 else Node("const", value=v, cls="K")
            return self.apply("clamp", [self.expr(depth - 1), bound(lo), bound(hi)])
        if kind == "unary":
            fn = r.choice([f for f, row in FUNCTIONS.items() if row[0] == 1] + ["neg", "!"])
            if fn == "trigamma" and r.random() < 0.7:
                fn = "digamma"
            arg = self.in_domain(FUNCTIONS.get(fn, OPERATORS.get(fn))[3], self.expr(depth - 1))
            return self.apply(fn, [arg])
        fn = r.choice([f for f, row in FUNCTIONS.items() if row[0] == 2 and f not in ("min", "max")]
                      + ["+", "-", "*", "/", "%", "^", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "+", "*", "-"])
        if fn in ("^", "pow"):
            base = self.in_domain("pos" if r.random() < 0.6 else None, self.expr(depth - 1))
            if r.random() < 0.6:
                return self.apply(fn, [base, Node("const", value=r.choice(CONST_EXPONENTS), cls="K")])
            return self.apply(fn, [base, self.expr(depth - 1)])
        if fn == "xlogy":
            return self.apply(fn, [self.expr(depth - 1), self.in_domain("pos" if r.random() < 0.6 else None, self.expr(depth - 1))])
        return self.apply(fn, [self.expr(depth - 1), self.expr(depth - 1)])

    def condition(self, depth):
        r = self.rng
        if self.index_names and r.random() < 0.25:  # an ignore_index mask
            y = Node("input", name=r.choice(self.index_names), cls="R")
            return self.apply(r.choice(("!=", ">=")), [y, Node("const", value=r.choice((0.0, 1.0, -1.0)), cls="K")])
        if r.random() < 0.6:
            return self.apply(r.choice(("<", "<=", ">", ">=", "==", "!=")), [self.expr(depth), self.expr(depth - 1)])
        return self.expr(depth)

    def in_domain(self, domain, node):
        r = self.rng
        if domain is None or r.random() < 0.3:
            return node
        if domain == "pos":
            return r.choice([
                lambda: self.apply("+", [self.apply("abs", [node]), Node("const", value=0.5, cls="K")]),
                lambda: self.apply("exp", [node]),
                lambda: self.apply("sigmoid", [node]),
                lambda: self.apply("+", [self.apply("*", [node, node]), Node("const", value=0.25, cls="K")]),
            ])()
        if domain == "unit":
            return self.apply(r.choice(("tanh", "erf")), [node])
        if domain == "ge1":
            return self.apply("+", [self.apply("abs", [node]), Node("const", value=1.5, cls="K")])
        return node

    def per_row_by_rule(self, node):
        """One value per row by lossjit's rule for a list of results, which knows no layout: row
        reductions, takes, indices, and what is computed from those with constants (an input of
        extent 1 along the row is per row only in a layout), at least one of them."""
        def visit(n):
            if n.kind in ("row", "take"):
                return True, True
            if n.kind == "input":
                spec = next((i for i in self.data if i.name == n.name), None)
                index = spec is not None and spec.role == "index"
                return index, index
            if n.kind in ("const", "param"):
                return True, False
            if n.kind == "total":
                return False, False
            ok, rowish = True, False
            for a in n.args:
                a_ok, a_row = visit(a)
                ok, rowish = ok and a_ok, rowish or a_row
            return ok, rowish
        ok, rowish = visit(node)
        return ok and rowish

    def row_value(self, depth):
        fn = self.rng.choice(list(ROW_REDUCTIONS))
        arg = self.expr(depth - 1)
        if arg.kind in ("const", "param"):
            arg = self.input_leaf()
        return Node("row", fn=fn, args=[arg], cls="R")

    def take(self, depth):
        y = self.rng.choice(self.index_names)
        arg = self.expr(depth - 1) if self.rng.random() < 0.6 else self.input_leaf()
        if arg.cls != "S":  # a take of a value constant along the row is refused (it ignores y)
            arg = self.full_leaf()
        return Node("take", args=[arg], name=y, cls="R")

    def full_leaf(self):
        """An input of the full shape: one value per element."""
        spec = self.new_input("full")
        return Node("input", name=spec.name, cls=input_class(spec), type_="b" if spec.role == "mask" else "f")

    def ensure_takes(self):
        """An index is an index because a take uses it; one only read as a value gets a take."""
        p = self.p
        taken = {n.name for n in p.nodes() if n.kind == "take"}
        read = {n.name for n in p.nodes() if n.kind == "input"}
        for y in self.index_names:
            if y in read and y not in taken:
                self.add_take(y)
        # The program's rank is its inputs' (an index of the rows' shape [.., R] or of K per row
        # [.., K] looks the same): where only an index has S's rank, lossjit reads the index's last
        # extent as K indices per row (refused where K is the row's length), not as the rows' S[:-1].
        # A take of an input of the full shape gives the program S's rank.
        ranks = [len(spec.shape) for spec in self.data
                 if spec.role != "index" and any(n.kind == "input" and n.name == spec.name for n in p.nodes())]
        if self.index_names and max(ranks, default=0) < len(p.shape):
            self.add_take(self.rng.choice(self.index_names))

    def add_take(self, y):
        """y[...] of a new input of the full shape, added into the body (into one of its
        reductions in a Composite program)."""
        p = self.p
        take = Node("take", args=[self.full_leaf()], name=y, cls="R")
        if p.form == "composite":
            total = self.rng.choice(totals_reached(p.body))
            total.args[0] = self.combine(total.args[0], take)
        else:
            p.body = self.combine(p.body, take)

    def combine(self, a, b):
        return self.apply(self.rng.choice(("+", "*", "-")), [a, b])

    def apply(self, fn, args):
        """An operator or function of these arguments; one that would be all constants gets an input
        instead (the checker would fold it)."""
        if all(a.kind in ("const", "param") for a in args):
            args = list(args)
            args[self.rng.randrange(len(args))] = self.input_leaf()
        row = OPERATORS.get(fn) or FUNCTIONS.get(fn)
        classes = {a.cls for a in args}
        return Node("apply", fn=fn, args=args, cls=combined_class(classes), type_=row[2])

    # -- composite programs: arithmetic over whole-tensor reductions --
    def composite(self):
        r = self.rng
        totals = [self.total() for _ in range(r.choice((1, 2, 2, 3)))]
        node = totals[0]
        for t in totals[1:]:
            node = Node("apply", fn=r.choice(("+", "-", "*", "/")), args=[node, t], cls="T")
        if r.random() < 0.3:
            node = Node("apply", fn="*", args=[Node("const", value=r.choice((0.5, 2.0, -1.0)), cls="K"), node], cls="T")
        if r.random() < 0.15:
            node = Node("apply", fn=r.choice(("sqrt", "log", "exp", "abs")), args=[node], cls="T")
        if r.random() < 0.1:
            cond = Node("apply", fn=">", args=[totals[-1], Node("const", value=0.0, cls="K")], cls="T", type_="b")
            node = Node("apply", fn="where", args=[cond, node, totals[0]], cls="T")
        return node

    def total(self):
        r = self.rng
        fn = r.choice(TOTALS) if self.p.shape else r.choice(("sum", "mean"))
        arg = self.expr(r.choice((1, 2, 3)))
        if r.random() < 0.3 and self.index_names:  # the weighted ignore_index pattern's denominator
            y = r.choice(self.index_names)
            arg = self.apply("where", [self.apply("!=", [Node("input", name=y, cls="R"), Node("const", value=-1.0, cls="K")]),
                                       arg, Node("const", value=0.0, cls="K")])
        return Node("total", fn=fn, args=[arg], cls="T")


def combined_class(classes):
    """The class of a value computed from values of these classes: per element if any is, else per
    row, else a whole-tensor number, else (constants alone) per row."""
    return "S" if "S" in classes else "R" if "R" in classes else "T" if "T" in classes else "R"


def settle(p):
    """What the text means: a composite body that is one reduction is a plain reduction (the same
    text), and batchmean needs a dimension 0 (sum instead over scalars)."""
    if p.form == "composite" and p.body.kind == "total" and not p.extra:
        p.form, p.reduction, p.body = "reduce", p.body.fn, p.body.args[0]
    if not p.broadcast:
        if p.reduction == "batchmean":
            p.reduction = "sum"
        for t in p.nodes():
            if t.kind == "total" and t.fn == "batchmean":
                t.fn = "sum"


def input_class(spec):
    if spec.role == "index":
        return "R"
    return "R" if (not spec.shape or spec.shape[-1] == 1) else "S"


def broadcast_shape(p):
    """S: the broadcast of every input (an index with a trailing 1), as lossjit's layout has it."""
    shapes = [list(i.shape) + ([1] if i.role == "index" else []) for i in p.inputs]
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for d, e in enumerate(s):
            k = rank - len(s) + d
            if e != 1:
                out[k] = e
    return tuple(out)


# ---- data --------------------------------------------------------------------------------------
NUMPY_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "int32": np.int32,
                "int64": np.int64, "uint8": np.uint8, "bool": np.bool_}


def make_inputs(p, rng, specials):
    """NumPy arrays, one per input in call order, in their dtypes and layouts. `specials`: put exact
    zeros, ones and ties in (kinks), and now and then an inf or nan."""
    arrays = []
    for spec in p.inputs:
        shape = spec.shape
        n = int(np.prod(shape)) if shape else 1
        if spec.role == "index":
            c = p.broadcast[-1] if p.broadcast else 1
            choices = list(range(c)) * 4 + [-1, c, -100]
            if spec.dtype == "uint8":
                choices = [v for v in choices if 0 <= v < 256] + [c + 1]
            values = np.array([rng.choice(choices) for _ in range(n)], dtype=np.float64)
        elif spec.role == "mask":
            values = np.array([rng.random() < 0.6 for _ in range(n)], dtype=np.float64)
        elif spec.role == "int":
            values = np.array([rng.randint(-3, 3) for _ in range(n)], dtype=np.float64)
        else:
            scale = rng.choice((0.5, 1.0, 2.0, 3.0))
            values = np.array([rng.gauss(0.0, scale) for _ in range(n)], dtype=np.float64)
            if specials:
                for i in range(n):
                    u = rng.random()
                    if u < 0.04:
                        values[i] = rng.choice((0.0, 1.0, -1.0, 0.5, 2.0))
                    elif u < 0.05 and specials == "nonfinite":
                        values[i] = rng.choice((math.inf, -math.inf, math.nan))
        values = values.reshape(shape)
        a = values.astype(NUMPY_DTYPES[spec.dtype])
        if spec.layout == "transposed":
            a = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
        elif spec.layout == "expanded":
            base = np.ascontiguousarray(a[..., :1])
            a = np.broadcast_to(base, shape)
        arrays.append(a)
    return arrays


def as_float64(a):
    return torch.from_numpy(np.array(a, dtype=np.float64))


# ---- the oracle ----------------------------------------------------------------------------------
class Oracle:
    """What lossjit should give for one program on one set of inputs: values from torch, gradients
    from torch's local derivatives chained by lossjit's rules (module docstring)."""

    def __init__(self, p, arrays, nudge=False):
        """`nudge`: every floating input moved by a few ulps (the noise floor of ill-conditioned results)."""
        self.p = p
        self.fragile = self.ties = False  # until evaluate(): a program lossjit refuses is never evaluated
        self.S = tuple(p.broadcast) if p.broadcast else (1,)
        self.R = self.S[:-1] + (1,)
        self.by_rows = p.is_by_rows()
        # The noise floor (nudge) also rounds each statistic to float32, as a float32 kernel reads it.
        self.rounded = {id(n) for n in p.statistic_roots()} if nudge else set()
        self.leaves = {}
        for spec, a in zip(p.inputs, arrays):
            if spec.role == "index":
                self.leaves[spec.name] = torch.from_numpy(np.array(a, dtype=np.int64))
            else:
                self.leaves[spec.name] = as_float64(a)
                if nudge and spec.floating:
                    signs = torch.from_numpy(np.random.default_rng(7).choice([-1.0, 1.0], size=a.shape))
                    self.leaves[spec.name] = self.leaves[spec.name] * (1 + 2.0 ** -50 * signs)

    # -- forward --
    def canonical(self, node):
        return self.S if node.cls == "S" else self.R

    def input_value(self, name, leaf):
        spec = self.p.input(name)
        if spec.role == "index":
            return leaf.to(F64).reshape(self.R)
        return leaf.reshape(spec.shape).expand(self.S if input_class(spec) == "S" else self.R)

    def apply_fn(self, node, args):
        row = OPERATORS.get(node.fn) or FUNCTIONS.get(node.fn)
        if node.fn in ("^", "pow") and node.args[1].kind in ("const", "param"):
            args = [args[0], float(args[1])]
        if node.fn == "clamp":
            args = [args[0]] + [float(a) if b.kind in ("const", "param") else a for a, b in zip(args[1:], node.args[1:])]
        return row[1](*args)

    def total_of(self, fn, value, cls):
        shape = self.R if cls != "S" else self.S
        full = value.expand(shape)
        s = full.sum()
        if fn == "sum":
            return s
        if fn == "mean":
            return s / (int(np.prod(shape)))
        if not self.p.broadcast:
            raise ValueError("batchmean of scalars")
        return s / self.p.broadcast[0]

    def evaluate(self, leaves=None, keep=None):
        """The program's value (a 0-dim tensor, or a map's output); `leaves` overrides the inputs
        (plain autograd, finite differences); `keep` collects every node's value."""
        leaves = leaves or self.leaves
        if leaves is self.leaves:
            self.fragile = self.ties = False
        values = {} if keep is None else keep
        self.value_scale = 0.0  # the largest value any node took: what a value that cancels is relative to
        for n in walk(self.p.body):
            if n.kind == "input":
                v = self.input_value(n.name, leaves[n.name])
            elif n.kind in ("const", "param"):
                v = torch.tensor(n.value if n.kind == "const" else self.p.params[n.name], dtype=F64)
            elif n.kind == "apply":
                args = []
                for a in n.args:
                    x = values[id(a)]
                    if n.cls == "S" and a.cls == "R":
                        x = x.expand(self.S)
                    args.append(x)
                v = self.apply_fn(n, args)
            elif n.kind == "row":
                x = values[id(n.args[0])].expand(self.S)
                v = ROW_REDUCTIONS[n.fn](x)
                if n.fn in ("std", "var") and leaves is self.leaves and self.constant_row(x):
                    # lossjit's var of a row of equal values is exactly 0, with no gradient (std's
                    # 0/0 masked); torch's is exactly 0 over an expanded row but may be 1e-33 over a
                    # contiguous copy (its vectorised Welford), and std's derivative then is not 0.
                    self.fragile = True
                if n.fn in ("amax", "amin") and leaves is self.leaves and n.args[0].kind != "input" \
                        and self.near_tie(x, v):
                    # A tie of computed values: the gradient is shared among the tied elements, and
                    # an ulp (torch's vectorised sinh against its scalar tail) decides which tie.
                    self.fragile = self.ties = True
            elif n.kind == "take":
                v = self.take(values[id(n.args[0])].expand(self.S), leaves[n.name])
            elif n.kind == "total":
                v = self.total_of(n.fn, values[id(n.args[0])], n.args[0].cls)
            if id(n) in self.rounded:
                v = v.to(torch.float32).to(F64)
            values[id(n)] = v
            finite = v.detach()[torch.isfinite(v.detach())]
            if finite.numel():
                self.value_scale = max(self.value_scale, float(finite.abs().max()))
            if n.kind == "apply" and leaves is self.leaves:
                self.note_discontinuities(n, values)
        body = values[id(self.p.body)]
        if self.p.form == "reduce":
            return self.total_of(self.p.reduction, body, self.p.body.cls if self.by_rows else "S")
        if self.p.form == "map":
            return self.map_output(body)
        return body

    def evaluate_results(self):
        """Every result of the program: its value, then each further result's (p.extra)."""
        out = [self.evaluate()]
        body, fragile, scale = self.p.body, self.fragile, self.value_scale
        try:
            for root in self.p.extra:
                self.p.body = root
                out.append(self.evaluate())
                fragile, scale = fragile or self.fragile, max(scale, self.value_scale)
        finally:
            self.p.body = body
        self.fragile, self.value_scale = fragile, scale
        return out

    def fragile_after_evaluate(self):
        """Whether any computed value lies within rounding of a jump (evaluates the program)."""
        self.evaluate_results()
        return self.fragile

    # Functions whose value or gradient jumps, and where: a comparison at equality, floor and its kin
    # at an integer, % and floordiv at an integer quotient, sign at 0, min / max / clamp at a tie, a
    # float condition at 0. (Rows: amax / amin at a near-tie, std / var of a constant row, in evaluate.)
    def note_discontinuities(self, n, values):
        """Sets `fragile` where a computed argument (not an input or constant, which both sides read
        exactly) lies within rounding of a jump, so that an ulp of difference between lossjit's float64
        and torch's may flip it; sets `ties` where min, max or clamp meet a tie (where torch's
        conventions split the gradient along directions a one-dimensional difference cannot see)."""
        def computed(a):
            return a.kind not in ("input", "const", "param")

        def near(a, b):
            a, b = a.detach(), b.detach()
            with np.errstate(all="ignore"):
                close = (a - b).abs() <= 1e-12 * torch.maximum(a.abs(), b.abs()).clamp(min=1e-300)
            return bool(close.any())

        args = [values[id(a)] for a in n.args]
        if n.fn in ("<", "<=", ">", ">=", "==", "!=") and n.args[0] is not n.args[1]:
            if any(computed(a) for a in n.args) and near(args[0], args[1]):
                self.fragile = True
        elif n.fn in ("floor", "ceil", "round", "trunc") and computed(n.args[0]):
            x = args[0].detach()
            if near(x, torch.round(x)) or near(x, torch.floor(x) + 0.5):
                self.fragile = True
        elif n.fn in ("sign", "?:", "where", "!", "&&", "||") and computed(n.args[0]):
            if bool((args[0].detach().abs() < 1e-12).any()) and n.args[0].type == "f":
                self.fragile = True
        elif n.fn in ("%", "floordiv") and (computed(n.args[0]) or computed(n.args[1])):
            q = (args[0] / args[1]).detach()
            if near(q, torch.round(q)):
                self.fragile = True
        elif n.fn in SINGULAR and computed(n.args[-1 if n.fn in ("/", "xlogy") else 0]):
            # A computed argument within rounding of a point where the function or its derivative is
            # infinite (asin at 1, log at 0): an ulp decides between a number and inf or nan.
            x = args[-1 if n.fn in ("/", "xlogy") else 0].detach()
            if any(near(x, torch.full_like(x, point)) or bool((x == point).any()) for point in SINGULAR[n.fn]):
                self.fragile = True
        elif n.fn in ("min", "max"):
            if near(args[0], args[1]):
                self.ties = True
                self.fragile = self.fragile or any(computed(a) for a in n.args)
        elif n.fn == "clamp":
            if near(args[0], args[1]) or near(args[0], args[2]) or near(args[1], args[2]):
                self.ties = True
                self.fragile = self.fragile or any(computed(a) for a in n.args)

    @staticmethod
    def constant_row(x):
        """Whether some row of x (rows: the last dimension, of 2 or more) holds one value alone."""
        if x.shape[-1] < 2:
            return False
        x = x.detach()
        return bool((x.max(-1).values == x.min(-1).values).any())

    @staticmethod
    def near_tie(x, extreme):
        """Whether some row of x has two or more elements within rounding of its extreme."""
        x, extreme = x.detach(), extreme.detach()
        close = (x - extreme).abs() <= 1e-12 * extreme.abs().clamp(min=1e-300)
        return bool((close.sum(-1) >= 2).any())

    def take(self, e, y):
        c = self.S[-1]
        y = y.reshape(self.R)
        valid = (y >= 0) & (y < c)
        picked = e.gather(-1, y.clamp(0, c - 1))
        return torch.where(valid, picked, torch.tensor(math.nan, dtype=F64))

    def map_shape(self):
        """A map's output shape: S, or the rows' shape where the body is one value per row."""
        S = tuple(self.p.broadcast)
        if self.by_rows and self.p.body.cls != "S":
            return S[:-1]
        return S

    def map_output(self, body):
        if self.by_rows and self.p.body.cls != "S":
            return body.expand(self.R).reshape(self.map_shape())
        return body.expand(self.S).reshape(self.map_shape())

    # -- gradients: plain torch autograd over the whole expression --
    def torch_gradients(self, upstream):
        leaves = dict(self.leaves)
        wanted = []
        for name in self.p.wrt:
            leaves[name] = self.leaves[name].clone().requires_grad_()
            wanted.append(leaves[name])
        out = self.evaluate(leaves)
        if not out.requires_grad:  # nothing differentiable reaches the value (floor, comparisons)
            return {n: torch.zeros_like(self.leaves[n]) for n in self.p.wrt}
        grads = torch.autograd.grad(out, wanted, torch.as_tensor(upstream, dtype=F64).reshape(out.shape), allow_unused=True)
        return {n: (g if g is not None else torch.zeros_like(self.leaves[n])) for n, g in zip(self.p.wrt, grads)}

    # -- gradients: node by node, where guarded --
    def gradients(self, upstream):
        """Each input's gradient; also sets term_scale, the largest term that went into one (what
        a gradient that cancels to about 0 is only known relative to)."""
        self.term_scale = 0.0
        values = {}
        self.evaluate(keep=values)
        order = walk(self.p.body)
        depends = {}
        for n in order:
            depends[id(n)] = (n.kind == "input" and n.name in self.p.wrt) or any(depends[id(a)] for a in n.args)
        adj = {}

        def give(node, value, mask):
            if not depends[id(node)] or node.kind in ("const", "param"):
                return
            finite = value[torch.isfinite(value)]
            if finite.numel():
                self.term_scale = max(self.term_scale, float(finite.abs().max()))
            have = adj.get(id(node))
            if have is None:
                adj[id(node)] = (value, mask)
            elif have[1] is mask or (have[1] is not None and mask is not None and torch.equal(have[1], mask)):
                adj[id(node)] = (have[0] + value, mask)
            else:
                adj[id(node)] = (guarded(*have) + guarded(value, mask), None)

        def to_arg(arg, v, mask, shape):
            """v: the adjoint of `arg` as broadcast to `shape`; sums it back where arg is per row (the
            sum guarded by whether any element of the row selected it)."""
            if arg.cls in ("K",):
                return
            if arg.cls == "R" and shape == self.S and self.S != self.R:
                if mask is None:
                    give(arg, v.sum(-1, keepdim=True), None)
                else:
                    give(arg, guarded(v, mask).sum(-1, keepdim=True), mask.expand(self.S).any(-1, keepdim=True))
            else:
                give(arg, v, mask)

        body = self.p.body
        if not depends[id(body)]:
            return {name: torch.zeros(self.p.input(name).shape, dtype=F64) for name in self.p.wrt}
        if self.p.form == "reduce":
            shape = self.canonical(body) if self.by_rows else self.S
            count = {"sum": 1.0, "mean": float(np.prod(shape)), "batchmean": float(self.p.broadcast[0]) if self.p.broadcast else 1.0}
            seed = torch.full(shape, float(upstream) / count[self.p.reduction], dtype=F64)
            if body.cls == "R" and shape == self.S and self.S != self.R:
                seed = seed.sum(-1, keepdim=True)
            adj[id(body)] = (seed.expand(values[id(body)].shape) if body.cls != "K" else seed, None)
        elif self.p.form == "map":
            up = torch.as_tensor(upstream, dtype=F64)
            up = up.reshape(self.R if (self.by_rows and body.cls != "S") else self.S)
            if body.cls == "R" and up.shape != self.R:  # a flat map of per-row values: each row's elements add
                up = up.sum(-1, keepdim=True)
            adj[id(body)] = (up, None)
        else:
            adj[id(body)] = (torch.tensor(float(upstream), dtype=F64), None)

        for n in reversed(order):
            if id(n) not in adj or not depends[id(n)]:
                continue
            g, mask = adj[id(n)]
            if n.kind == "apply":
                kind = gradient_kind(n)
                shape = tuple(values[id(n)].shape)
                if kind == "none":
                    continue
                if kind == "refused":
                    raise Refused("trigamma")
                if kind == "where":
                    c = _truth(values[id(n.args[0])]).expand(shape) if shape else _truth(values[id(n.args[0])])
                    inside = c if mask is None else (mask & c)
                    outside = ~c if mask is None else (mask & ~c)
                    to_arg(n.args[1], g.expand(shape), inside, shape)
                    to_arg(n.args[2], g.expand(shape), outside, shape)
                    continue
                leaves = []
                for i, a in enumerate(n.args):
                    v = values[id(a)].detach()
                    if depends[id(a)] and a.cls not in ("K",):
                        v = v.expand(shape).clone().requires_grad_()
                    leaves.append(v)
                out = self.apply_fn(n, leaves)
                wanted = [(i, leaves[i]) for i in range(len(leaves)) if leaves[i].requires_grad]
                grads = torch.autograd.grad(out, [w for _, w in wanted], g.expand(shape), allow_unused=True)
                for (i, _), d in zip(wanted, grads):
                    if d is not None:
                        to_arg(n.args[i], d, mask, shape)
            elif n.kind in ("row", "take"):
                if n.kind == "row" and n.fn in ROW_WITHOUT_GRADIENT:
                    continue
                arg = n.args[0]
                leaf = values[id(arg)].detach().expand(self.S).clone().requires_grad_()
                out = ROW_REDUCTIONS[n.fn](leaf) if n.kind == "row" else self.take(leaf, self.leaves[n.name])
                (d,) = torch.autograd.grad(out, [leaf], g.expand(self.R))
                m = None if mask is None else mask.expand(self.R).expand(self.S)
                to_arg(arg, d, m, self.S)
            elif n.kind == "total":
                factor = guarded(g, mask)
                arg = n.args[0]
                shape = self.R if arg.cls != "S" else self.S
                count = {"sum": 1.0, "mean": float(np.prod(shape)),
                         "batchmean": float(self.p.broadcast[0]) if self.p.broadcast else 1.0}[n.fn]
                if arg.cls == "K":
                    continue
                give(arg, (factor / count).expand(shape), None)

        grads = {}
        for name in self.p.wrt:
            spec = self.p.input(name)
            total = torch.zeros(spec.shape, dtype=F64)
            for n in order:
                if n.kind == "input" and n.name == name and id(n) in adj:
                    v = guarded(*adj[id(n)])
                    total = total + (v.sum() if not spec.shape else v.sum_to_size(spec.shape))
            grads[name] = total
        return grads


class Refused(Exception):
    """The oracle's own view of a gradient lossjit refuses (trigamma has no derivative)."""


def guarded(value, mask):
    if mask is None:
        return value
    return torch.where(mask, value, torch.zeros((), dtype=F64))


# ---- what lossjit refuses --------------------------------------------------------------------------
def expected_refusal(p):
    """Why lossjit may refuse the gradient of p.wrt, or None: each is a documented limit
    (docs/language.md). A refusal that is not listed here is a failure."""
    if not p.wrt:
        return None
    reasons = []
    # (A broadcast input of a program that reduces along rows: the CPU reference sums its gradient;
    # only the GPU refuses it, which check_gpu counts.)
    if any(n.kind == "input" and n.name in p.wrt for t in p.statistics() for n in walk(t)):
        reasons.append("statistic")
    if trigamma_differentiated(p):
        reasons.append("trigamma")
    return reasons or None


def totals_reached(body):
    """The whole-tensor reductions the body reaches, once per place in the text (lossjit's checker
    keeps a reduction written twice as two)."""
    out = []

    def visit(n):
        if n.kind == "total":
            out.append(n)
            return
        for a in n.args:
            visit(a)

    visit(body)
    return out


def trigamma_differentiated(p):
    """Whether a trigamma node receives a gradient: it depends on an input differentiated and the
    body reaches it through edges that pass gradients."""
    depends = {}
    for n in walk(p.body):
        depends[id(n)] = (n.kind == "input" and n.name in p.wrt) or any(depends[id(a)] for a in n.args)
    found = False
    seen = set()

    def visit(n):
        nonlocal found
        if id(n) in seen or not depends[id(n)]:
            return
        seen.add(id(n))
        if n.kind == "apply":
            kind = gradient_kind(n)
            if kind == "refused":
                found = True
                return
            if kind == "none":
                return
            args = n.args[1:] if kind == "where" else n.args
        else:
            args = n.args
        for a in args:
            visit(a)

    visit(p.body)
    return found


# ---- shrinking ---------------------------------------------------------------------------------
def replacements(p):
    """Smaller programs: a node replaced by one of its arguments, or by a constant; a binding inlined."""
    nodes = walk(p.body)
    for b in p.bindings:
        nodes += [n for n in walk(b) if n not in nodes]
    for target in nodes:
        if target.kind in ("input", "const", "param"):
            continue
        candidates = [a for a in target.args]
        candidates.append(Node("const", value=1.0, cls="K"))
        for c in candidates:
            if target.kind == "total" and c.kind != "total" and p.form == "composite":
                continue
            yield target, c


def rebuilt(p, target, replacement):
    """p with `target` replaced by `replacement` everywhere (a copy; classes recomputed)."""
    memo = {}

    def copy(n):
        if n is target:
            return copy(replacement) if replacement is not target else n
        if id(n) in memo:
            return memo[id(n)]
        m = Node(n.kind, n.fn, [copy(a) for a in n.args], n.value, n.name, n.cls, n.type, n.spelling)
        m.binding = n.binding
        if m.kind == "apply":
            classes = {a.cls for a in m.args}
            m.cls = combined_class(classes)
            if m.spelling == "variadic" and (m.args[0].kind != "apply" or m.args[0].fn != m.fn):
                m.spelling = None
        memo[id(n)] = m
        return m

    q = Program()
    q.form, q.reduction, q.params, q.declared, q.shape = p.form, p.reduction, dict(p.params), dict(p.declared), p.shape
    q.body = copy(p.body)
    if q.form == "composite" and not totals_reached(q.body):
        return None
    if q.form != "composite" and q.body.cls == "T":
        return None
    q.bindings = []
    used = {id(n) for n in walk(q.body)}
    for b in p.bindings:
        nb = copy(b)
        if id(nb) in used and nb.binding is not None and nb.kind not in ("input", "const", "param"):
            q.bindings.append(nb)
    for n in walk(q.body):
        if n.binding is not None and n not in q.bindings:
            n.binding = None
    names = {n.name for n in walk(q.body) if n.kind in ("input", "take")}
    q.inputs = [i for i in p.inputs if i.name in names]
    if not q.inputs:
        return None
    q.wrt = [w for w in p.wrt if w in names]
    used_params = {n.name for n in walk(q.body) if n.kind == "param"}
    q.declared = {k: v for k, v in q.declared.items() if k in used_params}
    q.broadcast = broadcast_shape(q)
    settle(q)
    if p.axes is not None and q.broadcast == p.broadcast and p.axes.fits(q):  # else it no longer fits
        q.axes, q.row_dims = p.axes, p.row_dims
    return q
