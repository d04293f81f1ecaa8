"""The C ABI (include/lossjit/lossjit.h) through ctypes: finding liblossjit_c.so.1, its structs and
function signatures, and its status codes as Python exceptions."""
import ctypes
import ctypes.util
import os
import pathlib

C_API_MAJOR = 1  # the LOSSJIT_C_API_VERSION major this package is written against
C_API_MINOR = 4  # and the minor it needs at least (1.1: lossjit_compile_n; 1.2: several results; 1.3: knobs;
                 # 1.4: linear_loss)


class LossjitError(Exception):
    """Everything lossjit raises derives from this."""


class SourceError(LossjitError):
    """A mistake in the program text. str() is the diagnostic with the line and a caret;
    .line and .column locate it (from 1)."""

    def __init__(self, message, line=0, column=0):
        super().__init__(message)
        self.line, self.column = line, column


class UsageError(LossjitError, ValueError):
    """Wrong arguments: shapes, dtypes, devices, names."""


class UnsupportedError(UsageError):
    """Valid, but not on the GPU yet; Loss.reference computes it on the CPU."""


class CompileError(LossjitError):
    """NVRTC rejected generated code: a lossjit bug; the message has the log."""


class CudaError(LossjitError, RuntimeError):
    """A CUDA driver call failed."""


class NoDeviceError(CudaError):
    """No CUDA driver or no such device."""


class CaptureError(LossjitError, RuntimeError):
    """The call would compile, load or allocate while its stream is captured into a CUDA graph:
    make the same call once before capturing."""


class ScratchTooSmall(UsageError):
    """The lent scratch is too small; .needed is the size that suffices."""

    def __init__(self, message, needed):
        super().__init__(message)
        self.needed = needed


class InternalError(LossjitError, RuntimeError):
    """A broken invariant inside lossjit (please report)."""


# What a gradient lossjit computed says when differentiated again (create_graph=True, then a second
# derivative): the ops, the eager Function and the native path (_native.cpp) raise it alike.
SECOND_DERIVATIVE = ("a gradient flows into a gradient lossjit computed (create_graph=True, then the gradient "
                     "differentiated again): lossjit differentiates a program once, and the second derivative would "
                     "miss its term through the inputs; compute it with torch (torch.func.hessian of a torch function) "
                     "instead")

# lossjit_status (lossjit.h) -> exception class. Fixed by the ABI's major version.
_ERRORS = {1: SourceError, 2: UsageError, 3: UnsupportedError, 4: CompileError, 5: CudaError,
           6: NoDeviceError, 7: CaptureError, 8: ScratchTooSmall, 9: MemoryError, 10: InternalError}
SCRATCH_TOO_SMALL = 8


class View(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


class Exec(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("device", ctypes.c_int32), ("scratch", ctypes.c_void_p),
                ("scratch_bytes", ctypes.c_size_t)]


class Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


class Options(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("source_name", ctypes.c_char_p),
                ("inputs", ctypes.POINTER(ctypes.c_char_p)), ("input_count", ctypes.c_size_t),
                ("params", ctypes.POINTER(Param)), ("param_count", ctypes.c_size_t),
                ("device", ctypes.c_int32), ("expect", ctypes.c_int32), ("knobs", ctypes.c_char_p)]


def _candidates():
    """Where liblossjit_c.so.1 is looked for, in order (docs/python.md, "Install"):
    1. LOSSJIT_LIBRARY, a path; when set, nothing else is tried.
    2. The copy inside the package, lossjit/liblossjit_c.so.1, which `pip install ./python` puts there.
    3. The checkout's CMake build folder, when this package is the checkout's python/lossjit
       (PYTHONPATH=python, or `pip install -e ./python`): build/src/capi/liblossjit_c.so.1.
    4. The system loader: ldconfig's cache, LD_LIBRARY_PATH (`cmake --install` puts it in lib/)."""
    env = os.environ.get("LOSSJIT_LIBRARY")
    if env:
        yield env, "LOSSJIT_LIBRARY"
        return
    here = pathlib.Path(__file__).resolve().parent
    yield str(here / "liblossjit_c.so.1"), "in the package"
    if (here.parent / "pyproject.toml").is_file():  # python/lossjit of a checkout, not site-packages
        yield str(here.parent.parent / "build" / "src" / "capi" / "liblossjit_c.so.1"), "the checkout's build folder"
    yield ctypes.util.find_library("lossjit_c") or "liblossjit_c.so.1", "the system loader"


def _load():
    tried = []
    for path, origin in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} ({origin}): no such file")
            continue
        try:
            return path, ctypes.CDLL(path), ctypes.PyDLL(path)  # one library; PyDLL calls keep the GIL
        except OSError as e:
            tried.append(f"{path} ({origin}): {str(e).removeprefix(path + ': ')}")
    raise ImportError("lossjit: cannot load liblossjit_c.so.1. Build it (cmake -S . -B build && cmake --build "
                      "build) and install the package again (pip install ./python), or set LOSSJIT_LIBRARY to "
                      "its path. Tried, in order:\n  " + "\n  ".join(tried))


# library_path: the library loaded, as given to the loader (a file path, or a name the system resolved).
library_path, lib, gil_lib = _load()

