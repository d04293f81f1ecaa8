"""The PyTorch op on CUDA: autograd parity, torch.compile, CUDA graphs, strided and expanded
inputs, bfloat16, two devices. Skips (saying why) without torch or a CUDA device."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="the GPU tests need torch")
if not torch.cuda.is_available():
    pytest.skip("the GPU tests need a CUDA device", allow_module_level=True)
import torch.nn.functional as F  # noqa: E402

import lossjit  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
dev = torch.device("cuda", 0)


def example(name):
    inputs = ["x"] if name == "hardsigmoid" else ["p", "t"]  # kl reads t first
    return lossjit.compile((EXAMPLES / f"{name}.loss").read_text(), inputs=inputs)


def _problems(n=512, c=384):
    g = torch.Generator(device="cpu").manual_seed(5)
    sm = lambda: torch.softmax(torch.randn(n, c, generator=g), dim=1)  # noqa: E731
    return [
        ("hinge", lambda: [torch.rand(n, c, generator=g), torch.randint(0, 2, (c,), generator=g).float() * 2 - 1],
         lambda p, t: torch.mean(torch.clamp(1 - p * t, min=0))),
        ("mse", lambda: [torch.rand(n, c, generator=g), torch.rand(n, c, generator=g)],
         lambda p, t: torch.mean((p - t) ** 2)),
        ("kl", lambda: [sm(), sm()], lambda p, t: F.kl_div(torch.log(p), t, reduction="batchmean")),
        ("smooth_l1", lambda: [torch.randn(n, c, generator=g), torch.randn(n, c, generator=g)],
         lambda p, t: F.smooth_l1_loss(p, t)),
        ("hardsigmoid", lambda: [torch.randn(n, c, generator=g) * 3], lambda x: torch.clamp(x + 3, 0, 6) / 6),
    ]


@pytest.fixture(scope="session")
def native_module():
    """The native path (lossjit/_native.cpp) built once for the session, in conftest.py's
    scratch TORCH_EXTENSIONS_DIR (a compiler, ninja and Python's headers are on the GPU machines)."""
    from lossjit import _native
    _native.build()
    return _native.module()


@pytest.fixture(autouse=True)
def python_path():
    """Every test takes the Python paths (the autograd Function, the ops' Python kernels) unless it asks
    for the native ones (fused_way, native_path), whatever was built on this machine."""
    from lossjit import _native
    _native.use(None)


@pytest.fixture
def native_path(native_module):
    from lossjit import _native
    _native.use(native_module)
    yield native_module
    _native.use(None)


@pytest.fixture(params=["in forward", "in forward, native", "in backward"])
def fused_way(request, monkeypatch):
    """Runs a test with an eager reduction's fused value-and-gradient kernel in forward (as every call
    below lossjit._torch.FUSED_IN_BACKWARD_MIN_BYTES of inputs runs it), the same with the autograd
    node in C++ (the native path, lossjit.build_native()), and in backward (every call from the
    threshold), whatever its tensors' size."""
    import lossjit._torch as T
    monkeypatch.setattr(T, "FUSED_IN_BACKWARD_MIN_BYTES", 0 if request.param == "in backward" else 1 << 62)
    if request.param.endswith("native"):
        request.getfixturevalue("native_path")
    return request.param


def _max_rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


@pytest.mark.parametrize("name, make, ref", _problems(), ids=[p[0] for p in _problems()])
@pytest.mark.usefixtures("fused_way")
def test_autograd_parity_with_torch(name, make, ref):
    loss = example(name)
    host = make()
    ours = [h.to(dev).requires_grad_() for h in host]
    theirs = [h.to(dev).requires_grad_() for h in host]
    out, expect = loss(*ours), ref(*theirs)
    if loss.kind == "map":
        up = torch.randn_like(expect)
        out.backward(up)
        expect.backward(up)
    else:
        (out * 1.5).backward()  # an upstream gradient other than 1
        (expect * 1.5).backward()
    assert _max_rel(out.detach(), expect.detach()) <= 1e-5
    for a, b in zip(ours, theirs):
        assert _max_rel(a.grad, b.grad) <= 1e-5, name


def _row_problems(n=512, c=1000):
    g = torch.Generator(device="cpu").manual_seed(6)
    logits = lambda: torch.randn(n, c, generator=g) * 2  # noqa: E731
    target = lambda: torch.randint(0, c, (n,), generator=g)  # noqa: E731

    def ignored():
        y = target()
        y[::7] = -100
        return y

    def focal(x, y, gamma=2.0):
        lp = torch.log_softmax(x, -1).gather(1, y[:, None])[:, 0]
        return torch.mean(-(1 - lp.exp()) ** gamma * lp)

    return [
        ("cross_entropy", ["x", "y"], lambda: [logits(), target()], lambda x, y: F.cross_entropy(x, y)),
        ("cross_entropy_ignore", ["x", "y"], lambda: [logits(), ignored()],
         lambda x, y: F.cross_entropy(x, y, ignore_index=-100)),
        ("cross_entropy_smoothing", ["x", "y"], lambda: [logits(), target()],
         lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1)),
        ("cross_entropy_weighted", ["x", "y", "w"], lambda: [logits(), target(), torch.rand(c, generator=g) + 0.5],
         lambda x, y, w: F.cross_entropy(x, y, weight=w)),
        ("focal", ["x", "y"], lambda: [logits(), target()], focal),
        ("cosine", ["a", "b"], lambda: [logits(), logits()],
         lambda a, b: torch.mean(1 - F.cosine_similarity(a, b, dim=1))),
        ("triplet", ["a", "p", "n"], lambda: [logits(), logits(), logits()],
         lambda a, p, n: torch.nn.TripletMarginLoss(margin=1.0)(a, p, n)),
        ("distill_kl", ["s", "t"], lambda: [logits(), logits()],
         lambda s, t: F.kl_div(F.log_softmax(s / 2, -1), F.softmax(t / 2, -1), reduction="batchmean") * 4),
    ]


@pytest.mark.parametrize("name, inputs, make, ref", _row_problems(), ids=[p[0] for p in _row_problems()])
@pytest.mark.usefixtures("fused_way")
def test_row_losses_autograd_parity_with_torch(name, inputs, make, ref):
    # The row-wise losses of examples/ (issue 12): the gradient of every floating input that is not
    # a class weight, against torch.autograd, within 1e-5 of the largest.
    loss = lossjit.compile((EXAMPLES / f"{name}.loss").read_text(), inputs=inputs)
    host = make()
    wants = [h.is_floating_point() and k != "w" for h, k in zip(host, inputs)]
    ours = [h.to(dev).requires_grad_() if w else h.to(dev) for h, w in zip(host, wants)]
    theirs = [h.to(dev).requires_grad_() if w else h.to(dev) for h, w in zip(host, wants)]
    out, expect = loss(*ours), ref(*theirs)
    (out * 1.5).backward()
    (expect * 1.5).backward()
    assert _max_rel(out.detach(), expect.detach()) <= 1e-5
    for a, b, w in zip(ours, theirs, wants):
        if w:
            assert _max_rel(a.grad, b.grad) <= 1e-5, name


def test_forward_only_leaves_the_value_on_the_device_and_matches_the_reference():
    loss = example("mse")
    p, t = torch.rand(4096, device=dev), torch.rand(4096, device=dev)
    v = loss(p, t)
    assert v.device == dev and v.dim() == 0 and v.dtype == torch.float32 and not v.requires_grad
    assert v.item() == pytest.approx(loss.reference(p.cpu().numpy(), t.cpu().numpy()), rel=1e-6)


