#!/usr/bin/env bash
# Round 41 (2026-11-26): takes of stage 0 that the first walk does not need (cross-entropy's x[y])
# filled after the walk, the index's load in flight during it. The row problems with and without
# the cache, on main before this session (old: 659e5c4), after whole tiles (prev: 3190da8) and now
# (new), in turn; several results against torch.compile; the whole gpu suite; the Python GPU tests.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== rows: old, prev, new in turn, at $(elapsed) s"
for v in old prev new; do
  bench=build/bench/lossjit_bench; [ $v != new ] && bench=build/gpu/$v/lossjit_bench
  timeout 40 $bench --examples examples --rows --reps 10 --variant row_cache=off --variant row_cache=auto > $OUT/rows_$v.txt 2>&1
  echo "-- $v"; grep -E "^(cross|cosine|triplet)" $OUT/rows_$v.txt | cut -c1-140
done
echo "== several_results at $(elapsed) s"
timeout 60 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt | head -20; grep -E "rc |Error" $OUT/several_results.txt
echo "== gpu suite at $(elapsed) s"
timeout 330 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -20
grep -B2 -A12 "ERROR" $OUT/gpu_suite.txt | head -40
left=$(( 470 - $(elapsed) ))
echo "== python gpu at $(elapsed) s ($left s left)"
[ $left -gt 20 ] && timeout $left python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/python_gpu.txt 2>&1; echo "rc $?" >> $OUT/python_gpu.txt
tail -3 $OUT/python_gpu.txt
echo "== end at $(elapsed) s"
