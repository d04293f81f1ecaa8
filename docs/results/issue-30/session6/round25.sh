#!/usr/bin/env bash
# Round 25 (2026-11-26, H100): the whole gpu suite with add_group/add_vec in every row kernel, the
# differential's program 231 of seed 127 after the float64-twin harness fix, then seed 128.
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
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -30
echo "== differential 127/231 at $(elapsed) s"
timeout 60 python3 tests/differential/differential.py --device cuda --seed 127 --only 231 > $OUT/differential_231.txt 2>&1; echo "rc $?" >> $OUT/differential_231.txt
tail -5 $OUT/differential_231.txt
echo "== differential gpu at $(elapsed) s"
left=$(( 570 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 300 --time-limit $(( left - 15 )) --cli build/lossjit --seed 128 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -4 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
