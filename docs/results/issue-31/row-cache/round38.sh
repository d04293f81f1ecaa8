#!/usr/bin/env bash
# Round 38 (2026-11-26): the first GPU run of what changed after round 37 (the 64 KB-per-SM rule,
# the signature without columns, the Python knobs test, _GradPlan's NULL strides, the GPU
# differential asking for the row cache): the whole gpu suite, the Python GPU tests, the row
# problems with and without the cache, several results against torch.compile, the differential.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== gpu suite at $(elapsed) s"
timeout 330 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -20
echo "== python gpu at $(elapsed) s"
timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/python_gpu.txt 2>&1; echo "rc $?" >> $OUT/python_gpu.txt
tail -3 $OUT/python_gpu.txt
echo "== rows with and without the cache at $(elapsed) s"
timeout 120 build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows.json --variant row_cache=off --variant row_cache=auto > $OUT/rows.txt 2>&1; echo "rc $?" >> $OUT/rows.txt
grep -v "^\s*$" $OUT/rows.txt | cut -c1-140 | tail -24
echo "== several_results at $(elapsed) s"
timeout 80 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt | head -20; grep -E "rc |Error" $OUT/several_results.txt
left=$(( 585 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 400 --time-limit $(( left - 15 )) --cli build/lossjit --seed 138 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -4 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
