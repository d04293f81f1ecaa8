#!/bin/bash
# Round 216 (stop 68, H200): round 215 found a warp's rows of 4096 faster at 384 threads (12 warps,
# every row kept whole, 192 KB of shared memory) than at 512 (16 warps keeping 89%) or 448 (14, whole).
# Which of the warps an SM, the shared memory a block takes or the bytes in flight: blocks of 128-384
# threads (several blocks an SM where they fit), unroll 4, the prefetch; rows of 2048 (kept whole at
# 512) and 6144 (a block a row by default). Kernels compiled here (warm216.sh); carry exp68.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp68/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c LOSSJIT_LIBRARY=$PWD/exp68/main/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
source docs/results/issue-31/stop68/scripts/variants216.sh
only=(); for p in "${FAMILY[@]}"; do only+=(--only "$p"); done
for round in 1 2; do
  for s in $SHAPES; do
    vs=(); for v in $(variants $s); do vs+=(--variant $v); done
    echo "== round $round $s"
    timeout 150 python3 bench/row_variants.py --shape $s "${only[@]}" "${vs[@]}" --reps 10 2>&1
  done
done > $OUT/family.txt 2>&1
grep -E "==|of floor|rror" $OUT/family.txt | head -250
# (2) Teams taking rows in turn on a grid of as few blocks as give no team more rows (exp68/even)
# against main's resident grid (exp68/main): lossjit_bench --rows in turn, twice; then the family's
# defaults (forward kernels unchanged, the grid alone differs).
for round in 1 2; do
  for v in main even; do
    echo "== round $round $v"
    timeout 150 exp68/$v/lossjit_bench --rows --reps 10 --examples examples --json $OUT/rows_${v}_$round.json 2>&1 | head -8
  done
done > $OUT/even_rows.txt 2>&1
cat $OUT/even_rows.txt
for round in 1 2; do
  for v in main even; do
    for s in 32768x4096 65536x2048; do
      echo "== round $round $v $s"
      LOSSJIT_LIBRARY=$PWD/exp68/$v/liblossjit_c.so.1 timeout 100 python3 bench/row_variants.py --shape $s "${only[@]}" --reps 10 2>&1
    done
  done
done > $OUT/even_family.txt 2>&1
grep -E "==|of floor|rror" $OUT/even_family.txt
