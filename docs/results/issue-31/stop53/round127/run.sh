#!/bin/bash
# Round 127 (one GPU a call): KL with one log (lj_kl_term) against the same program with log(p) bound
# to a name, which the printer leaves as two logs (the kernels before this change), at 512 and 1024
# threads, three rounds in turn; the same binary.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
for round in 1 2 3; do
  for prog in 'batchmean(xlogy(t, t) - t * log(p))' 'l = log(p); batchmean(xlogy(t, t) - t * l)'; do
    echo "== round $round: $prog" >> $OUT/kl.txt
    build/lossjit bench "$prog" -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 20 --sets 1 -q --sweep block=512,1024 >> $OUT/kl.txt 2>&1
  done
done
