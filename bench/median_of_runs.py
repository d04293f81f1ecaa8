#!/usr/bin/env python3
"""Issue 15's comparison: lossjit and torch.compile on the five reference problems over several
alternating runs (bench/run_alternating.sh), each run against its own roofline; prints the medians
and whether each target holds: >= 98% of the best streaming read (copy for the map; KL >= 97%) and
lossjit / torch.compile <= 1.00.

    python3 bench/median_of_runs.py --lossjit l1.json l2.json l3.json --torch t1.json t2.json t3.json
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
    print("\ntargets:")
    for text, ok in verdicts:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump({"device": first["device"], "runs": len(runs), "problems": rows}, f, indent=1)


if __name__ == "__main__":
    main()
