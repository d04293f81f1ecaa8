#!/bin/bash
# Round 225 (stop 69, H200): r225.py at three shapes, main's head (exp69/new).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
ln -sf liblossjit_c.so.1.0 exp69/new/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/exp69/new/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c225
cp -r exp69/c /tmp/c225
for s in 16384x32768 16384x32000 8192x49152; do
  timeout 60 python3 docs/results/issue-31/stop69/scripts/r225.py --shape $s --reps 10 2>&1
done > $OUT/distributed.txt
cat $OUT/distributed.txt
