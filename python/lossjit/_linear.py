"""linear_loss: a row program over logits = h @ W.T + bias without holding the logits (torch tensors).

The C++ side (lossjit/linear_loss.hpp) runs the rows a chunk at a time: cuBLASLt's product, the
program's fused value-and-gradient kernel, the backward products. The gradients are computed in the
forward call (the loss is the end of the graph) and scaled by the upstream gradient in backward, as
the other lossjit ops do. docs/linear_loss.md has the method and the rules.
"""
import ctypes
import itertools
import threading
import weakref
from typing import List

import torch

from . import _lib
from ._lib import UnsupportedError, UsageError
from ._torch import _raw_stream, _tensor_view

_run = _lib.gil_lib.lossjit_linear_run
_backward_run = _lib.gil_lib.lossjit_linear_backward
# key -> LinearLoss, for the custom ops; weak, so that a LinearLoss nothing else holds is freed with its
# handles and memory. The key is a string, not an int: torch.compile keeps strings constant, where an
# int that changes between calls of one compiled frame (another LinearLoss) becomes a symbolic int,
# which no dictionary takes.
_registry = weakref.WeakValueDictionary()
_ids = itertools.count(1)
_registry_lock = threading.Lock()


class LinearLoss:
    """A Loss whose input `logits` is h @ W.T (+ bias), for h [..., H] and W [V, H] CUDA tensors of
    float32, bfloat16 or float16. Calling it returns the value (or a named tuple of the results; a map
    of one value per row: a float32 tensor of h's leading shape), differentiable with respect to h, W
    and bias through autograd and torch.compile(fullgraph=True)."""

    def __init__(self, loss, *, logits="logits", chunk_rows=0, chunk_bytes=0):
        """loss: a program's text or a Loss (its parameters, set_param included, apply to every call)."""
        from . import Loss, compile as _compile
        self.loss = loss if isinstance(loss, Loss) else _compile(loss)
        self.logits = logits
        self._chunk = (int(chunk_rows), int(chunk_bytes))
        self.others = tuple(n for n in self.loss.inputs if n != logits)
        if len(self.others) == len(self.loss.inputs):
            raise UsageError(f"linear_loss: the program never reads '{logits}', the input that receives the logits")
        self._handles = {}  # device -> lossjit_linear*
        self._lock = threading.Lock()
        self._handle(None)  # checks the program now (SourceError at what keeps it from splitting by rows)
        with _registry_lock:
            self._key = f"linear{next(_ids)}"
            _registry[self._key] = self

    def _handle(self, device):
        key = 0 if device is None else device  # None: the check at construction, which device 0's calls reuse
        handle = self._handles.get(key)
        if handle is None:
            with self._lock:
                handle = self._handles.get(key)
                if handle is None:
                    out = ctypes.c_void_p()
                    _lib.check(_lib.lib.lossjit_linear_create(self.loss._handle, self.logits.encode(), self._chunk[0],
                                                              self._chunk[1], key, ctypes.byref(out)))
                    handle = self._handles[key] = out.value
        return handle

    def __del__(self):
        for handle in getattr(self, "_handles", {}).values():
            if _lib is not None and _lib.lib is not None:
                _lib.lib.lossjit_linear_free(handle)

    def close(self):
        with _registry_lock:
            _registry.pop(self._key, None)
        self.__del__()
        self._handles = {}

    def plan(self, h, W, bias_gradient=False):
        """(chunk rows, chunks, workspace bytes) of a call with these tensors."""
        keep = []
        return _plan(self._handle(None), _tensor_view(h.reshape(-1, h.shape[-1]), keep), _tensor_view(W, keep),
                     bias_gradient)

    def _arrange(self, h, others, named):
        if named:
            if others:
                raise UsageError("linear_loss: give the other inputs by position or by name, not both")
            missing = [n for n in self.others if n not in named]
            extra = [n for n in named if n not in self.others]
            if missing or extra:
                raise UsageError(f"linear_loss: the program reads {', '.join(self.others) or 'nothing'} beside "
                                 f"'{self.logits}'" + (f"; missing {', '.join(missing)}" if missing else "")
                                 + (f"; no input named {', '.join(extra)}" if extra else ""))
            others = tuple(named[n] for n in self.others)
        if len(others) != len(self.others):
            raise UsageError(f"linear_loss: the program reads {len(self.others)} input(s) beside '{self.logits}' "
                             f"({', '.join(self.others)}), {len(others)} given")
        # h [..., H]: its leading dimensions are the rows; inputs that share them are flattened alike.
        lead = tuple(h.shape[:-1])
        flat = []
        for t in others:
            if h.dim() > 2 and tuple(t.shape[:len(lead)]) == lead:
                t = t.reshape(-1, *t.shape[len(lead):])
            flat.append(t)
        return h.reshape(-1, h.shape[-1]), flat

    def __call__(self, h, W, *others, bias=None, **named):
        h2, flat = self._arrange(h, others, named)
        wants = (h.requires_grad, W.requires_grad, bias is not None and bias.requires_grad)
        mask = sum(1 << i for i, w in enumerate(wants) if w) if torch.is_grad_enabled() else 0
        tensors = [h2, W] + ([bias] if bias is not None else []) + flat
        if self.loss.kind == "map":
            values = torch.ops.lossjit.linear_loss_map(self._key, tensors, int(bias is not None), mask)
            return values.reshape(h.shape[:-1])
        out = torch.ops.lossjit.linear_loss(self._key, tensors, int(bias is not None), mask)
        results = self.loss.results
        if results:
            return self.loss._Results(*out[:len(results)])
        return out[0]

    def _call(self, entry, h, W, bias, others, middle, mask):
        """One C call, lossjit_linear_run or lossjit_linear_backward (`middle`: the values it writes or the
        upstream gradient it reads), with a workspace from torch's allocator. Returns [dh, dW, dbias] for
        mask's bits 0, 1, 2: an empty tensor each where not set (a custom op's outputs may not alias)."""
        device = h.device.index if h.device.index is not None else torch.cuda.current_device()
        handle = self._handle(device)
        keep = []
        grads = [torch.empty_like(h, memory_format=torch.contiguous_format) if mask & 1 else h.new_empty(0),
                 torch.empty_like(W, memory_format=torch.contiguous_format) if mask & 2 else h.new_empty(0),
                 torch.empty_like(bias) if mask & 4 else h.new_empty(0)]
        hv, Wv = _tensor_view(h, keep), _tensor_view(W, keep)
        workspace = torch.empty(_plan(handle, hv, Wv, mask & 4)[2], dtype=torch.uint8, device=h.device)
        others_views = (_lib.View * max(len(others), 1))(*[_tensor_view(t, keep) for t in others])
        view = lambda t: ctypes.byref(_tensor_view(t, keep))  # noqa: E731
        exec_ = _lib.Exec(_raw_stream(device), device, None, 0)
        _lib.check(entry(handle, ctypes.byref(hv), ctypes.byref(Wv), view(bias) if bias is not None else None,
                         others_views, len(others), view(middle),
                         *[view(g) if mask >> i & 1 else None for i, g in enumerate(grads)],
                         ctypes.byref(exec_), ctypes.c_void_p(workspace.data_ptr())))
        return grads

    def run(self, h, W, bias, others, mask):
        """A reduction's forward: [each result, dh, dW, dbias] (empty tensors where not asked)."""
        values = torch.empty(max(len(self.loss.results), 1), dtype=torch.float32, device=h.device)
        grads = self._call(_run, h, W, bias, others, values, mask)
        # One tensor per result: autograd tells which of them a gradient reaches (the others get None).
        return [values[k].clone() for k in range(values.shape[0])] + grads

    def run_map(self, h, W, bias, others):
        """A map's forward: one float32 value per row of h."""
        values = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
        self._call(_run, h, W, bias, others, values, 0)
        return values

    def run_map_backward(self, h, W, bias, others, upstream, mask):
        """A map's vector-Jacobian product with `upstream` [N]: [dh, dW, dbias] (empty where not asked)."""
        return self._call(_backward_run, h, W, bias, others, upstream, mask)


