#!/bin/bash
# Round 185 (H200): stop 61's rule (a block of more threads than ByRowCachedThreads holds as many fewer
# values a thread: bfloat16 fused row kernels of 1024 threads lose the unroll 8 that spilled, and with
# it the row cache) through the GPU tests that run bfloat16 fused row kernels with default knobs, in
# parallel; the GPU random differential; and the new defaults timed (bfloat16 logits). Carry
# build/tests/lossjit_tests, build/lossjit, build/src/capi/liblossjit_c.so.1.0.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
i=0
for tc in "*fused value and gradients match*" "*fused gradients into bfloat16*" "*row prefetch gives*" \
          "*one value per row ([N, 1])*,*class-weight gradients*" "*maps that reduce*" "*keep within their registers*,*every input dtype*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 500 build/tests/lossjit_tests -tc="$tc" --duration=true > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 500 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 185 --time-limit 380 --cli build/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
for s in 16384x32768 8192x49152; do
  timeout 60 python3 bench/row_variants.py --shape $s --dtype bfloat16 --only cross-entropy --only focal \
    --only "label smoothing" --only "loss, z and accuracy" --variant default
done >> $OUT/differential.txt 2>&1
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -12 $OUT/differential.txt