def test_value_and_grad_method():
    loss = example("hinge")
    p, t = torch.rand(64, 32, device=dev), torch.sign(torch.randn(32, device=dev))
    value, (gp, gt) = loss.value_and_grad(p, t)
    pp, tt = p.clone().requires_grad_(), t.clone().requires_grad_()
    torch.mean(torch.clamp(1 - pp * tt, min=0)).backward()
    assert _max_rel(gp, pp.grad) <= 1e-6 and _max_rel(gt, tt.grad) <= 1e-5
    assert value.item() == pytest.approx(torch.mean(torch.clamp(1 - p * t, min=0)).item(), rel=1e-6)


@pytest.mark.parametrize("knobs", [None, {"row_cache": False}, {"row_cache": True}, "block=128,row_cache=on,unroll=2"])
def test_knobs_give_torchs_cross_entropy_and_gradient(knobs):
    # The row cache off, on (asked for: a warp's share of each row of 8192 columns kept), and with
    # threads and unroll of one's own: the same numbers as torch within float32 rounding.
    loss = lossjit.compile("mean(logsumexp(x, -1) - x[y])", inputs=["x", "y"], knobs=knobs)
    x = torch.randn(300, 8192, device=dev)
    y = torch.randint(0, 8192, (300,), device=dev)
    value, (gx,) = loss.value_and_grad(x, y, wrt=["x"])
    xx = x.double().clone().requires_grad_()
    want = F.cross_entropy(xx, y)
    want.backward()
    assert value.item() == pytest.approx(want.item(), rel=2e-6)
    assert _max_rel(gx, xx.grad) <= 1e-5


@pytest.mark.usefixtures("fused_way")
def test_non_contiguous_and_expanded_inputs():
    loss = example("mse")
    base = torch.rand(96, 64, device=dev)
    p = base.t()                                    # transposed: strides (1, 64)
    t = torch.rand(96, device=dev).expand(64, 96)   # stride 0, no copy
    pr = p.clone().requires_grad_()
    out = loss(p.requires_grad_(), t)
    out.backward()
    expect = torch.mean((pr - t) ** 2)
    expect.backward()
    assert not p.is_contiguous() and t.stride()[0] == 0
    assert _max_rel(out.detach(), expect.detach()) <= 1e-6
    assert _max_rel(p.grad, pr.grad) <= 1e-6


@pytest.mark.usefixtures("fused_way")
def test_bfloat16_inputs_and_result():
    loss = example("mse")
    p = torch.rand(1000, device=dev, dtype=torch.bfloat16, requires_grad=True)
    t = torch.rand(1000, device=dev, dtype=torch.bfloat16)
    out = loss(p, t)
    assert out.dtype == torch.bfloat16  # as torch's own result
    out.backward()
    pr = p.detach().float().requires_grad_()
    ref = torch.mean((pr - t.float()) ** 2)
    ref.backward()
    assert p.grad.dtype == torch.bfloat16
    assert abs(out.float().item() - ref.item()) <= 2 ** -7 * abs(ref.item())
    assert _max_rel(p.grad.float(), pr.grad) <= 2 ** -7


def test_torch_compile_fullgraph():
    loss = example("smooth_l1")
    w = torch.randn(256, 128, device=dev, requires_grad=True)
    x, y = torch.randn(32, 256, device=dev), torch.randn(32, 128, device=dev)

    def step(x, y):
        return loss(x @ w, y)

    compiled = torch.compile(step, fullgraph=True)
    out = compiled(x, y)
    out.backward()
    g = w.grad.clone()
    w.grad = None
    ref = F.smooth_l1_loss(x @ w, y)
    ref.backward()
    assert _max_rel(out.detach(), ref.detach()) <= 1e-5 and _max_rel(g, w.grad) <= 1e-5
    with torch.no_grad():
        assert _max_rel(torch.compile(lambda a, b: loss(a, b), fullgraph=True)(x @ w, y), ref.detach()) <= 1e-5


