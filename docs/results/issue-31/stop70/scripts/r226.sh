#!/bin/bash
# Round 226 (stop 70, H200): main's head (exp69/new). (1) Round 225 as prepared in stop 69: focal and
# label smoothing as written against their take of x distributed by hand (x[y] - lse), cross-entropy
# beside, in turn, at three shapes. (2) Rows a warp takes (32768 x 4096): the cross-entropy family's
# value and gradient at the default against the next row walked ahead (row_prefetch=on), at 384 and
# 512 threads, in turn, two processes.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
ln -sf liblossjit_c.so.1.0 exp69/new/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/exp69/new/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c226
cp -r exp69/c /tmp/c226
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
for s in 16384x32768 8192x49152 16384x32000; do
  timeout 60 python3 docs/results/issue-31/stop69/scripts/r225.py --shape $s --reps 10 2>&1
done > $OUT/distributed.txt
cat $OUT/distributed.txt
for p in 1 2; do
  timeout 100 python3 bench/row_variants.py --shape 32768x4096 --reps 10 --only cross-entropy --only "label smoothing" \
    --only "class weights" --only focal --variant default --variant row_prefetch=on --variant block=512,row_prefetch=on 2>&1
done > $OUT/warps_ahead.txt
cat $OUT/warps_ahead.txt
