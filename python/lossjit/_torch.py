"""lossjit on torch tensors: the ops (lossjit::reduce, lossjit::value, lossjit::value_and_grad,
lossjit::map, lossjit::map_grad) with their fake (meta) kernels and autograd formulas, and the eager
fast paths.

Through lossjit::reduce (or, under torch.compile, _TracedReduce) a reduction's forward runs the fused
value-and-gradient kernel when any input requires grad and saves the gradients; backward multiplies
them by the upstream gradient (a torch elementwise op). An eager call (_EagerReduce) does the same on small
inputs; on large ones it computes the value in forward and runs the fused kernel in backward with
the upstream gradient multiplied in. Every tensor lossjit writes, and its scratch, comes from torch's
caching allocator; nothing waits for the GPU. Kernels run on the tensors' device and its current stream.
"""
import ctypes
import itertools
import threading
import weakref

import torch
from torch.autograd.function import once_differentiable

from . import _lib, _native, _registry
from ._lib import SCRATCH_TOO_SMALL, UnsupportedError, UsageError

lib = _lib.lib
# The GPU entry points through PyDLL: the GIL stays held during the call (the host side of a
# launch, microseconds), which saves releasing and taking it back; the first call of a layout
# holds it while NVRTC compiles (milliseconds).
_evaluate = _lib.gil_lib.lossjit_evaluate
_map = _lib.gil_lib.lossjit_map
_value_and_grad = _lib.gil_lib.lossjit_value_and_grad
# The same entry point's address, for the native path (_native.cpp's autograd node calls it with the GIL
# held too; the ops' C++ kernels with the GIL as torch's dispatcher leaves it).
_VALUE_AND_GRAD_ADDRESS = ctypes.cast(_value_and_grad, ctypes.c_void_p).value
_map_grad = _lib.gil_lib.lossjit_map_grad

# torch dtype <-> lossjit code, by the names of the library's dtype table (torch spells them alike).
_CODES = {getattr(torch, name): code for code, name in enumerate(_lib.DTYPE_NAMES)}
_DTYPES = [getattr(torch, name) for name in _lib.DTYPE_NAMES]

try:  # the raw cudaStream_t without a torch.cuda.Stream object per call (what inductor's code uses)
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older torch
    def _raw_stream(device):
        return torch.cuda.current_stream(device).cuda_stream

_grad_enabled = torch.is_grad_enabled

# A layout's views live in one buffer; a call writes each input's data pointer into the first 64-bit
# word of its view (lossjit_view starts with `void* data`) through a memoryview, not a ctypes field.
_VIEW_BYTES = ctypes.sizeof(_lib.View)
_VIEW_WORDS = _VIEW_BYTES // 8
if ctypes.sizeof(ctypes.c_void_p) != 8 or _VIEW_BYTES % 8 or _lib.View.data.offset != 0:  # pragma: no cover
    raise ImportError("lossjit: the torch integration needs 64-bit pointers")

# ---- the layout check: one C++ call instead of reading shapes, strides, dtypes and devices ----
# Dynamo's TensorGuards checks that tensors have exactly the Python type, dispatch keys, dtype,
# device, requires_grad, sizes and strides of the tensors it was made from (what a compiled graph's
# guards check). A call whose tensors pass the last layout's check skips building the layout key.
# Private to torch: where it is missing or refuses, every call builds the key (the same result).
try:
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except Exception:  # pragma: no cover - a torch without it
    _TensorGuards = None


def _not_yet(*tensors):
    """A layout's check before one is made: fails, so the call takes the key."""
    return False


def _no_check(*tensors):
    """A layout's check where none can be made (no TensorGuards): fails, so the call takes the key."""
    return False


def _make_check(tensors):
    if _TensorGuards is None:
        return _no_check
    try:
        check = _TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None).check
        if check(*tensors) is True:
            return check
    except Exception:  # pragma: no cover - another signature
        pass
    return _no_check


def _any_requires_grad(tensors):
    for t in tensors:
        if t.requires_grad:
            return True
    return False


# ---- scratch: one zero-filled torch buffer per (device, stream), lent to every call there ----
_scratch = {}       # (device, stream) -> (buffer tensor, lossjit_exec struct, its address)
_base_bytes = {}    # device -> lossjit_scratch_bytes
_generations = itertools.count(1)
_scratch_generation = 0  # changes whenever an entry of _scratch is made or replaced


def _scratch_entry(handle, device, stream, at_least=0):
    """The (buffer, lossjit_exec, address) for this device and stream, with scratch from torch
    (zero-filled once: the kernels leave their counters at zero). Under CUDA graph capture a new
    buffer comes from the graph's pool and stays referenced here, so replays find it."""
    global _scratch_generation
    entry = _scratch.get((device, stream))
    if entry is not None and entry[0].numel() >= at_least:
        return entry
    if device not in _base_bytes:
        size = ctypes.c_size_t()
        _lib.check(lib.lossjit_scratch_bytes(handle, device, ctypes.byref(size)))
        _base_bytes[device] = size.value
    size = max(at_least, _base_bytes[device])
    buffer = torch.zeros(size, dtype=torch.uint8, device=torch.device("cuda", device))
    ex = _lib.Exec(stream, device, buffer.data_ptr(), size)
    entry = _scratch[(device, stream)] = (buffer, ex, ctypes.addressof(ex))
    _scratch_generation = next(_generations)
    _native.scratch_replaced(device, stream)
    return entry


def _exec_address(handle, device, stream, at_least=0):
    return _scratch_entry(handle, device, stream, at_least)[2]


