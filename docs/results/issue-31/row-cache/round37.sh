#!/usr/bin/env bash
# Round 37 (2026-11-26, H100): after capping a cached kernel's loaded values at 32 a thread and
# leaving rows read an element at a time uncached unless asked: bfloat16 softmax with and without
# the cache, the tune test (a tuning record of a kernel that walks no rows leaves row_cache unset),
# and the row cases of the gpu suite.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
for shape in 32768x4096 16384x32768; do
  timeout 50 build/lossjit bench 'exp(x - logsumexp(x, -1))' -i x=$shape:normal:bf16 --sweep row_cache=auto,off --reps 10 --sets 1 -q > $OUT/map.txt 2>&1
  echo "bf16 softmax $shape"; sed -n 6,8p $OUT/map.txt | cut -c1-150; cat $OUT/map.txt >> $OUT/maps.txt
done
echo "== tests at $(elapsed) s"
timeout 250 build/tests/lossjit_tests --test-suite=gpu -tc='tune stores*,row programs*' > $OUT/gpu_tests.txt 2>&1; echo "rc $?" >> $OUT/gpu_tests.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_tests.txt | head -20
echo "== end at $(elapsed) s"
