#!/bin/bash
# Round 130 (one GPU a call): row clusters chosen automatically for rows a block keeps less than half
# of (ByRowClusterLongRowShare): the GPU row tests (80 x 131072 added), the row losses with the
# defaults, KernelBench's long rows (softmax / log_softmax 393216, L1/L2 65535: unchanged) and 95.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows.json > $OUT/rows.txt 2>&1
python3 bench/kernelbench.py --kernelbench build/kb/KernelBench/level1 --device cuda --rounds 3 --reps 10 --only 23 24 38 39 95 --json $OUT/kb.json > $OUT/kernelbench.txt 2>&1
timeout ${TEST_SECONDS:-300} build/tests/lossjit_tests -ts=gpu -tc="row programs: fused*,row programs: gradients of maps*,KL*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
