"""The Python package without a GPU: NumPy on the CPU reference, errors, parameters, DLPack."""
import pathlib
import sys

import numpy as np
import pytest

import lossjit

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
rng = np.random.default_rng(7)


def test_version():
    version, (major, minor) = lossjit.version()
    assert version == lossjit.__version__ and major == 1 and minor >= 0


def test_source_error_has_line_column_and_caret():
    with pytest.raises(lossjit.SourceError) as e:
        lossjit.compile("d = p - t;\nmean(lgo(d))", source_name="mine")
    assert e.value.line == 2 and e.value.column == 6
    text = str(e.value)
    assert text.startswith("mine:2:6: error:") and "lgo" in text
    assert text.splitlines()[-1] == "     ^"


def test_expect_and_usage_errors():
    with pytest.raises(lossjit.SourceError):
        lossjit.compile("mean(p)", expect="map")
    with pytest.raises(lossjit.UsageError):
        lossjit.compile("mean(p)", expect="sum")
    loss = lossjit.compile("mean((p - t)^2)")
    with pytest.raises(lossjit.UsageError, match="2 inputs"):
        loss.reference(np.zeros(3, np.float32))
    with pytest.raises(lossjit.UsageError, match="broadcast"):
        loss.reference(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(lossjit.UsageError, match="int16"):
        loss.reference(np.zeros(3, np.int16), np.zeros(3, np.float32))
    assert issubclass(lossjit.UsageError, ValueError)


def test_knobs_are_checked_at_compile():
    # As the CLI's --knob: a dict (True/False as on/off, None as auto) or a string.
    x = rng.standard_normal((8, 16)).astype(np.float32)
    for knobs in ({"block": 512, "row_cache": True, "unroll": 4}, "block=512, row_cache=off", {"row_cache": None}):
        loss = lossjit.compile("mean(logsumexp(x, -1))", knobs=knobs)
        assert abs(loss.reference(x) - np.mean(np.log(np.sum(np.exp(x.astype(np.float64)), -1)))) < 1e-12
    with pytest.raises(lossjit.UsageError, match="multiple of 32"):
        lossjit.compile("mean(p)", knobs={"block": 100})
    with pytest.raises(lossjit.UsageError, match="row_cache: 'sometimes'"):
        lossjit.compile("mean(p)", knobs="row_cache=sometimes")
    with pytest.raises(lossjit.UsageError, match="unknown knob 'blocks'"):
        lossjit.compile("mean(p)", knobs={"blocks": 2})
    with pytest.raises(lossjit.UsageError, match="dict or a string"):
        lossjit.compile("mean(p)", knobs=[("block", 512)])


@pytest.mark.parametrize("name, make, torchlike", [
    ("mse", lambda: (rng.random((64, 48), np.float32), rng.random((64, 48), np.float32)),
     lambda p, t: np.mean((p.astype(np.float64) - t) ** 2)),
    ("hinge", lambda: (rng.random((64, 48), np.float32), np.sign(rng.random(48) - 0.5).astype(np.float32)),
     lambda p, t: np.mean(np.maximum(0, 1 - p.astype(np.float64) * t))),
    ("smooth_l1", lambda: (rng.standard_normal((64, 48)).astype(np.float32),
                           rng.standard_normal((64, 48)).astype(np.float32)),
     lambda p, t: np.mean(np.where(np.abs(p - t.astype(np.float64)) < 1, 0.5 * (p - t.astype(np.float64)) ** 2,
                                   np.abs(p - t.astype(np.float64)) - 0.5))),
    ("kl", lambda: tuple(_softmax(rng.standard_normal((32, 40))).astype(np.float32) for _ in range(2)),
     lambda p, t: np.sum(t * np.log(t.astype(np.float64)) - t * np.log(p.astype(np.float64))) / p.shape[0]),
])
def test_reference_losses_match_numpy(name, make, torchlike):
    loss = lossjit.compile((EXAMPLES / f"{name}.loss").read_text(), inputs=["p", "t"])  # kl reads t first
    args = make()
    assert loss.reference(*args) == pytest.approx(torchlike(*args), rel=1e-12, abs=1e-15)
    assert loss(*args) == pytest.approx(torchlike(*args), rel=1e-12, abs=1e-15)  # NumPy calls are the reference


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_map_reference_strided_and_broadcast():
    hs = lossjit.compile((EXAMPLES / "hardsigmoid.loss").read_text())
    assert hs.kind == "map" and hs.reduction is None
    x = (rng.standard_normal((16, 12)) * 3).astype(np.float32)
    expect = np.clip(x.astype(np.float64) + 3, 0, 6) / 6
    np.testing.assert_allclose(hs(x), expect, rtol=1e-12)
    np.testing.assert_allclose(hs.reference(x.T), expect.T, rtol=1e-12)  # a transposed view, no copy
    two = lossjit.compile("a * b")
    a, b = rng.random((5, 1)), rng.random(7)
    np.testing.assert_allclose(two(a, np.broadcast_to(b, (5, 7))), a * b, rtol=1e-15)  # stride 0


def test_reference_grad():
    loss = lossjit.compile("param beta = 2; mean(beta * (p - t)^2)", inputs=["t", "p"])
    assert loss.inputs == ("t", "p") and loss.params == {"beta": 2.0}
    loss.set_param("beta", 0.5)
    assert loss.params == {"beta": 0.5}
    with pytest.raises(lossjit.UsageError, match="gamma"):
        loss.set_param("gamma", 1)
    p, t = rng.random((6, 3)), rng.random(3)
    gt, gp = loss.reference_grad(t, p, wrt=["t", "p"], upstream=3.0)
    np.testing.assert_allclose(gp, 3.0 * 0.5 * 2 * (p - t) / p.size, rtol=1e-12)
    np.testing.assert_allclose(gt, -gp.sum(axis=0), rtol=1e-12)
    assert gt.shape == (3,) and gp.shape == (6, 3)


def test_numpy_scalars_are_0_dim_arrays_of_their_dtype():
    loss = lossjit.compile("mean(a * b)")
    b = np.ones((2, 3), np.float32)
    assert loss.reference(np.float16(2.5), b) == loss.reference(np.array(2.5, np.float16), b) == 2.5
    assert loss.reference(np.int32(3), b) == 3.0


def test_several_results_match_torch_on_the_cpu_reference():
    torch = pytest.importorskip("torch", reason="the oracle is torch (Debian's python3-torch)")
    loss = lossjit.compile("lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); "
                           "acc = mean(argmax(x, -1) == y); loss, z, acc")
    assert loss.results == ("loss", "z", "acc") and loss.kind == "reduction"
    assert loss._differentiable == (True, True, False)
    x, y = rng.standard_normal((40, 9)), rng.integers(0, 9, 40)
    out = loss.reference(x, y)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.tensor(y)
    lse = torch.logsumexp(xt, -1)
    ce = torch.nn.functional.cross_entropy(xt, yt)
    assert out.loss == pytest.approx(ce.item(), rel=1e-12)
    assert out.z == pytest.approx((lse ** 2).mean().item(), rel=1e-12)
    assert out.acc == (xt.argmax(-1) == yt).double().mean().item()
    (gx,) = loss.reference_grad(x, y, wrt=["x"])
    ce.backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-10, atol=1e-15)
    with pytest.raises(lossjit.SourceError, match="one value per element"):
        lossjit.compile("a = mean(x); b = x * 2; a, b")


