#!/bin/bash
# Round 136 (one GPU a call): the row prefetch (KernelSpec::row_prefetch) asked for against without,
# in one process each (lossjit_bench --rows --variant, alternating, two rounds), and maps that keep
# their rows (softmax, log_softmax, layer norm, RMS norm) through `lossjit bench --sweep`; then the
# GPU row tests of fused values and gradients (the prefetch runs among them).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --variant row_prefetch=off --variant row_prefetch=on --json $OUT/rows.json > $OUT/rows.txt 2>&1
for p in "x - logsumexp(x, -1)" "exp(x - logsumexp(x, -1))" "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)" "x / sqrt(mean(x * x, -1) + 1e-6)"; do
  for shape in 16384x32768 4096x131072 32768x4096; do
    echo "== $p $shape" >> $OUT/maps.txt
    build/lossjit bench "$p" -i x=$shape:normal --reps 20 --sets 1 -q --sweep row_prefetch=off,on >> $OUT/maps.txt 2>&1
  done
done
timeout ${TEST_SECONDS:-240} build/tests/lossjit_tests -ts=gpu -tc="row programs: fused value and gradients*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
