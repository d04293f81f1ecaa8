"""The native path (lossjit/_native.cpp) on the CPU: built with torch's C++ extension loader
into a scratch TORCH_EXTENSIONS_DIR, then driven with a stand-in for lossjit_value_and_grad (a ctypes
callback that writes known gradients and records its arguments) on CPU tensors, so that the autograd
node's forward, backward, refusals and errors are checked without a GPU. The GPU tests run it against
the library (test_gpu.py). Skips, saying why, without torch, a C++ compiler or ninja."""
import ctypes
import os
import shutil

import pytest

torch = pytest.importorskip("torch")

from lossjit import _lib  # noqa: E402

if shutil.which(os.environ.get("CXX", "c++")) is None or shutil.which("ninja") is None:
    pytest.skip("no C++ compiler or ninja to build the native path with", allow_module_level=True)


@pytest.fixture(scope="module")
def native():
    """Built into the session's scratch TORCH_EXTENSIONS_DIR (conftest.py)."""
    from lossjit import _native
    path = _native.build()
    assert os.path.isfile(path) and os.path.basename(path).startswith(_native._name())
    return _native.module()


_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                              ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p,
                              ctypes.c_void_p)


class FakeLibrary:
    """lossjit_value_and_grad's stand-in: gradient k gets 10 * (k + 1) + e at element e, the value 42."""

    def __init__(self):
        self.status, self.calls = 0, []
        self.entry = _SIGNATURE(self._call)
        self.address = ctypes.cast(self.entry, ctypes.c_void_p).value

    def _call(self, loss, inputs, count, names, wrt_count, grads, value, upstream, upstream_device, exec_):
        self.calls.append(dict(loss=loss, inputs=inputs, count=count, names=names, wrt_count=wrt_count,
                               upstream=upstream, upstream_device=upstream_device, exec=exec_))
        if self.status:
            return self.status
        views = ctypes.cast(grads, ctypes.POINTER(_lib.View))
        for k in range(wrt_count):
            n = 1
            for d in range(views[k].ndim):
                n *= views[k].shape[d]
            data = (ctypes.c_float * n).from_address(views[k].data)
            for e in range(n):
                data[e] = 10 * (k + 1) + e
        ctypes.c_float.from_address(ctypes.cast(value, ctypes.POINTER(_lib.View))[0].data).value = 42.0
        return 0


def _plan(tensors, mask):
    """The gradient plan's views as _torch._GradPlan lays them out: one per differentiated input, then the value's."""
    keep, chosen = [], [t for i, t in enumerate(tensors) if mask >> i & 1]
    views = (_lib.View * (len(chosen) + 1))()
    for k, t in enumerate(chosen):
        shape = _lib.shape_array(t.shape)
        keep.append(shape)
        views[k] = _lib.View(None, 0, t.dim(), shape, None)
    return views, keep


def _call(native, fake, tensors, mask, value=None):
    views, keep = _plan(tensors, mask)
    value = torch.empty(()) if value is None else value
    out = native.fused(list(tensors), mask, value, fake.address, 11, 22, 33, ctypes.addressof(views), 44)
    return out, (views, keep)


@pytest.mark.parametrize("mask, expect", [
    (0b001, {0: [10, 11, 12]}),
    (0b100, {2: [10, 11, 12, 13]}),
    (0b101, {0: [10, 11, 12], 2: [20, 21, 22, 23]}),
])
def test_value_and_gradients_times_upstream(native, mask, expect):
    fake = FakeLibrary()
    tensors = [torch.randn(3, requires_grad=bool(mask & 1)), torch.randn(3), torch.randn(4, requires_grad=bool(mask & 4))]
    value = torch.empty(())
    out, keep = _call(native, fake, tensors, mask, value)
    assert out.item() == 42.0 and out.data_ptr() == value.data_ptr() and out.requires_grad
    call = fake.calls[0]
    assert (call["loss"], call["inputs"], call["count"], call["names"], call["exec"]) == (11, 22, 3, 33, 44)
    assert call["wrt_count"] == len(expect) and call["upstream"] == 1.0 and call["upstream_device"] is None
    wrt = [tensors[i] for i in sorted(expect)]
    grads = torch.autograd.grad(out * 0.5, wrt)
    for g, i in zip(grads, sorted(expect)):
        assert g.tolist() == [0.5 * v for v in expect[i]] and g.dtype == tensors[i].dtype
    assert not any(g.requires_grad for g in grads)