def test_result_names_python_does_not_take_as_fields_are_renamed():
    loss = lossjit.compile("_a = mean(x); lambda = sum(x); _a, lambda")
    out = loss.reference(np.arange(4.0))
    assert out == (1.5, 6.0) and out._0 == 1.5 and out._1 == 6.0


def test_results_of_one_value_per_row_on_the_reference():
    loss = lossjit.compile("param C = 9; m = amax(x, -1); s = sum(exp(x - m), -1); "
                           "t = where(y >= 0 && y < C, x[y], 0); m, s, t")
    assert loss.kind == "map" and loss.results == ("m", "s", "t")
    x, y = rng.standard_normal((20, 9)), rng.integers(-3, 12, 20)
    out = loss.reference(x, y)
    m = x.max(-1)
    np.testing.assert_allclose(out.m, m, rtol=0)
    np.testing.assert_allclose(out.s, np.exp(x - m[:, None]).sum(-1), rtol=1e-14)
    inside = (y >= 0) & (y < 9)
    np.testing.assert_allclose(out.t, np.where(inside, x[np.arange(20), np.clip(y, 0, 8)], 0), rtol=0)


@pytest.mark.parametrize("text, ref", [
    # z-loss beside cross-entropy: both reductions reach x through lse.
    ("lse = logsumexp(x, -1); t = mean(lse - x[y]) + 1e-2 * mean(lse^2); ce = mean(lse - x[y]); t, ce",
     lambda torch, x, y, w: torch.nn.functional.cross_entropy(x, y) + 1e-2 * (torch.logsumexp(x, -1) ** 2).mean()),
    ("sum(x) / sum(x * x)", lambda torch, x, y, w: x.sum() / (x * x).sum()),
    # Weighted cross-entropy normalised by the weights of the rows' classes, w.r.t. x and w at once.
    ("l = logsumexp(x, -1) - x[y]; sum(w[y] * l) / sum(w[y])",
     lambda torch, x, y, w: (w[y] * (torch.logsumexp(x, -1) - x.gather(1, y[:, None])[:, 0])).sum() / w[y].sum()),
    ("mean(x^2) * mean(exp(-x)) - sum(w) / mean(abs(x) + 1)",
     lambda torch, x, y, w: (x ** 2).mean() * torch.exp(-x).mean() - x.shape[0] * w.sum() / (x.abs() + 1).mean()),
])
def test_gradients_through_several_reductions_match_torch(text, ref):
    torch = pytest.importorskip("torch", reason="the oracle is torch (Debian's python3-torch)")
    x, y, w = rng.standard_normal((30, 7)), rng.integers(0, 7, 30), rng.random(7) + 0.5
    loss = lossjit.compile(text)
    arrays = {"x": x, "y": y, "w": w}
    args = [arrays[n] for n in loss.inputs]
    wrt = [n for n in loss.inputs if n != "y"]
    got = loss.reference_grad(*args, wrt=wrt)
    tensors = {"x": torch.tensor(x, requires_grad=True), "y": torch.tensor(y), "w": torch.tensor(w, requires_grad=True)}
    value = ref(torch, tensors["x"], tensors["y"], tensors["w"])
    value.backward()
    out = loss.reference(*args)
    first = out[0] if isinstance(out, tuple) else out
    assert first == pytest.approx(value.item(), rel=1e-12)
    for name, g in zip(wrt, got):
        np.testing.assert_allclose(g, tensors[name].grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("text, ref", [
    # Distillation from a teacher's top-k: q [N, K] its probabilities, k [N, K] their classes.
    ("lse = logsumexp(x, -1); mean(sum(q * (log(q) - (x[k] - lse)), -1))",
     lambda torch, x, k, q: (q * (torch.log(q) - (x.gather(-1, k) - torch.logsumexp(x, -1, keepdim=True)))).sum(-1).mean()),
    ("sum(sum(x[k] + logsumexp(x, -1), -1) * amax(q, -1))",
     lambda torch, x, k, q: ((x.gather(-1, k) + torch.logsumexp(x, -1, keepdim=True)).sum(-1) * q.amax(-1)).sum()),
    ("mean(logsumexp(x[k] / q, -1) - logsumexp(x, -1))",
     lambda torch, x, k, q: (torch.logsumexp(x.gather(-1, k) / q, -1) - torch.logsumexp(x, -1)).mean()),
    ("mean(q * x[k]) / batchmean(exp(x[k]))",
     lambda torch, x, k, q: (q * x.gather(-1, k)).mean() / (torch.exp(x.gather(-1, k)).sum() / x.shape[0])),
])
def test_takes_of_k_indices_per_row_match_torch_gather(text, ref):
    torch = pytest.importorskip("torch", reason="the oracle is torch (Debian's python3-torch)")
    x, q = rng.standard_normal((12, 50)), rng.random((12, 5)) + 0.2
    k = rng.integers(0, 50, (12, 5))
    k[3, 1] = k[3, 4]  # a repeated class: its gradients add
    loss = lossjit.compile(text, inputs=["x", "k", "q"])
    got = loss.reference_grad(x, k, q, wrt=["x", "q"])
    tensors = [torch.tensor(x, requires_grad=True), torch.tensor(k), torch.tensor(q, requires_grad=True)]
    value = ref(torch, *tensors)
    value.backward()
    assert loss.reference(x, k, q) == pytest.approx(value.item(), rel=1e-12)
    np.testing.assert_allclose(got[0], tensors[0].grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(got[1], tensors[2].grad.numpy(), rtol=1e-10, atol=1e-14)


def test_params_at_compile():
    loss = lossjit.compile((EXAMPLES / "smooth_l1.loss").read_text(), params={"beta": 0.25})
    assert loss.params == {"beta": 0.25} and loss.uses("p") and not loss.uses("q")


@pytest.mark.parametrize("program, inputs, params, message", [
    ("param beta = 1; mean(p * beta)", None, {"betta": 2}, "does not use a parameter 'betta' \\(did you mean 'beta'\\?\\)"),
    ("mean(p - t)", ("p", "t"), {"t": 1}, "'t' is listed as an input and cannot also be a parameter"),
])
def test_params_that_would_do_nothing_are_refused(program, inputs, params, message):
    with pytest.raises(lossjit.UsageError, match=message):
        lossjit.compile(program, inputs=inputs, params=params)


def test_a_nul_byte_is_refused_at_its_column_not_cut_off():
    with pytest.raises(lossjit.SourceError) as e:
        lossjit.compile("mean(p)\0 + mean(t)")
    assert e.value.line == 1 and e.value.column == 8 and "\\x00" in str(e.value)


def test_the_input_order_is_first_appearance_unless_given():
    masked = "sum(m * (p - t)^2) / sum(m)"
    assert lossjit.compile(masked).inputs == ("m", "p", "t")
    loss = lossjit.compile(masked, inputs=("p", "t", "m"))
    p, t, m = rng.standard_normal(8), rng.standard_normal(8), (rng.random(8) < 0.5).astype(np.float64)
    m[0] = 1
    assert loss.reference(p, t, m) == pytest.approx(np.sum(m * (p - t) ** 2) / np.sum(m), rel=1e-12)


def test_dtypes_on_the_reference():
    loss = lossjit.compile("mean(where(m, x, 0))")
    x, m = rng.random(10).astype(np.float16), rng.random(10) < 0.5
    assert loss(m, x) == pytest.approx(np.mean(np.where(m, x.astype(np.float64), 0)), rel=1e-12)


class HostDLPack:
    """An object that only speaks DLPack (as other frameworks' tensors do)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_objects_on_the_reference():
    loss = lossjit.compile("mean((p - t)^2)")
    p, t = rng.random(100).astype(np.float32), rng.random(100).astype(np.float32)
    assert loss(HostDLPack(p), HostDLPack(t)) == pytest.approx(loss.reference(p, t), rel=1e-15)


def test_cuda_available_says_why():
    ok, reason = lossjit.cuda_available()
    assert ok or reason


def test_a_dropped_loss_is_freed():
    import gc
    loss = lossjit.compile("mean(p)")
    key = loss._id
    assert lossjit._registry.get(key) is loss
    del loss
    gc.collect()
    assert lossjit._registry.get(key) is None
    closed = lossjit.compile("mean(p)")
    closed.close()
    with pytest.raises(lossjit.UsageError, match="NULL"):
        closed.reference(np.zeros(2))


def test_a_torch_too_old_for_the_ops_is_a_clear_error_not_a_failed_compile(monkeypatch):
    import types

    class OldTensor:
        pass

    old = types.SimpleNamespace(__version__="1.13.0", library=types.SimpleNamespace(), Tensor=OldTensor)
    monkeypatch.setitem(sys.modules, "torch", old)
    loss = lossjit.compile("mean((p - t)^2)")  # NumPy use does not need torch's ops
    p = rng.random(10).astype(np.float32)
    assert loss(p, p) == 0
    with pytest.raises(lossjit.UsageError, match="torch 2.4 or later.*this is torch 1.13.0"):
        loss(OldTensor(), OldTensor())
    with pytest.raises(lossjit.UsageError, match="LinearLoss needs torch 2.4 or later.*this is torch 1.13.0"):
        lossjit.LinearLoss("mean(logsumexp(logits, -1) - logits[y])")


def test_kernelbench_programs_name_their_inputs_in_the_header():
    """bench/kernelbench.py passes get_inputs() (and the Model's weights) in the order of each
    program's '# kernelbench:' line; that line, read by the script's own parser, must name exactly
    the program's inputs and parameters."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernelbench", EXAMPLES.parent / "bench" / "kernelbench.py")
    kernelbench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernelbench)
    programs = list(kernelbench.problems(None))
    assert len(programs) >= 34
    for number, path, text, clauses in programs:
        names = [kernelbench.bare(n) for n in clauses["inputs"]]
        names += [kernelbench.bare(w).rsplit(".", 1)[-1] for w in clauses.get("weights", [])]
        loss = lossjit.compile(text, inputs=names, source_name=path.name)
        assert list(loss.inputs) == names, path.name
        assert all(p in loss.params for p in clauses.get("params", [])), path.name

def test_batch_and_group_norm_rows_of_two_strides_match_torch_on_the_reference():
    """examples/kernelbench/33 and 35 (reductions over dimensions apart, weights broadcast along part
    of the row) on the float64 CPU reference against torch.nn.functional, with the views their
    headers ask for (bench/kernelbench.py's own parser)."""
    torch = pytest.importorskip("torch", reason="the oracle is torch (Debian's python3-torch)")
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernelbench", EXAMPLES.parent / "bench" / "kernelbench.py")
    kernelbench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernelbench)
    x = torch.from_numpy(rng.standard_normal((4, 16, 5, 6)) * 2 + 0.5)
    w, b = torch.from_numpy(rng.standard_normal(16)), torch.from_numpy(rng.standard_normal(16))
    for number, path, text, clauses in kernelbench.problems([33, 35]):
        inputs = [kernelbench.viewed(x, clauses["inputs"][0])]
        inputs += [kernelbench.viewed(t, name) for t, name in zip((w, b), clauses["weights"])]
        names = [kernelbench.bare(clauses["inputs"][0])] + [kernelbench.bare(n).rsplit(".", 1)[-1] for n in clauses["weights"]]
        got = lossjit.compile(text, inputs=names).reference(*[t.numpy() for t in inputs]).reshape(x.shape)
        if number == 33:
            want = torch.nn.functional.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
        else:
            want = torch.nn.functional.group_norm(x, 8, w, b, eps=1e-5)
        assert np.abs(got - want.numpy()).max() <= 1e-12 * np.abs(want.numpy()).max(), path.name


def test_the_vocab_parallel_pair_gives_the_unsplit_cross_entropy_on_the_reference():
    """examples/vocab_parallel*.loss with the all-reduces done by hand over three slices."""
    torch = pytest.importorskip("torch", reason="the oracle is torch (Debian's python3-torch)")
    partials = lossjit.compile((EXAMPLES / "vocab_parallel_partials.loss").read_text(), inputs=["x", "yl"])
    loss = lossjit.compile((EXAMPLES / "vocab_parallel_loss.loss").read_text(), inputs=["x", "yl", "L", "T"])
    n, vocab = 24, 31
    x, y = rng.standard_normal((n, vocab)) * 3, rng.integers(0, vocab, n)
    bounds = [0, 10, 11, 31]  # uneven, one a single class
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        partials.set_param("C", b - a)
        parts.append(partials.reference(x[:, a:b], y - a))
    M = np.max([p.m for p in parts], axis=0)
    S = np.sum([p.s * np.exp(p.m - M) for p in parts], axis=0)
    T = np.sum([p.t for p in parts], axis=0)
    L = M + np.log(S)
    xt = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.cross_entropy(xt, torch.tensor(y))
    want.backward()
    for a, b in zip(bounds, bounds[1:]):
        loss.set_param("C", b - a)
        args = (x[:, a:b], y - a, L[:, None], T[:, None])
        assert loss.reference(*args) == pytest.approx(want.item(), rel=1e-12)
        (g,) = loss.reference_grad(*args, wrt=["x"])
        np.testing.assert_allclose(g, xt.grad.numpy()[:, a:b], rtol=1e-10, atol=1e-15)
