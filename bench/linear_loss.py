"""linear_loss against torch at the LLM head's size: forward + backward of cross-entropy (and of the
z-loss + softcap program) over logits = h @ W.T, lossjit's chunked LinearLoss beside torch eager's
unfused F.linear + F.cross_entropy and torch.compile of the same, timed in turn in one run
(torch.autograd.grad of each, as a training step runs it), with each one's peak device memory beyond
h, W, y and the gradients (torch.cuda.max_memory_allocated; lossjit's chunk buffers come from torch's
allocator too), and the differences of values and gradients from torch eager's.

    python3 bench/linear_loss.py --rows 16384 --hidden 4096 --classes 128256 --reps 10
"""
import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from gpu_timing import alternating  # noqa: E402

import lossjit  # noqa: E402

PROGRAMS = {
    "cross_entropy": ("mean(logsumexp(logits, -1) - logits[y])",
                      lambda logits, y: F.cross_entropy(logits.float(), y)),
    "zloss_softcap": ("c = 30 * tanh(logits / 30); lse = logsumexp(c, -1); mean(lse - c[y]) + 1e-4 * mean(lse^2)",
                      lambda logits, y: _zsoft(logits, y)),
    # ignore_index as a ratio of two reductions (every 7th row ignored): the chunks run its reductions,
    # a last pass scales dh and dW by the factor.
    "cross_entropy_ignore": ("l = logsumexp(logits, -1) - logits[y]; sum(where(y != -100, l, 0)) / sum(y != -100)",
                             lambda logits, y: F.cross_entropy(logits.float(), y, ignore_index=-100)),
    # reduction='none', weighted per token outside: a map of one value per row, whose backward computes
    # each chunk's logits again (four products, not three).
    "cross_entropy_per_token": ("logsumexp(logits, -1) - logits[y]",
                                lambda logits, y: F.cross_entropy(logits.float(), y, reduction="none")),
}
# What turns a per-row program's values into the number differentiated: the same for lossjit and torch.
_TOKEN_WEIGHTS = {}


def _scalar(name, values):
    if values.dim() == 0:
        return values
    weights = _TOKEN_WEIGHTS.setdefault(values.shape[0], torch.rand(values.shape[0], device=values.device))
    return (values * weights).sum()


def _zsoft(logits, y):
    c = 30 * torch.tanh(logits.float() / 30)
    lse = torch.logsumexp(c, -1)
    return (lse - c.gather(1, y[:, None])[:, 0]).mean() + 1e-4 * (lse ** 2).mean()


def peak_beyond(fn, base):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak


def profile(name, fn):
    """The kernels of one call of fn, by total GPU time (cuBLAS's and lossjit's alike: CUPTI sees every
    kernel of the process)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = {}
    spans = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total, count = rows.get(e.name, (0.0, 0))
            rows[e.name] = (total + e.device_time_total / 1e3, count + 1)
            spans.append((e.time_range.start, e.time_range.end, e.name))
    spans.sort()
    busy = sum(end - start for start, end, _ in spans) / 1e3
    print(f"  kernels of {name} (ms, calls): {busy:.3f} ms busy from the first kernel's start to the last's end "
          f"{(spans[-1][1] - spans[0][0]) / 1e3:.3f} ms" if spans else f"  kernels of {name}: none")
    for kernel, (ms, count) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"    {ms:9.3f} {count:4d}  {kernel[:110]}")
    gaps = sorted(((b[0] - a[1], a[2], b[2]) for a, b in zip(spans, spans[1:])), reverse=True)[:4]
    for gap, before, after in gaps:
        if gap > 50:
            print(f"    idle {gap / 1e3:7.3f} ms between {before[:45]} and {after[:45]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--classes", type=int, default=128256)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--program", action="append", choices=sorted(PROGRAMS))
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--chunk-gib", type=float, action="append",
                    help="also time lossjit with chunk buffers of this many GiB (repeatable; the default is 1)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--profile", action="store_true",
                    help="also list each method's kernels by GPU time in one step (torch.profiler)")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    h = (torch.randn(args.rows, args.hidden, device=dev) * 0.5).to(dtype).requires_grad_()
    W = (torch.randn(args.classes, args.hidden, device=dev) * args.hidden ** -0.5).to(dtype).requires_grad_()
    targets = torch.randint(0, args.classes, (args.rows,), device=dev)
    ignoring = targets.clone()
    ignoring[::7] = -100  # for the ignore_index program
    # What a step must hold whatever the method: the operands and the two gradients.
    gradients_bytes = h.numel() * h.element_size() + W.numel() * W.element_size()
    print(f"# {torch.cuda.get_device_name()}, h {args.rows}x{args.hidden}, W {args.classes}x{args.hidden}, "
          f"{args.dtype}, torch {torch.__version__}")
    results = []
    for name in args.program or sorted(PROGRAMS):
        text, torch_loss = PROGRAMS[name]
        y = ignoring if name == "cross_entropy_ignore" else targets
        head = lossjit.LinearLoss(text)
        rows, chunks, ws = head.plan(h, W)

        def eager():
            return torch.autograd.grad(_scalar(name, torch_loss(F.linear(h, W), y)), [h, W])

        def ours():
            return torch.autograd.grad(_scalar(name, head(h, W, y=y)), [h, W])

        fns = {"lossjit": ours, "eager": eager}
        for gib in args.chunk_gib or []:
            other = lossjit.LinearLoss(text, chunk_bytes=int(gib * 2 ** 30))
            fns[f"lossjit {gib:g} GiB"] = lambda other=other: torch.autograd.grad(_scalar(name, other(h, W, y=y)),
                                                                                  [h, W])
        if not args.no_compile:
            compiled = torch.compile(lambda h, W, y, name=name, torch_loss=torch_loss:
                                     _scalar(name, torch_loss(F.linear(h, W), y)))
            fns["torch.compile"] = lambda: torch.autograd.grad(compiled(h, W, y), [h, W])
        # Values and gradients against torch eager's.
        with torch.no_grad():
            ref_value = _scalar(name, torch_loss(F.linear(h, W), y)).item()
        ref = eager()
        got = ours()
        with torch.no_grad():
            value = _scalar(name, head(h, W, y=y)).item()
        diff = [((g.float() - r.float()).abs().max() / r.float().abs().max()).item() for g, r in zip(got, ref)]
        del ref, got
        base = torch.cuda.memory_allocated() + gradients_bytes
        peaks = {k: peak_beyond(fn, base) for k, fn in fns.items()}
        times = alternating(fns, args.reps)
        if args.profile:
            for k, fn in fns.items():
                profile(k, fn)
        row = {"program": name, "chunk_rows": rows, "chunks": chunks, "workspace_bytes": ws,
               "value": value, "torch_value": ref_value, "value_rel_diff": abs(value - ref_value) / abs(ref_value),
               "dh_diff_of_largest": diff[0], "dW_diff_of_largest": diff[1],
               "ms": times, "peak_extra_GiB": {k: v / 2 ** 30 for k, v in peaks.items()}}
        results.append(row)
        print(f"\n{name}: chunks of {rows} rows x {chunks}; value {value:.6f} (torch {ref_value:.6f}, rel "
              f"{row['value_rel_diff']:.1e}); dh, dW differ by {diff[0]:.1e}, {diff[1]:.1e} of the largest")
        print(f"{'':16}{'fwd+bwd ms':>12}{'peak extra GiB':>16}{'x lossjit':>11}")
        for k in fns:
            print(f"{k:16}{times[k]:12.3f}{peaks[k] / 2 ** 30:16.3f}{times[k] / times['lossjit']:11.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
