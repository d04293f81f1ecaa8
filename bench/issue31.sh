#!/usr/bin/env bash
# Issue 31's figures on one GPU, in two parts that each fit one GPU-machine call (600 s):
#   bash bench/issue31.sh OUT rows     the row programs: lossjit_bench --rows (cross-entropy forward
#                                      at three shapes, cosine, triplet, each value with its gradients;
#                                      then bench/rows_torch.py), the five problems (KL's % of the read
#                                      roofline), bench/class_losses.py (the fused cross-entropy, focal,
#                                      label smoothing against torch.autograd.grad of torch.compile)
#   bash bench/issue31.sh OUT python   bench/torch_bench.py, then bench/python_overhead.py at 1024
#                                      elements with the native path built (direct call, eager and
#                                      compiled forward + backward beside torch's own MSE)
# Run from the repository root on the GPU machine, with a build folder (build/, or BUILD=DIR) carried
# or built there. Every figure goes to a file under OUT; the last lines of each are printed.
# (Stop 65's docs/results/issue-31/stop65/scripts/r201.sh, kept here, with the native path.)
set -uo pipefail
out=${1:?usage: bench/issue31.sh OUT rows|python}
part=${2:-rows}
build=${BUILD:-build}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} LOSSJIT_SOURCE_DIR=$PWD
export LOSSJIT_LIBRARY=$PWD/$build/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=${LOSSJIT_CACHE_DIR:-/tmp/lj_cache}
export LOSSJIT_BENCH=$build/bench/lossjit_bench TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/lj_extensions}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$out/gpu_$part.txt" 2>&1
case $part in
  rows)
    # Limits within a call's 600 s (round 275: run_rows and class_losses took 98 s together; the five
    # problems' bench, with issue 15's fused gradients after them, ran past 120 s before its JSON:
    # only the five now).
    timeout 200 bash bench/run_rows.sh "$out/rows" --reps 20 > "$out/rows.txt" 2>&1; echo "rows exit $?" >> "$out/rows.txt"
    timeout 240 "$LOSSJIT_BENCH" --no-sweep --reps 20 --only hinge mse kl smooth_l1 hardsigmoid \
      --json "$out/five.json" > "$out/five.txt" 2>&1
    echo "five exit $?" >> "$out/five.txt"
    timeout 150 python3 bench/class_losses.py --shape 16384x32768 --reps 20 > "$out/class_losses.txt" 2>&1
    echo "class_losses exit $?" >> "$out/class_losses.txt"
    tail -n 3 "$out/rows.txt" "$out/five.txt" "$out/class_losses.txt"
    ;;
  python)
    timeout 180 python3 bench/torch_bench.py --no-sweep --reps 20 --json "$out/torch.json" > "$out/torch.txt" 2>&1
    echo "torch exit $?" >> "$out/torch.txt"
    timeout 380 python3 bench/python_overhead.py --n 1024 --calls 5000 --repeats 5 --build-native \
      --json "$out/overhead.json" > "$out/overhead.txt" 2>&1
    echo "overhead exit $?" >> "$out/overhead.txt"
    tail -n 30 "$out/overhead.txt"
    ;;
  *) echo "bench/issue31.sh: the part is rows or python, not $part" >&2; exit 2 ;;
esac