def test_cuda_graph_capture_and_replay():
    loss = example("mse")
    p = torch.rand(4096, device=dev, requires_grad=True)
    t = torch.rand(4096, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        loss(p, t).backward()  # the warm-up: the kernel is loaded, the scratch exists
        p.grad = None
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = loss(p, t)
        out.backward()
    for _ in range(2):
        with torch.no_grad():
            p.copy_(torch.rand(4096, device=dev))
            p.grad.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert out.item() == pytest.approx(torch.mean((p - t) ** 2).item(), rel=1e-6)
        assert _max_rel(p.grad, 2 * (p - t) / 4096) <= 1e-6


def test_first_compile_during_capture_is_an_error_not_a_crash():
    loss = lossjit.compile("mean(abs(a - b))")  # a program never run before
    a, b = torch.rand(777, device=dev), torch.rand(777, device=dev)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(lossjit.CaptureError, match="warm-up"):
        with torch.cuda.graph(graph):
            loss(a, b)
    assert loss(a, b).item() == pytest.approx(torch.mean(torch.abs(a - b)).item(), rel=1e-6)  # still usable


def test_errors_from_tensors():
    loss = example("mse")
    with pytest.raises(lossjit.UsageError, match="broadcast"):
        loss(torch.rand(3, device=dev), torch.rand(4, device=dev))
    with pytest.raises(lossjit.UsageError, match="int16"):
        loss(torch.zeros(3, device=dev, dtype=torch.int16), torch.rand(3, device=dev))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_one_loss_on_two_devices():
    loss = example("hinge")
    results = []
    for d in (0, 1):
        device = torch.device("cuda", d)
        g = torch.Generator(device="cpu").manual_seed(3)
        p = torch.rand(256, 128, generator=g).to(device).requires_grad_()
        t = (torch.randint(0, 2, (128,), generator=g).float() * 2 - 1).to(device)
        with torch.cuda.device(1 - d):  # the current device is the other one: the tensors' device counts
            out = loss(p, t)
            out.backward()
        assert out.device == device and p.grad.device == device
        results.append((out.item(), p.grad.cpu()))
    assert results[0][0] == results[1][0] and torch.equal(results[0][1], results[1][1])


def test_direct_path_alternating_layouts():
    # One Loss, one thread, layouts taking turns (the last layout's check must tell them apart):
    # transposed, expanded, another dtype, another shape, the same tensor twice.
    loss = example("mse")
    base = torch.rand(96, 64, device=dev)
    a, b = torch.rand(64, 96, device=dev), torch.rand(64, 96, device=dev)
    cases = [(a, b), (base.t(), b), (a, torch.rand(96, device=dev).expand(64, 96)), (a.double(), b.double()),
             (a[:32], b[:32]), (a, a), (a[:, ::2], b[:, ::2])]
    with torch.no_grad():
        for _ in range(3):
            for x, y in cases:
                out = loss(x, y)
                assert out.dtype == torch.promote_types(x.dtype, y.dtype)
                assert _max_rel(out, torch.mean((x.double() - y.double()) ** 2)) <= 1e-6


def test_requires_grad_is_seen_after_calls_without_it():
    loss = example("mse")
    p, t = torch.rand(4096, device=dev), torch.rand(4096, device=dev)
    for _ in range(3):
        assert not loss(p, t).requires_grad  # the direct path, its check made from these tensors
    p.requires_grad_()
    with torch.no_grad():
        assert not loss(p, t).requires_grad
    out = loss(p, t)
    assert out.requires_grad
    out.backward()
    assert _max_rel(p.grad, 2 * (p.detach() - t) / 4096) <= 1e-6
    p.requires_grad_(False)
    assert not loss(p, t).requires_grad


def test_eager_gradients_take_the_autograd_function_and_match_the_op(fused_way):
    """An eager call that needs gradients runs the autograd.Function, or the native path's node in C++
    (no custom-op dispatch either way); it gives the op's gradients (bit for bit with the kernel in
    forward, as the op runs it; within a rounding
    with the kernel in backward, which multiplies the upstream gradient in where the op multiplies it
    after), and each set of inputs differentiated gets its own plan."""
    loss = example("mse")
    p = torch.rand(3, 1000, device=dev).t().requires_grad_()  # not contiguous; its gradient is, in its shape
    t = torch.rand(1000, 3, device=dev)
    out = loss(p, t)
    if fused_way.endswith("native"):
        assert "FusedReduce" in out.grad_fn.name(), out.grad_fn.name()
    else:
        assert type(out.grad_fn).__name__ == "_EagerReduceBackward"
    (eager,) = torch.autograd.grad(out * 1.5, p)
    (via_op,) = torch.autograd.grad(torch.ops.lossjit.reduce(loss._id, [p, t], 1)[0] * 1.5, p)
    assert eager.shape == p.shape
    if fused_way.startswith("in forward"):
        assert torch.equal(eager, via_op)
    else:
        assert _max_rel(eager, via_op) <= 2.5e-7
    t.requires_grad_()
    gp, gt = torch.autograd.grad(loss(p, t), (p, t))
    assert torch.equal(gp, -gt) and _max_rel(gp, 2 * (p.detach() - t.detach()) / 3000) <= 1e-6
    (gp_only,) = torch.autograd.grad(loss(p, t.detach()), p)  # back to the first plan
    assert torch.equal(gp_only, gp)


def test_eager_fused_kernel_runs_in_backward_from_the_threshold(monkeypatch):
    """From FUSED_IN_BACKWARD_MIN_BYTES of inputs the Function saves the inputs, below it the gradients
    (and the inputs they belong to, whose edges the refusal of a second derivative needs); an upstream
    gradient in float64 (float32 in the kernel would round it) and one that is a tensor of the graph
    give torch's gradients; differentiating the gradient again is refused either way (the kernel's
    gradient has no graph: the saved gradients times an upstream gradient of the graph would otherwise
    miss the second derivative's term through the inputs), not silently wrong."""
    import lossjit._torch as T
    loss = example("mse")
    p = torch.rand(4096, device=dev, requires_grad=True)
    t = torch.rand(4096, device=dev)
    monkeypatch.setattr(T, "FUSED_IN_BACKWARD_MIN_BYTES", 2 * 4096 * 4 + 1)  # one byte more than the inputs
    out = loss(p, t)
    saved = out.grad_fn.saved_tensors
    assert len(saved) == 2 and saved[0].data_ptr() != p.data_ptr()  # the gradient of p, from forward
    assert saved[1].data_ptr() == p.data_ptr()
    monkeypatch.setattr(T, "FUSED_IN_BACKWARD_MIN_BYTES", 2 * 4096 * 4)
    out = loss(p, t)
    assert [s.data_ptr() for s in out.grad_fn.saved_tensors] == [p.data_ptr(), t.data_ptr()]
    expect = 2 * (p.detach() - t) / 4096
    (g,) = torch.autograd.grad(out, p, torch.tensor(1 / 3, dtype=torch.float64, device=dev))
    assert _max_rel(g, expect / 3) <= 1e-6
    scale = torch.tensor(0.25, device=dev, requires_grad=True)
    (g,) = torch.autograd.grad(loss(p, t) * scale, p)
    assert _max_rel(g, expect * 0.25) <= 1e-6
    for threshold in (0, 1 << 62):  # both ways
        monkeypatch.setattr(T, "FUSED_IN_BACKWARD_MIN_BYTES", threshold)
        (g,) = torch.autograd.grad(loss(p, t) * scale, p, create_graph=True)
        with pytest.raises(RuntimeError, match="differentiates a program once"):
            g.sum().backward()
        # An upstream gradient that needs no grad (torch.autograd.grad of the loss itself, as a
        # gradient penalty takes it): the gradient still refuses, not a constant that loses the term.
        (g,) = torch.autograd.grad(loss(p, t), p, create_graph=True)
        assert _max_rel(g.detach(), expect) <= 1e-6
        with pytest.raises(RuntimeError, match="differentiates a program once"):
            torch.autograd.grad((g * p).sum(), p)


def test_second_derivatives_through_the_ops_are_refused():
    """The custom ops' gradients with create_graph=True, then differentiated again: lossjit::reduce's saved
    gradients lead back to the op, a map's gradient to lossjit::map_grad. Both refuse, not drop the
    second derivative's term through the inputs (a torch op without a formula only warns)."""
    loss = example("mse")
    p = torch.rand(4096, device=dev, requires_grad=True)
    t = torch.rand(4096, device=dev)
    scale = torch.tensor(0.25, device=dev, requires_grad=True)
    value = torch.ops.lossjit.reduce(loss._id, [p, t], 1)[0]
    (g,) = torch.autograd.grad(value * scale, p, create_graph=True)
    assert _max_rel(g.detach(), 0.25 * 2 * (p.detach() - t) / 4096) <= 1e-6
    with pytest.raises(lossjit.UnsupportedError, match="differentiates a program once"):
        torch.autograd.grad(g.sum(), p)
    (g_scale,) = torch.autograd.grad((value * scale).sum(), scale, create_graph=True)  # the value's own graph is fine
    assert _max_rel(g_scale.detach(), torch.mean((p.detach() - t) ** 2)) <= 1e-6
    square = lossjit.compile("x * x + y", inputs=["x", "y"])
    x = torch.rand(1000, device=dev, requires_grad=True)
    (gx,) = torch.autograd.grad(square(x, t[:1000]).sum(), x, create_graph=True)
    assert _max_rel(gx.detach(), 2 * x.detach()) <= 1e-6
    with pytest.raises(lossjit.UnsupportedError, match="differentiates a program once"):
        torch.autograd.grad(gx.sum(), x)
    loss.close()
    square.close()


def test_value_op():
    loss = example("mse")
    p, t = torch.rand(1000, device=dev), torch.rand(1000, device=dev)
    v = torch.ops.lossjit.value(loss._id, [p, t])
    assert v.dim() == 0 and _max_rel(v, torch.mean((p - t) ** 2)) <= 1e-6
    q = p.clone().requires_grad_()
    with pytest.raises(lossjit.UsageError, match="requires grad"):
        torch.ops.lossjit.value(loss._id, [q, t])
    with torch.no_grad():
        assert _max_rel(torch.ops.lossjit.value(loss._id, [q, t]), torch.mean((p - t) ** 2)) <= 1e-6
    loss.close()
    with pytest.raises(lossjit.UsageError, match="no longer exists"):
        torch.ops.lossjit.value(loss._id, [p, t])


def test_value_and_grad_op_and_the_traced_function():
    """lossjit::value_and_grad (what a compiled call with gradients runs: no autograd formula of its own)
    gives lossjit::reduce's value and gradient, refuses to be differentiated, and torch.compile's forward
    and backward through it match torch's (one result, two inputs of which one differentiated, an
    upstream gradient other than 1)."""
    loss = example("mse")
    p, t = torch.rand(1000, device=dev), torch.rand(1000, device=dev)
    value, grad = torch.ops.lossjit.value_and_grad(loss._id, [p, t], 1)
    ref_value, ref_grad = torch.ops.lossjit.reduce(loss._id, [p, t], 1)
    assert _max_rel(value, ref_value) == 0 and _max_rel(grad, ref_grad) == 0
    q = p.clone().requires_grad_()
    with pytest.raises(lossjit.UsageError, match="not differentiable itself"):
        torch.ops.lossjit.value_and_grad(loss._id, [q, t], 1)
    compiled = torch.compile(lambda a, b: loss(a, b) * 3.0, fullgraph=True)
    (g,) = torch.autograd.grad(compiled(q, t), q)
    (g_ref,) = torch.autograd.grad(torch.mean((q - t) ** 2) * 3.0, q)
    assert _max_rel(g, g_ref) <= 1e-6
    assert _max_rel(compiled(q, t).detach(), torch.mean((p - t) ** 2) * 3.0) <= 1e-6


def test_threads_share_a_loss():
    import threading
    loss = example("mse")
    inputs = [(torch.rand(500 + 100 * k, device=dev), torch.rand(500 + 100 * k, device=dev)) for k in range(4)]
    expect = [torch.mean((x - y) ** 2).item() for x, y in inputs]
    errors = []

    def work(k):
        try:
            x, y = inputs[k]
            values = [loss(x, y) for _ in range(200)]
            torch.cuda.synchronize()
            assert all(v.item() == pytest.approx(expect[k], rel=1e-6) for v in values)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


# Issue 27's repros: gradients that were silently wrong (a per-row [N, 1] input beside a row
# reduction was summed C times; the weighted ignore_index pattern gave nan on ignored rows; an
# all-ignored batch gave nan where torch gives 0). float64, so "within 1e-6 of the largest" is tight.
def _row_weight_cases():
    g = torch.Generator(device="cpu").manual_seed(27)
    a = torch.randn(64, 1000, generator=g, dtype=torch.float64)
    w = torch.rand(64, 1, generator=g, dtype=torch.float64) + 0.5
    return [
        ("mean(w * sum(a, -1))", lambda a, w: torch.mean(w * a.sum(-1, keepdim=True)), a, w),
        ("mean(where(w > 0, sum(a, -1), 0))",
         lambda a, w: torch.mean(torch.where(w > 0, a.sum(-1, keepdim=True), torch.zeros(()).to(a))), a, w),
        ("mean(sum(a, -1) / w)", lambda a, w: torch.mean(a.sum(-1, keepdim=True) / w), a, w),
        ("mean(w * logsumexp(a, -1))", lambda a, w: torch.mean(w * torch.logsumexp(a, -1, keepdim=True)), a, w),
    ]


@pytest.mark.parametrize("text, ref, a, w", _row_weight_cases(), ids=[c[0] for c in _row_weight_cases()])
@pytest.mark.usefixtures("fused_way")
def test_per_row_weight_times_a_row_reduction_matches_torch(text, ref, a, w):
    loss = lossjit.compile(text, inputs=["a", "w"])
    ours = a.to(dev).requires_grad_()
    theirs = a.to(dev).requires_grad_()
    loss(ours, w.to(dev)).backward()
    ref(theirs, w.to(dev)).backward()
    assert _max_rel(ours.grad, theirs.grad) <= 1e-6


@pytest.mark.parametrize("shape", [(4096, 1000), (1024, 32000)])
@pytest.mark.usefixtures("fused_way")
def test_weighted_cross_entropy_per_sample_and_with_ignore_index_matches_torch(shape):
    n, c = shape
    g = torch.Generator(device="cpu").manual_seed(n)
    x = torch.randn(n, c, generator=g, dtype=torch.float64).to(dev)
    y = torch.randint(0, c, (n,), generator=g).to(dev)
    y[::3] = -100
    w = (torch.rand(c, generator=g, dtype=torch.float64) + 0.5).to(dev)
    s = (torch.rand(n, 1, generator=g, dtype=torch.float64) + 0.5).to(dev)
    # Per-sample weights [N, 1] (d/dx was C - 1 times too large).
    per_sample = lossjit.compile("mean(s * (logsumexp(x, -1) - x[y]))", inputs=["x", "y", "s"])
    yy = y.clamp(min=0)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    per_sample(ours, yy, s).backward()
    (s[:, 0] * F.cross_entropy(theirs, yy, reduction="none")).mean().backward()
    assert _max_rel(ours.grad, theirs.grad) <= 1e-6
    # Class weights with ignore_index, as docs/language.md writes it (nan on every ignored row before).
    ignore = lossjit.compile("l = logsumexp(x, -1) - x[y]; sum(where(y != -100, w[y] * l, 0)) / "
                             "sum(where(y != -100, w[y], 0))", inputs=["x", "y", "w"])
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    value = ignore(ours, y, w)
    value.backward()
    expect = F.cross_entropy(theirs, y, weight=w, ignore_index=-100)
    expect.backward()
    assert torch.isfinite(ours.grad).all()
    assert (ours.grad[::3] == 0).all()
    assert _max_rel(value.detach(), expect.detach()) <= 1e-6
    assert _max_rel(ours.grad, theirs.grad) <= 1e-6
    # The class weights' own gradient (each row's value added into its class on the GPU), against
    # torch's autograd of the same ratio.
    ours_w, theirs_w = w.clone().requires_grad_(), w.clone().requires_grad_()
    ignore(x, y, ours_w).backward()
    wy = theirs_w[y.clamp(min=0)] * (y != -100)
    ((wy * F.cross_entropy(x, y, reduction="none", ignore_index=-100)).sum() / wy.sum()).backward()
    assert _max_rel(ours_w.grad, theirs_w.grad) <= 1e-6
    # Every row ignored: torch's value is nan and its gradient 0, not nan.
    y_none = torch.full_like(y, -100)
    ours = x.clone().requires_grad_()
    ignore(ours, y_none, w).backward()
    assert (ours.grad == 0).all()


def _reducing_maps():
    return [
        ("x - logsumexp(x, -1)", lambda x, y: F.log_softmax(x, -1), False),
        ("exp(x - logsumexp(x, -1))", lambda x, y: F.softmax(x, -1), False),
        ("x / sqrt(mean(x * x, -1) + 1e-6)", lambda x, y: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), False),
        ("logsumexp(x, -1) - x[y]", lambda x, y: F.cross_entropy(x, y, reduction="none"), True),
        ("m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
         lambda x, y: F.layer_norm(x, x.shape[-1:], eps=1e-5), False),
        ("x / max(sum(abs(x), -1), 1e-12)", lambda x, y: F.normalize(x, p=1, dim=-1), False),
        ("x / max(sqrt(sum(x^2, -1)), 1e-12)", lambda x, y: F.normalize(x, p=2, dim=-1), False),
        # Reductions along an axis as maps (torch's keepdim=False shape), and a map along dimension 0.
        ("sum(x, 0)", lambda x, y: x.sum(0), False),
        ("var(x, -1)", lambda x, y: x.var(-1), False),
        ("logsumexp(x, 0)", lambda x, y: torch.logsumexp(x, 0), False),
        ("x - logsumexp(x, 0)", lambda x, y: F.log_softmax(x, 0), False),
    ]


