# Round 115: forward + backward of reductions called eagerly on tensors that require grad
# (torch.autograd.grad of the value, upstream 1), through the lossjit package in the folder given
# first (python/ now: the value in forward, the fused kernel in backward with the upstream multiplied
# in; build/py-before/ as before: the fused kernel in forward, the saved gradients times the upstream
# in backward), with one library a process (LOSSJIT_LIBRARY). --reference adds torch.compile.
import sys, pathlib
import torch
import torch.nn.functional as F
sys.path.insert(0, str(pathlib.Path(sys.argv[1]).resolve())); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label, reference = sys.argv[2], "--reference" in sys.argv
print(label, "lossjit from", pathlib.Path(lossjit.__file__).parent, flush=True)
rate = copy_rate(1 << 30)
cases = [  # name, program, torch's, inputs (made per shape), the floor: bytes read and written once
    ("cross-entropy 16384x8192", "mean(logsumexp(x, -1) - x[y])", lambda x, y: F.cross_entropy(x, y),
     lambda: (torch.randn(16384, 8192, device="cuda", requires_grad=True), torch.randint(0, 8192, (16384,), device="cuda"))),
    ("cross-entropy 16384x32768", "mean(logsumexp(x, -1) - x[y])", lambda x, y: F.cross_entropy(x, y),
     lambda: (torch.randn(16384, 32768, device="cuda", requires_grad=True), torch.randint(0, 32768, (16384,), device="cuda"))),
    ("cosine 32768x4096", "mean(1 - sum(x * s, -1) / (max(sqrt(sum(x * x, -1)), 1e-8) * max(sqrt(sum(s * s, -1)), 1e-8)))",
     lambda x, s: (1 - F.cosine_similarity(x, s, -1, 1e-8)).mean(),
     lambda: (torch.randn(32768, 4096, device="cuda", requires_grad=True), torch.randn(32768, 4096, device="cuda"))),
    ("mse 2^28", "mean((p - t)^2)", lambda p, t: F.mse_loss(p, t),
     lambda: (torch.randn(1 << 28, device="cuda", requires_grad=True), torch.randn(1 << 28, device="cuda"))),
]
for name, text, ref, make in cases:
    x, other = make()
    floor_ms = 2 * x.numel() * x.element_size() / rate / 1e6  # x read, its gradient written (rate in GB/s)
    fns = {label: lossjit.compile(text)}
    if reference:
        fns["torch.compile"] = torch.compile(ref)
    fb = alternating({k: (lambda h: (lambda: torch.autograd.grad(h(x, other), x)[0]))(h) for k, h in fns.items()}, 5)
    print(name, "fwd+bwd:", " ".join(f"{k} {v:.3f} ms ({100 * floor_ms / v:.0f}% of x read + grad written)" for k, v in fb.items()), flush=True)
    del x, other
    torch.cuda.empty_cache()