def test_a_gradient_differentiated_again_is_refused(native):
    """create_graph=True, then anything that depends on the gradient differentiated: the node refuses,
    whether or not the upstream gradient requires grad (a gradient penalty must not lose its term)."""
    fake = FakeLibrary()
    p, t = torch.randn(3, requires_grad=True), torch.randn(3)
    out, keep = _call(native, fake, [p, t], 0b01)
    (g,) = torch.autograd.grad(out, p, create_graph=True)  # upstream: ones, needing no grad
    assert g.detach().tolist() == [10, 11, 12] and g.requires_grad
    with pytest.raises(RuntimeError, match="differentiates a program once"):
        torch.autograd.grad((g * p).sum(), p)
    scale = torch.tensor(0.25, requires_grad=True)
    out, keep = _call(native, fake, [p, t], 0b01)
    (g,) = torch.autograd.grad(out * scale, p, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiates a program once"):
        torch.autograd.grad(g.sum(), scale)


def test_a_failed_launch_says_its_status(native):
    fake = FakeLibrary()
    fake.status = _lib.SCRATCH_TOO_SMALL
    p, t = torch.randn(3, requires_grad=True), torch.randn(3)
    with pytest.raises(native.LaunchError, match=f"returned status {_lib.SCRATCH_TOO_SMALL}$"):
        _call(native, fake, [p, t], 0b01)
    assert len(fake.calls) == 1


@pytest.mark.parametrize("mode, found", [("auto", True), ("off", False)])
def test_a_later_process_finds_the_build(native, mode, found):
    """Another process of the same torch and Python imports the build without building (no compiler
    needed: PATH empty), unless LOSSJIT_TORCH_NATIVE=off."""
    import pathlib
    import subprocess
    import sys
    from lossjit import _native
    code = ("import lossjit._native as n, torch.utils.cpp_extension as c; "
            "c.load = None; m = n.module(); print(m is not None and m.__file__)")  # load: never called
    env = dict(os.environ, PATH="", PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[1]), **{_native.MODE_VARIABLE: mode})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (native.__file__ if found else "False")


def test_the_ops_kernels_register_once_configured_and_go_again(native):
    """The CUDA kernels of lossjit::value and lossjit::value_and_grad register only once configured
    (torch's side of lossjit gives the library's entry points and its callbacks), and set_ops(False)
    removes them, so that the ops' Python kernels run again. Here on torch 1.13 (CPU): configured with
    stand-ins, which no call reaches (no CUDA tensors); the GPU tests run the kernels."""
    import lossjit
    if lossjit._torch_supported(torch):
        pytest.skip("torch 2.4 or later: torch's side of lossjit configures the extension (no stand-ins on it); "
                    "the GPU tests drive the ops' kernels")

    def has_cuda_kernel(op):
        try:
            return torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA")
        except RuntimeError:  # "does not exist": nothing registered under the name (torch 1.13 defines no lossjit op)
            return False

    assert native.set_ops(True) is False and not native.ops_registered()
    native.configure_ops(1, 2, 3, None, None, None, None)
    try:
        assert native.set_ops(True) is True and native.ops_registered()
        assert has_cuda_kernel("lossjit::value") and has_cuda_kernel("lossjit::value_and_grad")
        assert native.set_ops(True) is True  # once
    finally:
        assert native.set_ops(False) is False
    assert not native.ops_registered()
    assert not has_cuda_kernel("lossjit::value") and not has_cuda_kernel("lossjit::value_and_grad")
    assert native.ops_counts() == (0, 0)
    native.forget(7)  # nothing kept of that Loss: no-op