@pytest.mark.parametrize("text, ref, indexed", _reducing_maps(), ids=[c[0] for c in _reducing_maps()])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_maps_that_reduce_along_rows_backward_matches_torch(text, ref, indexed, dtype):
    """log_softmax, softmax, RMS and layer norm, L1/L2 normalize, per-row cross-entropy
    (reduction='none') and reductions along an axis under autograd, with a grad_output that is not all
    ones, against torch's own backward."""
    g = torch.Generator(device="cpu").manual_seed(29)
    x = torch.randn(300, 1001, generator=g, dtype=dtype).to(dev)
    y = torch.randint(0, 1001, (300,), generator=g).to(dev)
    loss = lossjit.compile(text, inputs=["x", "y"] if indexed else ["x"])
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    args = (y,) if indexed else ()
    out = loss(ours, *args)
    expect = ref(theirs, y)
    assert out.shape == expect.shape
    upstream = torch.randn(expect.shape, generator=g, dtype=dtype).to(dev)
    out.backward(upstream)
    expect.backward(upstream)
    assert _max_rel(ours.grad, theirs.grad) <= (1e-5 if dtype == torch.float32 else 1e-12)


CE_Z_ACC = ("lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); "
            "acc = mean(argmax(x, -1) == y); loss, z, acc")


