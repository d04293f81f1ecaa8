#!/usr/bin/env bash
# The whole benchmark in one go on a GPU machine: lossjit (C++), PyTorch eager and torch.compile,
# then the merged table, JSON and plot. Usage: bench/run.sh OUTDIR [extra lossjit_bench flags]
set -euo pipefail
out=${1:?usage: bench/run.sh OUTDIR}
shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
# LOSSJIT_BENCH_DTYPE=bfloat16 (or float16): the five problems over inputs of that dtype, on both sides.
dtype=${LOSSJIT_BENCH_DTYPE:-float32}
"$here/build/bench/lossjit_bench" --examples "$here/examples" --json "$out/lossjit.json" --dtype "$dtype" "$@"
python3 "$here/bench/torch_bench.py" --json "$out/torch.json" --dtype "$dtype"
python3 "$here/bench/report.py" "$out/lossjit.json" "$out/torch.json" --out-json "$out/bench.json" --plot "$out/sweep.png" | tee "$out/table.md"
