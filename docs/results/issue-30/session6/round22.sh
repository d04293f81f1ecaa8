#!/usr/bin/env bash
# Round 22 (2026-11-26): verify the commits since round 21 (side-by-side team_in_block fix,
# LogSumExpArgMaxAcc refactor, review fixes): the whole gpu suite, Python GPU tests, the
# differential, the several-results bench.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache NCCL_NVLS_ENABLE=0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== gpu suite at $(elapsed) s"
timeout 200 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -30
echo "== python gpu at $(elapsed) s"
timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/python_gpu.txt 2>&1; echo "rc $?" >> $OUT/python_gpu.txt
tail -15 $OUT/python_gpu.txt
echo "== bench at $(elapsed) s"
timeout 100 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt; grep -E "three_results|rc |Error" $OUT/several_results.txt
echo "== differential gpu at $(elapsed) s"
left=$(( 560 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 400 --time-limit $(( left - 15 )) --cli build/lossjit --seed 126 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -6 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
