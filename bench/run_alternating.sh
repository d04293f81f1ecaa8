#!/usr/bin/env bash
# Issue 15's comparison on one GPU: RUNS alternating runs of lossjit_bench and bench/torch_bench.py
# over the five reference problems (no size sweep), one run of the fused value-and-gradient kernels,
# then the medians and the verdicts (bench/median_of_runs.py).
# Usage: bench/run_alternating.sh OUTDIR [RUNS=3] [REPS=20]
set -euo pipefail
out=${1:?usage: bench/run_alternating.sh OUTDIR [RUNS] [REPS]}
runs=${2:-3}
reps=${3:-20}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
lj=() th=()
for i in $(seq 1 "$runs"); do
    "$here/build/bench/lossjit_bench" --examples "$here/examples" --only hinge mse kl smooth_l1 hardsigmoid \
        --no-sweep --no-accuracy --reps "$reps" --json "$out/lossjit-$i.json"
    python3 "$here/bench/torch_bench.py" --no-sweep --reps "$reps" --json "$out/torch-$i.json"
    lj+=("$out/lossjit-$i.json") th+=("$out/torch-$i.json")
done
"$here/build/bench/lossjit_bench" --examples "$here/examples" --only value_and_grad --no-sweep --no-accuracy \
    --reps "$reps" --json "$out/value_and_grad.json"
python3 "$here/bench/median_of_runs.py" --lossjit "${lj[@]}" --torch "${th[@]}" --value-and-grad "$out/value_and_grad.json" \
    --out-json "$out/median.json" | tee "$out/table.md"
