#!/usr/bin/env bash
# The row-wise benchmark (issue 12): `lossjit bench` on each problem at the issue's shapes, then
# PyTorch eager and torch.compile on the same shapes (bench/rows_torch.py). Results into DIR.
#   bash bench/run_rows.sh DIR [--reps N]
set -euo pipefail
out=${1:?usage: bench/run_rows.sh DIR [--reps N]}
shift
reps=10
if [[ ${1:-} == --reps ]]; then reps=$2; fi
lossjit=${LOSSJIT:-build/lossjit}
mkdir -p "$out"
run() {
    local name=$1
    shift
    echo "== $name" >&2
    "$lossjit" bench "$@" --reps "$reps" --sets 2 --json -q > "$out/$name.json"
}
run ce_32768x4096 examples/cross_entropy.loss -i x=32768x4096:normal -i y=32768:integers[0,4095]:i64
run ce_16384x32768 examples/cross_entropy.loss -i x=16384x32768:normal -i y=16384:integers[0,32767]:i64
run ce_4096x131072 examples/cross_entropy.loss -i x=4096x131072:normal -i y=4096:integers[0,131071]:i64
run cosine_16384x16384 examples/cosine.loss -i a=16384x16384:normal -i b=16384x16384:normal
run triplet_32768x8192 examples/triplet.loss -i a=32768x8192:normal -i p=32768x8192:normal -i n=32768x8192:normal
if python3 -c 'import torch' 2>/dev/null; then
    python3 bench/rows_torch.py --reps "$reps" --json "$out/torch.json"
fi