class _Results:
    """0-dim result tensors handed out one per eager call: views of one buffer of 256, made with
    unbind (one allocation and one call per 256 results instead of a torch.empty each). Each view
    is its own element, never handed out twice; the buffer is freed when its last view is. One per
    (device, stream, dtype), allocated on that stream like torch.empty would be."""
    __slots__ = ("views", "dtype", "device")
    SIZE = 256

    def __init__(self, dtype, device):
        self.views, self.dtype, self.device = iter(()), dtype, device

    def next(self):
        out = next(self.views, None)
        if out is None:
            out = self.refill()
        return out

    def refill(self):
        self.views = iter(torch.empty(self.SIZE, dtype=self.dtype, device=self.device).unbind())
        return next(self.views)


class _Layout:
    """One layout of the inputs (shapes, strides, dtypes, device) on one thread: the inputs' ctypes
    views and the result's view, made once in one buffer (a call writes only the data pointers),
    the check that recognises the layout's tensors, and what the last stream selected (its scratch
    and its buffer of results)."""
    __slots__ = ("buffer", "views", "words", "slots", "address", "count", "result_slot", "result_address",
                 "out_dtype", "out_code", "out_shape", "device", "torch_device", "keep", "check", "grad_check", "state",
                 "stream", "generation", "scratch", "results", "grad_plans")

    def __init__(self, handle, tensors, device, state, results=1):
        n = self.count = len(tensors)
        self.buffer = bytearray(_VIEW_BYTES * (n + 1))  # n input views, then the result's
        self.views = (_lib.View * (n + 1)).from_buffer(self.buffer)
        self.address = ctypes.addressof(self.views)
        self.words = memoryview(self.buffer).cast("Q")
        self.slots = tuple(range(0, n * _VIEW_WORDS, _VIEW_WORDS))
        self.result_slot = n * _VIEW_WORDS
        self.result_address = self.address + n * _VIEW_BYTES
        self.keep = []
        for i, t in enumerate(tensors):
            code = _CODES.get(t.dtype)
            if code is None:
                raise UsageError(f"input {i} is a tensor of {t.dtype}; lossjit reads {', '.join(_lib.DTYPE_NAMES)}")
            shape, strides = _lib.shape_array(t.shape), _lib.shape_array(t.stride())
            self.keep += [shape, strides]
            self.views[i] = _lib.View(None, code, t.dim(), shape, strides)
        out = ctypes.c_int32()
        _lib.check(lib.lossjit_output_dtype(handle, self.address, n, ctypes.byref(out)))
        self.out_code, self.out_dtype = out.value, _DTYPES[out.value]
        self.out_shape = _output_shape_of(handle, self.address, n)
        if results == 1:
            self.views[n] = _lib.View(None, self.out_code, 0, None, None)  # a reduction's 0-dim result
        else:  # a vector of a program's several results
            shape = _lib.shape_array([results])
            self.keep.append(shape)
            self.views[n] = _lib.View(None, self.out_code, 1, shape, None)
        self.device = device
        self.torch_device = torch.device("cuda", device)
        self.check = self.grad_check = _not_yet
        self.state = state
        self.stream, self.generation, self.scratch, self.results = None, -1, None, None
        self.grad_plans = {}  # wrt mask -> _GradPlan

    def set_data(self, tensors):
        words = self.words
        for slot, t in zip(self.slots, tensors):
            words[slot] = t.data_ptr()

    def bind(self, handle, stream):
        """Selects the scratch and the result buffer of `stream` (until the stream or the scratch changes)."""
        self.scratch = _scratch_entry(handle, self.device, stream)
        key = (self.device, stream, self.out_code)
        results = self.state.results.get(key)
        if results is None:
            results = self.state.results[key] = _Results(self.out_dtype, self.torch_device)
        self.results = results
        self.stream, self.generation = stream, _scratch_generation


class _GradPlan:
    """What value_and_grad passes for one layout and one set of inputs differentiated, made once: the
    names, the gradients' views (of the inputs' shapes, contiguous as torch.empty makes them: strides
    NULL, which the C API reads as row-major) and the value's, in one buffer; a call writes only the
    data pointers."""
    __slots__ = ("positions", "names", "names_address", "buffer", "views", "words", "address", "value_slot",
                 "value_address", "keep", "grads")

    def __init__(self, loss, tensors, mask, out_code, results):
        self.positions = _set_bits(tensors, mask)
        wrt = [loss.inputs[i] for i in self.positions]
        self.names = (ctypes.c_char_p * len(wrt))(*[n.encode() for n in wrt])
        self.names_address = ctypes.addressof(self.names)
        n = len(self.positions)
        self.buffer = bytearray(_VIEW_BYTES * (n + 1))  # the gradients' views, then the value's
        self.views = (_lib.View * (n + 1)).from_buffer(self.buffer)
        self.address = ctypes.addressof(self.views)
        self.words = memoryview(self.buffer).cast("Q")
        self.value_slot = n * _VIEW_WORDS
        self.value_address = self.address + n * _VIEW_BYTES
        self.keep = []
        # (the word of the gradient's data pointer, its shape, its dtype) for each input differentiated
        self.grads = tuple((k * _VIEW_WORDS, tensors[i].shape, tensors[i].dtype) for k, i in enumerate(self.positions))
        for k, i in enumerate(self.positions):
            t = tensors[i]
            shape = _lib.shape_array(t.shape)
            self.keep.append(shape)
            self.views[k] = _lib.View(None, _CODES[t.dtype], t.dim(), shape, None)
        if results == 1:
            self.views[n] = _lib.View(None, out_code, 0, None, None)
        else:
            shape = _lib.shape_array([results])
            self.keep.append(shape)
            self.views[n] = _lib.View(None, out_code, 1, shape, None)


def _output_shape_of(handle, views_address, count):
    """A map's output shape for these views, as lossjit gives it: the broadcast shape, or the rows'
    shape where the program gives one value per row (an index input broadcasts with a trailing 1)."""
    shape = (ctypes.c_int64 * 16)()
    ndim = ctypes.c_int32()
    _lib.check(lib.lossjit_output_shape(handle, views_address, count, ctypes.addressof(shape), ctypes.byref(ndim)))
    return tuple(shape[:ndim.value])


