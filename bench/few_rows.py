#!/usr/bin/env python3
"""Few long rows (row clusters, issue 29): programs whose rows are fewer than the GPU's SMs, where a
block a row leaves most SMs idle and the blocks of a thread-block cluster share each row instead.

For each case: lossjit with its automatic choice and with `row_cluster=1` (a block a row), and
torch.compile of the same function, alternating round after round (medians of CUDA-event
intervals); forward, and forward + backward (torch.autograd.grad of the output against an upstream
tensor for maps, of the value for reductions) where the case says so. Values and gradients are
checked against torch in float64 first. The floor is the bytes the forward must move at least (each
input read once, the output written once; + the gradient written once for forward + backward) over
the copy rate measured in the same run.

    python3 bench/few_rows.py --reps 10 --json out.json
"""
import argparse
import json
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402
from gpu_timing import alternating, copy_rate  # noqa: E402 (bench/, beside this script)

LAYER_NORM = pathlib.Path(__file__).resolve().parents[1] / "examples" / "kernelbench" / "40_LayerNorm.loss"


def cases():
    """(name, program, make inputs, torch function, differentiated input indices, is map)."""
    ln = LAYER_NORM.read_text()
    yield ("layer_norm 16x64x256x256 (KernelBench 40)", ln,
           lambda: [torch.randn(16, 64, 256, 256, device="cuda"), torch.randn(64, 256, 256, device="cuda"),
                    torch.randn(64, 256, 256, device="cuda")],
           lambda x, w, b: F.layer_norm(x, (64, 256, 256), w, b, 1e-5), [0], True)
    yield ("log_softmax 32x1048576", "x - logsumexp(x, -1)",
           lambda: [torch.randn(32, 1 << 20, device="cuda")],
           lambda x: torch.log_softmax(x, -1), [0], True)
    yield ("cross_entropy 64x262144", "mean(logsumexp(x, -1) - x[y])",
           lambda: [torch.randn(64, 262144, device="cuda"), torch.randint(0, 262144, (64,), device="cuda")],
           lambda x, y: F.cross_entropy(x, y), [0], False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    args = ap.parse_args()
    torch.manual_seed(0)
    rate = copy_rate(1 << 30)
    print(f"copy rate: {rate:.0f} GB/s")
    report = {"device": torch.cuda.get_device_name(), "copy_gbps": rate, "cases": []}
    for name, program, make, torch_fn, wrt, is_map in cases():
        if args.only and args.only not in name:
            continue
        inputs = make()
        auto = lossjit.compile(program)
        block_a_row = lossjit.compile(program, knobs={"row_cluster": 1})
        compiled = torch.compile(torch_fn)

        # Correctness against torch in float64.
        wanted = [t.double() if t.is_floating_point() else t for t in inputs]
        for k in wrt:
            wanted[k].requires_grad_()
        want = torch_fn(*wanted)
        up = torch.randn_like(want, dtype=torch.float32) if is_map else torch.ones((), device="cuda")
        (want_grad,) = torch.autograd.grad(want, [wanted[wrt[0]]], up.double())
        diff_inputs = [t.clone().requires_grad_() if k in wrt else t for k, t in enumerate(inputs)]
        got = auto(*diff_inputs)
        (got_grad,) = torch.autograd.grad(got, [diff_inputs[wrt[0]]], up)
        value_error = ((got.double() - want.detach()).abs().max() / want.detach().abs().max()).item()
        grad_error = ((got_grad.double() - want_grad).abs().max() / want_grad.abs().max()).item()
        print(f"{name}: value error {value_error:.2e}, gradient error {grad_error:.2e} (relative to the largest)")

        read = sum(t.numel() * t.element_size() for t in inputs)
        written = want.numel() * 4
        grad_bytes = inputs[wrt[0]].numel() * 4
        fwd = alternating({
            "lossjit": lambda: auto(*inputs),
            "lossjit row_cluster=1": lambda: block_a_row(*inputs),
            "torch.compile": lambda: compiled(*inputs),
        }, args.reps)

        def backward(fn):
            def run():
                out = fn(*diff_inputs)
                torch.autograd.grad(out, [diff_inputs[wrt[0]]], up)
            return run
        bwd = alternating({
            "lossjit": backward(auto),
            "lossjit row_cluster=1": backward(block_a_row),
            "torch.compile": backward(compiled),
        }, args.reps)
        floor_fwd = (read + written) / rate / 1e6
        floor_bwd = (read + written + grad_bytes + (up.numel() * 4 if is_map else 0)) / rate / 1e6
        row = {"name": name, "value_error": value_error, "grad_error": grad_error, "forward_ms": fwd,
               "fwd_bwd_ms": bwd, "floor_forward_ms": floor_fwd, "floor_fwd_bwd_ms": floor_bwd}
        report["cases"].append(row)
        for what, times, floor in (("forward", fwd, floor_fwd), ("fwd+bwd", bwd, floor_bwd)):
            cells = ", ".join(f"{k} {v:.3f} ms ({100 * floor / v:.1f}%)" for k, v in times.items())
            print(f"  {what}: {cells}; lossjit / torch.compile {times['lossjit'] / times['torch.compile']:.2f}x")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