def _ce_z_acc_torch(x, y):
    lse = torch.logsumexp(x, -1)
    return (F.cross_entropy(x, y), (lse ** 2).mean(), (x.argmax(-1) == y).double().mean())


@pytest.mark.parametrize("shape", [(64, 10), (4099, 37), (300, 5000)])
@pytest.mark.usefixtures("fused_way")
def test_several_results_and_the_gradient_of_the_first_match_torch(shape):
    loss = lossjit.compile(CE_Z_ACC)
    assert loss.results == ("loss", "z", "acc")
    g = torch.Generator(device="cpu").manual_seed(11)
    x = torch.randn(*shape, generator=g).to(dev)
    y = torch.randint(0, shape[1], (shape[0],), generator=g).to(dev)
    want = _ce_z_acc_torch(x.double(), y)
    # Eager, no gradient: a named tuple of 0-dim tensors.
    out = loss(x, y)
    for got, ref in zip(out, want):
        assert got.shape == () and abs(got.item() - ref.item()) <= 2e-6 * max(1.0, abs(ref.item()))
    assert abs(out.acc.item() - want[2].item()) <= 1e-7  # a fraction, rounded to float32
    assert not out.acc.requires_grad
    # Through autograd: the gradient of the first result.
    xs = x.clone().requires_grad_()
    out = loss(xs, y)
    assert out.z.requires_grad and not out.acc.requires_grad
    out.loss.backward()
    xt = x.double().clone().requires_grad_()
    F.cross_entropy(xt, y).backward()
    assert _max_rel(xs.grad, xt.grad) <= 2e-6
    for got, ref in zip(out, want):
        assert abs(got.item() - ref.item()) <= 2e-6 * max(1.0, abs(ref.item()))
    # value_and_grad: the results and the gradient of the first from one kernel.
    values, (gx,) = loss.value_and_grad(x, y, wrt=["x"])
    assert abs(values.z.item() - want[1].item()) <= 2e-6 * abs(want[1].item())
    assert _max_rel(gx, xt.grad) <= 2e-6


@pytest.mark.usefixtures("fused_way")
def test_a_gradient_into_a_later_result_is_refused_not_dropped():
    loss = lossjit.compile(CE_Z_ACC)
    x = torch.randn(32, 7, device=dev, requires_grad=True)
    y = torch.randint(0, 7, (32,), device=dev)
    out = loss(x, y)
    with pytest.raises(lossjit.UnsupportedError, match="result 'z'"):
        (out.loss + 1e-4 * out.z).backward()
    # Written as the first result, the combination is differentiated (both reductions reach x).
    total = lossjit.compile("lse = logsumexp(x, -1); ce = mean(lse - x[y]); z = mean(lse^2); "
                            "t = ce + 1e-4 * z; t, ce, z")
    x.grad = None
    out = total(x, y)
    out.t.backward()
    xt = x.detach().double().requires_grad_()
    lse = torch.logsumexp(xt, -1)
    want = F.cross_entropy(xt, y) + 1e-4 * (lse ** 2).mean()
    want.backward()
    assert abs(out.t.item() - want.item()) <= 2e-6 * abs(want.item())
    assert _max_rel(x.grad, xt.grad) <= 2e-6


def test_several_results_under_torch_compile():
    loss = lossjit.compile(CE_Z_ACC)
    x = torch.randn(256, 33, device=dev, requires_grad=True)
    y = torch.randint(0, 33, (256,), device=dev)

    @torch.compile(fullgraph=True)
    def step(x, y):
        out = loss(x, y)
        return out.loss * 2, out.acc

    l2, acc = step(x, y)
    (gx,) = torch.autograd.grad(l2, x)
    want = _ce_z_acc_torch(x.detach().double(), y)
    assert abs(l2.item() / 2 - want[0].item()) <= 2e-6 * abs(want[0].item())
    assert abs(acc.item() - want[2].item()) <= 1e-7
    xt = x.detach().double().requires_grad_()
    (2 * F.cross_entropy(xt, y)).backward()
    assert _max_rel(gx, xt.grad) <= 2e-6


def test_results_of_one_value_per_row_on_the_gpu():
    loss = lossjit.compile("param C = 33; m = amax(x, -1); s = sum(exp(x - m), -1); "
                           "t = where(y >= 0 && y < C, x[y], 0); m, s, t")
    x = torch.randn(1000, 33, device=dev, requires_grad=True)
    y = torch.randint(-5, 40, (1000,), device=dev)
    out = loss(x, y)  # x requires grad: the op, and no gradient flows back through it unless used
    m = x.detach().double().amax(-1)
    assert _max_rel(out.m, m) <= 1e-7
    assert _max_rel(out.s, torch.exp(x.detach().double() - m[:, None]).sum(-1)) <= 2e-6
    inside = (y >= 0) & (y < 33)
    t = torch.where(inside, x.detach().double().gather(1, y.clamp(0, 32)[:, None])[:, 0], 0.0)
    assert _max_rel(out.t, t) <= 1e-7
    with pytest.raises(lossjit.UnsupportedError, match="no gradient of a list of results"):
        out.s.sum().backward()


def test_vocab_parallel_pair_on_one_gpu_matches_the_unsplit_cross_entropy():
    """The recipe of examples/vocab_parallel.py with its all-reduces done by hand (one GPU, two slices)."""
    import sys as _sys
    _sys.path.insert(0, str(EXAMPLES))
    import vocab_parallel as vp

    g = torch.Generator(device="cpu").manual_seed(3)
    x_all = (torch.randn(777, 5003, generator=g) * 3).to(dev)
    y = torch.randint(0, 5003, (777,), generator=g).to(dev)
    partials, loss = vp.compile_pair()
    bounds = [0, 2500, 5003]
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        partials.set_param("C", b - a)
        parts.append(partials(x_all[:, a:b].contiguous(), y - a))
    M = torch.stack([p.m for p in parts]).amax(0)
    S = sum(p.s * torch.exp(p.m - M) for p in parts)
    T = sum(p.t for p in parts)
    L = M + torch.log(S)
    xd = x_all.double().requires_grad_()
    want = F.cross_entropy(xd, y)
    want.backward()
    for a, b in zip(bounds, bounds[1:]):
        loss.set_param("C", b - a)
        x = x_all[:, a:b].contiguous().requires_grad_()
        value = loss(x, y - a, L[:, None], T[:, None])
        value.backward()
        assert abs(value.item() - want.item()) <= 1e-6 * abs(want.item())
        assert _max_rel(x.grad, xd.grad[:, a:b]) <= 1e-6 * xd.grad.abs().max().item() / xd.grad[:, a:b].abs().max().item()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
