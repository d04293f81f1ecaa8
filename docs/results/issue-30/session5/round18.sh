#!/usr/bin/env bash
# Round 18 (2026-11-26, 2 GPUs): argmax's lane-ascending add (the 5% target of issue 30: the bench),
# the vocab-parallel pair on 2 GPUs after the all_reduce aliasing fix, the gpu suite, the differential.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
export NCCL_NVLS_ENABLE=0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== bench at $(elapsed) s"
timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt; grep -E "three_results|rc |Error" $OUT/several_results.txt
echo "== python vocab + several at $(elapsed) s"
timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py -k "vocab or several or later_result or one_value_per_row" > $OUT/py_gpu.txt 2>&1; echo "rc $?" >> $OUT/py_gpu.txt
grep -E "^FAILED|^E  |passed|failed|rc " $OUT/py_gpu.txt | head -20
python3 examples/vocab_parallel.py > $OUT/vocab_parallel.txt 2>&1; echo "rc $?" >> $OUT/vocab_parallel.txt; cat $OUT/vocab_parallel.txt
echo "== gpu suite at $(elapsed) s"
timeout 260 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -20
echo "== differential gpu at $(elapsed) s"
left=$(( 550 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 400 --time-limit $(( left - 15 )) --cli build/lossjit --seed 124 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -9 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
