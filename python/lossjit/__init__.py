"""lossjit: a loss written as a string becomes one fused GPU kernel.

    import lossjit, torch
    hinge = lossjit.compile("mean(max(0, 1 - p*t))")
    value = hinge(p, t)          # CUDA tensors: a 0-dim tensor on their device, differentiable
    value.backward()             # the gradients came from the same fused kernel

NumPy arrays (and host __dlpack__ objects) run on the float64 CPU reference. docs/python.md has the rest.
"""
import collections
import ctypes
import itertools
import sys
import threading
import weakref

from . import _lib
from ._lib import (CaptureError, CompileError, CudaError, InternalError, LossjitError, NoDeviceError,
                   ScratchTooSmall, SourceError, UnsupportedError, UsageError)

__all__ = ["compile", "Loss", "cuda_available", "build_native", "version", "LossjitError", "SourceError", "UsageError",
           "UnsupportedError", "CompileError", "CudaError", "NoDeviceError", "CaptureError", "ScratchTooSmall",
           "InternalError"]

__version__ = _lib.lib.lossjit_version().decode()


def version():
    """(lossjit's version, the C API version as (major, minor))."""
    v = _lib.lib.lossjit_c_api_version()
    return __version__, (v >> 16, v & 0xFFFF)


def build_native(verbose=False):
    """Builds the native path for this torch and Python (once; about 20-60 s: a C++ compiler, ninja,
    Python's headers and torch's) and returns its shared object's path. From then on, in this process
    and later ones, an eager call on small inputs that need gradients runs its autograd node in C++
    instead of a Python torch.autograd.Function, and the ops torch.compile's code calls
    (lossjit::value, lossjit::value_and_grad) run their CUDA kernels in C++ (docs/python.md, "The
    native path").
    UsageError, with the compiler's output, where it cannot be built; the Python path stays in use."""
    import torch  # noqa: F401 (the native path is torch's C++ extension)
    from . import _native
    return _native.build(verbose=verbose)


def cuda_available():
    """(True, "") when a CUDA driver and device are usable, else (False, the reason)."""
    if _lib.lib.lossjit_cuda_available():
        return True, ""
    return False, _lib.lib.lossjit_last_error().decode()


_KINDS = {None: 0, "reduction": 1, "map": 2}
# id -> Loss: the PyTorch ops name their Loss by an int (a constant under torch.compile). Weak: a
# Loss is freed when its last user drops it (a compiled function holds the Loss it calls).
_registry = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()
_ids = itertools.count(1)


def compile(program, inputs=None, params=None, *, source_name="expr", expect=None, knobs=None):
    """Parses and checks `program` (SourceError with a caret on mistakes); needs no GPU.

    inputs: the call order of the inputs (default: order of first appearance); params: {name: default}
    (overrides `param x = v;`); expect: "reduction" or "map" to refuse the other kind; knobs: kernel
    variant knobs, {"block": 512, "row_cache": "on"} or "block=512,row_cache=on" (docs/tuning.md;
    UsageError for a bad one). Tensors run on their own CUDA device, whichever it is.
    """
    if expect not in _KINDS:
        raise UsageError(f"expect is {expect!r}; it takes 'reduction', 'map' or None")
    if isinstance(knobs, dict):
        knobs = ",".join(f"{k}={_knob_text(v)}" for k, v in knobs.items())
    elif knobs is not None and not isinstance(knobs, str):
        raise UsageError(f"knobs is {type(knobs).__name__}; it takes a dict or a string such as 'block=512'")
    options = _lib.Options()
    _lib.lib.lossjit_options_init(ctypes.byref(options))
    options.source_name = source_name.encode()
    keep = []
    if inputs:
        names = (ctypes.c_char_p * len(inputs))(*[n.encode() for n in inputs])
        keep.append(names)
        options.inputs, options.input_count = names, len(inputs)
    if params:
        array = (_lib.Param * len(params))(*[_lib.Param(k.encode(), float(v)) for k, v in params.items()])
        keep.append(array)
        options.params, options.param_count = array, len(params)
    options.expect = _KINDS[expect]
    if knobs:
        options.knobs = knobs.encode()
    handle = ctypes.c_void_p()
    text = program.encode()  # with its length: a NUL inside is the checker's to refuse, not the end
    _lib.check(_lib.lib.lossjit_compile_n(text, len(text), ctypes.byref(options), ctypes.byref(handle)))
    return Loss(handle.value, program)


