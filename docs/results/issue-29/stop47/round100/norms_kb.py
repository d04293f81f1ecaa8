import sys, pathlib
import torch
sys.path.insert(0, str(pathlib.Path.cwd() / "python")); sys.path.insert(0, str(pathlib.Path.cwd() / "bench"))
import lossjit
from gpu_timing import alternating, copy_rate
torch.manual_seed(0)
x = torch.randn(32768, 65535, device="cuda")
out = {}
for name, path, ref in [("38 L1Norm", "examples/kernelbench/38_L1Norm_.loss", lambda x: x / torch.mean(torch.abs(x), dim=1, keepdim=True)),
                        ("39 L2Norm", "examples/kernelbench/39_L2Norm_.loss", lambda x: x / torch.norm(x, p=2, dim=1, keepdim=True))]:
    text = "\n".join(l for l in open(path).read().splitlines() if not l.startswith("#"))
    loss = lossjit.compile(text, inputs=["x"])
    want = ref(x[:256].double())
    got = loss(x[:256].contiguous())
    err = ((got.double() - want).abs().max() / want.abs().max()).item()
    compiled = torch.compile(ref)
    t = alternating({"lossjit": lambda: loss(x), "torch.compile": lambda: compiled(x)}, 10)
    rate = copy_rate(1 << 30)
    floor = 2 * x.numel() * 4 / rate / 1e6
    out[name] = {"ms": t, "floor_pct": {k: 100 * floor / v for k, v in t.items()}, "err": err}
    print(name, {k: round(v, 3) for k, v in t.items()}, {k: round(v, 1) for k, v in out[name]["floor_pct"].items()}, "err", err, "lossjit/torch.compile", round(t["lossjit"] / t["torch.compile"], 3), flush=True)
