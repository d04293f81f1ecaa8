#!/bin/bash
# Round 135 (one GPU a call): cross-entropy's value + gradient over 32768 x 4096, warps a row with the
# row cache: 16 warps a block keep 3504 of each row's 4096 columns (219 KB / 16); 13 warps (416
# threads) or 12 (384) keep whole rows, one block an SM either way. Each variant twice, in turn.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --only "cross_entropy 32768x4096" --variant row_cache=auto --variant block=416 --variant block=384 --variant block=416,unroll=4 --variant block=256 > $OUT/warps.txt 2>&1
