#!/bin/bash
# Round 118 (H100): grad_sweep.py over unroll and team variants. Carry build/src/capi/liblossjit_c.so.1.0.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 500 python3 -u docs/results/issue-29/stop51/round117/grad_sweep.py default unroll=2 unroll=1 \
  "unroll=2,block=128,row_team=block" "unroll=2,block=256,row_team=block" "unroll=1,block=256,row_team=block" \
  "row_team=block,block=256" 2>&1 | grep -v -i warn | tee $OUT/grad_sweep.txt