def _output_shape(loss_id, inputs):
    """The same from tensors' shapes and strides alone (fake tensors too)."""
    keep = []
    views = (_lib.View * max(len(inputs), 1))()
    for i, t in enumerate(inputs):
        shape, strides = _lib.shape_array(t.shape), _lib.shape_array(t.stride())
        keep += [shape, strides]
        views[i] = _lib.View(None, _CODES[t.dtype], t.dim(), shape, strides)
    return _output_shape_of(_side(loss_id).handle, ctypes.addressof(views), len(inputs))


def _key(tensors):
    key = []
    for t in tensors:
        key += (t.shape, t.stride(), t.dtype, t.get_device())
    return tuple(key)


class _ThreadState:
    """What one thread's calls patch and pass: its layouts (ctypes views with the result's view) and
    its result buffers. Per thread, so that two threads calling one Loss never write each other's
    pointers between setting them and the C call."""
    __slots__ = ("layouts", "results", "last")

    def __init__(self):
        self.layouts = {}   # layout key -> _Layout
        self.results = {}   # (device, stream, dtype code) -> _Results
        self.last = None    # the layout of this thread's last call


# loss id -> weak reference to its TorchLoss: what the ops' kernels look up (a dict and a call,
# where the registry of Loss objects is a WeakValueDictionary).
_sides = {}


def _forget(loss_id):
    def callback(_ref):
        sides, native = _sides, _native  # None only at interpreter shutdown
        if sides is not None:
            sides.pop(loss_id, None)
        if native is not None:
            native.forget(loss_id)
    return callback