_vp, _sz, _i32, _cp, _dbl = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_char_p, ctypes.c_double
_SIGNATURES = {
    "lossjit_c_api_version": (ctypes.c_uint32, []),
    "lossjit_version": (_cp, []),
    "lossjit_dtype_name": (_cp, [_i32]),
    "lossjit_last_error": (_cp, []),
    "lossjit_last_error_status": (_i32, []),
    "lossjit_last_error_line": (_i32, []),
    "lossjit_last_error_column": (_i32, []),
    "lossjit_last_error_scratch_bytes": (_sz, []),
    "lossjit_cuda_available": (_i32, []),
    "lossjit_options_init": (None, [ctypes.POINTER(Options)]),
    "lossjit_compile_n": (_i32, [_cp, _sz, ctypes.POINTER(Options), ctypes.POINTER(_vp)]),
    "lossjit_free": (None, [_vp]),
    "lossjit_kind_of": (_i32, [_vp]),
    "lossjit_reduction": (_cp, [_vp]),
    "lossjit_input_count": (_sz, [_vp]),
    "lossjit_input_name": (_cp, [_vp, _sz]),
    "lossjit_param_count": (_sz, [_vp]),
    "lossjit_param_at": (_i32, [_vp, _sz, ctypes.POINTER(_cp), ctypes.POINTER(_dbl)]),
    "lossjit_set_param": (_i32, [_vp, _cp, _dbl]),
    "lossjit_uses": (_i32, [_vp, _cp]),
    "lossjit_scratch_bytes": (_i32, [_vp, _i32, ctypes.POINTER(_sz)]),
    "lossjit_output_shape": (_i32, [_vp, _vp, _sz, _vp, ctypes.POINTER(_i32)]),
    "lossjit_output_dtype": (_i32, [_vp, _vp, _sz, ctypes.POINTER(_i32)]),
    # The GPU calls take addresses (ints): the hot path passes precomputed ones, no byref per call.
    "lossjit_evaluate": (_i32, [_vp, _vp, _sz, _vp, _vp]),
    "lossjit_map": (_i32, [_vp, _vp, _sz, _vp, _vp]),
    "lossjit_value_and_grad": (_i32, [_vp, _vp, _sz, _vp, _sz, _vp, _vp, ctypes.c_float, _vp, _vp]),
    "lossjit_map_grad": (_i32, [_vp, _vp, _sz, _vp, _sz, _vp, _vp, _vp]),
    "lossjit_reference": (_i32, [_vp, _vp, _sz, ctypes.POINTER(_dbl)]),
    "lossjit_reference_map": (_i32, [_vp, _vp, _sz, _vp]),
    "lossjit_reference_values": (_i32, [_vp, _vp, _sz, _vp, _sz]),
    "lossjit_result_count": (_sz, [_vp]),
    "lossjit_result_name": (_cp, [_vp, _sz]),
    "lossjit_result_differentiable": (_i32, [_vp, _sz]),
    "lossjit_reference_grad": (_i32, [_vp, _vp, _sz, _vp, _sz, _vp, _dbl, _vp]),
    "lossjit_view_from_dlpack": (_i32, [_vp, ctypes.POINTER(View), ctypes.POINTER(_i32)]),
    "lossjit_reference_dlpack": (_i32, [_vp, _vp, _sz, ctypes.POINTER(_dbl)]),
    "lossjit_linear_create": (_i32, [_vp, _cp, ctypes.c_int64, _sz, _i32, ctypes.POINTER(_vp)]),
    "lossjit_linear_free": (None, [_vp]),
    "lossjit_linear_plan": (_i32, [_vp, _vp, _vp, _i32, _vp, _vp, _vp]),
    "lossjit_linear_run": (_i32, [_vp, _vp, _vp, _vp, _vp, _sz, _vp, _vp, _vp, _vp, _vp, _vp]),
    "lossjit_linear_backward": (_i32, [_vp, _vp, _vp, _vp, _vp, _sz, _vp, _vp, _vp, _vp, _vp, _vp]),
}
# The version first: an older library lacks functions below, and should say so rather than fail on one.
lib.lossjit_c_api_version.restype, lib.lossjit_c_api_version.argtypes = ctypes.c_uint32, []
_version = lib.lossjit_c_api_version()
if _version >> 16 != C_API_MAJOR or _version & 0xFFFF < C_API_MINOR:
    raise ImportError(f"lossjit: liblossjit_c.so has C API version {_version >> 16}.{_version & 0xFFFF}; "
                      f"this package needs {C_API_MAJOR}.{C_API_MINOR} or a later {C_API_MAJOR}.x")

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    for _library in (lib, gil_lib):
        _f = getattr(_library, _name)
        _f.restype, _f.argtypes = _restype, _argtypes

# The dtype codes, named by the library's one dtype table (lossjit_dtype_name).
DTYPE_NAMES = []
while (_n := lib.lossjit_dtype_name(len(DTYPE_NAMES))) is not None:
    DTYPE_NAMES.append(_n.decode())
DTYPE_CODES = {name: code for code, name in enumerate(DTYPE_NAMES)}


def error(status):
    """The exception for a failed call's status, with this thread's last-error message."""
    message = (lib.lossjit_last_error() or b"").decode(errors="replace")
    cls = _ERRORS.get(status, InternalError)
    if cls is SourceError:
        return SourceError(message, lib.lossjit_last_error_line(), lib.lossjit_last_error_column())
    if cls is ScratchTooSmall:
        return ScratchTooSmall(message, lib.lossjit_last_error_scratch_bytes())
    return cls(message)


def check(status):
    if status:
        raise error(status)


def shape_array(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)
