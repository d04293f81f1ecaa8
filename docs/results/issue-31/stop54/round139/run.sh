#!/bin/bash
# Round 139 (one GPU a call): the GPU tests the row prefetch touches: its own (asked for, on and off,
# three dtypes, block and warp teams, part of a row kept), and the gradients of maps that reduce
# (layer norm's, a block a row, now with the prefetch by default).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
timeout ${TEST_SECONDS:-420} build/tests/lossjit_tests -ts=gpu -tc="row programs: the row prefetch*,row programs: gradients of maps*" -d > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
