#!/bin/bash
# Round 178 (H200): the walk ahead with the next row's own values (its index, [N, 1] inputs) loaded
# by the row before. The GPU test of the prefetch on and off (now with a take of a second input at
# the index); lossjit_bench --rows (the change's only: HEAD's is rounds 176-177); bench/row_variants.py
# at 16384 x 32768, the change's library and HEAD's.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 build-old/src/capi/liblossjit_c.so.1
LOSSJIT_CACHE_DIR=/tmp/c_tests timeout 110 build/tests/lossjit_tests -tc="row programs: the row prefetch*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 50 build/bench/lossjit_bench --rows --reps 10 --no-accuracy --examples examples 2>&1 | head -12 > $OUT/rows.txt
for v in new old; do
  b=build; [ $v = old ] && b=build-old
  echo "== 16384x32768: $v" >> $OUT/variants.txt
  LOSSJIT_LIBRARY=$PWD/$b/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 40 python3 bench/row_variants.py \
    --shape 16384x32768 --reps 20 --variant default >> $OUT/variants.txt 2>&1
done
