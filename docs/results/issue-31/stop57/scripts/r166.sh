#!/bin/bash
# Round 166 (H100): the final change (1024 threads for a fused kernel's block alone on its SM with
# exp or log at each element; the next row's index asked of L2 with the prefetch) against HEAD,
# alternating; the GPU row tests it touches; the GPU random-program differential. Each step appends
# to one file under $OUT (files come back even if the call runs out of time).
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 build-old/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
for r in 1 2; do
  for v in old new; do
    b=build; [ $v = old ] && b=build-old
    echo "== $v $r" >> $OUT/rows.txt
    LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 80 $b/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy 2>&1 | grep -v "^ \|^{\|^}\|^\]" >> $OUT/rows.txt
  done
done
for v in old new; do
  b=build; [ $v = old ] && b=build-old
  echo "== $v" >> $OUT/variants.txt
  LOSSJIT_LIBRARY=$PWD/$b/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 80 python3 bench/row_variants.py \
    --shape 16384x32000 --reps 20 --variant default >> $OUT/variants.txt 2>&1
done
LOSSJIT_CACHE_DIR=/tmp/ljcache timeout 270 build/tests/lossjit_tests --duration=true -tc="row programs: the row prefetch*,row programs: the gradient of an input of one value per row*,row programs: fused value and gradients*,row programs: class-weight*" > $OUT/gpu_tests.txt 2>&1; echo "exit $?" >> $OUT/gpu_tests.txt
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 110 python3 tests/differential/differential.py --device cuda --count 600 --seed 5701 --time-limit 90 --cli build/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt
grep -n "^[0-9.]* s: \|ERROR\|test cases\|assertions\|exit" $OUT/gpu_tests.txt | tail -8; tail -3 $OUT/differential.txt