class TorchLoss:
    """The torch side of a lossjit.Loss."""
    Tensor = torch.Tensor

    def __init__(self, loss):
        self.loss = loss
        self.handle = loss._handle
        self.id = loss._id
        self.n = len(loss.inputs)
        self.is_map = loss.kind == "map"
        self.results = max(1, len(loss.results))  # how many results (numbers, or rows of a map's output)
        self.local = threading.local()
        _sides[self.id] = weakref.ref(self, _forget(self.id))

    def close(self):
        """The Loss frees its handle next: nothing may use it from now on."""
        self.handle = None
        native = _native  # None only at interpreter shutdown
        if native is not None:
            native.forget(self.id)

    def state(self):
        try:
            return self.local.state
        except AttributeError:
            st = self.local.state = _ThreadState()
            return st

    def layout(self, tensors, st):
        """The layout of these tensors, made on first sight (UsageError for a wrong count of inputs,
        mixed devices, CPU tensors or a dtype lossjit does not read)."""
        lay = st.last
        if lay is not None and len(tensors) == lay.count and (lay.check(*tensors) or lay.grad_check(*tensors)):
            return lay
        key = _key(tensors)
        lay = st.layouts.get(key)
        if lay is None:
            if len(tensors) != self.n:
                self.loss._check_count(tensors)
            device = tensors[0].get_device()
            for i, t in enumerate(tensors):
                if t.get_device() != device:
                    raise UsageError(f"input {i} ('{self.loss.inputs[i]}') is on {t.device}, input 0 on {tensors[0].device}")
            if device < 0:
                raise UsageError("CPU tensors: lossjit runs torch tensors on CUDA devices (Loss.reference takes host data)")
            lay = st.layouts[key] = _Layout(self.handle, tensors, device, st, self.results)
        if lay.check is _not_yet and not _any_requires_grad(tensors):
            # Made from tensors that need no gradient, the check also proves that a call's tensors
            # need none: the direct path then skips looking at requires_grad.
            lay.check = _make_check(tensors)
        elif lay.grad_check is _not_yet and _any_requires_grad(tensors):
            lay.grad_check = _make_check(tensors)  # the same layout's tensors as autograd calls pass them
        st.last = lay
        return lay

    # ---- entry points ----
    def __call__(self, tensors):
        if torch.compiler.is_compiling():  # traced: only the ops, which torch.compile sees through their fake kernels
            return self.through_ops(tensors)
        if self.is_map:
            if _grad_enabled() and _any_requires_grad(tensors):
                return self.through_ops(tensors)
            return self.named(self.run_map(tensors, None))
        if self.results > 1:
            if _grad_enabled() and _any_requires_grad(tensors):
                return self.with_autograd(tensors)
            if tensors and tensors[0].get_device() < 0:
                return self._on_cpu(tensors)
            return self.loss._Results(*self.evaluate(tensors).unbind())
        # The eager fast path (no autograd, no dispatcher): the layout's views get the pointers,
        # the result is the next of a buffer's 0-dim views, one C call launches.
        try:
            st = self.local.state
        except AttributeError:
            st = self.state()
        lay = st.last
        if lay is None or len(tensors) != lay.count or not lay.check(*tensors):
            # Not the last call's layout, or not known to need no gradient: the full checks.
            if _grad_enabled() and _any_requires_grad(tensors):
                return self.with_autograd(tensors)
            if tensors and tensors[0].get_device() < 0:
                return self._on_cpu(tensors)
            lay = self.layout(tensors, st)
        words = lay.words
        for slot, t in zip(lay.slots, tensors):
            words[slot] = t.data_ptr()
        stream = _raw_stream(lay.device)
        if stream != lay.stream or lay.generation != _scratch_generation:
            lay.bind(self.handle, stream)
        results = lay.results
        out = next(results.views, None)
        if out is None:
            out = results.refill()
        words[lay.result_slot] = out.data_ptr()
        status = _evaluate(self.handle, lay.address, lay.count, lay.result_address, lay.scratch[2])
        if status:
            self._retry(status, _evaluate, lay, stream, lay.result_address)
        return out

    def _bind_stream(self, lay):
        """The current stream of the layout's device, its scratch and result buffer selected."""
        stream = _raw_stream(lay.device)
        if stream != lay.stream or lay.generation != _scratch_generation:
            lay.bind(self.handle, stream)
        return stream

    def _launch(self, call, lay, *args):
        """call(handle, inputs, count, *args, exec) on the current stream of the layout's device."""
        stream = self._bind_stream(lay)
        status = call(self.handle, lay.address, lay.count, *args, lay.scratch[2])
        if status:
            self._retry(status, call, lay, stream, *args)

    def _retry(self, status, call, lay, stream, *args):
        """After a failed launch: raises, or where the scratch was too small grows it and launches again."""
        if status != SCRATCH_TOO_SMALL:
            raise _lib.error(status)
        entry = _scratch_entry(self.handle, lay.device, stream, lib.lossjit_last_error_scratch_bytes())
        lay.generation = -1  # the next call selects the grown scratch
        status = call(self.handle, lay.address, lay.count, *args, entry[2])
        if status:
            raise _lib.error(status)

    def through_ops(self, tensors):
        """The ops: what autograd and torch.compile see."""
        mask = 0
        if torch.is_grad_enabled():
            for i, t in enumerate(tensors):
                if t.requires_grad:
                    mask |= 1 << i
        if self.is_map:
            return self.named(torch.ops.lossjit.map(self.id, list(tensors)))
        if self.results > 1:
            if mask:
                return self.loss._Results(*torch.ops.lossjit.reduce(self.id, list(tensors), mask)[:self.results])
            return self.loss._Results(*torch.ops.lossjit.value.default(self.id, list(tensors)).unbind())
        if mask:
            if torch.compiler.is_compiling():
                return _TracedReduce.apply(self.id, mask, *tensors)
            return torch.ops.lossjit.reduce(self.id, list(tensors), mask)[0]
        return torch.ops.lossjit.value.default(self.id, list(tensors))

    def with_autograd(self, tensors):
        """An eager call of a reduction on tensors that need gradients (CUDA tensors: CPU ones go to the
        op, which refuses them with the same message as every other path)."""
        if tensors and tensors[0].get_device() < 0:
            return self.through_ops(tensors)
        mask = 0
        for i, t in enumerate(tensors):
            if t.requires_grad:
                mask |= 1 << i
        if _eager_reduce_apply is not None and not _functorch_active():
            native = _native.module()
            if (native is not None and self.results == 1 and self.handle is not None
                    and _input_bytes(tensors) < FUSED_IN_BACKWARD_MIN_BYTES):
                out = self.native_fused(native, tensors, mask)
                if out is not None:
                    return out
            out = _eager_reduce_apply(self, mask, *tensors)
        else:
            out = _EagerReduce.apply(self, mask, *tensors)
        return self.loss._Results(*out) if self.results > 1 else out

    def gradient_call(self, tensors, mask):
        """(layout, gradient plan, stream) of a fused call on these tensors, the inputs' data pointers
        written and the current stream's scratch and result buffer selected (before a pooled value:
        the result buffer is the stream's)."""
        try:
            st = self.local.state
        except AttributeError:
            st = self.state()
        lay = self.layout(tensors, st)
        plan = lay.grad_plans.get(mask)
        if plan is None:
            plan = lay.grad_plans[mask] = _GradPlan(self.loss, tensors, mask, lay.out_code, self.results)
        lay.set_data(tensors)
        return lay, plan, self._bind_stream(lay)

    def native_fused(self, native, tensors, mask):
        """_EagerReduce's small-input way with the autograd node in C++ (_native.cpp): the layout, plan,
        stream and pooled value as fused() prepares them; the extension allocates the gradients and
        launches. None where the launch returned a status: the caller's Python path then repeats the
        call, growing a scratch that was too small or raising the library's error."""
        lay, plan, _ = self.gradient_call(tensors, mask)
        try:
            return native.fused(tensors, mask, lay.results.next(), _VALUE_AND_GRAD_ADDRESS, self.handle,
                                lay.address, plan.names_address, plan.address, lay.scratch[2])
        except native.LaunchError:
            return None

    def _on_cpu(self, tensors):
        arrays = [(t.detach().float() if t.dtype == torch.bfloat16 else t.detach()).numpy() for t in tensors]
        out = self.loss.reference(*arrays)
        if self.results > 1:
            return self.loss._Results(*(torch.tensor(v, dtype=torch.float64) for v in out))
        return torch.tensor(out, dtype=torch.float64) if not self.is_map else torch.from_numpy(out)

    def evaluate(self, tensors):
        """The value into a fresh tensor (inside the ops; the eager path in __call__ does the same
        with a result from a buffer): 0-dim, or a vector of a program's several results."""
        lay = self.layout(tensors, self.state())
        words = lay.words
        for slot, t in zip(lay.slots, tensors):
            words[slot] = t.data_ptr()
        out = torch.empty(self.value_shape(), dtype=lay.out_dtype, device=lay.torch_device)
        words[lay.result_slot] = out.data_ptr()
        self._launch(_evaluate, lay, lay.result_address)
        return out

    def named(self, out):
        """A map's output as the caller gets it: the tensor, or for several results a named tuple of
        its rows (views)."""
        return self.loss._Results(*out.unbind(0)) if self.results > 1 else out

    def value_shape(self):
        return (self.results,) if self.results > 1 else ()

    def run_map(self, tensors, out):
        lay = self.layout(tensors, self.state())
        lay.set_data(tensors)
        if out is None:
            out = torch.empty(lay.out_shape, dtype=lay.out_dtype, device=lay.torch_device)
        keep = []
        view = _tensor_view(out, keep)
        self._launch(_map, lay, ctypes.addressof(view))
        return out

    def map(self, tensors, out):
        if out is not None:
            return self.named(self.run_map(tensors, out))
        return self(tensors)

    def value_and_grad_masked(self, tensors, mask, upstream=None):
        """[value, gradient of each input whose bit is set in mask] (fresh tensors); a program of several
        results gives each of them first, as 0-dim tensors of their own. `upstream`: a float32 device
        scalar the kernel multiplies the gradients by (None: 1)."""
        if not mask:
            return self.split(self.evaluate(tensors))
        value, grads = self.fused(tensors, mask, upstream)
        return [*self.split(value), *grads]

    def fused(self, tensors, mask, upstream=None, pooled=False):
        """(value, [gradient of each input whose bit is set in mask]) from one launch of the fused kernel.
        The value is a new 0-dim tensor (a vector of a program's several results), or with `pooled` the
        next view of the layout's result buffer (as the direct path returns; an op's outputs are never
        views). `upstream`: as in value_and_grad_masked."""
        lay, plan, stream = self.gradient_call(tensors, mask)
        device, plan_words = lay.torch_device, plan.words
        grads = []
        for slot, shape, dtype in plan.grads:
            g = torch.empty(shape, dtype=dtype, device=device)
            plan_words[slot] = g.data_ptr()
            grads.append(g)
        if pooled and self.results == 1:
            value = lay.results.next()
        else:
            value = torch.empty(self.value_shape(), dtype=lay.out_dtype, device=device)
        plan_words[plan.value_slot] = value.data_ptr()
        upstream_device = None if upstream is None else upstream.data_ptr()
        args = (plan.names_address, len(grads), plan.address, plan.value_address, 1.0, upstream_device)
        status = _value_and_grad(self.handle, lay.address, lay.count, *args, lay.scratch[2])
        if status:
            self._retry(status, _value_and_grad, lay, stream, *args)
        return value, grads

    def split(self, value):
        """A program's results as the ops return them: one tensor each (copies: an op's outputs may not
        alias each other)."""
        if self.results == 1:
            return [value]
        return [v.clone() for v in value.unbind()]

    def value_and_grad(self, tensors, wrt):
        if self.is_map:
            raise UsageError("this program is an elementwise map: its gradient needs an upstream tensor "
                             "(call it on tensors that require grad and use backward)")
        names = list(wrt) if wrt is not None else [n for n, t in zip(self.loss.inputs, tensors)
                                                   if t.dtype.is_floating_point]
        mask = 0
        for n in names:
            if n not in self.loss.inputs:
                raise UsageError(f"'{n}' is not an input of the program (its inputs: {', '.join(self.loss.inputs)})")
            mask |= 1 << self.loss.inputs.index(n)
        out = self.value_and_grad_masked(tuple(t.detach() for t in tensors), mask)
        by_input = {}
        k = self.results
        for i, n in enumerate(self.loss.inputs):
            if mask >> i & 1:
                by_input[n] = out[k]
                k += 1
        value = self.loss._Results(*out[:self.results]) if self.results > 1 else out[0]
        return value, tuple(by_input[n] for n in names)

    def map_grad(self, tensors, upstream, mask):
        lay = self.layout(tensors, self.state())
        lay.set_data(tensors)
        wrt, grads = [], []
        for i, t in enumerate(tensors):
            if mask >> i & 1:
                wrt.append(self.loss.inputs[i])
                grads.append(torch.empty(t.shape, dtype=t.dtype, device=lay.torch_device))
        keep = []
        grad_views = (_lib.View * len(grads))(*[_tensor_view(g, keep) for g in grads])
        names = (ctypes.c_char_p * len(wrt))(*[n.encode() for n in wrt])
        up = _tensor_view(upstream, keep)
        self._launch(_map_grad, lay, ctypes.addressof(names), len(wrt), ctypes.addressof(grad_views),
                     ctypes.addressof(up))
        return grads


