#!/bin/bash
# Round 207 (stop 65, H100): the final build (exp65/final: the factor fold, ByRowCachedValuesManyWalks,
# the row cache kept for many walks short of its bytes in flight): distillation at the five shapes of
# round 206 with the defaults, the fused-gradient GPU tests and the GPU differential. Carry exp65/final.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
export LOSSJIT_LIBRARY=$PWD/exp65/final/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 exp65/final/liblossjit_c.so.1
(LOSSJIT_CACHE_DIR=/tmp/c_t timeout 200 exp65/final/lossjit_tests -tc="*fused value and gradients match*" \
   > $OUT/tests.txt 2>&1; echo "exit $?" >> $OUT/tests.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 200 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 207 --time-limit 170 --cli exp65/final/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
for s in 32768x4096 16384x8192 8192x1000 16384x2048; do
  LOSSJIT_CACHE_DIR=/tmp/c_b timeout 40 python3 bench/row_variants.py --shape $s --reps 20 --only "distillation KL" 2>&1
done > $OUT/distill.txt
cat $OUT/distill.txt
grep -h -E "test cases|assertions|exit" $OUT/tests.txt
tail -3 $OUT/differential.txt
