#!/bin/bash
# Round 131 (one H200): the row losses' value + gradient with the row cache at more threads or more
# bytes in flight (a block alone on its SM, its read and write walks not overlapping with another's):
# block 1024, unroll 16 / 4; each variant twice, in turn. And the Python GPU tests (second derivatives
# through the ops refused, stop 53).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --variant row_cache=auto --variant block=1024 --variant unroll=16 --variant block=1024,unroll=4 --json $OUT/threads.json > $OUT/threads.txt 2>&1
timeout 300 python3 -m pytest -q -rfs -p no:cacheprovider python/tests/test_gpu.py > $OUT/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/pytest.txt