def _plan(handle, h_view, W_view, bias_gradient):
    rows, chunks, ws = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_size_t()
    _lib.check(_lib.lib.lossjit_linear_plan(handle, ctypes.byref(h_view), ctypes.byref(W_view),
                                            int(bool(bias_gradient)), ctypes.byref(rows), ctypes.byref(chunks),
                                            ctypes.byref(ws)))
    return rows.value, chunks.value, ws.value


def _linear(key):
    linear = _registry.get(key)
    if linear is None:
        raise UsageError(f"lossjit::linear_loss called for LinearLoss {key}, which no longer exists (keep it alive)")
    return linear


def _split(tensors, has_bias):
    """h, W, bias (or None) and the other inputs from the op's one list of tensors."""
    return tensors[0], tensors[1], tensors[2] if has_bias else None, tensors[2 + has_bias:]


@torch.library.custom_op("lossjit::linear_loss", mutates_args=())
def linear_loss_op(linear_id: str, tensors: List[torch.Tensor], has_bias: int, grad_mask: int) -> List[torch.Tensor]:
    """tensors: h, W, the bias if has_bias, the program's other inputs. Returns each result (a float32
    0-dim tensor), then dh, dW, dbias (empty where grad_mask's bit 0, 1, 2 is not set)."""
    h, W, bias, others = _split(tensors, has_bias)
    return _linear(linear_id).run(h, W, bias, others, grad_mask)


