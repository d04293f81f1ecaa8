#!/bin/bash
# Round 158 (H200): HEAD's library against the instruction diet (with the first walk's cache stores
# after its loads), alternating; the diet with 1024 threads and the prefetch.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r158; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt
for r in 1 2; do
  LOSSJIT_CACHE_DIR=/tmp/c_old timeout 150 build-old/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy > $O/old$r.txt 2>&1
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 150 build/bench/lossjit_bench --rows --reps 10 --no-accuracy > $O/new$r.txt 2>&1
done
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 200 build/bench/lossjit_bench --rows --reps 10 --no-accuracy --variant row_cache=auto --variant block=1024,row_prefetch=on --variant row_prefetch=on > $O/new_variants.txt 2>&1
cd $OUT && tar czf r158.tgz r158 && rm -rf r158
