"""lossjit's torch paths in C++ (_native.cpp): the eager autograd node of a reduction and the CUDA
kernels of the ops lossjit::value and lossjit::value_and_grad (what torch.compile's code calls). Built
once on request with torch's C++ extension loader, then found by every later process of the same
torch and Python.

A call on small inputs is the host's time; in C++ the autograd node costs less than a Python
torch.autograd.Function, and an op's kernel less than its Python kernel (docs/python.md, "The native
path"). Nothing is built behind the user's back: `lossjit.build_native()` builds it (a compiler,
ninja, Python's headers and torch's, about 20-60 s), and from then on calls use it where they can.
LOSSJIT_TORCH_NATIVE=off keeps the Python paths (comparisons, debugging)."""
import hashlib
import importlib.util
import os
import pathlib
import sys
import threading

import torch

from ._lib import SECOND_DERIVATIVE, UsageError

MODE_VARIABLE = "LOSSJIT_TORCH_NATIVE"
SOURCE = pathlib.Path(__file__).with_name("_native.cpp")

_lock = threading.Lock()
_module = None     # the loaded extension in use
_looked = False    # whether a built one was looked for (once a process, unless built since)
_registered = None  # the extension whose ops' kernels are registered (at most one at a time)
_configure = None   # _torch's setup of a loaded extension's ops (set by _torch: it imports this module)
_keeping = []       # the extensions configured: what their ops' kernels keep of each Loss (forget)


def _header_directory():
    """The C API's header: inside the package (a wheel) or the checkout's include/."""
    here = pathlib.Path(__file__).resolve().parent
    for d in (here / "include", here.parent.parent / "include"):
        if (d / "lossjit" / "lossjit.h").is_file():
            return d
    raise UsageError("lossjit's C header (lossjit/lossjit.h) is neither in the package nor in the checkout's include/: "
                     "the native path cannot be built")


def _name():
    """The module's name: one per source, header, torch and Python, so that a change of any of them
    is a new build (an extension built against another torch must not be loaded)."""
    digest = hashlib.sha256()
    digest.update(SOURCE.read_bytes())
    digest.update((_header_directory() / "lossjit" / "lossjit.h").read_bytes())
    digest.update(f"{torch.__version__}|{sys.implementation.cache_tag}".encode())
    return "lossjit_native_" + digest.hexdigest()[:16]


def _built_path(name):
    """Where torch's loader puts the module (TORCH_EXTENSIONS_DIR, else its cache folder)."""
    from torch.utils import cpp_extension
    return pathlib.Path(cpp_extension._get_build_directory(name, verbose=False)) / f"{name}.so"


def _import(name, path):
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return _configured(module)


def _configured(module):
    module.set_second_derivative(f"lossjit: {SECOND_DERIVATIVE}")
    if _configure is not None:
        _configure(module)
        _keep(module)
    return module


def _keep(module):
    if all(kept is not module for kept in _keeping):
        _keeping.append(module)


def _register(module):
    """Makes `module`'s ops' kernels the registered ones (None: the ops' Python kernels). A module not
    configured yet (torch's side of lossjit not imported) registers nothing until set_configure."""
    global _registered
    if _registered is module:
        return
    if _registered is not None:
        _registered.set_ops(False)
    _registered = module if module is not None and module.set_ops(True) else None


def set_configure(configure):
    """_torch's setup of an extension's ops (the library's entry points, its Python callbacks), applied
    to every extension loaded from now on and to the one already in use."""
    global _configure
    with _lock:
        _configure = configure
        if _module is not None:
            configure(_module)
            _keep(_module)
            _register(_module)


def look():
    """Loads a build on the ops' first call in a process that has not looked for one (a process that only
    runs compiled code calls no eager path that would): its kernels then take the calls after this one.
    Not at import: the lookup imports torch's extension loader (and setuptools)."""
    if not _looked:
        module()


def use(module):
    """Selects the paths: `module`'s (a loaded extension) or, with None, the Python ones. Returns the
    extension in use before (tests and benchmarks compare the two). Switch while no other thread calls
    lossjit's ops: torch's dispatcher does not expect a kernel to go while another thread runs it."""
    global _module, _looked
    with _lock:
        before = _module
        _module, _looked = module, True
        _register(module)
    return before


def scratch_replaced(device, stream):
    """Python replaced the scratch of (device, stream) (a larger one): the ops' kernels drop their copy."""
    module = _registered
    if module is not None:
        module.drop_scratch(device, stream)


def forget(loss_id):
    """A Loss is gone or closed: the ops' kernels drop what they keep of it before its handle is freed."""
    for module in _keeping or ():  # None only at interpreter shutdown
        module.forget(loss_id)


def module():
    """The loaded extension, or None: switched off, or not built for this torch and Python."""
    global _module, _looked
    if _module is not None or _looked:
        return _module
    with _lock:
        if not _looked:
            _looked = True
            if os.environ.get(MODE_VARIABLE, "auto") != "off":
                try:
                    name = _name()
                    path = _built_path(name)
                    if path.is_file():
                        _module = _import(name, path)
                        _register(_module)
                except Exception:  # a private torch function gone, a header missing, an unloadable file:
                    _module = None  # the Python path, which is correct without it
    return _module


def build(verbose=False):
    """Builds the native path for this torch and Python if it is not built yet, loads it and returns
    the path of its shared object. Raises UsageError with the compiler's output where it cannot."""
    global _module, _looked
    from torch.utils import cpp_extension
    name = _name()
    with _lock:
        try:  # C++17 as the library (torch 1.13's loader asks for C++14)
            loaded = cpp_extension.load(name, [str(SOURCE)], extra_include_paths=[str(_header_directory())],
                                        extra_cflags=["-O2", "-std=c++17"], verbose=verbose)
        except Exception as e:
            raise UsageError(f"the native path could not be built (a C++ compiler, ninja, Python's headers and torch's "
                             f"are needed; the Python path stays in use): {e}") from e
        _module, _looked = _configured(loaded), True
        _register(_module)
    return loaded.__file__
