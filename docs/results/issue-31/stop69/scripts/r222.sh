#!/bin/bash
# Round 222 (stop 69, H200): the rule as built (exp69/new: walked ahead at 1024 threads only where
# every take is picked, ByRowWalkAheadPickedMaxThreads). (1) lossjit_bench --rows, main and the
# change in turn, twice. (2) Untimed: the GPU tests of row programs with the change (the new picked
# take test among them) and the GPU random differential, in parallel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp69/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
for v in main new; do ln -sf liblossjit_c.so.1.0 exp69/$v/liblossjit_c.so.1; done
for round in 1 2; do
  for v in main new; do
    echo "== round $round $v"
    timeout 60 exp69/$v/lossjit_bench --rows --reps 10 --examples examples 2>&1 | head -8
  done
done > $OUT/rows.txt 2>&1
cat $OUT/rows.txt
export LOSSJIT_LIBRARY=$PWD/exp69/new/liblossjit_c.so.1
i=0
for tc in "row programs: fused value*" "row programs: the row prefetch*" \
          "row programs: a take picked*,row programs: class-weight*,row programs: the gradient of an input of one*,row programs: out-of-range*" \
          "row programs: gradients of maps*,row programs: a GPU known by name*,row programs: reductions*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 330 exp69/new/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 300 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 222 --time-limit 270 --cli exp69/new/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|^exit|SKIPPED|ERROR" $OUT/tests.txt | head -40
tail -4 $OUT/differential.txt
