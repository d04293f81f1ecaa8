#!/bin/bash
# Round 132 (one H200): cross-entropy's forward over 32768 x 4096 (a warp a row, 86.5% of the read
# roofline in round 130): threads a block x unroll x row_team, for an H200 row of the defaults table.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
for round in 1 2; do
  build/lossjit bench examples/cross_entropy.loss -i x=32768x4096:uniform[-4,4] -i 'y=32768:integers[0,4095]:i64' --reps 20 --sets 1 -q --sweep block=256,512,1024 --sweep unroll=1,2,4 >> $OUT/ce.txt 2>&1
done
build/lossjit bench examples/cross_entropy.loss -i x=32768x4096:uniform[-4,4] -i 'y=32768:integers[0,4095]:i64' --reps 20 --sets 1 -q --sweep row_team=warp,block --sweep block=128,256,512 >> $OUT/ce.txt 2>&1
