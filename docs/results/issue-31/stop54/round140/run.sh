#!/bin/bash
# Round 140 (one GPU a call): the GPU row tests whose kernels the prefetch's emitter change reaches
# without the prefetch (the first walk keeps the cache, the later ones read it): fused values and
# gradients along rows, rows side by side kept in the cache.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
timeout ${TEST_SECONDS:-380} build/tests/lossjit_tests -ts=gpu -tc="row programs: fused value and gradients*,row programs: rows side by side*" -d > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
