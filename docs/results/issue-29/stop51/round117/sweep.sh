#!/bin/bash
# Round 117b (H100): round 113's rows.py (layer norm, RMS norm, softmax, cross-entropy; forward +
# backward and forward, alternating in one process) over knob variants for rows of 4096 and 8192:
# does the row cache, or the block a row of 128 threads at 124 registers (ncu.txt: 25% occupancy,
# 59% of DRAM bandwidth in layer norm's gradient kernel), lose to more threads reading from L2?
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader
SHAPES="32768x4096 16384x8192" timeout 560 python3 -u docs/results/issue-29/stop50/round113/rows.py main default \
  "row_cache=off" "row_cache=off,row_team=block,block=512" "row_cache=off,row_team=block,block=256" \
  "row_team=block,block=256" "unroll=2" "unroll=2,row_team=block,block=128" --reference 2>&1 | grep -v -i "warn\|online softmax\|split the reduction\|important use case\|^$" | tee $OUT/sweep.txt
