#!/bin/bash
# Round 90: the row table (lossjit_bench --rows: cross-entropy at three shapes forward and value+grad,
# cosine, triplet, the maps) of 8d66338 against stop 46, alternating.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for round in 1 2; do for b in old new; do
  if [ $b = old ]; then B=build/ab/lossjit_bench_old; else B=build/bench/lossjit_bench; fi
  s=$(date +%s)
  LOSSJIT_CACHE_DIR=/tmp/ljcache_$b timeout 140 $B --rows --reps 10 --json $OUT/rows_${b}_$round.json > $OUT/rows_${b}_$round.txt 2>&1
  echo "$round $b rc $? $(( $(date +%s) - s )) s"
done; done
