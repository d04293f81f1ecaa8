#!/usr/bin/env bash
# The row-wise benchmark (issue 12): lossjit_bench --rows (cross-entropy at three shapes, cosine,
# triplet margin: the value, and the value with its gradients), then PyTorch eager and torch.compile
# on the same shapes (bench/rows_torch.py). Results into DIR.
#   bash bench/run_rows.sh DIR [--reps N]
set -euo pipefail
out=${1:?usage: bench/run_rows.sh DIR [--reps N]}
shift
reps=10
if [[ ${1:-} == --reps ]]; then reps=$2; fi
bench=${LOSSJIT_BENCH:-build/bench/lossjit_bench}
mkdir -p "$out"
"$bench" --rows --reps "$reps" --json "$out/lossjit.json"
if python3 -c 'import torch' 2>/dev/null; then
    python3 bench/rows_torch.py --reps "$reps" --json "$out/torch.json"
fi
