#!/usr/bin/env python3
"""Issue 15's comparison: lossjit and torch.compile on the five reference problems over several
alternating runs (bench/run_alternating.sh), each run against its own roofline; prints the medians
and whether each target holds: >= 98% of the best streaming read (copy for the map; KL >= 97%) and
lossjit / torch.compile <= 1.00.

    python3 bench/median_of_runs.py --lossjit l1.json l2.json l3.json --torch t1.json t2.json t3.json \
        [--value-and-grad vg.json]

With --value-and-grad (lossjit_bench --only value_and_grad), also the fused gradient targets: smooth
L1 value + gradient <= 0.55 x torch.compile forward + backward (the torch runs' median), fused hinge
value + both gradients >= 97% of its floor, and the gradients of broadcast inputs (t [N, 1], a
scalar w) >= 90% of theirs, each floor the bytes at the add rate (two reads, one write) of that run.
"""
import argparse
import json
import statistics

from report import nonfinite_as_numbers

WANT = {"hinge": 98.0, "mse": 98.0, "smooth_l1": 98.0, "kl": 97.0, "hardsigmoid": 98.0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lossjit", nargs="+", required=True)
    ap.add_argument("--torch", nargs="+", required=True)
    ap.add_argument("--value-and-grad", help="a lossjit_bench --only value_and_grad JSON")
    ap.add_argument("--out-json")
    args = ap.parse_args()
    if len(args.lossjit) != len(args.torch):
        raise SystemExit("median_of_runs.py: give as many lossjit runs as torch runs")
    runs = [(nonfinite_as_numbers(json.load(open(l))), json.load(open(t))) for l, t in zip(args.lossjit, args.torch)]
    first = runs[0][0]
    print(f"{first['device']} ({first['arch']}), NVRTC {first['nvrtc']}, torch {runs[0][1]['torch']}, "
          f"{len(runs)} alternating runs (lossjit, then torch), each the median of {first['reps']}")
    print("\n| problem | lossjit ms | % of roofline | torch.compile ms | lossjit / compile | per-run ratios | target |")
    print("|---|---|---|---|---|---|---|")
    rows, verdicts = [], []
    for name in [p["problem"] for p in first["problems"]]:
        ms, pct, tc, ratios = [], [], [], []
        for lj, th in runs:
            row = next(p for p in lj["problems"] if p["problem"] == name)
            t = next(p for p in th["problems"] if p["problem"] == name)
            roof = lj["copy_roofline"]["gbps"] if name == "hardsigmoid" else lj["read_roofline"]["gbps"]
            ms.append(row["ms"])
            pct.append(100 * row["gbps"] / roof)
            tc.append(t["compile_ms"])
            ratios.append(row["ms"] / t["compile_ms"])
        r = {"problem": name, "lossjit_ms": statistics.median(ms), "roofline_pct": statistics.median(pct),
             "compile_ms": statistics.median(tc), "ratio": statistics.median(ratios), "ratios": ratios}
        rows.append(r)
        want = WANT.get(name, 98.0)
        print(f"| {name} | {r['lossjit_ms']:.3f} | {r['roofline_pct']:.1f}% | {r['compile_ms']:.3f} | {r['ratio']:.3f} | "
              f"{' '.join(f'{x:.3f}' for x in ratios)} | ≥ {want:.0f}%, ≤ 1.00 |")
        verdicts.append((f"{name}: {r['roofline_pct']:.1f}% of {'copy' if name == 'hardsigmoid' else 'read'} ≥ {want:.0f}%",
                         r["roofline_pct"] >= want))
        verdicts.append((f"{name}: lossjit / torch.compile {r['ratio']:.3f} ≤ 1.00", r["ratio"] <= 1.00))
    gradients = []
    if args.value_and_grad:
        vg = nonfinite_as_numbers(json.load(open(args.value_and_grad)))
        add = vg["add_roofline"]["gbps"]
        fwd_bwd = statistics.median(th["smooth_l1_fwd_bwd_compile_ms"] for _, th in runs)
        hinge_fwd_bwd = statistics.median(th["hinge_fwd_bwd_compile_ms"] for _, th in runs)
        print("\n| fused value + gradients (one run) | ms | % of floor (add rate) | torch.compile fwd + bwd ms | ratio | target |")
        print("|---|---|---|---|---|---|")
        def floor_pct(row):
            return 100 * row["bytes"] / (add * 1e6) / row["ms"]
        sl1 = vg["value_and_grad"]
        ratio = sl1["ms"] / fwd_bwd
        print(f"| smooth L1, d/dp | {sl1['ms']:.3f} | {floor_pct(sl1):.1f}% | {fwd_bwd:.3f} | {ratio:.3f} | ≤ 0.55 |")
        verdicts_grad = [(f"smooth_l1 value_and_grad / torch.compile fwd+bwd {ratio:.3f} ≤ 0.55", ratio <= 0.55)]
        hinge = vg["hinge_value_and_grad"]
        print(f"| hinge, d/dp and d/dt (t [C]) | {hinge['ms']:.3f} | {floor_pct(hinge):.1f}% | {hinge_fwd_bwd:.3f} | "
              f"{hinge['ms'] / hinge_fwd_bwd:.3f} | ≥ 97% of floor |")
        verdicts_grad.append((f"hinge value_and_grad {floor_pct(hinge):.1f}% of floor ≥ 97%", floor_pct(hinge) >= 97))
        for row in vg.get("broadcast_value_and_grad", []):
            print(f"| {row['problem']} | {row['ms']:.3f} | {floor_pct(row):.1f}% | | | ≥ 90% of floor |")
            verdicts_grad.append((f"{row['problem']}: {floor_pct(row):.1f}% of floor ≥ 90%", floor_pct(row) >= 90))
        verdicts += verdicts_grad
        gradients = [{"problem": r["problem"], "ms": r["ms"], "floor_pct": floor_pct(r)}
                     for r in [sl1, hinge] + vg.get("broadcast_value_and_grad", [])]
    print("\ntargets:")
    for text, ok in verdicts:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump({"device": first["device"], "runs": len(runs), "problems": rows, "value_and_grad": gradients}, f,
                      indent=1)


if __name__ == "__main__":
    main()