def _tensor_view(t, keep):
    code = _CODES.get(t.dtype)
    if code is None:
        raise UsageError(f"a tensor of {t.dtype}; lossjit reads {', '.join(_lib.DTYPE_NAMES)}")
    shape, strides = _lib.shape_array(t.shape), _lib.shape_array(t.stride())
    keep += [shape, strides]
    return _lib.View(t.data_ptr(), code, t.dim(), shape, strides)


def _side(loss_id):
    ref = _sides.get(loss_id)
    side = ref() if ref is not None else None
    if side is not None and side.handle is not None:
        return side
    loss = _registry.get(loss_id)  # a Loss whose torch side is not made yet
    if loss is None or loss._handle is None:
        raise UsageError(f"lossjit op called for Loss {loss_id}, which no longer exists (keep the Loss alive)")
    return loss._torch_side()


def _set_bits(inputs, mask):
    return [i for i, t in enumerate(inputs) if mask >> i & 1]


def _fake_dtype(loss_id, inputs):
    """The result's dtype: lossjit_output_dtype reads only dtypes, so fake tensors do."""
    handle = _side(loss_id).handle
    views = (_lib.View * max(len(inputs), 1))()
    for i, t in enumerate(inputs):
        views[i] = _lib.View(None, _CODES[t.dtype], 0, None, None)
    out = ctypes.c_int32()
    _lib.check(lib.lossjit_output_dtype(handle, ctypes.addressof(views), len(inputs), ctypes.byref(out)))
    return _DTYPES[out.value]


# ---- the ops ----
# lossjit::value: a reduction's value when no input needs a gradient (what torch.compile calls
# then). Defined with torch.library.Library rather than custom_op: its one Python kernel is all the
# Python a call runs (no autograd kernel in Python, no wrapper around the kernel); autograd is
# torch's C++ fallback, and the kernel refuses inputs that require grad, which lossjit::reduce takes.
_ops = torch.library.Library("lossjit", "FRAGMENT")
_ops.define("value(int loss_id, Tensor[] inputs) -> Tensor", tags=(torch.Tag.pt2_compliant_tag,))


