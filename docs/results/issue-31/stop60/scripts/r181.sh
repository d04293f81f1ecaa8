#!/bin/bash
# Round 181 (H200): the GPU tests round 179 did not reach (by name order from the K-takes test on;
# round 180 ran out of time before its logs were written), each shard's log straight into $OUT;
# first the harness's printed walk-ahead variants Q1 (no run-time inner stride), Q2 (and the cache
# indexed by column) beside P0 and C, at one shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
# harness_q: harness.cu with the variants P0, Q1 and Q2 only (scripts/build.sh now builds them all in harness)
(cd exp60 && timeout 60 ./harness_q 16384 32768) > $OUT/harness.txt 2>&1
n=$(build/tests/lossjit_tests -ltc --no-skip 2>/dev/null | grep -c .)
first=236; last=$n  # 240 with --no-skip here; two tests skip on an H200
step=$(( (last - first + 6) / 6 ))
for s in 0 1 2 3 4 5; do
  f=$(( first + s * step )); l=$(( first + (s + 1) * step - 1 ))
  (LOSSJIT_CACHE_DIR=/tmp/c_t$s timeout 330 build/tests/lossjit_tests --order-by=name --first=$f --last=$l \
     --duration=true > $OUT/tests_$s.txt 2>&1; echo "exit $? (tests $f-$l of $n)" >> $OUT/tests_$s.txt) &
done
wait
grep -h -E "test cases|assertions|exit" $OUT/tests_*.txt
