#!/usr/bin/env bash
# Round 17 (2026-11-26, 2 GPUs): several results (numbers and values per row), gradients through
# several reductions, the vocab-parallel pair on 2 GPUs; Python GPU tests, the bench, the differential.
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
echo "== results cases at $(elapsed) s"
timeout 120 build/tests/lossjit_tests --test-suite=gpu --test-case='several results*' > $OUT/gpu_results.txt 2>&1; echo "rc $?" >> $OUT/gpu_results.txt
grep -E "ERROR|CHECK|values|logged|test cases|assertions|Status|rc " $OUT/gpu_results.txt | head -30
echo "== python GPU tests at $(elapsed) s"
timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/py_gpu.txt 2>&1; echo "rc $?" >> $OUT/py_gpu.txt
grep -E "^FAILED|^ERROR|passed|failed|rc " $OUT/py_gpu.txt | head -20
echo "== bench at $(elapsed) s"
timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
tail -45 $OUT/several_results.txt
echo "== differential gpu at $(elapsed) s"
left=$(( 545 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 400 --time-limit $(( left - 15 )) --cli build/lossjit --seed 123 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -9 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