def _value_kernel(loss_id, inputs):
    _native.look()
    ref = _sides.get(loss_id)
    side = ref() if ref is not None else None
    if side is None or side.handle is None:
        side = _side(loss_id)
    if _grad_enabled() and _any_requires_grad(inputs):
        raise UsageError("lossjit::value computes no gradient, and an input requires grad: "
                         "call the Loss, or lossjit::reduce with a wrt_mask")
    return side.evaluate(inputs)


_ops.impl("value", _value_kernel, "CompositeExplicitAutograd")


@torch.library.register_fake("lossjit::value", lib=_ops)
def _(loss_id, inputs):
    return inputs[0].new_empty(_side(loss_id).value_shape(), dtype=_fake_dtype(loss_id, inputs))


# The ops with gradients, defined the same way, their autograd through torch.library.register_autograd.
# Not torch.library.custom_op: its Python wrapper around each call's kernel (backend_impl: the kernel
# under torch._disable_dynamo, then a check that no output aliases an input) took 58 us of own time a
# call of lossjit::reduce under torch.compile (cProfile, the H200's host), more than the kernel's own
# Python and launch together (docs/python.md).
_ops.define("reduce(int loss_id, Tensor[] inputs, int wrt_mask) -> Tensor[]", tags=(torch.Tag.pt2_compliant_tag,))
_ops.define("map(int loss_id, Tensor[] inputs) -> Tensor", tags=(torch.Tag.pt2_compliant_tag,))
_ops.define("map_grad(int loss_id, Tensor[] inputs, Tensor upstream, int wrt_mask) -> Tensor[]",
            tags=(torch.Tag.pt2_compliant_tag,))


def _reduce_kernel(loss_id, inputs, wrt_mask):
    """[value, gradients of the inputs whose bit is set in wrt_mask] from one fused kernel."""
    side = _side(loss_id)
    if wrt_mask:
        return side.value_and_grad_masked(inputs, wrt_mask)
    return side.split(side.evaluate(inputs))


_ops.impl("reduce", _reduce_kernel, "CompositeExplicitAutograd")


@torch.library.register_fake("lossjit::reduce", lib=_ops)
def _reduce_fake(loss_id, inputs, wrt_mask):
    lay_dtype = _fake_dtype(loss_id, inputs)
    out = [inputs[0].new_empty((), dtype=lay_dtype) for _ in range(_side(loss_id).results)]
    for i in _set_bits(inputs, wrt_mask):
        out.append(inputs[i].new_empty(inputs[i].shape))
    return out


def _save_gradients(ctx, side, count, mask, values, saved):
    """What backward needs, for lossjit::reduce and the eager autograd.Function alike: the gradients the
    fused kernel computed (or, for the Function's kernel in backward, the inputs), which inputs they
    belong to, and the results' names."""
    ctx.mask, ctx.count = mask, count
    ctx.results = side.results
    ctx.names = side.loss.results
    ctx.save_for_backward(*saved)
    # Results with no gradient at all (accuracy) are constants to autograd (no tangent under
    # torch.compile either). Of the others, those nothing differentiates get None, not zeros: a
    # gradient reaching one of them is refused.
    differentiable = side.loss._differentiable
    constants = [values[k] for k in range(ctx.results if ctx.results > 1 else 0) if not differentiable[k]]
    if constants:
        ctx.mark_non_differentiable(*constants)
    ctx.set_materialize_grads(False)


def _input_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _first_upstream(ctx, grad_outputs):
    """The upstream gradient of the first result (None where nothing reached it); a gradient reaching a
    later result is refused."""
    for k in range(1, ctx.results):
        if grad_outputs[k] is not None:
            raise UnsupportedError(
                f"a gradient flows into result '{ctx.names[k]}', but lossjit differentiates the first result of a "
                f"list only ('{ctx.names[0]}'): make the combination the first result "
                f"(`total = {ctx.names[0]} + 1e-4 * {ctx.names[k]}; total, {', '.join(ctx.names)}`), or detach it "
                f"(under torch.compile: inside the compiled function, if it returns '{ctx.names[k]}')")
    return grad_outputs[0]


def _by_input(ctx, grads):
    """One entry per input: the differentiated inputs' gradients in order, None for the others."""
    grads, out = iter(grads), []
    for i in range(ctx.count):
        out.append(next(grads) if ctx.mask >> i & 1 else None)
    return out


def _input_gradients(ctx, grad_outputs, grads=None):
    """Each input's gradient (None where not differentiated): the saved ones (`grads`, else all that
    ctx saved) times the upstream gradient."""
    upstream = _first_upstream(ctx, grad_outputs)
    if upstream is None:
        return [None] * ctx.count
    return _by_input(ctx, [g * upstream for g in (ctx.saved_tensors if grads is None else grads)])


def _reduce_setup(ctx, inputs, output):
    loss_id, tensors, wrt_mask = inputs
    side = _side(loss_id)
    _save_gradients(ctx, side, len(tensors), wrt_mask, output[:side.results], output[side.results:])


def _refuse_second_derivative(op):
    raise UnsupportedError(f"{op}: {_lib.SECOND_DERIVATIVE}")


def _reduce_backward(ctx, grad_outputs):
    # The gradient outputs are the op's own: with create_graph=True the first backward's saved gradients
    # times the upstream one lead back here, and ignoring what reaches them would drop the second
    # derivative's term through the inputs.
    if any(g is not None for g in grad_outputs[ctx.results:]):
        _refuse_second_derivative("lossjit::reduce")
    return None, _input_gradients(ctx, grad_outputs), None


