#!/usr/bin/env python3
"""Host time per call of lossjit's PyTorch entry points beside eager torch and torch.compile, on a
4096-element MSE, forward only, the result left on the device (issue 14's target: <= 10 us on H100).

Each variant is called `--calls` times back to back, timed on the host (time.perf_counter), then the
device is synchronised once; a kernel of 4096 elements takes less time on the GPU than a call takes
on the host, so the loop measures the host. Median of `--repeats` loops.

    python3 bench/python_overhead.py [--calls 20000] [--repeats 7] [--json out.json]
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402


def host_us(fn, calls, repeats):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    p, t = torch.rand(args.n, device=dev), torch.rand(args.n, device=dev)
    loss = lossjit.compile("mean((p - t)^2)")
    assert abs(loss(p, t).item() - F.mse_loss(p, t).item()) <= 1e-6 * F.mse_loss(p, t).item()

    torch_eager = lambda: torch.mean((p - t) ** 2)  # noqa: E731
    mse_compiled = torch.compile(lambda a, b: torch.mean((a - b) ** 2))
    lossjit_compiled = torch.compile(lambda a, b: loss(a, b), fullgraph=True)
    op = torch.ops.lossjit.reduce
    variants = [
        ("lossjit: loss(p, t) (eager, no grad: the direct path)", lambda: loss(p, t)),
        ("lossjit: torch.ops.lossjit.reduce (the custom op, eager)", lambda: op(loss._id, [p, t], 0)),
        ("lossjit: loss(p, t) inside torch.compile(fullgraph=True)", lambda: lossjit_compiled(p, t)),
        ("torch eager: torch.mean((p - t) ** 2)", torch_eager),
        ("torch eager: F.mse_loss(p, t)", lambda: F.mse_loss(p, t)),
        ("torch.compile: torch.mean((p - t) ** 2)", lambda: mse_compiled(p, t)),
    ]
    # Where the direct path's time goes: its parts, each alone.
    from lossjit import _lib, _torch as lt
    side = loss._torch
    st = side.state()
    lay = side.layout((p, t), st)
    stream = lt._raw_stream(0)
    ex = lt._exec_address(side.handle, 0, stream)
    out = torch.empty((), device=dev)
    st.result.data, st.result.dtype = out.data_ptr(), lay.out_code
    results = lt._Results(torch.float32, dev)
    parts = [
        ("part: the C call alone (lossjit_evaluate: checks, plan lookup, cuLaunchKernel)",
         lambda: lt._evaluate(side.handle, lay.address, lay.count, st.result_address, ex)),
        ("part: a ctypes call that does nothing (lossjit_c_api_version)", _lib.gil_lib.lossjit_c_api_version),
        ("part: torch.empty((), device=cuda)", lambda: torch.empty((), dtype=torch.float32, device=dev)),
        ("part: the next 0-dim result view (_Results.next)", results.next),
        ("part: the layout key of two tensors", lambda: lt._key((p, t))),
        ("part: the current raw stream", lambda: lt._raw_stream(0)),
        ("part: two data_ptr() into the views", lambda: [setattr(v, "data", x.data_ptr()) for v, x in zip(lay.items, (p, t))]),
    ]
    rows = []
    with torch.no_grad():
        for name, fn in variants + parts:
            median, best = host_us(fn, args.calls, args.repeats)
            rows.append({"variant": name, "host_us_median": round(median, 2), "host_us_min": round(best, 2)})
            print(f"{median:8.2f} us  (min {best:6.2f})  {name}", flush=True)
    report = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "n": args.n,
              "calls": args.calls, "repeats": args.repeats, "rows": rows}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
