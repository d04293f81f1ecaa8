#!/bin/bash
# Round 132c (one H100): the warp unroll for heavier one-input row programs (label smoothing: 96
# registers at unroll 8; loss, z and accuracy: 78), 2 / 4 / 8, two rounds.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
for round in 1 2; do
  for f in cross_entropy cross_entropy_smoothing cross_entropy_z_acc focal; do
    echo "== round $round $f 32768x4096" >> $OUT/heavier.txt
    build/lossjit bench examples/$f.loss -i x=32768x4096:uniform[-4,4] -i 'y=32768:integers[0,4095]:i64' --reps 20 --sets 1 -q --sweep unroll=2,4,8 >> $OUT/heavier.txt 2>&1
  done
done
