#!/bin/bash
# Round 137 (one GPU a call): the row prefetch with staged waits (a copy group a vector; the next
# row's first walk waits for each vector as it reaches it) asked for against without: the row losses
# that a block or warps keep whole (lossjit_bench --rows --variant, alternating, two rounds), maps
# that keep rows at 32768 x 4096 (`lossjit bench --sweep`), then the GPU tests of fused values and
# gradients along rows (the prefetch runs among them).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --only "cross_entropy 32768x4096" --only "cross_entropy 16384x32768" \
  --only "cosine 16384x16384" --only "triplet 32768x8192" \
  --variant row_prefetch=off --variant row_prefetch=on --json $OUT/rows.json > $OUT/rows.txt 2>&1
for p in "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)" "x / sqrt(mean(x * x, -1) + 1e-6)" "exp(x - logsumexp(x, -1))"; do
  for shape in 32768x4096 8192x16384; do
    echo "== $p $shape" >> $OUT/maps.txt
    build/lossjit bench "$p" -i x=$shape:normal --reps 20 --sets 1 -q --sweep row_prefetch=off,on >> $OUT/maps.txt 2>&1
  done
done
timeout ${TEST_SECONDS:-150} build/tests/lossjit_tests -ts=gpu -tc="row programs: fused value and gradients*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
