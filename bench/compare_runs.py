#!/usr/bin/env python3
"""Before/after comparison of lossjit_bench JSON files from one GPU and one call (alternating runs):
every kernel time, the median of each side's runs, and after / before.

Usage: bench/compare_runs.py --before B1.json B2.json ... --after A1.json A2.json ... [--tolerance 0.01]
Exits 1 if any measurement is slower than before by more than the tolerance (median against median).
"""
import argparse
import json
import statistics
import sys


def measurements(doc):
    """name -> ms for every kernel time in one lossjit_bench report (five problems, fused
    gradients, row losses)."""
    out = {}
    for row in doc.get("problems", []):
        out[row["problem"]] = row["ms"]
    for key in ("value_and_grad", "hinge_value_and_grad"):
        if key in doc:
            out[doc[key]["problem"]] = doc[key]["ms"]
    for row in doc.get("broadcast_value_and_grad", []):
        out[row["problem"]] = row["ms"]
    for row in doc.get("row_problems", []):
        out[row["problem"]] = row["ms"]
        out[row["problem"] + " value_and_grad"] = row["value_and_grad_ms"]
    return out


def medians(paths):
    runs = {}
    for path in paths:
        with open(path) as f:
            for name, ms in measurements(json.load(f)).items():
                runs.setdefault(name, []).append(ms)
    return {name: (statistics.median(v), v) for name, v in runs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", nargs="+", required=True)
    ap.add_argument("--after", nargs="+", required=True)
    ap.add_argument("--tolerance", type=float, default=0.01, help="slower than this fraction fails (default 1%%)")
    args = ap.parse_args()
    before, after = medians(args.before), medians(args.after)
    worst = 0.0
    print("| kernel | before ms: median (each run) | after ms: median (each run) | after / before |")
    print("|---|---|---|---|")
    for name in before:
        if name not in after:
            print(f"| {name} | {before[name][0]:.4f} | missing | |")
            worst = float("inf")
            continue
        b, a = before[name][0], after[name][0]
        ratio = a / b
        worst = max(worst, ratio - 1)
        print(f"| {name} | {b:.4f} ({', '.join(f'{x:.4f}' for x in before[name][1])}) "
              f"| {a:.4f} ({', '.join(f'{x:.4f}' for x in after[name][1])}) | {ratio:.4f} |")
    verdict = "within" if worst <= args.tolerance else "NOT within"
    print(f"\nslowest change: {100 * worst:+.2f}% ({verdict} {100 * args.tolerance:.0f}%)")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
