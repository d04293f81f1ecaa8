#!/bin/bash
# Round 167 (H100): the GPU row tests of the fused kernels (1024 threads where a block is alone on
# its SM: 40 x 50257 cross-entropy, 24 x 20000 distillation) and of the row prefetch (the next row's
# index asked of L2). Round 166 ran them with two more in 270 s and ran out of time.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
LOSSJIT_CACHE_DIR=/tmp/ljcache timeout 380 build/tests/lossjit_tests --duration=true -tc="row programs: the row prefetch*,row programs: fused value and gradients*" > $OUT/gpu_tests.txt 2>&1; echo "exit $?" >> $OUT/gpu_tests.txt
grep -n "^[0-9.]* s: \|ERROR\|test cases\|assertions\|exit" $OUT/gpu_tests.txt | tail -8
