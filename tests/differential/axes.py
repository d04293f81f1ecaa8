"""Reductions along other dimensions: a generated program (which reduces along the last dimension)
presented to lossjit with its row elsewhere, so that the torch oracle, written for the last
dimension, checks it unchanged.

A presentation moves the canonical shape's last dimension (the row, C) to dimension d of the same
rank, or splits it into two, C = c1 * c2, placed at dimensions d1 < d2 of one more: every input is
first given the full rank (leading 1s), then moved (a view: torch and NumPy move strides), and
sometimes copied contiguous (the row is then strided in memory: lossjit's thread-per-row kernels and
the layout's reordering). The program is the same text with `sum(e, -1)` written `sum(e, d)` (or
`sum(e, (d1, d2))`, from the front or from the end). Indices (one value per row) are not moved:
their shape, the rows', is the same in both. lossjit's outputs and gradients are moved back before
they meet the oracle's."""
import numpy as np
import torch


def _move(a, source, destination):
    return torch.movedim(a, source, destination) if torch.is_tensor(a) else np.moveaxis(a, source, destination)


def _contiguous(a):
    return a.contiguous() if torch.is_tensor(a) else np.ascontiguousarray(a)


class Axes:
    def __init__(self, rank, dims, split=None, copy=False, from_end=False):
        self.rank = rank          # the canonical broadcast rank R (the row is its last dimension)
        self.dims = dims          # where the row goes: (d,) in rank R, or (d1, d2) in rank R + 1
        self.split = split        # (c1, c2) with c1 * c2 = C, or None
        self.copy = copy
        self.from_end = from_end

    @staticmethod
    def fits(p):
        return fits(p)

    @property
    def presented_rank(self):
        return self.rank + (1 if self.split else 0)

    def text(self):
        written = [d - self.presented_rank if self.from_end else d for d in self.dims]
        return str(written[0]) if len(written) == 1 else f"({', '.join(map(str, written))})"

    def describe(self):
        what = f"row at dimension{'s' if len(self.dims) > 1 else ''} {self.text()}"
        if self.split:
            what += f", C split {self.split[0]} x {self.split[1]}"
        return what + (", copied contiguous" if self.copy else ", a view")

    def _row_extents(self, extent):
        return self.split if extent != 1 else (1, 1)

    def present(self, spec, a):
        """An input as lossjit gets it (an index unchanged)."""
        if spec.role == "index":
            return a
        shape = tuple(a.shape)
        full = a.reshape((1,) * (self.rank - len(shape)) + shape)
        if self.split:
            full = full.reshape(tuple(full.shape[:-1]) + tuple(self._row_extents(full.shape[-1])))
            moved = _move(full, (-2, -1), self.dims)
        else:
            moved = _move(full, -1, self.dims[0])
        return _contiguous(moved) if self.copy else moved

    def present_like_output(self, canonical_shape, a):
        """A map's upstream gradient (canonical shape) as the presented output's."""
        if len(canonical_shape) < self.rank:  # one value per row: the rows' shape, the same
            return a
        full = np.asarray(a)
        if self.split:
            full = full.reshape(tuple(full.shape[:-1]) + tuple(self._row_extents(full.shape[-1])))
            return np.ascontiguousarray(np.moveaxis(full, (-2, -1), self.dims))
        return np.ascontiguousarray(np.moveaxis(full, -1, self.dims[0]))

    def canonical(self, a, shape):
        """A presented output or gradient back in the canonical `shape` (a map's, or an input's)."""
        if len(tuple(a.shape)) < self.presented_rank:  # the rows' shape: not moved
            return a
        if self.split:
            back = _move(a, self.dims, (-2, -1))
            back = back.reshape(tuple(back.shape[:-2]) + (back.shape[-2] * back.shape[-1],))
        else:
            back = _move(a, self.dims[0], -1)
        return back.reshape(tuple(shape))


def fits(p):
    """Whether a presentation keeps the program's meaning: it must reduce along rows (a take alone
    cannot name its dimension: it goes along the last), and not use batchmean (which divides by
    dimension 0, another one once moved)."""
    kinds = {n.kind for n in p.nodes()}
    batchmean = p.reduction == "batchmean" or any(n.kind == "total" and n.fn == "batchmean" for n in p.nodes())
    return "row" in kinds and not batchmean


def choose(p, rng):
    """A presentation for program p, or None (most programs keep the last dimension)."""
    shape = p.broadcast
    if not shape or not fits(p):
        return None
    if rng.random() < 0.55:
        return None
    rank, c = len(shape), shape[-1]
    takes = any(n.kind == "take" for n in p.nodes())
    # Indices are shown unmoved: one of fewer dimensions than the rows' is broadcast from the front,
    # and lossjit refuses a dimension counted from the front over it (torch would count its own).
    short_index = any(i.role == "index" and len(i.shape) + 1 < rank for i in p.inputs)
    factors = [f for f in range(2, c) if c % f == 0]
    if factors and not takes and rng.random() < 0.6:
        c1 = rng.choice(factors)
        d1 = rng.randrange(rank)
        d2 = rng.randrange(d1 + 1, rank + 1)
        # Two row dimensions apart are two runs in a contiguous copy, and in what lossjit writes in
        # the presented shape (a map's output, gradients): a row of two strides (Layout::row_inner).
        copy = rng.random() < 0.5
        return Axes(rank, (d1, d2), (c1, c // c1), copy, short_index or rng.random() < 0.3)
    return Axes(rank, (rng.randrange(rank),), None, rng.random() < 0.5, short_index or rng.random() < 0.3)