def _knob_text(value):
    """A knob's value as the CLI writes it: True/False as on/off, None as auto."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


class _HostViews:
    """ctypes views of NumPy arrays (kept alive with them) for the CPU reference."""

    def __init__(self, arrays, names):
        import numpy as np
        self.arrays, self.keep = [], []
        self.views = (_lib.View * max(len(arrays), 1))()
        for i, a in enumerate(arrays):
            a = _as_numpy(a, names[i] if i < len(names) else f"input {i}")
            self.arrays.append(a)
            self.views[i] = _numpy_view(a, self.keep)
        self.np = np


def _numpy_dtype_code(dtype, what):
    name = "bool" if dtype.kind == "b" else str(dtype)
    code = _lib.DTYPE_CODES.get(name)
    if code is None or not dtype.isnative:
        raise UsageError(f"{what} is a NumPy array of {dtype}; lossjit reads {', '.join(_lib.DTYPE_NAMES)}")
    return code


def _numpy_view(a, keep):
    code = _numpy_dtype_code(a.dtype, "an input")
    if any(s % a.itemsize for s in a.strides):
        raise UsageError(f"a NumPy array with strides {a.strides} that are not whole elements")
    shape = _lib.shape_array(a.shape)
    strides = _lib.shape_array([s // a.itemsize for s in a.strides])
    keep += [shape, strides, a]
    return _lib.View(a.ctypes.data, code, a.ndim, shape, strides)


def _as_numpy(a, what):
    import numpy as np
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, np.generic):  # a NumPy scalar (np.float16(2.0)): a 0-dim array of its dtype
        return np.asarray(a)
    if isinstance(a, (int, float, bool)):
        return np.asarray(a, dtype=np.float64 if isinstance(a, float) else np.int64 if not isinstance(a, bool) else np.bool_)
    if hasattr(a, "__dlpack__"):
        return np.from_dlpack(a)  # zero-copy for host memory; a CUDA object is refused by NumPy
    raise UsageError(f"{what} is a {type(a).__name__}; the CPU reference takes NumPy arrays or __dlpack__ objects")


def _torch_supported(torch):
    """lossjit's ops need torch.library's custom_op, register_fake and register_autograd: torch 2.4 and later."""
    library = getattr(torch, "library", None)
    return (library is not None and hasattr(library, "custom_op") and hasattr(library, "register_fake")
            and hasattr(library, "register_autograd"))


class Loss:
    """A compiled program. Call it on torch CUDA tensors (a differentiable op), NumPy arrays (the CPU
    reference) or __dlpack__ objects. Thread-safe; one Loss runs on any number of CUDA devices."""

    def __init__(self, handle, source):
        self._handle = handle
        self.source = source
        lib = _lib.lib
        self.kind = "map" if lib.lossjit_kind_of(handle) == 2 else "reduction"
        self.reduction = lib.lossjit_reduction(handle).decode() or None
        self.inputs = tuple(lib.lossjit_input_name(handle, i).decode() for i in range(lib.lossjit_input_count(handle)))
        # A program's several results (`loss, z, acc`); () for one. Calls return them as a Results tuple.
        self.results = tuple(lib.lossjit_result_name(handle, i).decode()
                             for i in range(lib.lossjit_result_count(handle)) if lib.lossjit_result_name(handle, i))
        # rename: a name Python does not take as a field (a keyword, a leading _) becomes _k, its index.
        self._Results = collections.namedtuple("Results", self.results, rename=True) if self.results else None
        # Which results have a gradient at all (accuracy has none): autograd treats the others as constants.
        self._differentiable = tuple(bool(lib.lossjit_result_differentiable(handle, i)) for i in range(len(self.results)))
        self._param_names = []
        for i in range(lib.lossjit_param_count(handle)):
            name = ctypes.c_char_p()
            _lib.check(lib.lossjit_param_at(handle, i, ctypes.byref(name), None))
            self._param_names.append(name.value.decode())
        with _registry_lock:
            self._id = next(_ids)
            _registry[self._id] = self
        # The torch side (lossjit._torch.TorchLoss): made now if torch is loaded (so that a first call
        # inside torch.compile finds it made), else on the first tensor call.
        self._torch = None
        if "torch" in sys.modules and _torch_supported(sys.modules["torch"]):
            self._torch_side()

    def __del__(self):
        torch_side = getattr(self, "_torch", None)
        if torch_side is not None:
            torch_side.close()  # before the handle goes: the native ops' kernels keep it
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and _lib is not None and _lib.lib is not None:
            _lib.lib.lossjit_free(handle)

    def close(self):
        """Frees the compiled program now (a Loss used after this raises UsageError)."""
        with _registry_lock:
            _registry.pop(self._id, None)
        self.__del__()

    def __repr__(self):
        return f"lossjit.Loss({self.source!r}, inputs={self.inputs}, kind={self.kind!r})"

    @property
    def params(self):
        """{name: current value}."""
        out = {}
        for i, name in enumerate(self._param_names):
            value = ctypes.c_double()
            _lib.check(_lib.lib.lossjit_param_at(self._handle, i, None, ctypes.byref(value)))
            out[name] = value.value
        return out

    def set_param(self, name, value):
        """Takes effect for calls that start after it returns; no recompiling. (Under torch.compile or
        a captured CUDA graph the value is read when the kernel launches: set it before capturing.)"""
        _lib.check(_lib.lib.lossjit_set_param(self._handle, name.encode(), float(value)))

    def uses(self, name):
        return bool(_lib.lib.lossjit_uses(self._handle, name.encode()))

    def _check_count(self, args):
        if len(args) != len(self.inputs):
            raise UsageError(f"the program takes {len(self.inputs)} input{'s' if len(self.inputs) != 1 else ''} "
                             f"({', '.join(self.inputs)}), but {len(args)} were given")

    def _torch_side(self):
        if self._torch is None:
            torch = sys.modules.get("torch")
            if torch is not None and not _torch_supported(torch):
                raise UsageError(f"lossjit's PyTorch ops need torch 2.4 or later (torch.library.custom_op and "
                                 f"register_fake); this is torch {getattr(torch, '__version__', '(unknown)')}: "
                                 f"upgrade torch, or pass NumPy arrays (the CPU reference)")
            from . import _torch
            self._torch = _torch.TorchLoss(self)
        return self._torch

    def __call__(self, *args):
        """Reduction: the value (a 0-dim tensor for torch tensors, differentiable; a float for NumPy);
        a program of several results gives a named tuple of them (`out.loss`, `out.z`), whose gradient
        is of the first. Map: the output tensor (or array)."""
        side = self._torch
        if side is not None and args and isinstance(args[0], side.Tensor):
            return side(args)
        torch = sys.modules.get("torch")
        if torch is not None and args and isinstance(args[0], torch.Tensor):
            return self._torch_side()(args)
        if args and _is_cuda_dlpack(args[0]):
            import torch
            return self._torch_side()(tuple(torch.from_dlpack(a) for a in args))
        return self.reference(*args)

    def map(self, *args, out=None):
        """A map's output: for torch tensors a new tensor of the broadcast shape (or into `out`). A map of
        several results (one value per row each) writes one tensor [R, rows...]: `out`, or a new one,
        returned as a named tuple of its R rows."""
        if self.kind != "map":
            raise UsageError(f"this program is a {self.reduction} reduction: call it for its value")
        torch = sys.modules.get("torch")
        if torch is not None and args and isinstance(args[0], torch.Tensor):
            return self._torch_side().map(args, out)
        return self.reference(*args)

    def value_and_grad(self, *args, wrt=None):
        """(value, (gradient of each input in `wrt`, default every floating input)) from one fused kernel,
        on torch CUDA tensors; outside autograd (the tensors' requires_grad is ignored)."""
        return self._torch_side().value_and_grad(args, wrt)

    def reference(self, *arrays):
        """The float64 CPU reference on NumPy arrays (or host __dlpack__ objects): a float for a
        reduction, a NumPy array of the output's shape (float64) for a map; a named tuple of those for
        a program of several results."""
        self._check_count(arrays)
        host = _HostViews(arrays, self.inputs)
        lib = _lib.lib
        if self.kind == "reduction" and self.results:
            values = (ctypes.c_double * len(self.results))()
            _lib.check(lib.lossjit_reference_values(self._handle, ctypes.addressof(host.views), len(arrays),
                                                    ctypes.addressof(values), len(self.results)))
            return self._Results(*values)
        if self.kind == "reduction":
            value = ctypes.c_double()
            _lib.check(lib.lossjit_reference(self._handle, ctypes.addressof(host.views), len(arrays), ctypes.byref(value)))
            return value.value
        shape = (ctypes.c_int64 * 16)()
        ndim = ctypes.c_int32()
        _lib.check(lib.lossjit_output_shape(self._handle, ctypes.addressof(host.views), len(arrays),
                                            ctypes.addressof(shape), ctypes.byref(ndim)))
        out = host.np.empty(tuple(shape[:ndim.value]), dtype=host.np.float64)
        keep = []
        view = _numpy_view(out, keep)
        _lib.check(lib.lossjit_reference_map(self._handle, ctypes.addressof(host.views), len(arrays),
                                             ctypes.addressof(view)))
        return self._Results(*out) if self.results else out

    def reference_grad(self, *arrays, wrt=None, upstream=1.0):
        """Gradients on the CPU reference, float64 NumPy arrays in each input's shape, for the inputs
        named in `wrt` (default all). A map takes `upstream`, an array of the output's shape."""
        self._check_count(arrays)
        host = _HostViews(arrays, self.inputs)
        np = host.np
        wrt = list(wrt) if wrt is not None else list(self.inputs)
        index = {n: i for i, n in enumerate(self.inputs)}
        grads = [np.zeros(host.arrays[index[n]].shape if n in index else (), dtype=np.float64) for n in wrt]
        keep = []
        views = (_lib.View * max(len(grads), 1))(*[_numpy_view(g, keep) for g in grads])
        names = (ctypes.c_char_p * max(len(wrt), 1))(*[n.encode() for n in wrt])
        up_view = None
        if self.kind == "map":
            up = _as_numpy(upstream, "upstream")
            up_view = _numpy_view(up, keep)
            scale = 0.0
        else:
            scale = float(upstream)
        _lib.check(_lib.lib.lossjit_reference_grad(
            self._handle, ctypes.addressof(host.views), len(arrays), ctypes.addressof(names), len(wrt),
            ctypes.addressof(views), scale, ctypes.addressof(up_view) if up_view is not None else None))
        return tuple(grads)


def _is_cuda_dlpack(a):
    if not hasattr(a, "__dlpack_device__"):
        return False
    device_type, _ = a.__dlpack_device__()
    return device_type == 2  # kDLCUDA


def __getattr__(name):
    """LinearLoss and linear_loss (lossjit._linear) need torch: imported on first use."""
    if name in ("LinearLoss", "linear_loss"):
        import torch
        if not _torch_supported(torch):
            raise UsageError(f"lossjit.{name} needs torch 2.4 or later (torch.library.custom_op); this is torch "
                             f"{getattr(torch, '__version__', '(unknown)')}")
        from . import _linear
        return getattr(_linear, name)
    raise AttributeError(f"module 'lossjit' has no attribute {name!r}")
