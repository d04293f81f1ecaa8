#!/bin/bash
# Round 229, shortened for the device time left (stop 70, H200): the rule as built (exp70/new) against
# main (exp69/new), each library in its own process, in turn, 8192 x 65536; then, untimed, the GPU
# tests of the picked take (65536 columns among them) and of the row prefetch, and the GPU random
# differential, in parallel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
for v in exp69/new exp70/new; do ln -sf liblossjit_c.so.1.0 $v/liblossjit_c.so.1; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
for v in exp69/new exp70/new; do
  echo "== $v"
  LOSSJIT_LIBRARY=$PWD/$v/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c229_${v#*/} timeout 60 python3 bench/row_variants.py \
    --shape 8192x65536 --reps 10 --only cross-entropy --only "class weights" --only "label smoothing" --only focal \
    --only "loss, z and accuracy" 2>&1
done > $OUT/part.txt
cat $OUT/part.txt
export LOSSJIT_LIBRARY=$PWD/exp70/new/liblossjit_c.so.1
i=0
for tc in "row programs: a take picked*" "row programs: the row prefetch*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 170 exp70/new/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 170 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 229 --time-limit 140 --cli exp70/new/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|^exit|ERROR" $OUT/tests.txt
tail -4 $OUT/differential.txt