torch.library.register_autograd("lossjit::reduce", _reduce_backward, setup_context=_reduce_setup, lib=_ops)


# lossjit::value_and_grad: lossjit::reduce's kernel without an autograd formula, for _TracedReduce.
_ops.define("value_and_grad(int loss_id, Tensor[] inputs, int wrt_mask) -> Tensor[]",
            tags=(torch.Tag.pt2_compliant_tag,))


def _value_and_grad_kernel(loss_id, inputs, wrt_mask):
    _native.look()
    if _grad_enabled() and _any_requires_grad(inputs):
        raise UsageError("lossjit::value_and_grad is not differentiable itself, and an input requires grad: "
                         "call the Loss, or lossjit::reduce")
    return _reduce_kernel(loss_id, inputs, wrt_mask)


_ops.impl("value_and_grad", _value_and_grad_kernel, "CompositeExplicitAutograd")
torch.library.register_fake("lossjit::value_and_grad", lib=_ops)(_reduce_fake)


# The native path's CUDA kernels of lossjit::value and lossjit::value_and_grad (_native.cpp) run the
# plain calls themselves and these Python kernels for the rest; they ask Python only for what stays
# the same from call to call.
def _native_describe(loss_id):
    """(handle, input names, results) of a Loss, for the native kernels (UsageError where it is gone)."""
    side = _side(loss_id)
    return side.handle, list(side.loss.inputs), side.results


def _native_exec(loss_id, device):
    """(scratch buffer, stream, its address, its bytes) of the device's current stream, as this module's
    calls lend it."""
    stream = _raw_stream(device)
    buffer = _scratch_entry(_side(loss_id).handle, device, stream)[0]
    return buffer, stream, buffer.data_ptr(), buffer.numel()


def _configure_native(module):
    module.set_dtypes([torch.empty(0, dtype=d) for d in _DTYPES])
    module.configure_ops(ctypes.cast(_evaluate, ctypes.c_void_p).value, _VALUE_AND_GRAD_ADDRESS,
                         ctypes.cast(lib.lossjit_output_dtype, ctypes.c_void_p).value, _native_describe, _native_exec,
                         _value_kernel, _value_and_grad_kernel)


_native.set_configure(_configure_native)


class _TracedReduce(torch.autograd.Function):
    """A reduction of one result traced by torch.compile on inputs that need gradients. Dynamo traces
    the Function itself, so the compiled forward calls lossjit::value_and_grad, an op with no autograd
    kernel (lossjit::reduce's, with its re-dispatch, runs in Python on every call, grad mode on or
    off), and the compiled backward is the multiply (H100, 4096 elements, torch.autograd.grad of a
    compiled call: 693 us against 764 through lossjit::reduce, alternating; docs/python.md)."""

    @staticmethod
    def forward(ctx, loss_id, mask, *tensors):
        out = torch.ops.lossjit.value_and_grad(loss_id, list(tensors), mask)
        ctx.mask, ctx.count = mask, len(tensors)
        ctx.save_for_backward(*out[1:])
        return out[0]

    @staticmethod
    def backward(ctx, upstream):
        grads = iter(ctx.saved_tensors)
        return (None, None, *[next(grads) * upstream if ctx.mask >> i & 1 else None for i in range(ctx.count)])


# An eager reduction whose inputs are at least this many bytes runs its fused value-and-gradient kernel
# in backward (see _EagerReduce); smaller ones run it in forward. Set from the same-process comparison
# in docs/python.md ("The fused kernel in forward or in backward"); a benchmark may change it.
FUSED_IN_BACKWARD_MIN_BYTES = 1 << 26


class _EagerReduce(torch.autograd.Function):
    """A reduction called eagerly on tensors that need gradients, without the op's dispatch and its
    autograd wrapper (H100, 4096 elements, torch.autograd.grad of the value: 220 us a call against 487
    through lossjit::reduce in the same run; docs/python.md). Two ways, by the inputs' size:

    - From FUSED_IN_BACKWARD_MIN_BYTES: forward computes the value alone and saves the inputs; backward
      runs the fused value-and-gradient kernel with the upstream gradient multiplied in (a float32
      device scalar the kernel reads: no host sync), its value discarded. Against the other way the
      inputs are read once more instead of every gradient read and written again, and no gradient is
      held from forward to backward.
    - Below it, where a call's time is the host's, not the memory's: lossjit::reduce's way, the fused
      kernel in forward and the saved gradients times the upstream one in backward.

    A composite program (its gradient factor takes the upstream gradient on the host) always goes the
    second way, and a float64 upstream gradient (float32 would round it) is multiplied in afterwards."""

    @staticmethod
    def forward(ctx, side, mask, *tensors):
        if side.loss.reduction == "composite" or _input_bytes(tensors) < FUSED_IN_BACKWARD_MIN_BYTES:
            value, grads = side.fused(tensors, mask, pooled=True)
            values = side.split(value)
            # The gradients, then the inputs they belong to (_refuse_twice needs their edges).
            _save_gradients(ctx, side, len(tensors), mask, values, [*grads, *(tensors[i] for i in _set_bits(tensors, mask))])
            ctx.side = None
        else:
            values = side.split(side.evaluate(tensors))
            _save_gradients(ctx, side, len(tensors), mask, values, tensors)
            ctx.side = side
        return tuple(values) if side.results > 1 else values[0]

    @staticmethod
    def backward(ctx, *grad_outputs):
        # Grad mode is on in backward only with create_graph=True: then the gradients refuse to be
        # differentiated again (the second derivative's term through the inputs would be missing).
        if _grad_enabled():
            return _eager_backward_refusing(ctx, *grad_outputs)
        return _eager_backward(ctx, *grad_outputs)


