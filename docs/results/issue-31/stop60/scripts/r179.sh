#!/bin/bash
# Round 179 (H200): the whole doctest suite on the GPU in six shards at once (stop 59's walk ahead
# ran only the prefetch test there), the GPU random differential and the K-takes differential.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
n=$(build/tests/lossjit_tests -ltc 2>/dev/null | grep -c .)
per=$(( (n + 5) / 6 ))
for s in 0 1 2 3 4 5; do
  f=$(( s * per + 1 )); l=$(( (s + 1) * per ))
  (LOSSJIT_CACHE_DIR=/tmp/c_t$s timeout 560 build/tests/lossjit_tests --order-by=name --first=$f --last=$l \
     --duration=true > $OUT/tests_$s.txt 2>&1; echo "exit $?" >> $OUT/tests_$s.txt) &
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 560 python3 -u tests/differential/differential.py --device cuda --count 600 \
   --seed 179 --time-limit 420 --cli build/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_k timeout 560 python3 -u tests/differential/k_takes.py --device cuda --count 300 \
   --seed 179 > $OUT/k_takes.txt 2>&1; echo "exit $?" >> $OUT/k_takes.txt) &
wait
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests_*.txt
tail -3 $OUT/differential.txt $OUT/k_takes.txt
