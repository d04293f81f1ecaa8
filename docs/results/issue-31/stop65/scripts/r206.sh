#!/bin/bash
# Round 206 (stop 65, H100): ByRowCachedValuesManyWalks (16 loaded values a thread where 3+ walks with
# exp or log at each element read 2+ cached inputs: distillation's value + gradient). The library
# before (exp65/fold) and after (exp65/walks), in turn, twice, distillation and soft-target CE at five
# shapes (bench/row_variants.py); at the shapes whose warps now leave the cache off, the new default
# against row_cache=on; then the fused-gradient GPU tests and the GPU differential with the new build.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
for d in exp65/fold exp65/walks; do ln -sf liblossjit_c.so.1.0 $d/liblossjit_c.so.1; done
for s in 32768x4096 16384x8192 16384x32000 8192x1000 16384x2048; do
  for lib in exp65/fold exp65/walks exp65/fold exp65/walks; do
    LOSSJIT_CACHE_DIR=/tmp/c_$(basename $lib) LOSSJIT_LIBRARY=$PWD/$lib/liblossjit_c.so.1 timeout 60 python3 \
      bench/row_variants.py --shape $s --reps 20 --only "distillation KL" --only "soft-target CE" 2>&1 | sed "s|^|$lib |"
  done
done > $OUT/before_after.txt
cat $OUT/before_after.txt
for s in 8192x1000 16384x2048; do
  LOSSJIT_CACHE_DIR=/tmp/c_walks LOSSJIT_LIBRARY=$PWD/exp65/walks/liblossjit_c.so.1 timeout 60 python3 bench/row_variants.py \
    --shape $s --reps 20 --only "distillation KL" --variant default --variant row_cache=on --variant unroll=2,row_cache=on
done > $OUT/cache.txt 2>&1
cat $OUT/cache.txt
export LOSSJIT_LIBRARY=$PWD/exp65/walks/liblossjit_c.so.1
(LOSSJIT_CACHE_DIR=/tmp/c_t timeout 200 exp65/walks/lossjit_tests -tc="*fused value and gradients match*" \
   > $OUT/tests.txt 2>&1; echo "exit $?" >> $OUT/tests.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 200 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 206 --time-limit 170 --cli exp65/walks/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
grep -h -E "test cases|assertions|exit" $OUT/tests.txt
tail -3 $OUT/differential.txt
