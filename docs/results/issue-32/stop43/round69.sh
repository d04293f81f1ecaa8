#!/bin/bash
# linear_loss: the ignore_index ratio beside the plain cross-entropy (bench/linear_loss.py)
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
timeout 400 python3 bench/linear_loss.py --reps 10 --program cross_entropy --program cross_entropy_ignore --json $OUT/linear_loss.json > $OUT/bench.txt 2>&1
cat $OUT/bench.txt