def test_the_ops_kernels_take_dtype_codes_from_pythons_table(native):
    """The ops' kernels read lossjit's dtype codes from Python's table (_lib.DTYPE_NAMES, through
    set_dtypes), not from a copy of their own: each dtype of the table gets its code, any other none,
    and the table is read once (a later one is ignored: calls read it without a lock)."""
    from lossjit import _lib
    table = [getattr(torch, name) for name in _lib.DTYPE_NAMES]
    native.set_dtypes([torch.empty(0, dtype=d) for d in table])
    for code, dtype in enumerate(table):
        assert native.dtype_code_of(torch.empty(0, dtype=dtype)) == code
    assert native.dtype_code_of(torch.empty(0, dtype=torch.complex64)) == -1
    assert native.dtype_code_of(torch.empty(0, dtype=torch.int16)) == -1
    native.set_dtypes([torch.empty(0, dtype=torch.int16)])
    assert native.dtype_code_of(torch.empty(0, dtype=torch.int16)) == -1
    assert native.dtype_code_of(torch.empty(0, dtype=table[0])) == 0
    with pytest.raises(ValueError, match="more than the ops' kernels hold"):  # not a silent fall-back to Python
        native.set_dtypes([torch.empty(0)] * 33)


class FakeExtension:
    """A loaded extension as _native drives it: records what it is asked; set_ops registers only where
    the extension was configured (as the real one's, which returns False before configure_ops)."""

    def __init__(self, configured=True):
        self.configured, self.registered, self.calls = configured, False, []

    def set_ops(self, on):
        self.calls.append(("set_ops", on))
        self.registered = on and self.configured
        return self.registered

    def forget(self, loss_id):
        self.calls.append(("forget", loss_id))

    def drop_scratch(self, device, stream):
        self.calls.append(("drop_scratch", device, stream))


@pytest.fixture
def clean_native(monkeypatch):
    """_native's state as in a process that has loaded nothing (restored afterwards)."""
    from lossjit import _native
    for name, value in (("_module", None), ("_looked", False), ("_registered", None), ("_keeping", []),
                        ("_configure", None)):
        monkeypatch.setattr(_native, name, value)
    return _native


def test_use_keeps_one_extensions_kernels_registered(clean_native):
    """use() switches the paths: one extension's ops' kernels registered at a time, none with
    use(None); a replaced scratch reaches the registered extension only; an extension not configured
    registers nothing."""
    n = clean_native
    a, b = FakeExtension(), FakeExtension()
    assert n.use(a) is None and n.module() is a and n._registered is a and a.calls == [("set_ops", True)]
    assert n.use(b) is a and a.calls[-1] == ("set_ops", False) and not a.registered and b.registered
    n.scratch_replaced(0, 1234)
    assert b.calls[-1] == ("drop_scratch", 0, 1234) and ("drop_scratch", 0, 1234) not in a.calls
    assert n.use(b) is b and b.calls.count(("set_ops", True)) == 1  # already registered: nothing asked
    assert n.use(None) is b and not b.registered and n._registered is None and n.module() is None
    n.scratch_replaced(0, 1234)  # nothing registered: nobody asked
    assert b.calls.count(("drop_scratch", 0, 1234)) == 1
    unconfigured = FakeExtension(configured=False)
    n.use(unconfigured)
    assert n.module() is unconfigured and n._registered is None


def test_look_loads_a_build_once_where_nothing_has_looked(clean_native, monkeypatch):
    """look(), which the ops' Python kernels call first, looks for a build where nothing has looked yet (a
    process that only runs compiled code calls no eager path that would), and not again."""
    n = clean_native
    looked = []

    def module():
        looked.append(True)
        n._looked = True
    monkeypatch.setattr(n, "module", module)
    n.look()
    n.look()
    assert looked == [True]


def test_configure_reaches_a_loaded_extension_and_forget_every_configured_one(clean_native):
    """An extension loaded before torch's side of lossjit (lossjit.build_native() first) is configured
    and registered when that side arrives (set_configure); forget() reaches every extension configured,
    registered or not."""
    n = clean_native
    a = FakeExtension(configured=False)
    n.use(a)
    assert n._registered is None
    configured = []

    def configure(module):
        configured.append(module)
        module.configured = True
    n.set_configure(configure)
    assert configured == [a] and n._registered is a and a.registered
    b = FakeExtension()
    n._configured(type("Loaded", (FakeExtension,), {"set_second_derivative": lambda self, text: None})())
    assert len(configured) == 2 and len(n._keeping) == 2
    n.use(b)
    n.forget(7)
    assert ("forget", 7) in a.calls and ("forget", 7) in n._keeping[1].calls and ("forget", 7) not in b.calls
    n.use(a)
    n.set_configure(configure)  # `a` configured again: still kept once, so forgotten once
    assert configured[-1] is a and len(n._keeping) == 2
    n.forget(8)
    assert a.calls.count(("forget", 8)) == 1