def test_vocab_parallel_cross_entropy_on_two_gpus():
    import subprocess
    import sys as _sys
    run = subprocess.run([_sys.executable, str(EXAMPLES / "vocab_parallel.py")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "equal within 1e-6" in run.stdout


# ---- linear_loss: the row program over h @ W.T + bias, a chunk of rows at a time ----

def _linear_reference(h, W, b, y, program):
    logits = F.linear(h, W, b)
    if program == "ce":
        return F.cross_entropy(logits.float(), y)
    c = 30 * torch.tanh(logits.float() / 30)
    lse = torch.logsumexp(c, -1)
    return (lse - c.gather(1, y[:, None])[:, 0]).mean() + 1e-4 * (lse ** 2).mean()


LINEAR_PROGRAMS = {
    "ce": "mean(logsumexp(logits, -1) - logits[y])",
    "zsoftcap": "c = 30 * tanh(logits / 30); lse = logsumexp(c, -1); mean(lse - c[y]) + 1e-4 * mean(lse^2)",
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("program", ["ce", "zsoftcap"])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_loss_matches_torchs_unfused_linear_and_loss(dtype, program, bias):
    torch.manual_seed(0)
    n, hidden, classes = 1000, 256, 3001  # 1000 rows, at most 192 a chunk: five of 167, one of 165
    h = (torch.randn(n, hidden, device=dev) * 0.5).to(dtype).requires_grad_()
    W = (torch.randn(classes, hidden, device=dev) * 0.1).to(dtype).requires_grad_()
    b = (torch.randn(classes, device=dev) * 0.1).to(dtype).requires_grad_() if bias else None
    y = torch.randint(0, classes, (n,), device=dev)
    head = lossjit.LinearLoss(LINEAR_PROGRAMS[program], chunk_rows=192)
    assert head.plan(h, W)[:2] == (167, 6)
    value = head(h, W, bias=b, y=y)
    grads = torch.autograd.grad(value * 3, [h, W] + ([b] if bias else []))
    ref = _linear_reference(h, W, b, y, program)
    ref_grads = torch.autograd.grad(ref * 3, [h, W] + ([b] if bias else []))
    # float32: the logits of one product, the loss in float32; bfloat16: both round the logits and
    # their gradient to bfloat16 (torch's in its backward), dW and dbias add up chunks in bfloat16.
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert abs(value.item() - ref.item()) <= (1e-5 if dtype == torch.float32 else 2e-3) * abs(ref.item())
    for g, r in zip(grads, ref_grads):
        assert g.dtype == r.dtype and g.shape == r.shape
        assert (g.float() - r.float()).abs().max().item() <= tol * r.float().abs().max().item()


def test_linear_loss_several_results_rows_of_three_dims_and_torch_compile():
    torch.manual_seed(1)
    h = torch.randn(4, 50, 64, device=dev, requires_grad=True)
    W = torch.randn(500, 64, device=dev, requires_grad=True)
    y = torch.randint(0, 500, (4, 50), device=dev)
    head = lossjit.LinearLoss("lse = logsumexp(logits, -1); loss = mean(lse - logits[y]); z = mean(lse^2); "
                              "acc = mean(argmax(logits, -1) == y); loss, z, acc", chunk_rows=64)
    out = head(h, W, y=y)
    logits = h.reshape(-1, 64) @ W.T
    lse = torch.logsumexp(logits, -1)
    assert abs(out.loss.item() - F.cross_entropy(logits, y.reshape(-1)).item()) <= 1e-5 * out.loss.item()
    assert abs(out.z.item() - (lse ** 2).mean().item()) <= 1e-5 * out.z.item()
    assert out.acc.item() == (logits.argmax(-1) == y.reshape(-1)).float().mean().item()
    gh, gW = torch.autograd.grad(out.loss + out.acc, [h, W])  # acc is a constant to autograd
    rh, rW = torch.autograd.grad(F.cross_entropy(logits, y.reshape(-1)), [h, W])
    assert (gh - rh).abs().max() <= 1e-5 * rh.abs().max() and (gW - rW).abs().max() <= 1e-5 * rW.abs().max()
    with pytest.raises(lossjit.UnsupportedError, match="differentiates the first result only"):
        torch.autograd.grad(head(h, W, y=y).z, [h])

    compiled = torch.compile(lambda h, W, y: head(h, W, y=y).loss, fullgraph=True)
    value = compiled(h, W, y)
    ch, cW = torch.autograd.grad(value, [h, W])
    assert (ch - rh).abs().max() <= 1e-5 * rh.abs().max() and (cW - rW).abs().max() <= 1e-5 * rW.abs().max()


def test_linear_loss_ignore_index_as_a_ratio_and_as_a_sum_divided_outside():
    torch.manual_seed(2)
    h = torch.randn(300, 32, device=dev, requires_grad=True)
    W = torch.randn(100, 32, device=dev, requires_grad=True)
    y = torch.randint(0, 100, (300,), device=dev)
    y[::3] = -100
    ref = F.cross_entropy(h @ W.T, y, ignore_index=-100)
    r = torch.autograd.grad(ref, [W])[0]
    # The ratio as examples/cross_entropy_ignore.loss writes it (its reductions run by chunks and are
    # combined after), and the numerator divided outside.
    ratio = lossjit.LinearLoss("l = logsumexp(logits, -1) - logits[y]; sum(where(y != -100, l, 0)) / sum(y != -100)",
                               chunk_rows=128)
    numerator = lossjit.LinearLoss("sum(where(y != -100, logsumexp(logits, -1) - logits[y], 0))", chunk_rows=128)
    for value in (ratio(h, W, y=y), numerator(h, W, y=y) / (y != -100).sum()):
        assert abs(value.item() - ref.item()) <= 1e-5 * ref.item()
        g = torch.autograd.grad(value, [W])[0]
        assert (g - r).abs().max() <= 1e-5 * r.abs().max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_loss_per_row_map_matches_torchs_reduction_none(dtype):
    torch.manual_seed(3)
    h = (torch.randn(2, 150, 64, device=dev) * 0.5).to(dtype).requires_grad_()
    W = (torch.randn(700, 64, device=dev) * 0.2).to(dtype).requires_grad_()
    b = (torch.randn(700, device=dev) * 0.1).to(dtype).requires_grad_()
    y = torch.randint(0, 700, (2, 150), device=dev)
    head = lossjit.LinearLoss("logsumexp(logits, -1) - logits[y]", chunk_rows=128)
    per_row = head(h, W, y=y, bias=b)
    assert per_row.shape == (2, 150) and per_row.dtype == torch.float32
    ref = F.cross_entropy(F.linear(h, W, b).float().reshape(-1, 700), y.reshape(-1), reduction="none").reshape(2, 150)
    up = torch.randn(2, 150, device=dev)
    grads = torch.autograd.grad(per_row, [h, W, b], up)
    ref_grads = torch.autograd.grad(ref, [h, W, b], up, retain_graph=True)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert (per_row - ref).abs().max() <= (1e-5 if dtype == torch.float32 else 2e-3) * ref.abs().max()
    for g, r in zip(grads, ref_grads):
        assert g.dtype == r.dtype and (g.float() - r.float()).abs().max() <= tol * r.float().abs().max()
    # Weighted per token, as training loops weigh them, under torch.compile.
    weights = torch.rand(2, 150, device=dev)
    compiled = torch.compile(lambda h, W, b, y: (head(h, W, y=y, bias=b) * weights).sum(), fullgraph=True)
    got = torch.autograd.grad(compiled(h, W, b, y), [h, W])
    want = torch.autograd.grad((ref * weights).sum(), [h, W])
    for g, r in zip(got, want):
        assert (g.float() - r.float()).abs().max() <= tol * r.float().abs().max()


def test_linear_loss_without_gradients_and_with_some_frozen():
    torch.manual_seed(4)
    h = torch.randn(200, 32, device=dev)  # frozen features: no dh
    W = torch.randn(300, 32, device=dev, requires_grad=True)
    b = torch.randn(300, device=dev)  # a frozen bias
    y = torch.randint(0, 300, (200,), device=dev)
    head = lossjit.LinearLoss("mean(logsumexp(logits, -1) - logits[y])", chunk_rows=64)
    ref = F.cross_entropy(F.linear(h, W, b), y)
    with torch.no_grad():  # nothing differentiated: values only
        assert abs(head(h, W, y=y, bias=b).item() - ref.item()) <= 1e-5 * ref.item()
    value = head(h, W, y=y, bias=b)
    (gW,) = torch.autograd.grad(value, [W])
    (rW,) = torch.autograd.grad(ref, [W])
    assert (gW - rW).abs().max() <= 1e-5 * rW.abs().max()
    per_row = lossjit.LinearLoss("logsumexp(logits, -1) - logits[y]", chunk_rows=64)
    with torch.no_grad():
        got = per_row(h, W, y=y, bias=b)
    assert (got - F.cross_entropy(F.linear(h, W, b), y, reduction="none")).abs().max() <= 1e-4


def test_linear_loss_takes_the_loss_parameters_and_a_broadcast_upstream():
    torch.manual_seed(5)
    h = torch.randn(120, 16, device=dev, requires_grad=True)
    W = torch.randn(90, 16, device=dev, requires_grad=True)
    y = torch.randint(0, 90, (120,), device=dev)
    loss = lossjit.compile("param eps = 0.1; lp = logits - logsumexp(logits, -1); "
                           "mean(-(1 - eps) * lp[y] - eps * mean(lp, -1))")
    head = lossjit.LinearLoss(loss, chunk_rows=50)
    for eps in (0.1, 0.3):
        loss.set_param("eps", eps)
        ref = F.cross_entropy(h @ W.T, y, label_smoothing=eps)
        assert abs(head(h, W, y=y).item() - ref.item()) <= 1e-5 * ref.item()
    # per_row.sum()'s upstream gradient is one value expanded over the rows (stride 0).
    per_row = lossjit.LinearLoss("logsumexp(logits, -1) - logits[y]", chunk_rows=50)
    gh, gW = torch.autograd.grad(per_row(h, W, y=y).sum(), [h, W])
    rh, rW = torch.autograd.grad(F.cross_entropy(h @ W.T, y, reduction="sum"), [h, W])
    assert (gh - rh).abs().max() <= 1e-5 * rh.abs().max() and (gW - rW).abs().max() <= 1e-5 * rW.abs().max()


@pytest.mark.parametrize("shape", [(512, 1000, 8), (2048, 32000, 64), (64, 16, 12)])
def test_top_k_distillation_matches_torch_gather(shape):
    # A teacher's top-k classes k [N, K] and probabilities q [N, K] against the student's logits: the
    # value, x's gradient (added into the K columns; 64 x 16 with 12 repeats many) and q's.
    n, c, k = shape
    g = torch.Generator(device="cpu").manual_seed(c)
    x = torch.randn(n, c, generator=g, dtype=torch.float64).to(dev)
    top = torch.randint(0, c, (n, k), generator=g).to(dev)
    q = torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64), -1).to(dev)
    loss = lossjit.compile((EXAMPLES / "distill_topk.loss").read_text(), inputs=["x", "k", "q"])
    ours_x, ours_q = x.clone().requires_grad_(), q.clone().requires_grad_()
    theirs_x, theirs_q = x.clone().requires_grad_(), q.clone().requires_grad_()
    value = loss(ours_x, top, ours_q)
    value.backward()
    expect = (theirs_q * (theirs_q.log() - torch.log_softmax(theirs_x, -1).gather(-1, top))).sum(-1).mean()
    expect.backward()
    assert _max_rel(value.detach(), expect.detach()) <= 1e-6
    assert _max_rel(ours_x.grad, theirs_x.grad) <= 1e-6
    assert _max_rel(ours_q.grad, theirs_q.grad) <= 1e-6


def test_native_path_matches_the_python_path(native_path, monkeypatch):
    """The autograd node in C++ (lossjit.build_native()) runs the same fused kernel as the Python
    Function: the same value and gradients, bit for bit, for one input or several differentiated;
    a program of several results and a launch that fails take the Python path."""
    from lossjit import _native
    cases = [
        ("mean((p - t)^2)", None, lambda: [torch.rand(3000, device=dev), torch.rand(3000, device=dev)], [0]),
        ((EXAMPLES / "cross_entropy.loss").read_text(), ["x", "y"],
         lambda: [torch.randn(64, 1000, device=dev), torch.randint(0, 1000, (64,), device=dev)], [0]),
        ("mean(w * (p - t)^2)", ["p", "t", "w"],
         lambda: [torch.rand(500, device=dev), torch.rand(500, device=dev), torch.rand(500, device=dev)], [0, 2]),
    ]
    for program, inputs, make, wrt in cases:
        loss = lossjit.compile(program, inputs=inputs)
        host = make()
        got = {}
        for way, module in (("python", None), ("native", native_path)):
            _native.use(module)
            tensors = [h.clone().requires_grad_(i in wrt) for i, h in enumerate(host)]
            out = loss(*tensors)
            assert ("FusedReduce" in out.grad_fn.name()) == (way == "native"), out.grad_fn.name()
            got[way] = (out.detach(), torch.autograd.grad(out * 0.5, [tensors[i] for i in wrt]))
        assert torch.equal(got["python"][0], got["native"][0]), program
        for a, b in zip(got["python"][1], got["native"][1]):
            assert torch.equal(a, b), program
        loss.close()

    several = lossjit.compile("loss = mean((p - t)^2); m = mean(p); loss, m", inputs=["p", "t"])
    p = torch.rand(100, device=dev, requires_grad=True)
    out = several(p, torch.rand(100, device=dev))
    assert "FusedReduce" not in out.loss.grad_fn.name()

    class Failing:
        LaunchError = native_path.LaunchError

        @staticmethod
        def fused(*args):
            raise native_path.LaunchError("stand-in")
    monkeypatch.setattr(_native, "_module", Failing)
    loss = example("mse")
    p, t = torch.rand(4096, device=dev, requires_grad=True), torch.rand(4096, device=dev)
    out = loss(p, t)
    assert "FusedReduce" not in out.grad_fn.name()
    (g,) = torch.autograd.grad(out, p)
    assert _max_rel(g, 2 * (p.detach() - t) / 4096) <= 1e-6
    loss.close()
    several.close()


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_native_ops_match_the_python_ops(native_path):
    """With the native path, lossjit::value and lossjit::value_and_grad run their CUDA kernels in C++ (what
    torch.compile's code and direct calls reach): the same values and gradients, bit for bit, as their
    Python kernels, through one compiled function switched between the two at run time (the dispatcher
    picks the kernel per call), for a plain program, cross-entropy's class indices, three inputs of which
    two differentiated, bfloat16, a transposed input and a broadcast row vector."""
    from lossjit import _native
    n, c = 96, 200
    g = torch.Generator(device="cpu").manual_seed(11)
    cases = [
        ("mean((p - t)^2)", None, lambda: [torch.rand(3000, generator=g), torch.rand(3000, generator=g)], [0]),
        ((EXAMPLES / "cross_entropy.loss").read_text(), ["x", "y"],
         lambda: [torch.randn(n, c, generator=g), torch.randint(0, c, (n,), generator=g)], [0]),
        ("mean(w * (p - t)^2)", ["p", "t", "w"],
         lambda: [torch.rand(500, generator=g), torch.rand(500, generator=g), torch.rand(500, generator=g)], [0, 2]),
        ("mean((p - t)^2)", None,
         lambda: [torch.rand(700, generator=g).bfloat16(), torch.rand(700, generator=g).bfloat16()], [0, 1]),
        ("mean(abs(p - t))", None, lambda: [torch.randn(c, n, generator=g).t(), torch.randn(n, c, generator=g)], [0]),
        ((EXAMPLES / "hinge.loss").read_text(), ["p", "t"],
         lambda: [torch.randn(n, c, generator=g), torch.randn(c, generator=g)], [0, 1]),
    ]
    for program, inputs, make, wrt in cases:
        loss = lossjit.compile(program, inputs=inputs)
        host = [h.to(dev) for h in make()]
        mask = sum(1 << i for i in wrt)
        torch._dynamo.reset()  # one lambda for every case: without it, past the recompile limit
        compiled = torch.compile(lambda *a: loss(*a) * 0.5, fullgraph=True)
        got = {}
        for way, module in (("python", None), ("native", native_path)):
            _native.use(module)
            assert native_path.ops_registered() == (way == "native")
            before = native_path.ops_counts()
            tensors = [h.clone().requires_grad_(i in wrt) for i, h in enumerate(host)]
            out = compiled(*tensors)
            grads = torch.autograd.grad(out, [tensors[i] for i in wrt])
            with torch.no_grad():
                forward = compiled(*host)  # lossjit::value
            direct = torch.ops.lossjit.value_and_grad(loss._id, host, mask)
            launched, passed = (a - b for a, b in zip(native_path.ops_counts(), before))
            assert (launched, passed) == ((3, 0) if way == "native" else (0, 0)), (program, way)
            got[way] = [out.detach(), *grads, forward, *direct]
        for a, b in zip(got["python"], got["native"]):
            assert _same_bits(a, b), program
        loss.close()


def test_native_ops_pass_the_rest_to_python(native_path):
    """What the ops' C++ kernels do not take runs their Python kernels, which answer as before: a program of
    several results with gradients, an input that requires grad, the wrong count of inputs, mixed
    devices, a Loss closed; a program of several results without gradients is theirs (a vector)."""
    several = lossjit.compile("loss = mean((p - t)^2); m = mean(p); loss, m", inputs=["p", "t"])
    p, t = torch.rand(100, device=dev), torch.rand(100, device=dev)
    before = native_path.ops_counts()
    value = torch.ops.lossjit.value(several._id, [p, t])
    assert value.shape == (2,) and _max_rel(value[1], p.mean()) <= 1e-6
    assert native_path.ops_counts()[0] == before[0] + 1
    out = torch.ops.lossjit.value_and_grad(several._id, [p, t], 1)
    assert len(out) == 3 and _max_rel(out[2], 2 * (p - t) / 100) <= 1e-6
    assert native_path.ops_counts()[1] == before[1] + 1
    loss = example("mse")
    with pytest.raises(lossjit.UsageError, match="not differentiable itself"):
        torch.ops.lossjit.value_and_grad(loss._id, [p.clone().requires_grad_(), t], 1)
    with pytest.raises(lossjit.UsageError, match="computes no gradient"):
        torch.ops.lossjit.value(loss._id, [p.clone().requires_grad_(), t])
    with pytest.raises(lossjit.UsageError, match="takes 2 inputs"):
        torch.ops.lossjit.value_and_grad(loss._id, [p], 1)
    with pytest.raises(lossjit.UsageError, match="is on cpu"):
        torch.ops.lossjit.value_and_grad(loss._id, [p, t.cpu()], 1)
    assert _max_rel(torch.ops.lossjit.value(loss._id, [p, t]), torch.mean((p - t) ** 2)) <= 1e-6
    loss_id = loss._id
    loss.close()
    with pytest.raises(lossjit.UsageError, match="no longer exists"):
        torch.ops.lossjit.value(loss_id, [p, t])
    several.close()


def test_native_ops_grow_a_scratch_too_small(native_path):
    """A gradient that sums along a broadcast input needs more scratch than a stream's first: on a stream
    whose scratch is made anew, the first call's launch says so, the Python kernel grows the scratch and
    repeats the call; the next call takes the grown scratch and launches in C++."""
    import lossjit._torch as T
    from lossjit import _native
    loss = example("hinge")
    p, t = torch.randn(512, 384, device=dev), torch.randn(384, device=dev)
    expect = torch.ops.lossjit.reduce(loss._id, [p, t], 0b11)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    T._scratch.pop((0, stream.cuda_stream), None)  # made anew, at its first size, by the next call
    _native.scratch_replaced(0, stream.cuda_stream)
    with torch.cuda.stream(stream):
        counts = [native_path.ops_counts()]
        first = torch.ops.lossjit.value_and_grad(loss._id, [p, t], 0b11)
        counts.append(native_path.ops_counts())
        second = torch.ops.lossjit.value_and_grad(loss._id, [p, t], 0b11)
        counts.append(native_path.ops_counts())
    stream.synchronize()
    assert counts[1][1] == counts[0][1] + 1 and counts[2][0] == counts[1][0] + 1  # passed, then launched
    for out in (first, second):
        for a, b in zip(out, expect):
            assert _same_bits(a, b)
    loss.close()


@pytest.mark.parametrize("way", ["python", "native"])
def test_ops_captured_into_a_cuda_graph(way, request):
    """lossjit::value_and_grad and lossjit::value (what compiled code calls), through their Python kernels
    and through their C++ ones, captured into a CUDA graph after a warm-up on another stream and replayed
    on new data; a program never run before is a CaptureError through either."""
    native = request.getfixturevalue("native_path") if way == "native" else None

    def native_counts():
        return native.ops_counts() if native is not None else (0, 0)
    loss = example("mse")
    p, t = torch.rand(4096, device=dev), torch.rand(4096, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.ops.lossjit.value_and_grad(loss._id, [p, t], 1)
        torch.ops.lossjit.value(loss._id, [p, t])
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    counts = native_counts()
    with torch.cuda.graph(graph):
        value, grad = torch.ops.lossjit.value_and_grad(loss._id, [p, t], 1)
        forward = torch.ops.lossjit.value(loss._id, [p, t])
    launched, passed = (a - b for a, b in zip(native_counts(), counts))
    assert (launched, passed) == ((2, 0) if way == "native" else (0, 0))
    for _ in range(2):
        p.copy_(torch.rand(4096, device=dev))
        graph.replay()
        torch.cuda.synchronize()
        expect = torch.mean((p - t) ** 2).item()
        assert value.item() == pytest.approx(expect, rel=1e-6) and forward.item() == pytest.approx(expect, rel=1e-6)
        assert _max_rel(grad, 2 * (p - t) / 4096) <= 1e-6
    fresh = lossjit.compile("mean(abs(a - b))")  # never run: its first call would compile
    counts = native_counts()
    with pytest.raises(lossjit.CaptureError, match="warm-up"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            torch.ops.lossjit.value_and_grad(fresh._id, [p, t], 1)
    assert native_counts()[1] == counts[1] + (1 if way == "native" else 0)  # the C++ kernel's status: Python's call
    assert _max_rel(torch.ops.lossjit.value(fresh._id, [p, t]), torch.mean(torch.abs(p - t))) <= 1e-6
