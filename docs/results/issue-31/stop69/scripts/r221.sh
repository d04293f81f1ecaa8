#!/bin/bash
# Round 221 (stop 69, H200): the same two libraries as round 220. (1) lossjit_bench --rows, main and
# the change in turn, twice (every row target of issue 31). (2) The family at 8192x49152, each
# library in turn, twice. (3) Untimed, last: the GPU tests of row programs with the change and the
# GPU random differential, in parallel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp69/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
for v in main p12w; do ln -sf liblossjit_c.so.1.0 exp69/$v/liblossjit_c.so.1; done
for round in 1 2; do
  for v in main p12w; do
    echo "== round $round $v"
    timeout 80 exp69/$v/lossjit_bench --rows --reps 10 --examples examples --json $OUT/rows_${v}_$round.json 2>&1 | head -8
  done
done > $OUT/rows.txt 2>&1
cat $OUT/rows.txt
only=(--only cross-entropy --only "class weights" --only "label smoothing" --only focal)
for round in 1 2; do
  for v in main p12w; do
    echo "== round $round 8192x49152 $v"
    LOSSJIT_LIBRARY=$PWD/exp69/$v/liblossjit_c.so.1 timeout 40 python3 bench/row_variants.py --shape 8192x49152 "${only[@]}" --reps 10 2>&1
  done
done > $OUT/family49152.txt 2>&1
grep -E "==|of floor|rror" $OUT/family49152.txt
export LOSSJIT_LIBRARY=$PWD/exp69/p12w/liblossjit_c.so.1
i=0
for tc in "row programs: fused value*" "row programs: the row prefetch*" \
          "row programs: class-weight*,row programs: the gradient of an input of one*" "row programs: gradients of maps*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 200 exp69/p12w/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 200 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 221 --time-limit 175 --cli exp69/p12w/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|^exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
