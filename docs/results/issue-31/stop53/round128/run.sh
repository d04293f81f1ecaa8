#!/bin/bash
# Round 128 (one H200): other reductions on the logs' common path at 512 and 1024 threads and unroll
# 4 and 8: is 1024 threads (what KL with one log gains from) a rule for them too?
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
for prog in 'sum(log(p) * t)' 'mean(-(t * log(p) + (1 - t) * log(1 - p)))' 'batchmean(xlogy(t, t) - t * log(p))'; do
  echo "== $prog" >> $OUT/sweep.txt
  build/lossjit bench "$prog" -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 20 --sets 1 -q --sweep block=512,1024 --sweep unroll=2,4,8 >> $OUT/sweep.txt 2>&1
done