def _saved_gradients_and_inputs(ctx):
    """What the Function's forward saved below the threshold: the gradients, then the inputs they
    belong to (as many)."""
    saved = ctx.saved_tensors
    return saved[:len(saved) // 2], saved[len(saved) // 2:]


def _eager_backward(ctx, *grad_outputs):
    if ctx.side is None:
        return (None, None, *_input_gradients(ctx, grad_outputs, _saved_gradients_and_inputs(ctx)[0]))
    upstream = _first_upstream(ctx, grad_outputs)
    if upstream is None:
        return (None, None, *[None] * ctx.count)
    in_kernel = upstream.dtype != torch.float64
    out = ctx.side.value_and_grad_masked(ctx.saved_tensors, ctx.mask, upstream.float() if in_kernel else None)
    grads = out[ctx.results:]
    if not in_kernel:
        grads = [g * upstream for g in grads]
    return (None, None, *_by_input(ctx, grads))


def _eager_backward_refusing(ctx, *grad_outputs):
    """_eager_backward with create_graph=True: the gradients carry a node that refuses to be
    differentiated, with edges to the inputs differentiated and the upstream gradients, so that
    differentiating anything that depends on them reaches it. (once_differentiable's node leads only
    to the upstream gradient; where that needs no grad, as torch.autograd.grad(loss, p,
    create_graph=True) passes it, the gradients were constants and a gradient penalty silently lost
    the term through the inputs.)"""
    if _DelayedError is None:  # pragma: no cover - another torch
        return _eager_backward_once(ctx, *grad_outputs)
    with torch.no_grad():
        out = _eager_backward(ctx, *grad_outputs)
    if ctx.side is None:
        inputs = _saved_gradients_and_inputs(ctx)[1]
    else:
        saved = ctx.saved_tensors  # the inputs, all of them
        inputs = [saved[i] for i in _set_bits(saved, ctx.mask)]
    return _refuse_twice(out, [*inputs, *(g for g in grad_outputs if g is not None)])


def _refuse_twice(out, reached):
    """`out` with each gradient in it given a node that raises _lib.SECOND_DERIVATIVE when reached, its edges those of
    `reached` (torch's DelayedError, what once_differentiable uses)."""
    positions = [k for k, g in enumerate(out) if g is not None]
    if not positions:
        return out
    refuse = _DelayedError(f"lossjit: {_lib.SECOND_DERIVATIVE}".encode(), len(positions) + len(reached))
    wrapped = refuse(*(out[k] for k in positions), *reached)
    out = list(out)
    for k, g in zip(positions, wrapped):
        out[k] = g
    return tuple(out)


try:  # private to torch (once_differentiable's node); where it is missing, once_differentiable's way
    _DelayedError = torch._C._functions.DelayedError
except AttributeError:  # pragma: no cover - another torch
    _DelayedError = None
_eager_backward_once = once_differentiable(_eager_backward)

# _EagerReduce.apply without autograd.Function.apply's Python wrapper (which binds default arguments
# and unwraps functorch's dead wrappers: only needed while a functorch transform is active, where
# with_autograd takes the wrapper). Private to torch: where it is missing, the wrapper every time.
try:
    _eager_reduce_apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, _EagerReduce)
    _functorch_active = torch._C._are_functorch_transforms_active
except (AttributeError, KeyError):  # pragma: no cover - another torch
    _eager_reduce_apply = None


def _map_kernel(loss_id, inputs):
    return _side(loss_id).run_map(inputs, None)


def _map_grad_kernel(loss_id, inputs, upstream, wrt_mask):
    """A map's vector-Jacobian product with `upstream` for the inputs whose bit is set."""
    return _side(loss_id).map_grad(inputs, upstream, wrt_mask)


_ops.impl("map", _map_kernel, "CompositeExplicitAutograd")
_ops.impl("map_grad", _map_grad_kernel, "CompositeExplicitAutograd")


@torch.library.register_fake("lossjit::map", lib=_ops)
def _(loss_id, inputs):
    return inputs[0].new_empty(_output_shape(loss_id, inputs), dtype=_fake_dtype(loss_id, inputs))


@torch.library.register_fake("lossjit::map_grad", lib=_ops)
def _(loss_id, inputs, upstream, wrt_mask):
    return [inputs[i].new_empty(inputs[i].shape) for i in _set_bits(inputs, wrt_mask)]


def _map_setup(ctx, inputs, output):
    loss_id, tensors = inputs
    ctx.loss_id, ctx.count = loss_id, len(tensors)
    ctx.loss = _registry.get(loss_id)  # keeps the Loss alive until backward has run its kernel
    ctx.mask = sum(1 << i for i, t in enumerate(tensors) if t.requires_grad)
    ctx.save_for_backward(*tensors)


def _map_backward(ctx, upstream):
    tensors = list(ctx.saved_tensors)
    mask = 0
    for i in range(ctx.count):
        if ctx.needs_input_grad[1] and tensors[i].dtype.is_floating_point and (ctx.mask >> i & 1):
            mask |= 1 << i
    grads = [None] * ctx.count
    if mask:
        for i, g in zip(_set_bits(tensors, mask), torch.ops.lossjit.map_grad(ctx.loss_id, tensors, upstream, mask)):
            grads[i] = g
    return None, grads


torch.library.register_autograd("lossjit::map", _map_backward, setup_context=_map_setup, lib=_ops)


# map_grad runs in a map's backward; with create_graph=True autograd records it, and a second derivative
# reaches it here: refused (without a formula torch's fallback would only warn and drop the term).
def _map_grad_setup(ctx, inputs, output):
    pass


def _map_grad_backward(ctx, grads):
    _refuse_second_derivative("lossjit::map_grad")


torch.library.register_autograd("lossjit::map_grad", _map_grad_backward, setup_context=_map_grad_setup, lib=_ops)
