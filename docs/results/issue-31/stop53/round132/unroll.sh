#!/bin/bash
# Round 132b (one GPU a call): the by-row unroll of one input (ByRowUnrollOneInput, 2) against 4 and 8:
# cross-entropy's forward at the three shapes and a per-row map (reduction='none'), two rounds.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
for round in 1 2; do
  for shape in 32768x4096 16384x32768 4096x131072; do
    n=${shape%x*}; c=${shape#*x}
    echo "== round $round cross-entropy $shape" >> $OUT/unroll.txt
    build/lossjit bench examples/cross_entropy.loss -i x=$shape:uniform[-4,4] -i y=$n:integers[0,$((c-1))]:i64 --reps 20 --sets 1 -q --sweep unroll=2,4,8 >> $OUT/unroll.txt 2>&1
  done
  echo "== round $round logsumexp(x, -1) - x[y] 32768x4096" >> $OUT/unroll.txt
  build/lossjit bench 'logsumexp(x, -1) - x[y]' -i x=32768x4096:uniform[-4,4] -i 'y=32768:integers[0,4095]:i64' --reps 20 --sets 1 -q --sweep unroll=2,4,8 >> $OUT/unroll.txt 2>&1
done
