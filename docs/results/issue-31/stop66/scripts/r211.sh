#!/bin/bash
# Round 211 (stop 66, H200): the GPU tests of row programs and the GPU random differential with
# exp66/cap's build (512 x 8, registers for 1024 threads an SM); round 210 ran out of time before them.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
export LOSSJIT_LIBRARY=$PWD/exp66/cap/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp66/cap/liblossjit_c.so.1
i=0
for tc in "row programs: reductions*" "row programs: logsumexp and argmax*,row programs: out-of-range*,row programs: rank 3*" \
          "every input dtype*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 130 exp66/cap/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 140 python3 -u tests/differential/differential.py --device cuda --count 200 \
   --seed 211 --time-limit 110 --cli exp66/cap/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
