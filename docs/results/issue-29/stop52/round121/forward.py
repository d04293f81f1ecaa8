# Round 121: forwards that divide each element by a value of its row (now by the row's reciprocal,
# lj_div_by_param), lossjit alone, one library a process (LOSSJIT_LIBRARY; run.sh alternates main's
# and the new), and torch.compile where --reference. Floors at the copy rate: x read, y written.
import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
label, reference = sys.argv[1], "--reference" in sys.argv
rate = copy_rate(1 << 30)
cases = [  # name, program, torch's, shape
    ("38 L1 norm", "x / mean(abs(x), -1)", lambda x: x / torch.mean(torch.abs(x), dim=1, keepdim=True), (32768, 65535)),
    ("39 L2 norm", "x / sqrt(sum(x^2, -1))", lambda x: x / torch.norm(x, p=2, dim=1, keepdim=True), (32768, 65535)),
    ("RMS norm", "x / sqrt(mean(x^2, -1) + 1e-5)", lambda x: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5), (32768, 4096)),
    ("layer norm", "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)",
     lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]), (32768, 4096)),
    ("softmax as a quotient", "exp(x - amax(x, -1)) / sum(exp(x - amax(x, -1)), -1)", lambda x: torch.softmax(x, -1), (32768, 4096)),
]
torch.manual_seed(0)
for name, text, ref, shape in cases:
    x = torch.randn(*shape, device="cuda")
    loss = lossjit.compile(text)
    want = ref(x[:64].double())
    err = ((loss(x[:64].contiguous()).double() - want).abs().max() / want.abs().max()).item()
    fns = {label: lambda: loss(x)}
    if reference:
        compiled = torch.compile(ref)
        fns["torch.compile"] = lambda: compiled(x)
    t = alternating(fns, 10)
    floor = 2 * x.numel() * 4 / rate / 1e6
    print(name, shape, " ".join(f"{k} {v:.3f} ms ({100 * floor / v:.1f}%)" for k, v in t.items()), f"err {err:.1e}", flush=True)
    del x
    torch.cuda.empty_cache()
