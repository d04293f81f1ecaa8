#!/bin/bash
# linear_loss: where the time goes (kernels by GPU time) and chunk budgets
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv > $OUT/env.txt
./build/tests/lossjit_tests -tc="linear_loss*" 2>&1 | grep -v "^$" | tail -40 > $OUT/tests.txt
timeout 500 python3 bench/linear_loss.py --reps 20 --profile --program cross_entropy --json $OUT/linear_loss.json > $OUT/bench.txt 2>&1
cat $OUT/env.txt $OUT/tests.txt $OUT/bench.txt
