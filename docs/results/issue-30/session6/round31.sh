#!/usr/bin/env bash
# Round 31 (2026-11-26, H100): the SASS of the cross-entropy and loss, z, acc kernels (for the
# next look at the 9 instructions per element); Python GPU tests and the gpu suite's row, results
# and map cases after the output-overlap and take checks.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
for n in CE THREE; do /usr/local/cuda/bin/cuobjdump -sass build/gpu/sass/$n.cubin > $OUT/$n.sass 2>&1; echo "$n: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $OUT/$n.sass) instructions"; done
echo "== python gpu at $(elapsed) s"
timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/python_gpu.txt 2>&1; echo "rc $?" >> $OUT/python_gpu.txt
grep -E "passed|failed|Error|rc " $OUT/python_gpu.txt | tail -6
echo "== gpu cases at $(elapsed) s"
timeout 200 build/tests/lossjit_tests --test-suite=gpu --test-case='row programs*,several*,maps*,the backward of a map*,edge cases*,layouts*' > $OUT/gpu_cases.txt 2>&1; echo "rc $?" >> $OUT/gpu_cases.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_cases.txt | head -20
echo "== end at $(elapsed) s"