@linear_loss_op.register_fake
def _(linear_id, tensors, has_bias, grad_mask):
    h, W, bias, others = _split(tensors, has_bias)
    count = max(len(_linear(linear_id).loss.results), 1)
    return [h.new_empty((), dtype=torch.float32) for _ in range(count)] + [
            h.new_empty(h.shape) if grad_mask & 1 else h.new_empty(0),
            W.new_empty(W.shape) if grad_mask & 2 else h.new_empty(0),
            bias.new_empty(bias.shape) if grad_mask & 4 and bias is not None else h.new_empty(0)]


_scaler = None  # the Loss of `d * g` (made on first use)
_map = _lib.gil_lib.lossjit_map


def _scaler_handle():
    global _scaler
    if _scaler is None:
        from . import compile as _compile
        _scaler = _compile("d * g", inputs=["d", "g"], expect="map", source_name="linear_loss upstream")
    return _scaler._handle


@torch.library.custom_op("lossjit::linear_scale", mutates_args=())
def linear_scale(d: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """d * g in d's dtype, multiplied in float32 and rounded once, in one vectorized pass (torch's mul
    of a bfloat16 tensor by a float32 0-dim tensor takes its unvectorized casting loop: 2.1 ms for W's
    128256 x 4096 on an H100 against 0.7 for a copy)."""
    out = torch.empty_like(d, memory_format=torch.contiguous_format)
    keep = []
    views = (_lib.View * 2)(_tensor_view(d, keep), _tensor_view(g, keep))
    device = d.device.index if d.device.index is not None else torch.cuda.current_device()
    exec_ = _lib.Exec(_raw_stream(device), device, None, 0)
    _lib.check(_map(_scaler_handle(), views, 2, ctypes.byref(_tensor_view(out, keep)), ctypes.byref(exec_)))
    return out


@linear_scale.register_fake
def _(d, g):
    return torch.empty_like(d, memory_format=torch.contiguous_format)


def _setup(ctx, inputs, output):
    linear_id, tensors, has_bias, mask = inputs
    loss = _linear(linear_id).loss
    count = max(len(loss.results), 1)
    ctx.mask, ctx.names, ctx.has_bias, ctx.count = mask, loss.results, has_bias, len(tensors)
    ctx.save_for_backward(*output[count:])
    # Results with no gradient at all (accuracy) are constants to autograd, as in the Loss's own op.
    constants = [output[k] for k in range(len(loss.results)) if not loss._differentiable[k]]
    if constants:
        ctx.mark_non_differentiable(*constants)
    ctx.set_materialize_grads(False)


def _backward(ctx, grads):  # one gradient per output of the list (None where none reaches it)
    for k in range(1, len(ctx.names)):
        if grads[k] is not None:
            raise UnsupportedError(
                f"a gradient flows into result '{ctx.names[k]}', but linear_loss differentiates the first result "
                f"only ('{ctx.names[0]}'): make the combination the first result "
                f"(`total = {ctx.names[0]} + 1e-4 * {ctx.names[k]}; total, ...`), or detach it")
    g = grads[0]
    out = [None] * ctx.count
    if g is not None:
        dh, dW, dbias = ctx.saved_tensors
        scale = torch.ops.lossjit.linear_scale
        out[0] = scale(dh, g) if ctx.mask & 1 else None
        out[1] = scale(dW, g) if ctx.mask & 2 else None
        if ctx.has_bias:
            out[2] = scale(dbias, g) if ctx.mask & 4 else None
    return None, out, None, None


linear_loss_op.register_autograd(_backward, setup_context=_setup)


@torch.library.custom_op("lossjit::linear_loss_map", mutates_args=())
def linear_loss_map(linear_id: str, tensors: List[torch.Tensor], has_bias: int, grad_mask: int) -> torch.Tensor:
    """A map of one value per row over h @ W.T + bias: [N] float32 (grad_mask: which of h, W, bias the
    backward differentiates)."""
    h, W, bias, others = _split(tensors, has_bias)
    return _linear(linear_id).run_map(h, W, bias, others)


@linear_loss_map.register_fake
def _(linear_id, tensors, has_bias, grad_mask):
    return tensors[0].new_empty(tensors[0].shape[0], dtype=torch.float32)


@torch.library.custom_op("lossjit::linear_loss_map_backward", mutates_args=())
def linear_loss_map_backward(linear_id: str, tensors: List[torch.Tensor], has_bias: int, upstream: torch.Tensor,
                             grad_mask: int) -> List[torch.Tensor]:
    """The map's vector-Jacobian product with `upstream` [N]: [dh, dW, dbias] (empty where grad_mask's bit
    0, 1, 2 is not set), each chunk's logits computed again."""
    h, W, bias, others = _split(tensors, has_bias)
    return _linear(linear_id).run_map_backward(h, W, bias, others, upstream, grad_mask)


@linear_loss_map_backward.register_fake
def _(linear_id, tensors, has_bias, upstream, grad_mask):
    h, W, bias, _ = _split(tensors, has_bias)
    return [h.new_empty(h.shape) if grad_mask & 1 else h.new_empty(0),
            W.new_empty(W.shape) if grad_mask & 2 else h.new_empty(0),
            bias.new_empty(bias.shape) if grad_mask & 4 and bias is not None else h.new_empty(0)]


def _map_setup(ctx, inputs, output):
    linear_id, tensors, has_bias, mask = inputs
    ctx.linear_id, ctx.has_bias, ctx.mask, ctx.count = linear_id, has_bias, mask, len(tensors)
    ctx.linear = _linear(linear_id)  # alive until backward has run
    ctx.save_for_backward(*tensors)


def _map_backward(ctx, upstream):
    out = [None] * ctx.count
    if upstream is not None and ctx.mask:
        tensors = list(ctx.saved_tensors)
        dh, dW, dbias = torch.ops.lossjit.linear_loss_map_backward(ctx.linear_id, tensors, ctx.has_bias,
                                                                   upstream.reshape(-1), ctx.mask)
        out[0] = dh if ctx.mask & 1 else None
        out[1] = dW if ctx.mask & 2 else None
        if ctx.has_bias:
            out[2] = dbias if ctx.mask & 4 else None
    return None, out, None, None


linear_loss_map.register_autograd(_map_backward, setup_context=_map_setup)


def linear_loss(program, h, W, *others, bias=None, logits="logits", chunk_rows=0, chunk_bytes=0, **named):
    """One call of LinearLoss(program, ...)(h, W, *others, bias=bias): compiles (through the caches)
    on every call; keep a LinearLoss in a training loop."""
    return LinearLoss(program, logits=logits, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes)(
        h, W, *others, bias=bias, **named)
