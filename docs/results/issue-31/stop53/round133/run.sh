#!/bin/bash
# Round 133 (one GPU a call): the final library of stop 53 (one-input warp rows at unroll 8 on an
# H100, 4 elsewhere; clusters for long cached rows; KL's one log): the row losses with the defaults,
# and the GPU row tests of reductions along rows (warp teams among them).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows.json > $OUT/rows.txt 2>&1
timeout ${TEST_SECONDS:-300} build/tests/lossjit_tests -ts=gpu -tc="row programs: reductions*,row programs: logsumexp*,row programs: out-of-range*,row programs: rank 3*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
