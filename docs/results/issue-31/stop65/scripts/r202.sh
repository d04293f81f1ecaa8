#!/bin/bash
# Round 202 (stop 65, H100): knob variants of the fused cross-entropy value+gradient kernel at the
# two shapes below 90% of the one-read-one-write floor in round 201 (32768x4096: a warp a row;
# 4096x131072: clusters of 4 blocks a row), `lossjit_bench --rows --variant` (each variant twice, in turn).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_CACHE_DIR=/tmp/lj_cache
b=build/bench/lossjit_bench
timeout 280 $b --rows --reps 20 --only "cross_entropy 32768x4096" --variant row_cache=auto \
  unroll=4 block=256 block=1024 row_cache=off row_prefetch=on row_team=block "block=256,unroll=4" \
  "row_cache=off,unroll=4" > $OUT/short.txt 2>&1
echo "exit $?" >> $OUT/short.txt
timeout 280 $b --rows --reps 20 --only "cross_entropy 4096x131072" --variant row_cache=auto \
  row_cluster=2 row_cluster=8 block=1024 row_prefetch=on unroll=8 "row_cluster=8,block=1024" \
  "row_cluster=2,block=1024" row_cache=off > $OUT/long.txt 2>&1
echo "exit $?" >> $OUT/long.txt
cat $OUT/short.txt $OUT/long.txt
