# Round 278: fused value-and-gradient kernels the resident grid would change on an H200 (block
# teams without the prefetch, rows beyond the slots): exp79/lib_broad (682ce54: the resident grid for
# them too) against exp79/lib_narrow (values alone), bench/row_variants.py's defaults, in turn.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_CACHE_DIR=/tmp/ljc
run() { LOSSJIT_LIBRARY=$PWD/exp79/lib_$1/liblossjit_c.so.1 timeout 45 python3 bench/row_variants.py "${@:2}" --reps 20 2>&1 | grep -E "of floor|Error|error" | tail -2; }
for round in 1 2; do
  for lib in broad narrow; do
    echo "== $lib, round $round"
    run $lib --shape 16384x32768 --dtype bfloat16 --only cross-entropy
    run $lib --shape 16384x50257 --only cross-entropy
    run $lib --shape 16384x32000 --only "distillation KL"
  done
done
