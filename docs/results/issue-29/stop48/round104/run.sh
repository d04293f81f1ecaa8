#!/bin/bash
# Round 104: rows side by side with the row cache (the first build of it): RMS norm over dimension 1
# at 64 / 128 / 256 features, cache on and off, block and unroll; log_softmax over the classes.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
B="timeout 120 build/lossjit bench -q --reps 10 --sets 1"
R=examples/kernelbench/36_RMSNorm_.loss
echo "== rms 8x64x512x512 cache on"; $B $R -i x=8x64x512x512:normal -k row_cache=on --sweep block=64,128,256 --sweep unroll=8,16,32 2>&1 | tail -11
echo "== rms 8x64x512x512 default/off"; $B $R -i x=8x64x512x512:normal --sweep row_cache=auto,off 2>&1 | tail -4
echo "== rms 8x128x512x256"; $B $R -i x=8x128x512x256:normal --sweep row_cache=off,on --sweep block=64,128,256 2>&1 | tail -7
echo "== rms 8x256x256x256"; $B $R -i x=8x256x256x256:normal --sweep row_cache=off,on --sweep block=32,64,128 2>&1 | tail -7
echo "== log_softmax dim 1 8x100x512x256"; $B 'x - logsumexp(x, 1)' -i x=8x100x512x256:normal --sweep row_cache=off,on --sweep block=64,128 2>&1 | tail -5
