#!/usr/bin/env bash
# round 15 (new session 2026-11-26): gradients of inputs of one value for each row on the GPU
# (written once per row): the gpu suite and the differential.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== per-row gradient case at $(elapsed) s"
timeout 120 build/tests/lossjit_tests --test-suite=gpu --test-case='*one value per row*' > $OUT/gpu_per_row.txt 2>&1; echo "rc $?" >> $OUT/gpu_per_row.txt
grep -E "ERROR|CHECK|logged|test cases|assertions|Status|rc " $OUT/gpu_per_row.txt | head -30
echo "== gpu suite at $(elapsed) s"
timeout 250 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*,*one value per row*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
tail -5 $OUT/gpu_suite.txt
echo "== differential gpu at $(elapsed) s"
left=$(( 520 - $(elapsed) )); [ $left -gt 30 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 400 --time-limit $(( left - 15 )) --cli build/lossjit --seed 122 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -9 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
