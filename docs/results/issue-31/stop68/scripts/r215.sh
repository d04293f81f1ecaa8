#!/bin/bash
# Round 215 (stop 68, H200): a warp's row kept whole in the row cache. At 512 threads (16 warps) a
# fused value-and-gradient kernel over 4096 float32 columns keeps 89% of each row in shared memory and
# reads the rest twice; 14 warps (448 threads) or two blocks of 7 (224) keep every row whole. The
# cross-entropy family through bench/row_variants.py, each variant in turn, at 32768x4096 and, with
# warps keeping whole rows of 8192 at 224 threads, 16384x8192. Kernels compiled here (warm215.sh);
# carry exp68.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp68/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c LOSSJIT_LIBRARY=$PWD/exp68/main/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
source docs/results/issue-31/stop68/scripts/variants215.sh
only=(); for p in "${FAMILY[@]}"; do only+=(--only "$p"); done
for round in 1 2; do
  for s in 32768x4096 16384x8192; do
    vs=(); for v in $(variants $s); do vs+=(--variant $v); done
    echo "== round $round $s"
    timeout 120 python3 bench/row_variants.py --shape $s "${only[@]}" "${vs[@]}" --reps 10 2>&1
  done
done > $OUT/family.txt 2>&1
grep -E "==|of floor|rror" $OUT/family.txt | head -150
