#!/usr/bin/env bash
# Round 16 (2026-11-26): several results and gradients through several reductions on the GPU:
# their C++ and Python cases, the bench (issue 30's 5% target), the gpu suite, the differential.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== results cases at $(elapsed) s"
timeout 120 build/tests/lossjit_tests --test-suite=gpu --test-case='several results*' > $OUT/gpu_results.txt 2>&1; echo "rc $?" >> $OUT/gpu_results.txt
grep -E "ERROR|CHECK|values|logged|test cases|assertions|Status|rc " $OUT/gpu_results.txt | head -30
echo "== python several at $(elapsed) s"
timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py -k "several or refused_not_dropped" > $OUT/py_several.txt 2>&1; echo "rc $?" >> $OUT/py_several.txt
tail -15 $OUT/py_several.txt
echo "== bench at $(elapsed) s"
timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
tail -40 $OUT/several_results.txt
echo "== gpu suite at $(elapsed) s"
left=$(( 540 - $(elapsed) )); [ $left -gt 30 ] && timeout $left build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*,several results*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -20
echo "== end at $(elapsed) s"
