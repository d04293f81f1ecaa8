#!/usr/bin/env python3
"""Merges bench/bench.cpp's and bench/torch_bench.py's JSON into one table, one JSON and one plot of
GB/s against size. Prints the table (markdown) and whether each target of the performance issue holds.

    python3 bench/report.py lossjit.json torch.json --out-json merged.json --plot sweep.png
"""
import argparse
import datetime
import json

TARGETS = {"hinge": 0.96, "mse": 0.96, "smooth_l1": 0.96, "kl": 0.85, "hardsigmoid": 1.00}


def nonfinite_as_numbers(value):
    """lossjit writes inf, -inf and nan as strings (JSON has no such numbers): numbers again here."""
    if isinstance(value, dict):
        return {k: nonfinite_as_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nonfinite_as_numbers(v) for v in value]
    if value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def svg_plot(series, path):
    # A dependency-free line plot: x = log2(bytes), y = GB/s.
    w, h, m = 720, 420, 60
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1, y1 = min(xs), max(xs), max(ys) * 1.05
    sx = lambda x: m + (x - x0) / (x1 - x0) * (w - 2 * m)
    sy = lambda y: h - m - y / y1 * (h - 2 * m)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{m}" y1="{h-m}" x2="{w-m}" y2="{h-m}" stroke="black"/><line x1="{m}" y1="{m}" x2="{m}" y2="{h-m}" stroke="black"/>',
             f'<text x="{w/2}" y="{h-15}" text-anchor="middle">bytes read (log2)</text>',
             f'<text x="15" y="{h/2}" transform="rotate(-90 15 {h/2})" text-anchor="middle">GB/s</text>']
    for x in range(int(x0), int(x1) + 1, 2):
        parts.append(f'<text x="{sx(x)}" y="{h-m+15}" text-anchor="middle">{x}</text>')
    for i in range(6):
        y = y1 * i / 5
        parts.append(f'<text x="{m-5}" y="{sy(y)+4}" text-anchor="end">{y:.0f}</text>')
    for i, (label, pts) in enumerate(series):
        c = colors[i % len(colors)]
        parts.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (c, " ".join(f"{sx(x)},{sy(y)}" for x, y in pts)))
        parts.append(f'<text x="{m+10}" y="{m+15*i}" fill="{c}">{label}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lossjit")
    ap.add_argument("torch")
    ap.add_argument("--out-json")
    ap.add_argument("--plot")
    args = ap.parse_args()
    lj, th = nonfinite_as_numbers(json.load(open(args.lossjit))), json.load(open(args.torch))
    read, copy = lj["read_roofline"]["gbps"], lj["copy_roofline"]["gbps"]
    torch_rows = {r["problem"]: r for r in th["problems"]}
    dtype = lj.get("dtype", "float32")
    if dtype != th.get("dtype", "float32"):
        raise SystemExit(f"report.py: lossjit ran {dtype} inputs, torch {th.get('dtype', 'float32')}")
    # Issue 13's targets for 16-bit inputs: at least 97% of the roofline and never slower than torch.compile.
    targets = TARGETS if dtype == "float32" else {name: 1.00 for name in TARGETS}
    print(f"{datetime.date.today()} {lj['device']} ({lj['arch']}), NVRTC {lj['nvrtc']}, torch {th['torch']}, median of {lj['reps']}, "
          f"inputs {dtype}")
    print(f"roofline: best streaming read {read:.0f} GB/s ({lj['read_roofline'].get('kernel')}), copy {copy:.0f} GB/s; "
          f"torch.sum read {th['torch_sum_read_gbps']:.0f} GB/s, torch copy {th['torch_copy_gbps']:.0f} GB/s\n")
    print("| problem | GB moved | lossjit ms | GB/s | % of roofline | eager ms | torch.compile ms | lossjit / compile | target | rel. error (lossjit) | rel. error (compile) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for row in lj["problems"]:
        name, t = row["problem"], torch_rows.get(row["problem"], {})
        roof = copy if name == "hardsigmoid" else read
        pct = 100 * row["gbps"] / roof
        ratio = row["ms"] / t["compile_ms"] if t else float("nan")
        err = row.get("rel_error", row.get("max_rel_error", float("nan")))
        terr = t.get("compile_rel_error", t.get("compile_max_abs_error", float("nan")))
        print(f"| {name} | {row['bytes']/1e9:.2f} | {row['ms']:.3f} | {row['gbps']:.0f} | {pct:.1f}% | {t.get('eager_ms', float('nan')):.3f} | "
              f"{t.get('compile_ms', float('nan')):.3f} | {ratio:.3f} | ≤ {targets[name]:.2f} | {err:.2e} | {terr:.2e} |")
        if dtype != "float32" and name == "kl":
            continue  # no 16-bit target for KL
        verdicts.append((f"{name}: lossjit/torch.compile {ratio:.3f} ≤ {targets[name]}", ratio <= targets[name]))
        if name in ("hinge", "mse", "smooth_l1"):
            verdicts.append((f"{name}: {pct:.1f}% of read roofline ≥ 97%", pct >= 97))
        if name == "hardsigmoid":
            want = 98 if dtype == "float32" else 97
            verdicts.append((f"{name}: {pct:.1f}% of copy rate ≥ {want}%", pct >= want))
        if "rel_error" in row:
            # float32: 1e-7; 16-bit inputs: 1e-6 (issue 13), against float64 on the same rounded inputs.
            bound = 1e-7 if dtype == "float32" else 1e-6
            verdicts.append((f"{name}: rel. error {row['rel_error']:.2e} ≤ {bound:g}, same bits on 10 runs",
                             row["rel_error"] <= bound and row["same_bits_10_runs"]))
    if "value_and_grad" in lj and "smooth_l1_fwd_bwd_compile_ms" in th:
        vg, tc = lj["value_and_grad"], th["smooth_l1_fwd_bwd_compile_ms"]
        # The floor: read p, t once and write grad_p once at the best rate a plain kernel with that
        # traffic (STREAM add: two reads, one write) reaches in this run; the copy rate for comparison.
        add = lj.get("add_roofline", {}).get("gbps", copy)
        floor_ms = vg["bytes"] / (add * 1e6)
        ratio = vg["ms"] / tc
        print(f"\nsmooth L1 value_and_grad (loss + grad_p, one kernel): {vg['ms']:.3f} ms, {vg['gbps']:.0f} GB/s; "
              f"floor {floor_ms:.3f} ms at the add rate {add:.0f} GB/s ({vg['bytes'] / (copy * 1e6):.3f} ms at the copy "
              f"rate); torch.compile forward + backward {tc:.3f} ms; ratio {ratio:.3f}; "
              f"value rel. error {vg.get('rel_error', float('nan')):.2e}, grad max error / max |grad| "
              f"{vg.get('grad_max_error_rel_to_max', float('nan')):.2e}")
        verdicts.append((f"smooth_l1 value_and_grad / torch.compile fwd+bwd {ratio:.3f} ≤ 0.6", ratio <= 0.6))
        verdicts.append((f"smooth_l1 value_and_grad {vg['ms']:.3f} ms within 5% of its floor {floor_ms:.3f} ms",
                         vg["ms"] <= 1.05 * floor_ms))
    if "hinge_value_and_grad" in lj and "hinge_fwd_bwd_compile_ms" in th:
        vg, tc = lj["hinge_value_and_grad"], th["hinge_fwd_bwd_compile_ms"]
        floor_ms = vg["bytes"] / (lj.get("add_roofline", {}).get("gbps", copy) * 1e6)
        print(f"hinge value_and_grad (loss + grad_p + grad_t summed over rows, one kernel): {vg['ms']:.3f} ms, "
              f"{vg['gbps']:.0f} GB/s; floor {floor_ms:.3f} ms ({100 * floor_ms / vg['ms']:.1f}%); torch.compile "
              f"forward + backward {tc:.3f} ms; ratio {vg['ms'] / tc:.3f}; grad max error / max |grad| "
              f"{vg.get('grad_max_error_rel_to_max', float('nan')):.2e}")
    if "small_call" in lj and "small_call" in th:
        small = lj["small_call"]
        verdicts.append((f"mse over 4096 elements: {small['host_us_per_call']:.2f} µs host time per call ≤ 5", small["host_us_per_call"] <= 5))
        print(f"\nsmall call (mse, 4096 elements, result left on the device): lossjit {small['host_us_per_call']:.2f} µs/call host, "
              f"{small['gpu_us_per_call']:.2f} µs GPU; eager {th['small_call']['eager_host_us_per_call']:.1f} µs, "
              f"torch.compile {th['small_call']['compile_host_us_per_call']:.1f} µs\n")
    if "sweep" in lj and "sweep" in th:
        print("| log2(elements) | lossjit GB/s | torch.compile GB/s | eager GB/s | read roofline GB/s |")
        print("|---|---|---|---|---|")
        tsweep = {r["log2n"]: r for r in th["sweep"]}
        for r in lj["sweep"]:
            t = tsweep.get(r["log2n"], {})
            print(f"| {r['log2n']} | {r['lossjit_gbps']:.0f} | {t.get('compile_gbps', float('nan')):.0f} | {t.get('eager_gbps', float('nan')):.0f} | "
                  f"{r.get('read_gbps', float('nan')):.0f} |")
        if args.plot:
            import math
            series = [("lossjit", [(math.log2(r["bytes"]), r["lossjit_gbps"]) for r in lj["sweep"]]),
                      ("torch.compile", [(math.log2(r["bytes"]), r["compile_gbps"]) for r in th["sweep"]]),
                      ("read roofline", [(math.log2(r["bytes"]), r["read_gbps"]) for r in lj["sweep"] if "read_gbps" in r])]
            if args.plot.endswith(".png"):
                import matplotlib
                matplotlib.use("Agg")
                import matplotlib.pyplot as plt
                fig, ax = plt.subplots(figsize=(8, 4.5))
                for label, pts in series:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
                ax.set_xlabel("bytes read (log2)")
                ax.set_ylabel("GB/s")
                ax.set_title(f"mean((p - t)^2) on {lj['device']}")
                ax.grid(alpha=0.3)
                ax.legend()
                fig.savefig(args.plot, dpi=120, bbox_inches="tight")
            else:
                svg_plot(series, args.plot)
    print("\ntargets:")
    for text, ok in verdicts:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    if args.out_json:
        json.dump({"date": str(datetime.date.today()), "lossjit": lj, "torch": th,
                   "targets": [{"target": t, "met": ok} for t, ok in verdicts]}, open(args.out_json, "w"), indent=2)


if __name__ == "__main__":
    main()
